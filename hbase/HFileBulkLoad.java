import java.util.ArrayList;
import java.util.Arrays;
import java.util.Iterator;
import java.util.List;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.hbase.HBaseConfiguration;
import org.apache.hadoop.hbase.KeyValue;
import org.apache.hadoop.hbase.TableName;
import org.apache.hadoop.hbase.client.Connection;
import org.apache.hadoop.hbase.client.ConnectionFactory;
import org.apache.hadoop.hbase.client.RegionLocator;
import org.apache.hadoop.hbase.io.hfile.CacheConfig;
import org.apache.hadoop.hbase.io.hfile.HFile;
import org.apache.hadoop.hbase.io.hfile.HFileContext;
import org.apache.hadoop.hbase.io.hfile.HFileContextBuilder;
import org.apache.hadoop.hbase.tool.BulkLoadHFiles;
import org.apache.hadoop.hbase.util.Bytes;
import org.apache.spark.TaskContext;
import org.apache.spark.api.java.function.MapPartitionsFunction;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Encoders;
import org.apache.spark.sql.Row;

/**
 * HBase bulk load for gridagg's Spark ingest job (used from Python through py4j; see
 * ingest/hfiles.py). Compiled by hbase/launcher.py against Spark's and HBase's jars.
 *
 * write(): the executors sort each partition's cells by row key and write them as HFiles,
 * one per partition and region, under dir/family/. Rows whose "key" is null are not
 * cells: they are passed through, and are what the returned Dataset holds.
 * writeCells(): the driver writes a few cells (the aggregates) as one HFile.
 * load(): hands every HFile under dir to the region servers, which move them into their
 * regions; no cell goes through the write path (WAL, memstore, flushes).
 */
public class HFileBulkLoad {

  static {
    // Two warnings every job would print, both harmless here: the ZooKeeper registry is
    // deprecated, and a local file system has no delegation tokens.
    for (String name : new String[] {"org.apache.hadoop.hbase.client.ZKConnectionRegistry",
                                     "org.apache.hadoop.hbase.security.token.FsDelegationToken"}) {
      org.apache.logging.log4j.core.config.Configurator.setLevel(name, org.apache.logging.log4j.Level.ERROR);
    }
  }

  static Configuration conf(String quorum, String port) {
    Configuration conf = HBaseConfiguration.create();
    conf.set("hbase.zookeeper.quorum", quorum);
    conf.set("hbase.zookeeper.property.clientPort", port);
    return conf;
  }

  private static Connection connection;

  /** One connection per JVM: a job's calls, and later jobs of the session, share it. */
  static synchronized Connection connection(String quorum, String port) throws Exception {
    if (connection == null || connection.isClosed()) {
      connection = ConnectionFactory.createConnection(conf(quorum, port));
    }
    return connection;
  }

  /** CreatePresplitTable.create in this JVM (no JVM to start); "," separates the specs and the keys. */
  public static boolean createTable(String table, String families, String splits, String quorum, String port)
      throws Exception {
    return CreatePresplitTable.create(connection(quorum, port), table, families.split(","),
        splits.isEmpty() ? new String[0] : splits.split(","));
  }

  /** Columns of `in`: key (binary), value (binary), then any others (kept on the rows passed through). */
  public static Dataset<Row> write(Dataset<Row> in, String table, String family, String qualifier, String dir,
                                   String quorum, String port) throws Exception {
    byte[][] starts;
    try (RegionLocator regions = connection(quorum, port).getRegionLocator(TableName.valueOf(table))) {
      starts = regions.getStartKeys();
    }
    Writer writer = new Writer(dir, Bytes.toBytes(family), Bytes.toBytes(qualifier), starts);
    return in.sortWithinPartitions("key").mapPartitions(writer, Encoders.row(in.schema()));
  }

  /**
   * Writes cells already in order into the HFile dir/family/name. `cells` holds, per cell:
   * a 2-byte row length, the row, a 2-byte qualifier length, the qualifier, a 4-byte value
   * length and the value (big-endian lengths).
   */
  public static void writeCells(byte[] cells, String dir, String family, String name) throws Exception {
    Configuration conf = HBaseConfiguration.create();
    Path path = new Path(dir, family + "/" + name);
    byte[] fam = Bytes.toBytes(family);
    long ts = System.currentTimeMillis();
    java.nio.ByteBuffer in = java.nio.ByteBuffer.wrap(cells);
    try (HFile.Writer out = HFile.getWriterFactory(conf, CacheConfig.DISABLED)
        .withPath(path.getFileSystem(conf), path)
        .withFileContext(new HFileContextBuilder().withBlockSize(64 * 1024).build()).create()) {
      while (in.hasRemaining()) {
        byte[] row = new byte[in.getShort() & 0xffff];
        in.get(row);
        byte[] qualifier = new byte[in.getShort() & 0xffff];
        in.get(qualifier);
        byte[] value = new byte[in.getInt()];
        in.get(value);
        out.append(new KeyValue(row, fam, qualifier, ts, value));
      }
    }
  }

  public static void load(String table, String dir, String quorum, String port) throws Exception {
    BulkLoadHFiles.create(conf(quorum, port)).bulkLoad(TableName.valueOf(table), new Path(dir));
  }

  static class Writer implements MapPartitionsFunction<Row, Row> {
    final String dir;
    final byte[] family, qualifier;
    final byte[][] starts;

    Writer(String dir, byte[] family, byte[] qualifier, byte[][] starts) {
      this.dir = dir;
      this.family = family;
      this.qualifier = qualifier;
      this.starts = starts;
    }

    public Iterator<Row> call(Iterator<Row> rows) throws Exception {
      Configuration conf = HBaseConfiguration.create();
      HFileContext context = new HFileContextBuilder().withBlockSize(64 * 1024).build();
      // The task's partition names its files: a retried task overwrites its own.
      int partition = TaskContext.getPartitionId();
      long ts = System.currentTimeMillis();
      List<Row> passed = new ArrayList<>();
      HFile.Writer out = null;
      int region = -1;
      while (rows.hasNext()) {
        Row r = rows.next();
        if (r.isNullAt(0)) {
          passed.add(r);
          continue;
        }
        byte[] key = (byte[]) r.get(0);
        int at = regionOf(key);
        if (at != region) {  // sorted keys: each region's cells come in one run
          if (out != null) {
            out.close();
          }
          Path path = new Path(dir, Bytes.toString(family) + "/p" + partition + "-r" + at);
          FileSystem fs = path.getFileSystem(conf);
          out = HFile.getWriterFactory(conf, CacheConfig.DISABLED).withPath(fs, path)
              .withFileContext(context).create();
          region = at;
        }
        out.append(new KeyValue(key, family, qualifier, ts, (byte[]) r.get(1)));
      }
      if (out != null) {
        out.close();
      }
      return passed.iterator();
    }

    int regionOf(byte[] key) {
      int i = Arrays.binarySearch(starts, key, Bytes.BYTES_COMPARATOR);
      return i >= 0 ? i : -i - 2;  // the last region starting at or before key
    }
  }
}
