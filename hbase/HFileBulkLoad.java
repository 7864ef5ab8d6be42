import java.net.URI;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.PriorityQueue;
import java.util.TreeMap;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.hbase.HBaseConfiguration;
import org.apache.hadoop.hbase.HConstants;
import org.apache.hadoop.hbase.KeyValue;
import org.apache.hadoop.hbase.TableName;
import org.apache.hadoop.hbase.client.Connection;
import org.apache.hadoop.hbase.client.ConnectionFactory;
import org.apache.hadoop.hbase.client.RegionLocator;
import org.apache.hadoop.hbase.io.encoding.DataBlockEncoding;
import org.apache.hadoop.hbase.io.hfile.CacheConfig;
import org.apache.hadoop.hbase.io.hfile.HFile;
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
 * write(): the executors write the cells Python packed (each value one region's cells in
 * order: gridagg's segment cells and family deletes, see ingest/hfiles.py) as HFiles
 * under dir/family/, one per task and region. Rows without such a value are passed
 * through, and are what the returned Dataset holds.
 * writeCells(): the driver writes a few cells (the aggregates) as one HFile.
 * warmUp(): what a bulk load uses, started while the session has nothing else to do.
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

  private static Configuration base;

  /** HBase's configuration, read once per JVM (reading its XML files each time was slow). */
  static synchronized Configuration base() {
    if (base == null) {
      base = HBaseConfiguration.create();
    }
    return base;
  }

  static Configuration conf(String quorum, String port) {
    Configuration conf = new Configuration(base());
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

  /**
   * Starts what a session's first bulk load would start cold (HBase's connection, the
   * HFile writer, the bulk-load tool): writes an empty HFile at `file` and deletes it.
   */
  public static void warmUp(String quorum, String port, String file) throws Exception {
    connection(quorum, port);
    Path path = new Path(file);
    create(base(), path, HConstants.DEFAULT_BLOCKSIZE, DataBlockEncoding.NONE.name()).close();
    path.getFileSystem(base()).delete(path, false);
    BulkLoadHFiles.create(conf(quorum, port));
  }

  /** CreatePresplitTable.create in this JVM (no JVM to start); "," separates the specs and the keys. */
  public static boolean createTable(String table, String families, String splits, String quorum, String port)
      throws Exception {
    return CreatePresplitTable.create(connection(quorum, port), table, families.split(","),
        splits.isEmpty() ? new String[0] : splits.split(","));
  }

  /** The start key of each region of `table`, in order. */
  public static byte[][] regionStarts(String table, String quorum, String port) throws Exception {
    try (RegionLocator regions = connection(quorum, port).getRegionLocator(TableName.valueOf(table))) {
      return regions.getStartKeys();
    }
  }

  /**
   * Rows of `in` with a "cells" value (packed cells of the region numbered "region", see
   * Run) become HFiles under dir/family/: per task, one per region, merging the task's
   * values of that region (and more when a task buffers over FLUSH_BYTES). The returned
   * Dataset holds the other rows. Every cell is stamped `ts` (gridagg.model.stamps); blocks of
   * the files hold `blockBytes` and are encoded as `encoding` (the family's block size and
   * data block encoding).
   */
  public static Dataset<Row> write(Dataset<Row> in, String family, int blockBytes, String encoding, String dir,
      long ts) {
    return in.mapPartitions(new Writer(dir, Bytes.toBytes(family), blockBytes, encoding, ts),
        Encoders.row(in.schema()));
  }

  /**
   * Writes the cells of the local file `cells` (a URI), already in order, into the HFile
   * dir/family/name. The file holds, per cell: a 2-byte row length, the row, a 2-byte
   * qualifier length, the qualifier, a 4-byte value length and the value (big-endian
   * lengths). A file, because py4j sends a byte array as text, slowly. Every
   * cell is stamped `ts`; blocks hold `blockBytes`, encoded as `encoding`.
   */
  public static void writeCells(String cells, String dir, String family, int blockBytes, String encoding,
      String name, long ts) throws Exception {
    Configuration conf = base();
    byte[] fam = Bytes.toBytes(family);
    ByteBuffer in = ByteBuffer.wrap(Files.readAllBytes(Paths.get(URI.create(cells))));
    try (HFile.Writer out = create(conf, new Path(dir, family + "/" + name), blockBytes, encoding)) {
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

  static HFile.Writer create(Configuration conf, Path path, int blockBytes, String encoding) throws Exception {
    return HFile.getWriterFactory(conf, CacheConfig.DISABLED).withPath(path.getFileSystem(conf), path)
        .withFileContext(new HFileContextBuilder().withBlockSize(blockBytes)
            .withDataBlockEncoding(DataBlockEncoding.valueOf(encoding)).build()).create();
  }

  public static void load(String table, String dir, String quorum, String port) throws Exception {
    BulkLoadHFiles.create(conf(quorum, port)).bulkLoad(TableName.valueOf(table), new Path(dir));
  }

  /** Bytes of packed rows a task holds before it writes them out. */
  static final long FLUSH_BYTES = 256L << 20;

  static class Writer implements MapPartitionsFunction<Row, Row> {
    final String dir;
    final byte[] family;
    final int blockBytes;
    final String encoding;
    final long ts;

    Writer(String dir, byte[] family, int blockBytes, String encoding, long ts) {
      this.dir = dir;
      this.family = family;
      this.blockBytes = blockBytes;
      this.encoding = encoding;
      this.ts = ts;
    }

    public Iterator<Row> call(Iterator<Row> rows) throws Exception {
      Configuration conf = base();
      // The task's partition names its files: a retried task overwrites its own.
      String task = "p" + TaskContext.getPartitionId();
      List<Row> passed = new ArrayList<>();
      Map<Integer, List<Run>> regions = new TreeMap<>();
      long held = 0;
      int flushes = 0;
      while (rows.hasNext()) {
        Row r = rows.next();
        int cells = r.fieldIndex("cells");
        if (r.isNullAt(cells)) {
          passed.add(r);
          continue;
        }
        byte[] packed = (byte[]) r.get(cells);
        regions.computeIfAbsent(r.getInt(r.fieldIndex("region")), k -> new ArrayList<>()).add(new Run(packed));
        held += packed.length;
        if (held > FLUSH_BYTES) {
          flush(conf, regions, task + "-" + flushes++, ts);
          held = 0;
        }
      }
      flush(conf, regions, task + "-" + flushes, ts);
      return passed.iterator();
    }

    void flush(Configuration conf, Map<Integer, List<Run>> regions, String name, long ts) throws Exception {
      for (Map.Entry<Integer, List<Run>> region : regions.entrySet()) {
        Path path = new Path(dir, Bytes.toString(family) + "/" + name + "-r" + region.getKey());
        PriorityQueue<Run> runs = new PriorityQueue<>();
        for (Run run : region.getValue()) {
          if (run.next()) {
            runs.add(run);
          }
        }
        try (HFile.Writer out = create(conf, path, blockBytes, encoding)) {
          while (!runs.isEmpty()) {
            Run run = runs.poll();
            out.append(run.cell(family, ts));
            if (run.next()) {
              runs.add(run);
            }
          }
        }
      }
      regions.clear();
    }
  }

  /**
   * Packed cells in order, read from the front. `packed` holds cells one after another
   * (little-endian): u8 kind (0: a put; 1: delete the row's older cells of the family),
   * u16 row length, the row, u16 qualifier length, the qualifier, i32 value length, the
   * value. A family delete comes before its row's puts and is stamped one older
   * than them. Runs compare by their current cell.
   */
  static class Run implements Comparable<Run> {
    static final int PUT = 0, DELETE_FAMILY = 1;
    final byte[] packed;
    final ByteBuffer in;
    int kind, rowAt, rowLength, qualifierAt, qualifierLength, valueAt, valueLength;

    Run(byte[] packed) {
      this.packed = packed;
      in = ByteBuffer.wrap(packed).order(ByteOrder.LITTLE_ENDIAN);
    }

    /** Moves to the next cell; false at the end. */
    boolean next() {
      if (!in.hasRemaining()) {
        return false;
      }
      kind = in.get();
      rowLength = in.getShort() & 0xffff;
      rowAt = in.position();
      in.position(rowAt + rowLength);
      qualifierLength = in.getShort() & 0xffff;
      qualifierAt = in.position();
      in.position(qualifierAt + qualifierLength);
      valueLength = in.getInt();
      valueAt = in.position();
      in.position(valueAt + valueLength);
      return true;
    }

    KeyValue cell(byte[] family, long ts) {
      if (kind == DELETE_FAMILY) {
        return new KeyValue(packed, rowAt, rowLength, family, 0, family.length, packed, 0, 0, ts - 1,
            KeyValue.Type.DeleteFamily, packed, 0, 0);
      }
      return new KeyValue(packed, rowAt, rowLength, family, 0, family.length, packed, qualifierAt, qualifierLength,
          ts, KeyValue.Type.Put, packed, valueAt, valueLength);
    }

    public int compareTo(Run other) {
      int c = Bytes.compareTo(packed, rowAt, rowLength, other.packed, other.rowAt, other.rowLength);
      if (c == 0) {
        c = other.kind - kind; // a family delete first
      }
      if (c == 0) {
        c = Bytes.compareTo(packed, qualifierAt, qualifierLength, other.packed, other.qualifierAt,
            other.qualifierLength);
      }
      return c;
    }
  }
}
