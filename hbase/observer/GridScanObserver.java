package gridagg.observer;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.hadoop.hbase.Cell;
import org.apache.hadoop.hbase.CellBuilderFactory;
import org.apache.hadoop.hbase.CellBuilderType;
import org.apache.hadoop.hbase.DoNotRetryIOException;
import org.apache.hadoop.hbase.client.Get;
import org.apache.hadoop.hbase.client.RegionInfo;
import org.apache.hadoop.hbase.coprocessor.ObserverContext;
import org.apache.hadoop.hbase.coprocessor.RegionCoprocessor;
import org.apache.hadoop.hbase.coprocessor.RegionCoprocessorEnvironment;
import org.apache.hadoop.hbase.coprocessor.RegionObserver;
import org.apache.hadoop.hbase.regionserver.Region;
import org.apache.hadoop.hbase.util.Bytes;

/**
 * gridagg's work on the region servers: scans that filter and aggregate the rows of a
 * region and return only the answer, and the lookups a write needs. The wire formats are
 * written once, in gridagg/store/hbase/scan.py (the client side); gridagg/store/scan.py
 * says what a scan computes and gridagg/store/kernels.py computes the same in-process.
 *
 * <p>A Get carrying the attribute {@code gridagg.store.scan} (a ScanRequest) is answered
 * with one computed cell {@code a:gridagg.store.scan} instead of the row (RegionScan); one
 * carrying {@code gridagg.keys}, with {@code a:gridagg.keys} (KeyLookup); one carrying
 * {@code gridagg.stats} (one byte, the version), with {@code a:gridagg.stats}: the region,
 * then this JVM's scans stopped by their deadline and the items they left unread. The
 * client sends one Thrift getRows call with one anchor row per region; the gateway
 * copies the attribute onto every Get, and each region answers for the items inside its
 * own [start, end) only.
 *
 * <p>Rows read (family "r"): layout 0, gridagg's grids, one row per grid whose cells are
 * segments (gridagg/store/segments.py; Segment), qualifier an 8-byte big-endian segment
 * number whose lowest bit marks a base segment: a row's live segments are its last base
 * segment and every one after it (gridagg/store/hbase/rows.py). Layout 1, one row per
 * cell (HBase alone, loadtest's peer): value = ncols x int64.
 *
 * <p>Failures: an IOException (e.g. the region is closing) reaches the client as it is,
 * and the client's retries apply; anything else is rethrown as DoNotRetryIOException,
 * never thrown from the hook as it is (hbase.coprocessor.abortonerror would abort the
 * region server). The work of a call stops when its caller has gone or its RPC deadline
 * has passed.
 */
public class GridScanObserver implements RegionCoprocessor, RegionObserver {
  public static final String SCAN_ATTRIBUTE = "gridagg.store.scan";
  public static final String KEYS_ATTRIBUTE = "gridagg.keys";
  public static final String STATS_ATTRIBUTE = "gridagg.stats";
  static final byte[] ROWS = Bytes.toBytes("r");
  static final byte[] ANSWER_FAMILY = Bytes.toBytes("a");
  static final int VERSION = 6;
  /** Scans stopped by their deadline, and the items they left unread, in this JVM. */
  static final AtomicLong STOPPED_SCANS = new AtomicLong(), UNREAD_ITEMS = new AtomicLong();

  @Override
  public Optional<RegionObserver> getRegionObserver() {
    return Optional.of(this);
  }

  @Override
  public void preGetOp(ObserverContext<RegionCoprocessorEnvironment> ctx, Get get, List<Cell> result)
      throws IOException {
    byte[] scan = get.getAttribute(SCAN_ATTRIBUTE);
    byte[] keys = get.getAttribute(KEYS_ATTRIBUTE);
    byte[] stats = get.getAttribute(STATS_ATTRIBUTE);
    String kind = scan != null ? SCAN_ATTRIBUTE : keys != null ? KEYS_ATTRIBUTE : stats != null ? STATS_ATTRIBUTE : null;
    if (kind == null) {
      return;
    }
    Region region = ctx.getEnvironment().getRegion();
    byte[] answer;
    try {
      answer = scan != null ? RegionScan.answer(region, new ScanRequest(scan))
          : keys != null ? new KeyLookup(region, keys).run() : stats(region, stats);
    } catch (IOException e) {
      throw e;
    } catch (Throwable e) {
      throw new DoNotRetryIOException(kind + " failed in region "
          + region.getRegionInfo().getRegionNameAsString() + ": " + e, e);
    }
    result.add(CellBuilderFactory.create(CellBuilderType.SHALLOW_COPY).setRow(get.getRow())
        .setFamily(ANSWER_FAMILY).setQualifier(Bytes.toBytes(kind))
        .setTimestamp(System.currentTimeMillis()).setType(Cell.Type.Put).setValue(answer).build());
    ctx.bypass();
  }

  /** The answer to a gridagg.stats request: the region, then this JVM's stop counters. */
  static byte[] stats(Region region, byte[] request) throws IOException {
    if (request.length != 1 || (request[0] & 0xff) != VERSION) {
      throw new DoNotRetryIOException(STATS_ATTRIBUTE + ": a request is one byte, version " + VERSION);
    }
    RegionInfo info = region.getRegionInfo();
    ByteBuffer out = ByteBuffer.allocate(regionBytes(info) + 16).order(ByteOrder.LITTLE_ENDIAN);
    putRegion(out, info);
    out.putLong(STOPPED_SCANS.get()).putLong(UNREAD_ITEMS.get());
    return out.array();
  }

  /** Every answer's head: version, then the region's start and end keys and id. */
  static void putRegion(ByteBuffer out, RegionInfo info) {
    byte[] rs = info.getStartKey(), re = info.getEndKey();
    out.put((byte) VERSION);
    out.putShort((short) rs.length).put(rs).putShort((short) re.length).put(re);
    out.putLong(info.getRegionId());
  }

  static int regionBytes(RegionInfo info) {
    return 1 + 2 + info.getStartKey().length + 2 + info.getEndKey().length + 8;
  }

  static boolean holds(RegionInfo info, byte[] row) {
    byte[] rs = info.getStartKey(), re = info.getEndKey();
    return Bytes.compareTo(row, rs) >= 0 && (re.length == 0 || Bytes.compareTo(row, re) < 0);
  }
}
