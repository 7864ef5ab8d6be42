import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.apache.hadoop.hbase.HBaseConfiguration;
import org.apache.hadoop.hbase.HRegionLocation;
import org.apache.hadoop.hbase.ServerName;
import org.apache.hadoop.hbase.TableName;
import org.apache.hadoop.hbase.client.Admin;
import org.apache.hadoop.hbase.client.ColumnFamilyDescriptor;
import org.apache.hadoop.hbase.client.ColumnFamilyDescriptorBuilder;
import org.apache.hadoop.hbase.client.CompactionState;
import org.apache.hadoop.hbase.client.Connection;
import org.apache.hadoop.hbase.client.ConnectionFactory;
import org.apache.hadoop.hbase.client.RegionInfo;
import org.apache.hadoop.hbase.client.RegionLocator;
import org.apache.hadoop.hbase.client.TableDescriptorBuilder;
import org.apache.hadoop.hbase.io.encoding.DataBlockEncoding;
import org.apache.hadoop.hbase.util.Bytes;

/**
 * What Thrift1 cannot do to a table's regions and descriptor (run by hbase/launcher.py's
 * region_admin, against the local HBase):
 * <pre>
 *   split TABLE KEY          split the region holding KEY (hex) at KEY
 *   merge TABLE KEY KEY      merge the regions holding the two keys (hex; adjacent)
 *   move TABLE KEY PORT      move the region holding KEY (hex) to the region server on
 *                            PORT (of this machine)
 *   balance TABLE            run the balancer (it moves regions of every table; prints
 *                            whether it ran)
 *   set TABLE NAME VALUE     set a value of the table's descriptor (its regions reopen;
 *                            values named like settings override hbase-site.xml there)
 *   compact TABLE [FAMILY=ENCODING ...]
 *                            set each family's data block encoding where it differs,
 *                            flush the table's memstores, then major-compact it (each
 *                            region's files rewritten as one, without deleted cells, in
 *                            the families' encodings); returns when done, printing each
 *                            family's encoding
 * </pre>
 * Each returns once the table's regions are online again.
 */
public class RegionAdmin {
  public static void main(String[] args) throws Exception {
    TableName table = TableName.valueOf(args[1]);
    try (Connection conn = ConnectionFactory.createConnection(HBaseConfiguration.create());
         Admin admin = conn.getAdmin();
         RegionLocator regions = conn.getRegionLocator(table)) {
      switch (args[0]) {
        case "split": {
          byte[] key = HexFormat.of().parseHex(args[2]);
          byte[] region = regions.getRegionLocation(key, true).getRegion().getRegionName();
          admin.splitRegionAsync(region, key).get(5, TimeUnit.MINUTES);
          break;
        }
        case "merge": {
          byte[][] names = new byte[2][];
          for (int i = 0; i < 2; i++) {
            names[i] = regions.getRegionLocation(HexFormat.of().parseHex(args[2 + i]), true).getRegion()
                .getRegionName();
          }
          admin.mergeRegionsAsync(names, false).get(5, TimeUnit.MINUTES);
          break;
        }
        case "move": {
          byte[] region = regions.getRegionLocation(HexFormat.of().parseHex(args[2]), true).getRegion()
              .getEncodedNameAsBytes();
          int port = Integer.parseInt(args[3]);
          ServerName to = admin.getRegionServers().stream().filter(s -> s.getPort() == port).findFirst()
              .orElseThrow(() -> new IllegalArgumentException("no live region server on port " + port));
          admin.move(region, to);
          break;
        }
        case "balance":
          admin.balancerSwitch(true, true);
          System.out.println(admin.balance() ? "ran" : "did not run (regions in transition or balanced)");
          break;
        case "set":
          admin.modifyTable(TableDescriptorBuilder.newBuilder(admin.getDescriptor(table))
              .setValue(args[2], args[3]).build());
          break;
        case "compact": {
          for (int i = 2; i < args.length; i++) {
            String[] set = args[i].split("=", 2);
            ColumnFamilyDescriptor family = admin.getDescriptor(table).getColumnFamily(Bytes.toBytes(set[0]));
            DataBlockEncoding encoding = DataBlockEncoding.valueOf(set[1]);
            if (family.getDataBlockEncoding() != encoding) {
              admin.modifyColumnFamily(table,
                  ColumnFamilyDescriptorBuilder.newBuilder(family).setDataBlockEncoding(encoding).build());
              waitOnline(admin, regions, table);
            }
          }
          admin.flush(table);
          admin.majorCompact(table);
          Thread.sleep(1000); // the request reaches the region servers before its state shows
          while (admin.getCompactionState(table) != CompactionState.NONE) { // bounded by the caller
            Thread.sleep(1000);
          }
          List<String> encodings = new ArrayList<>();
          for (ColumnFamilyDescriptor family : admin.getDescriptor(table).getColumnFamilies()) {
            encodings.add(family.getNameAsString() + "=" + family.getDataBlockEncoding());
          }
          System.out.println(String.join(" ", encodings));
          break;
        }
        default:
          throw new IllegalArgumentException("unknown command " + args[0]);
      }
      waitOnline(admin, regions, table);
    }
  }

  /** Until every region of the table has a location (none in transition). */
  static void waitOnline(Admin admin, RegionLocator regions, TableName table) throws Exception {
    long until = System.currentTimeMillis() + 300_000;
    while (System.currentTimeMillis() < until) {
      List<RegionInfo> infos = admin.getRegions(table);
      List<HRegionLocation> located = regions.getAllRegionLocations();
      boolean online = !infos.isEmpty() && located.size() == infos.size()
          && located.stream().allMatch(l -> l.getServerName() != null)
          && admin.getClusterMetrics().getRegionStatesInTransition().isEmpty();
      if (online) {
        return;
      }
      Thread.sleep(200);
    }
    throw new IllegalStateException("regions of " + table + " not online after 5 minutes");
  }
}
