package gridagg.observer;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.Comparator;
import java.util.List;
import org.apache.hadoop.hbase.Cell;
import org.apache.hadoop.hbase.CellComparatorImpl;
import org.apache.hadoop.hbase.CellUtil;
import org.apache.hadoop.hbase.DoNotRetryIOException;
import org.apache.hadoop.hbase.client.Get;
import org.apache.hadoop.hbase.client.RegionInfo;
import org.apache.hadoop.hbase.client.Scan;
import org.apache.hadoop.hbase.filter.MultiRowRangeFilter;
import org.apache.hadoop.hbase.ipc.RpcCall;
import org.apache.hadoop.hbase.ipc.RpcServer;
import org.apache.hadoop.hbase.regionserver.Region;
import org.apache.hadoop.hbase.regionserver.RegionScanner;
import org.apache.hadoop.hbase.util.Bytes;

/**
 * One scan request's work in one region, and its answer (gridagg/store/scan.py says what
 * is computed; gridagg/store/kernels.py computes the same in-process, block for block).
 *
 * <p>Each segment's block tree is walked as the planner walks grids: a node whose bounds
 * miss the request is passed over, one inside it (within one bucket, and inside the
 * polygon) answers from its aggregate, one it cuts is opened, and only the rows of the
 * blocks reached are read, a column at a time (RowLoops). With skip specs, items are visited in the given order and
 * an item or block whose bounds cannot improve the best found so far is passed over;
 * without, layout 0 reads its grids in key order with one region scanner. Rows_of items
 * (grids on a polygon's edge) are never passed over: each of their rows that meets the
 * conditions is tested against the polygon (a row inside adds to the aggregates, one
 * outside is left out, one within eps of an edge comes back whole for the caller's exact
 * test; without a polygon every matching row comes back).
 *
 * <p>Deadlines: the region checks a request's deadline before each item it reads. Once it
 * has passed, the scan stops and the items not read yet are named unread: every other
 * item's rows are in the aggregates whole. The deadline is absolute, in epoch
 * milliseconds: the time a request waits in queues counts.
 *
 * <p>Memory: what the answer holds (its groups' aggregates, rows handed back) is reserved
 * of the region server's ScanBudget before it is held; a grid row is read as its cells,
 * which lie in the block cache's blocks (a leaf's row is bounded by its split threshold).
 */
final class RegionScan {
  /** Bytes of rows_of rows one region may hand back. */
  static final long MAX_ROW_BYTES = 64L << 20;
  /** Bytes of handed-back rows reserved of the budget at a time. */
  static final long ROW_BYTES_STEP = 1L << 20;

  final Region region;
  final ScanRequest q;
  final RegionInfo info;
  final int k;
  final Sums sums;
  final long[][] rows; // rows_of items' matching rows, row-major
  final int[] nrows;
  long rowBytes, rowBytesReserved;
  final RpcCall call;
  /** Whether the deadline has passed (then nothing more is read), and the items left unread. */
  boolean stopped;
  final boolean[] unread;
  int nunread;
  /** The row loops and which rows of those read pass. */
  final RowLoops loops = new RowLoops();
  /** Runs of rows of one group: rows runFrom[r]..runTo[r]-1 in group runGroup[r], runRows[r] of them passing. */
  int[] runFrom = new int[1], runTo = new int[1], runGroup = new int[1], runRows = new int[1];
  final long[] folded = new long[5];
  final long[] blockBound;

  /** The answer of region to request q, within the region server's ScanBudget. */
  static byte[] answer(Region region, ScanRequest q) throws IOException {
    long reserved = q.answerBytes();
    ScanBudget.reserve(reserved, q.deadline, ScanRequest.WHAT);
    RegionScan scan = null;
    try {
      scan = new RegionScan(region, q);
      return scan.run();
    } finally {
      ScanBudget.release(reserved + (scan == null ? 0 : scan.rowBytesReserved));
    }
  }

  private RegionScan(Region region, ScanRequest q) {
    this.region = region;
    this.q = q;
    info = region.getRegionInfo();
    k = q.aggCol.length;
    sums = new Sums(q.ngroups, k);
    rows = new long[q.nitems][];
    nrows = new int[q.nitems];
    unread = new boolean[q.nitems];
    blockBound = new long[q.skipAgg.length];
    call = RpcServer.getCurrentCall().orElse(null);
  }

  byte[] run() throws IOException {
    List<Integer> mine = new ArrayList<>();
    for (int i = 0; i < q.nitems; i++) {
      if (inRegion(i)) {
        mine.add(i);
      }
    }
    if (q.layout == 1) {
      for (int i : mine) {
        if (!passOver(i)) {
          rowRange(i);
        }
      }
    } else if (q.skipAgg.length > 0) {
      for (int i : mine) {
        if (!passOver(i)) {
          Cell[] cells = region.get(new Get(q.start(i)).addFamily(GridScanObserver.ROWS)).rawCells();
          grid(i, cells == null ? Collections.<Cell>emptyList() : Arrays.asList(cells));
        }
      }
    } else {
      gridsInKeyOrder(mine);
    }
    if (nunread > 0) {
      GridScanObserver.STOPPED_SCANS.incrementAndGet();
      GridScanObserver.UNREAD_ITEMS.addAndGet(nunread);
    }
    return answerBytes();
  }

  boolean inRegion(int i) {
    byte[] rs = info.getStartKey(), re = info.getEndKey();
    boolean startsBeforeEnd = re.length == 0 || q.compareStart(i, re) < 0;
    if (q.layout == 0) {
      return startsBeforeEnd && q.compareStart(i, rs) >= 0;
    }
    boolean endsAfterStart = q.openEnded(i) || q.compareStop(i, rs) > 0;
    return startsBeforeEnd && endsAfterStart;
  }

  /** Stops the work when the caller has gone or its deadline has passed. */
  void checkCaller() throws IOException {
    if (call == null) {
      return;
    }
    if (call.disconnectSince() >= 0) {
      throw new DoNotRetryIOException(ScanRequest.WHAT + ": the caller has disconnected");
    }
    if (System.currentTimeMillis() > call.getDeadline()) {
      throw new DoNotRetryIOException(ScanRequest.WHAT + ": past the call's deadline");
    }
  }

  /** Whether the request's deadline has passed (checked until it has; then for good). */
  boolean pastDeadline() {
    if (!stopped && q.deadline != 0 && System.currentTimeMillis() > q.deadline) {
      stopped = true;
    }
    return stopped;
  }

  /**
   * Whether item i is left alone: past the deadline (named unread), or passed over by
   * skipping (counted so); else counts it as scanned.
   */
  boolean passOver(int i) throws IOException {
    checkCaller();
    if (pastDeadline()) {
      unread[i] = true;
      nunread++;
      return true;
    }
    int nspecs = q.skipAgg.length;
    if (nspecs > 0 && !q.rowsOf[i] && useless(q.bounds, i * nspecs)) {
      sums.gridsSkipped++;
      return true;
    }
    sums.gridsScanned++;
    return false;
  }

  /** Whether bounds[at + s] of every skip spec s cannot improve the best found so far (group 0's, or the request's). */
  boolean useless(long[] bounds, int at) {
    for (int s = 0; s < q.skipAgg.length; s++) {
      int c = q.skipAgg[s];
      boolean seen = q.ngroups > 0 && sums.present[c] > 0;
      if (!(seen || q.bestHas[s])) {
        return false;
      }
      long bound = bounds[at + s];
      if (q.skipMax[s]) {
        long best = seen ? sums.max[c] : q.bestVal[s];
        if (q.bestHas[s] && q.bestVal[s] > best) {
          best = q.bestVal[s];
        }
        if (bound > best) {
          return false;
        }
      } else {
        long best = seen ? sums.min[c] : q.bestVal[s];
        if (q.bestHas[s] && q.bestVal[s] < best) {
          best = q.bestVal[s];
        }
        if (bound < best) {
          return false;
        }
      }
    }
    return true;
  }

  /** Layout 0 without skipping: every grid of the region read by one scanner, in key order. */
  void gridsInKeyOrder(List<Integer> mine) throws IOException {
    if (mine.isEmpty()) {
      return;
    }
    Integer[] order = mine.toArray(new Integer[0]);
    Arrays.sort(order, Comparator.comparing((Integer i) -> q.start(i), Bytes.BYTES_COMPARATOR));
    List<MultiRowRangeFilter.RowRange> ranges = new ArrayList<>();
    for (int i : order) {
      ranges.add(new MultiRowRangeFilter.RowRange(q.start(i), true, q.start(i), true));
    }
    Scan scan = new Scan().withStartRow(q.start(order[0])).withStopRow(q.start(order[order.length - 1]), true)
        .addFamily(GridScanObserver.ROWS).setFilter(new MultiRowRangeFilter(ranges));
    int[] at = {0}; // next item in key order
    eachRow(scan, cells -> {
      Cell first = cells.get(0);
      // Items whose grid has no row come before this row; then the row's own items.
      while (at[0] < order.length && compareRow(first, q.start(order[at[0]])) > 0) {
        passOver(order[at[0]++]);
      }
      while (at[0] < order.length && compareRow(first, q.start(order[at[0]])) == 0) {
        int i = order[at[0]++];
        if (!passOver(i)) {
          grid(i, cells);
        }
      }
      return !stopped;
    });
    while (at[0] < order.length) {
      passOver(order[at[0]++]);
    }
  }

  static int compareRow(Cell cell, byte[] key) {
    return CellComparatorImpl.COMPARATOR.compareRows(cell, key, 0, key.length);
  }

  /** What is done with a row's cells (valid until it returns); false: read no more rows. */
  interface RowVisitor {
    boolean visit(List<Cell> cells) throws IOException;
  }

  /**
   * Each row `scan` finds in this region, in key order, handed to `visitor`: through
   * nextRaw inside one region operation (a coprocessor's way; next() takes the region's
   * lock per row), read positionally (the blocks are in the block cache; a long scan
   * would otherwise reopen its files for a streaming read part way).
   */
  void eachRow(Scan scan, RowVisitor visitor) throws IOException {
    scan.setReadType(Scan.ReadType.PREAD);
    List<Cell> cells = new ArrayList<>();
    region.startRegionOperation();
    try (RegionScanner scanner = region.getScanner(scan)) {
      synchronized (scanner) {
        boolean more = true;
        while (more) {
          cells.clear();
          more = scanner.nextRaw(cells);
          if (!cells.isEmpty() && !visitor.visit(cells)) {
            break;
          }
        }
      }
    } finally {
      region.closeRegionOperation();
    }
  }

  /** A grid's row: its live segments (the last base segment and those after it). */
  void grid(int i, List<Cell> cells) throws IOException {
    for (int c = Cells.firstLive(cells); c < cells.size(); c++) {
      segment(i, Cells.segment(cells.get(c), q.ncols, ScanRequest.WHAT));
    }
  }

  /**
   * One segment of item i: its block tree walked as the planner walks the grids (a node
   * outside the request passed over, one inside it answered from its aggregate, one it
   * cuts opened), the blocks reached read, those next to each other as one run (not for
   * buckets of column 0, which are runs of rows in column-0 order); a segment without
   * blocks read whole.
   */
  void segment(int i, Segment s) throws IOException {
    sums.rowsInGrids += s.n;
    boolean gridEdge = q.rowsOf[i];
    if (s.nblocks == 0) {
      read(i, s, 0, s.n, gridEdge, SEARCH);
      return;
    }
    if (stack.length < 2 * s.nnodes) {
      stack = new int[2 * s.nnodes];
    }
    boolean join = q.bucketCol != 0;
    int runLo = 0, runHi = 0, runBlocks = 0;
    boolean runEdge = false, runHeld0 = true;
    int top = 0;
    stack[top++] = 0;
    while (top > 0) {
      int node = stack[--top];
      int fate = nodeFate(i, s, node);
      if (fate == PASSED) {
        continue;
      }
      boolean edge = (fate & EDGE) != 0;
      if (q.skipAgg.length > 0 && !edge && useless(blockBound, 0)) {
        continue;
      }
      if ((fate & OPEN) == 0) {
        sums.addNode(s, node, fate, q.aggCol);
        continue;
      }
      int right = s.link(node, Segment.RIGHT);
      if (right != 0) {
        stack[top++] = right;
        stack[top++] = node + 1;
        continue;
      }
      int b = s.link(node, Segment.FIRST), from = s.blockStart(b), to = s.blockStart(b + 1);
      boolean held0 = s.stat(node, 0, Segment.MIN) >= q.lo0 && s.stat(node, 0, Segment.MAX) <= q.hi0;
      if (join && runBlocks > 0 && runHi == from && runEdge == edge) {
        runHi = to;
        runBlocks++;
        runHeld0 &= held0;
        continue;
      }
      if (runBlocks > 0) {
        read(i, s, runLo, runHi, runEdge, column0(runBlocks, runHeld0));
      }
      runLo = from;
      runHi = to;
      runBlocks = 1;
      runEdge = edge;
      runHeld0 = held0;
    }
    if (runBlocks > 0) {
      read(i, s, runLo, runHi, runEdge, column0(runBlocks, runHeld0));
    }
  }

  /** How rows read meet column 0's range: by a binary search (they are in column-0 order), every one, or by a test. */
  static final int SEARCH = 0, HELD = 1, TEST = 2;

  /** A block alone: a binary search of its rows; blocks inside column 0's range whole: HELD; others: TEST. */
  static int column0(int blocks, boolean held0) {
    return blocks == 1 ? SEARCH : held0 ? HELD : TEST;
  }

  int[] stack = new int[64];

  /** What nodeFate says: passed over, or the group its aggregate answers for, or OPEN (with EDGE: row by row). */
  static final int PASSED = -1, OPEN = 1 << 30, EDGE = 1 << 29;

  /**
   * What becomes of tree node `node` of item i's segment s: PASSED over (its bounds miss
   * the request), or the group whose aggregate it answers for (inside every condition,
   * one bucket, inside the polygon), or OPEN (its children, or a block's rows), with EDGE
   * when its rows go through the polygon test. blockBound gets its bound of each skip spec.
   */
  int nodeFate(int i, Segment s, int node) {
    if (s.stat(node, 0, Segment.MIN) > q.hi0 || s.stat(node, 0, Segment.MAX) < q.lo0) {
      return PASSED;
    }
    boolean inside = s.stat(node, 0, Segment.MIN) >= q.lo0 && s.stat(node, 0, Segment.MAX) <= q.hi0;
    for (int j = 0; j < q.condCol.length; j++) {
      int c = q.condCol[j];
      if (c == 0 || !q.tests(i, j)) {
        continue;
      }
      long least = s.stat(node, c, Segment.MIN), most = s.stat(node, c, Segment.MAX);
      if (least > q.condHi[j] || most < q.condLo[j]) {
        return PASSED;
      }
      // A NULL meets no condition: a node with one is not inside.
      if (least < q.condLo[j] || most > q.condHi[j]
          || s.stat(node, c, Segment.PRESENT) < s.stat(node, 0, Segment.PRESENT)) {
        inside = false;
      }
    }
    boolean edge = q.rowsOf[i];
    if (edge && q.polygon != null) {
      int side = q.polygon.face(s.stat(node, q.polygon.lonCol, Segment.MIN),
          s.stat(node, q.polygon.lonCol, Segment.MAX), s.stat(node, q.polygon.latCol, Segment.MIN),
          s.stat(node, q.polygon.latCol, Segment.MAX));
      if (side == Polygon.OUTSIDE) {
        return PASSED;
      }
      edge = side != Polygon.INSIDE;
    }
    if (q.skipAgg.length > 0 && !edge) {
      for (int sp = 0; sp < q.skipAgg.length; sp++) {
        int c = q.aggCol[q.skipAgg[sp]];
        blockBound[sp] = q.skipMax[sp] ? s.stat(node, c, Segment.MAX) : s.stat(node, c, Segment.MIN);
      }
    }
    int group = q.group[i];
    if (q.bucketCol >= 0 && !edge) { // an edge's rows come back whatever their bucket
      long first = Math.floorDiv(s.stat(node, q.bucketCol, Segment.MIN) - q.bucketBase, q.bucketStep);
      long last = Math.floorDiv(s.stat(node, q.bucketCol, Segment.MAX) - q.bucketBase, q.bucketStep);
      if (last < 0 || first >= q.nbuckets) {
        return PASSED;
      }
      if (first != last) {
        inside = false;
      }
      group = (int) first;
    }
    if (inside && !edge) {
      return group;
    }
    return OPEN | (edge ? EDGE : 0);
  }

  /**
   * Rows from..to-1 of item i's segment s (blocks, or the whole of a segment without
   * blocks), tested and added up; column 0's range is met as `column0` says.
   */
  void read(int i, Segment s, int from, int to, boolean edge, int column0) throws IOException {
    sums.rowsRead += to - from;
    int a = from, z = to;
    if (column0 == SEARCH) {
      a = q.lo0 == Long.MIN_VALUE ? from : s.firstAtLeast(q.lo0, from, to);
      z = q.hi0 == Long.MAX_VALUE ? to : s.firstAtLeast(q.hi0 + 1, a, to);
    }
    if (z <= a) {
      return;
    }
    if (edge && q.polygon == null) {
      rows(i, s, a, z);
      return;
    }
    for (int c = a; c < z; c += RowLoops.CHUNK) {
      columns(i, s, c, Math.min(z, c + RowLoops.CHUNK), edge, column0 == TEST);
    }
  }

  /**
   * Rows a..z-1 (at most RowLoops.CHUNK) a column at a time: each tested condition marks in `pass` which rows meet
   * it; the rows are cut into runs of one group (the item's, or one per time bucket); each
   * aggregated column is added up a run at a time, a narrow column on its deltas.
   */
  void columns(int i, Segment seg, int a, int z, boolean edge, boolean test0) throws IOException {
    if (!select(i, seg, a, z, test0) || (edge && !inPolygon(i, seg, a, z))) {
      return;
    }
    int nruns = runs(i, seg, a, z);
    for (int r = 0; r < nruns; r++) {
      runRows[r] = loops.count(runFrom[r] - a, runTo[r] - a);
      sums.rowsMatched += runRows[r];
      sums.count[runGroup[r]] += runRows[r];
    }
    for (int j = 0; j < k; j++) {
      for (int r = 0; r < nruns; r++) {
        if (runRows[r] > 0) {
          int c = q.aggCol[j];
          loops.fold(seg, c, runFrom[r], runTo[r], runFrom[r] - a, folded);
          sums.addFold(runGroup[r] * k + j, folded, seg.width[c] == 8 ? 0 : seg.base[c]);
        }
      }
    }
  }

  /**
   * Marks in `pass` which of rows a..z-1 meet every condition of item i, but those on
   * column 0 unless `test0` (else a..z are the rows that meet them) and those the request
   * says every row of the item meets; false when no row can.
   */
  boolean select(int i, Segment seg, int a, int z, boolean test0) {
    boolean first = true;
    for (int j = 0; j < q.condCol.length; j++) {
      if ((q.condCol[j] == 0 && !test0) || !q.tests(i, j)) {
        continue;
      }
      if (!loops.test(seg, q.condCol[j], a, z, q.condLo[j], q.condHi[j], first)) {
        return false;
      }
      first = false;
    }
    if (first) {
      loops.passAll(z - a);
    }
    return true;
  }

  /**
   * Clears in `pass` the marked rows of a..z-1 (item i's, on the polygon's edge) that
   * lie outside the polygon, and those near an edge, which come back whole instead;
   * false when no marked row is left.
   */
  boolean inPolygon(int i, Segment seg, int a, int z) throws IOException {
    boolean any = false;
    for (int r = a; r < z; r++) {
      if (loops.pass[r - a] == 0) {
        continue;
      }
      int where = q.polygon.where(seg, r);
      if (where == Polygon.INSIDE) {
        any = true;
        continue;
      }
      loops.pass[r - a] = 0;
      if (where == Polygon.NEAR) {
        keepRow(i, seg, r);
      }
    }
    return any;
  }

  /**
   * Cuts rows a..z-1 into runs of one group (run fields), rows outside every bucket left
   * out; returns how many. Rows are in column-0 order, so on column 0 a bucket's rows are
   * one run and where it ends is a binary search.
   */
  int runs(int i, Segment seg, int a, int z) {
    if (q.bucketCol < 0) {
      runFrom[0] = a;
      runTo[0] = z;
      runGroup[0] = q.group[i];
      return 1;
    }
    int bc = q.bucketCol, nruns = 0;
    long base = q.bucketBase, step = q.bucketStep;
    for (int s = a, e; s < z; s = e) {
      long bucket = Math.floorDiv(seg.get(bc, s) - base, step);
      if (bc == 0) {
        e = seg.firstAtLeast(bucketStart(bucket + 1), s + 1, z);
      } else {
        e = s + 1;
        while (e < z && Math.floorDiv(seg.get(bc, e) - base, step) == bucket) {
          e++;
        }
      }
      if (bucket < 0 || bucket >= q.nbuckets) {
        continue;
      }
      if (nruns == runFrom.length) {
        runFrom = Arrays.copyOf(runFrom, 2 * nruns);
        runTo = Arrays.copyOf(runTo, 2 * nruns);
        runGroup = Arrays.copyOf(runGroup, 2 * nruns);
        runRows = Arrays.copyOf(runRows, 2 * nruns);
      }
      runFrom[nruns] = s;
      runTo[nruns] = e;
      runGroup[nruns++] = (int) bucket;
    }
    return nruns;
  }

  /** Where bucket b starts (Long.MAX_VALUE past the int64 range). */
  long bucketStart(long b) {
    try {
      return Math.addExact(q.bucketBase, Math.multiplyExact(b, q.bucketStep));
    } catch (ArithmeticException e) {
      return b > 0 ? Long.MAX_VALUE : Long.MIN_VALUE;
    }
  }

  /** Layout 1: the rows of item i's key range inside this region, one cell each. */
  void rowRange(int i) throws IOException {
    byte[] rs = info.getStartKey(), re = info.getEndKey();
    byte[] from = Bytes.compareTo(q.start(i), rs) > 0 ? q.start(i) : rs;
    byte[] to = q.stop(i);
    if (re.length > 0 && (to.length == 0 || Bytes.compareTo(to, re) > 0)) {
      to = re;
    }
    Scan scan = new Scan().withStartRow(from).addFamily(GridScanObserver.ROWS);
    if (to.length > 0) {
      scan.withStopRow(to);
    }
    long[] seen = {0};
    eachRow(scan, cells -> {
      for (Cell cell : cells) {
        if (cell.getValueLength() != 8 * q.ncols) {
          throw new DoNotRetryIOException(ScanRequest.WHAT + ": row " + Bytes.toStringBinary(CellUtil.cloneRow(cell))
              + " has a " + cell.getValueLength() + "-byte cell, not " + q.ncols + " int64s");
        }
        ByteBuffer b = Cells.value(cell);
        sums.rowsRead++;
        sums.rowsInGrids++;
        rows(i, Segment.wide(b, b.position(), 1, q.ncols), 0, 1);
      }
      if ((++seen[0] & 0xfff) == 0) {
        checkCaller();
      }
      return true;
    });
  }

  /**
   * Rows a..z-1 of item i's rows s, row by row: for blocks of one row (layout 1) and for
   * items whose rows are asked back; segments' aggregates go through columns().
   */
  void rows(int i, Segment s, int a, int z) throws IOException {
    int[] cc = q.condCol;
    long[] cl = q.condLo, ch = q.condHi;
    int nconds = cc.length;
    boolean wantRows = q.rowsOf[i];
    for (int r = a; r < z; r++) {
      boolean ok = true;
      for (int j = 0; j < nconds; j++) {
        if (!q.tests(i, j)) {
          continue;
        }
        long v = s.get(cc[j], r);
        if (v < cl[j] || v > ch[j]) {
          ok = false;
          break;
        }
      }
      if (!ok) {
        continue;
      }
      if (wantRows) {
        keepRow(i, s, r);
        continue;
      }
      int g = q.group[i];
      if (q.bucketCol >= 0) {
        long bucket = Math.floorDiv(s.get(q.bucketCol, r) - q.bucketBase, q.bucketStep);
        if (bucket < 0 || bucket >= q.nbuckets) {
          continue;
        }
        g = (int) bucket;
      }
      sums.rowsMatched++;
      sums.count[g]++;
      int slot = g * k;
      for (int j = 0; j < k; j++, slot++) {
        long v = s.get(q.aggCol[j], r);
        if (v == Long.MIN_VALUE) {
          continue; // NULL: an absent value
        }
        sums.add(slot, v);
      }
    }
  }

  /** Row r of s handed back for item i, within MAX_ROW_BYTES and the region server's ScanBudget. */
  void keepRow(int i, Segment s, int r) throws IOException {
    rowBytes += 8L * q.ncols;
    if (rowBytes > MAX_ROW_BYTES) {
      throw new DoNotRetryIOException(ScanRequest.WHAT + ": more than " + MAX_ROW_BYTES + " bytes of rows asked back");
    }
    if (rowBytes > rowBytesReserved) {
      ScanBudget.reserve(ROW_BYTES_STEP, q.deadline, ScanRequest.WHAT);
      rowBytesReserved += ROW_BYTES_STEP;
    }
    long[] kept = rows[i];
    int need = (nrows[i] + 1) * q.ncols;
    if (kept == null || kept.length < need) {
      kept = rows[i] = Arrays.copyOf(kept == null ? new long[0] : kept, Math.max(need, 2 * need));
    }
    int to = nrows[i]++ * q.ncols;
    for (int c = 0; c < q.ncols; c++) {
      kept[to + c] = s.get(c, r);
    }
  }

  byte[] answerBytes() {
    long size = GridScanObserver.regionBytes(info) + sums.bytes() + 4 + 4 + 4L * nunread;
    int items = 0;
    for (int i = 0; i < rows.length; i++) {
      if (q.rowsOf[i] && inRegion(i) && !unread[i]) {
        items++;
        size += 8 + 8L * nrows[i] * q.ncols;
      }
    }
    ByteBuffer out = ByteBuffer.allocate((int) size).order(ByteOrder.LITTLE_ENDIAN);
    GridScanObserver.putRegion(out, info);
    sums.write(out);
    out.putInt(items);
    for (int i = 0; i < rows.length; i++) {
      if (q.rowsOf[i] && inRegion(i) && !unread[i]) {
        out.putInt(i).putInt(nrows[i]);
        for (int j = 0; j < nrows[i] * q.ncols; j++) {
          out.putLong(rows[i][j]);
        }
      }
    }
    out.putInt(nunread);
    for (int i = 0; i < unread.length; i++) {
      if (unread[i]) {
        out.putInt(i);
      }
    }
    return out.array();
  }
}
