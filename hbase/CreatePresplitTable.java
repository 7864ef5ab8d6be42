import java.util.HexFormat;
import org.apache.hadoop.hbase.HBaseConfiguration;
import org.apache.hadoop.hbase.TableName;
import org.apache.hadoop.hbase.client.Admin;
import org.apache.hadoop.hbase.client.ColumnFamilyDescriptorBuilder;
import org.apache.hadoop.hbase.client.Connection;
import org.apache.hadoop.hbase.client.ConnectionFactory;
import org.apache.hadoop.hbase.client.TableDescriptorBuilder;
import org.apache.hadoop.hbase.io.encoding.DataBlockEncoding;

/**
 * Creates a pre-split table (Thrift1's createTable takes no split keys). Run by
 * hbase/launcher.py as a program, and called by HFileBulkLoad in Spark's JVM.
 */
public class CreatePresplitTable {
  /**
   * families: "name:maxVersions", "name:maxVersions:blockBytes" (0: HBase's default) or
   * "name:maxVersions:blockBytes:dataBlockEncoding" each; splits: the start keys of the
   * 2nd..nth regions, in hex. Returns false when the table exists already.
   */
  public static boolean create(Connection conn, String table, String[] families, String[] splits)
      throws Exception {
    TableName name = TableName.valueOf(table);
    TableDescriptorBuilder desc = TableDescriptorBuilder.newBuilder(name);
    for (String family : families) {
      String[] spec = family.split(":", 4);
      ColumnFamilyDescriptorBuilder cf = ColumnFamilyDescriptorBuilder.newBuilder(spec[0].getBytes("UTF-8"))
          .setMaxVersions(Integer.parseInt(spec[1]));
      if (spec.length >= 3 && Integer.parseInt(spec[2]) > 0) {
        cf.setBlocksize(Integer.parseInt(spec[2]));
      }
      if (spec.length == 4) {
        cf.setDataBlockEncoding(DataBlockEncoding.valueOf(spec[3]));
      }
      desc.setColumnFamily(cf.build());
    }
    byte[][] keys = new byte[splits.length][];
    for (int i = 0; i < splits.length; i++) {
      keys[i] = HexFormat.of().parseHex(splits[i]);
    }
    try (Admin admin = conn.getAdmin()) {
      if (admin.tableExists(name)) {
        return false;
      }
      if (keys.length == 0) {
        admin.createTable(desc.build());
      } else {
        admin.createTable(desc.build(), keys);
      }
      return true;
    }
  }

  /** args: table, then family specs, then "--", then split keys in hex. Exit code 3: the table exists. */
  public static void main(String[] args) throws Exception {
    int dash = java.util.Arrays.asList(args).indexOf("--");
    String[] families = java.util.Arrays.copyOfRange(args, 1, dash < 0 ? args.length : dash);
    String[] splits = dash < 0 ? new String[0] : java.util.Arrays.copyOfRange(args, dash + 1, args.length);
    try (Connection conn = ConnectionFactory.createConnection(HBaseConfiguration.create())) {
      if (!create(conn, args[0], families, splits)) {
        System.err.println("table already exists: " + args[0]);
        System.exit(3);
      }
    }
  }
}
