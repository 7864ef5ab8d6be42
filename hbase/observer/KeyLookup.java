package gridagg.observer;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.apache.hadoop.hbase.Cell;
import org.apache.hadoop.hbase.DoNotRetryIOException;
import org.apache.hadoop.hbase.client.Get;
import org.apache.hadoop.hbase.client.RegionInfo;
import org.apache.hadoop.hbase.regionserver.Region;

/**
 * A gridagg.keys request in one region: for grid rows, which cells they hold and which
 * of some element IDs their live segments hold (what a write must know), without the
 * rows crossing the wire (its format: gridagg/store/hbase/scan.py).
 */
final class KeyLookup {
  static final String WHAT = GridScanObserver.KEYS_ATTRIBUTE;
  final Region region;
  final byte[][] grids;
  final byte[][][] eids;

  KeyLookup(Region region, byte[] data) throws IOException {
    this.region = region;
    ByteBuffer in = ByteBuffer.wrap(data).order(ByteOrder.LITTLE_ENDIAN);
    int version = in.get() & 0xff;
    if (version != GridScanObserver.VERSION) {
      throw new DoNotRetryIOException(WHAT + ": request version " + version + ", this observer reads "
          + GridScanObserver.VERSION);
    }
    int n = in.getInt();
    if (n < 0 || n > in.remaining()) {
      throw new DoNotRetryIOException(WHAT + ": bad grid count " + n);
    }
    grids = new byte[n][];
    eids = new byte[n][][];
    for (int g = 0; g < n; g++) {
      grids[g] = new byte[in.getShort() & 0xffff];
      in.get(grids[g]);
      int m = in.getInt();
      if (m < 0 || m > in.remaining()) {
        throw new DoNotRetryIOException(WHAT + ": bad element ID count " + m);
      }
      eids[g] = new byte[m][];
      for (int e = 0; e < m; e++) {
        eids[g][e] = new byte[in.getShort() & 0xffff];
        in.get(eids[g][e]);
      }
    }
  }

  byte[] run() throws IOException {
    RegionInfo info = region.getRegionInfo();
    ByteArrayOutputStream body = new ByteArrayOutputStream();
    int count = 0;
    for (int g = 0; g < grids.length; g++) {
      if (!GridScanObserver.holds(info, grids[g])) {
        continue;
      }
      count++;
      Cell[] found = region.get(new Get(grids[g]).addFamily(GridScanObserver.ROWS)).rawCells();
      List<Cell> cells = found == null ? Collections.<Cell>emptyList() : Arrays.asList(found);
      Map<ByteBuffer, List<Integer>> wanted = new HashMap<>();
      for (int e = 0; e < eids[g].length; e++) {
        wanted.computeIfAbsent(ByteBuffer.wrap(eids[g][e]), k -> new ArrayList<>()).add(e);
      }
      List<Integer> hits = new ArrayList<>();
      int from = Cells.firstLive(cells);
      ByteBuffer head = ByteBuffer.allocate(8 + 12 * cells.size()).order(ByteOrder.LITTLE_ENDIAN);
      head.putInt(g).putInt(cells.size());
      for (int c = 0; c < cells.size(); c++) {
        Cell cell = cells.get(c);
        head.put(cell.getQualifierArray(), cell.getQualifierOffset(), 8).putInt(cell.getValueLength());
        if (c >= from && !wanted.isEmpty()) {
          hits.addAll(elements(cell, wanted));
        }
      }
      body.write(head.array(), 0, head.position());
      ByteBuffer tail = ByteBuffer.allocate(4 + 4 * hits.size()).order(ByteOrder.LITTLE_ENDIAN);
      tail.putInt(hits.size());
      for (int e : hits) {
        tail.putInt(e);
      }
      body.write(tail.array(), 0, tail.position());
    }
    ByteBuffer out = ByteBuffer.allocate(GridScanObserver.regionBytes(info) + 4 + body.size())
        .order(ByteOrder.LITTLE_ENDIAN);
    GridScanObserver.putRegion(out, info);
    out.putInt(count).put(body.toByteArray());
    return out.array();
  }

  /** Indexes of the wanted element IDs one segment holds (each found once). */
  static List<Integer> elements(Cell cell, Map<ByteBuffer, List<Integer>> wanted) throws IOException {
    Segment s = Cells.segment(cell, -1, WHAT);
    ByteBuffer b = s.b;
    int n = s.n, offsets = s.end, blob = offsets + 4 * (n + 1);
    List<Integer> hits = new ArrayList<>();
    ByteBuffer eid = b.duplicate();
    for (int i = 0; i < n && !wanted.isEmpty(); i++) {
      int a = blob + b.getInt(offsets + 4 * i), z = blob + b.getInt(offsets + 4 * i + 4);
      eid.limit(z).position(a);
      List<Integer> at = wanted.remove(eid.slice());
      if (at != null) {
        hits.addAll(at);
      }
    }
    return hits;
  }
}
