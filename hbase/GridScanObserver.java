import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.hadoop.hbase.ByteBufferExtendedCell;
import org.apache.hadoop.hbase.Cell;
import org.apache.hadoop.hbase.CellBuilderFactory;
import org.apache.hadoop.hbase.CellBuilderType;
import org.apache.hadoop.hbase.CellComparatorImpl;
import org.apache.hadoop.hbase.CellUtil;
import org.apache.hadoop.hbase.DoNotRetryIOException;
import org.apache.hadoop.hbase.client.Get;
import org.apache.hadoop.hbase.client.RegionInfo;
import org.apache.hadoop.hbase.client.Scan;
import org.apache.hadoop.hbase.coprocessor.ObserverContext;
import org.apache.hadoop.hbase.coprocessor.RegionCoprocessor;
import org.apache.hadoop.hbase.coprocessor.RegionCoprocessorEnvironment;
import org.apache.hadoop.hbase.coprocessor.RegionObserver;
import org.apache.hadoop.hbase.filter.MultiRowRangeFilter;
import org.apache.hadoop.hbase.ipc.RpcCall;
import org.apache.hadoop.hbase.ipc.RpcServer;
import org.apache.hadoop.hbase.regionserver.Region;
import org.apache.hadoop.hbase.regionserver.RegionScanner;
import org.apache.hadoop.hbase.util.Bytes;
import jdk.incubator.vector.ByteVector;
import jdk.incubator.vector.IntVector;
import jdk.incubator.vector.ShortVector;
import jdk.incubator.vector.VectorMask;
import jdk.incubator.vector.VectorOperators;
import jdk.incubator.vector.VectorSpecies;

/**
 * gridagg's scans on the region servers: filters and aggregates the rows of a region and
 * returns only the answer (gridagg/scan.py says what is computed; gridagg/kernels.py is
 * the same in-process; gridagg/store/hbase_scan.py is the client side).
 *
 * <p>A Get carrying the request attribute {@code gridagg.store.scan} is answered with one
 * computed cell {@code a:gridagg.store.scan} instead of the row. The client sends one Thrift
 * getRows call with one anchor row per region; the gateway copies the attribute onto
 * every Get, and each region answers for the items inside its own [start, end) only.
 *
 * <p>Layouts of the rows read (family "r"):
 * <ul>
 * <li>0, gridagg's grids: one row per grid, key = the grid's key prefix; each cell a
 *     segment (gridagg/segments.py), qualifier = 8-byte big-endian segment number whose
 *     lowest bit marks a base segment: a row's live segments are its last base segment
 *     and every one after it (gridagg/store/hbase_rows.py). Items name grid rows.</li>
 * <li>1, one row per cell (HBase alone, loadtest/peers/hbase.py): value = ncols x
 *     int64. Items are key ranges [start, stop).</li>
 * </ul>
 *
 * <p>Request (all little-endian):
 * <pre>
 *   u8 version = 5, u8 layout, u16 ncols
 *   i64 deadline: milliseconds since the epoch after which the answer is no longer
 *      wanted (0: none; see Deadlines below)
 *   u16 nconds, then per condition: u16 col, i64 lo, i64 hi      (lo &lt;= v &lt;= hi)
 *   u16 naggcols, then u16 col each
 *   u8 grouping: 0 = by the item's group; 1 = by bucket, then u16 col, i64 base,
 *      i64 step, u32 nbuckets (group = floor((v - base) / step), kept in [0, nbuckets))
 *   u32 ngroups
 *   u8 skip: 0, or 1 then u16 nspecs, per spec u16 aggcol index and u8 is_max, then per
 *      spec u8 has and i64 best
 *   u8 polygon: 0, or 1 then u16 lon col, u16 lat col, f64 lon scale, f64 lat scale,
 *      f64 eps, u32 nedges, then per edge f64 x1, y1, x2, y2 (every ring's edges)
 *   u32 nitems, then the items a column at a time: u32 x (nitems + 1) offsets of the
 *      start keys in their block, the same of the stop keys, the start keys' block, the
 *      stop keys' block (layout 0: every stop key empty; layout 1: empty = to the
 *      table's end), u32 group x nitems, u8 rows_of x nitems, i64 bound x nitems x nspecs
 *      (item-major), and (nconds + 7) / 8 bytes per item: bit j (of byte j / 8, from its
 *      lowest bit) set when the item's rows must be tested against condition j (clear:
 *      every row meets it)
 * </pre>
 * Response (the cell's value):
 * <pre>
 *   u8 version = 5
 *   u16 len + region start key, u16 len + region end key, i64 region id
 *   i64 rows visited, rows matched, grids (items) scanned, grids skipped
 *   u32 n, then per group with rows: u32 group, i64 count, per aggcol i64 present, min,
 *      max, hi, lo (sum = hi * 2^32 + lo)
 *   u32 n, then per rows_of item read: u32 item index, u32 nrows, nrows x ncols i64 (rows)
 *   u32 n, then u32 item index x n: the region's items left unread (the deadline passed)
 * </pre>
 * With skip specs, items are visited in the given order and an item whose bounds cannot
 * improve the best found so far (the request's, or this region's group 0) is passed
 * over; without, layout 0 reads its grids in key order with one region scanner.
 * Rows_of items (grids on a polygon's edge) are never passed over. With a polygon, each
 * of their rows that meets the conditions is tested against it as gridagg/kernels.py's
 * point_in_polygon does (its lon/lat as doubles, value / scale): a row inside adds to
 * the aggregates, a row outside is left out, and a row within eps of an edge comes back
 * whole for the caller's exact test. Without a polygon every matching row comes back.
 *
 * <p>A Get carrying {@code gridagg.keys} instead asks, for grid rows, which cells they hold
 * and which of some element IDs their live segments hold (what a write must know), and is
 * answered with the cell {@code a:gridagg.keys}:
 * <pre>
 *   request: u8 version = 5, u32 ngrids, then per grid: u16 len + row key, u32 neids,
 *            then per element ID u16 len + bytes
 *   answer:  u8 version = 5, the region (as above), u32 n, then per grid of the region:
 *            u32 grid index, u32 ncells, per cell its 8-byte qualifier and u32 value
 *            length, u32 nfound, then u32 index of each element ID found
 * </pre>
 *
 * <p>Deadlines: the region checks a request's deadline before each item it reads (a
 * grid row of at most a leaf's rows; a key range is read whole once begun). Once it has
 * passed, the scan stops and the items not read yet are named in the answer as unread:
 * every other item's rows are in the aggregates whole, an unread item's not at all, so
 * the client keeps bounds for the unread ones and never takes a part for the whole. The
 * deadline is absolute, in the epoch milliseconds of System.currentTimeMillis: on one
 * machine the client and the region servers read the same clock, and the time a request
 * waits in the gateway's and region server's queues counts (a remaining duration would
 * start only when the region begins); across machines it relies on the clocks agreeing,
 * as HBase itself does (hbase.master.maxclockskew). Stopping is a normal answer, not an
 * exception: a stopped scan is no failure to retry.
 *
 * <p>A Get carrying {@code gridagg.stats} (value: u8 version = 5) is answered with the
 * cell {@code a:gridagg.stats}: u8 version = 5, the region (as above), i64 scans stopped by
 * their deadline, i64 items they left unread; counted since the region server started,
 * over all of its regions (what a test or an operator reads to see that stopping works).
 *
 * <p>The row loops use the Vector API (Lanes): the region server's JVM needs
 * {@code --add-modules jdk.incubator.vector}; without it every scan fails with that advice.
 * Its scans run steadier when the JIT compiles Lanes' count, test and fold each on its
 * own (hbase/launcher.py's OBSERVER_JIT_FLAGS): inlined into the scan's larger methods,
 * a Vector API call there at times stayed uncompiled, many times slower.
 *
 * <p>Failures: an IOException (e.g. the region is closing) reaches the client as it is,
 * and the client's retries apply; anything else is rethrown as DoNotRetryIOException,
 * never thrown from the hook as it is (hbase.coprocessor.abortonerror would abort the
 * region server). The work of a call stops when its caller has gone or its RPC deadline
 * has passed.
 */
public class GridScanObserver implements RegionCoprocessor, RegionObserver {
  public static final String ATTRIBUTE = "gridagg.store.scan";
  public static final String KEYS_ATTRIBUTE = "gridagg.keys";
  public static final String STATS_ATTRIBUTE = "gridagg.stats";
  static final byte[] ROWS = Bytes.toBytes("r");
  static final byte[] ANSWER_FAMILY = Bytes.toBytes("a");
  static final int VERSION = 5;
  /** Scans stopped by their deadline, and the items they left unread, in this JVM. */
  static final AtomicLong STOPPED_SCANS = new AtomicLong(), UNREAD_ITEMS = new AtomicLong();
  /** Aggregate slots (groups x aggregated columns) one request may ask for. */
  static final long MAX_SLOTS = 1L << 24;
  /** Bytes of rows_of rows one region may return. */
  static final long MAX_ROW_BYTES = 256L << 20;

  @Override
  public Optional<RegionObserver> getRegionObserver() {
    return Optional.of(this);
  }

  @Override
  public void preGetOp(ObserverContext<RegionCoprocessorEnvironment> ctx, Get get, List<Cell> result)
      throws IOException {
    byte[] scan = get.getAttribute(ATTRIBUTE);
    byte[] keys = get.getAttribute(KEYS_ATTRIBUTE);
    byte[] stats = get.getAttribute(STATS_ATTRIBUTE);
    String kind = scan != null ? ATTRIBUTE : keys != null ? KEYS_ATTRIBUTE : stats != null ? STATS_ATTRIBUTE : null;
    if (kind == null) {
      return;
    }
    Region region = ctx.getEnvironment().getRegion();
    byte[] answer;
    try {
      answer = scan != null ? new Scanner(region, new Request(scan)).run()
          : keys != null ? new Lookup(region, keys).run() : stats(region, stats);
    } catch (IOException e) {
      throw e;
    } catch (NoClassDefFoundError e) {
      throw new DoNotRetryIOException(ATTRIBUTE + " in region " + region.getRegionInfo().getRegionNameAsString()
          + ": the region server lacks the Vector API (" + e.getMessage() + "): start its JVM with "
          + "--add-modules jdk.incubator.vector (JDK 17 or later)", e);
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

  /** The answer's head: version, then the region's start and end keys and id. */
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

  /** Index of the live segments of a grid row's cells (the last base segment). */
  static int firstLive(List<Cell> cells) throws IOException {
    int from = 0;
    for (int c = 0; c < cells.size(); c++) {
      Cell cell = cells.get(c);
      if (cell.getQualifierLength() != 8) {
        throw new DoNotRetryIOException("row " + Bytes.toStringBinary(CellUtil.cloneRow(cell)) + " has a cell r:"
            + Bytes.toStringBinary(CellUtil.cloneQualifier(cell)) + ", not a segment number");
      }
      if ((cell.getQualifierArray()[cell.getQualifierOffset() + 7] & 1) != 0) {
        from = c;
      }
    }
    return from;
  }

  /** A cell's value as a little-endian buffer positioned at its first byte (no copy). */
  static ByteBuffer value(Cell cell) {
    ByteBuffer b;
    if (cell instanceof ByteBufferExtendedCell) {
      ByteBufferExtendedCell bb = (ByteBufferExtendedCell) cell;
      b = bb.getValueByteBuffer().duplicate();
      b.position(bb.getValuePosition());
    } else {
      b = ByteBuffer.wrap(cell.getValueArray());
      b.position(cell.getValueOffset());
    }
    return b.order(ByteOrder.LITTLE_ENDIAN);
  }

  /** A gridagg.keys request in one region. */
  static final class Lookup {
    final Region region;
    final byte[][] grids;
    final byte[][][] eids;

    Lookup(Region region, byte[] data) throws IOException {
      this.region = region;
      ByteBuffer in = ByteBuffer.wrap(data).order(ByteOrder.LITTLE_ENDIAN);
      int version = in.get() & 0xff;
      if (version != VERSION) {
        throw new DoNotRetryIOException(KEYS_ATTRIBUTE + ": request version " + version + ", this observer reads "
            + VERSION);
      }
      int n = in.getInt();
      if (n < 0 || n > in.remaining()) {
        throw new DoNotRetryIOException(KEYS_ATTRIBUTE + ": bad grid count " + n);
      }
      grids = new byte[n][];
      eids = new byte[n][][];
      for (int g = 0; g < n; g++) {
        grids[g] = new byte[in.getShort() & 0xffff];
        in.get(grids[g]);
        int m = in.getInt();
        if (m < 0 || m > in.remaining()) {
          throw new DoNotRetryIOException(KEYS_ATTRIBUTE + ": bad element ID count " + m);
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
        if (!holds(info, grids[g])) {
          continue;
        }
        count++;
        Cell[] found = region.get(new Get(grids[g]).addFamily(ROWS)).rawCells();
        List<Cell> cells = found == null ? Collections.<Cell>emptyList() : Arrays.asList(found);
        Map<ByteBuffer, List<Integer>> wanted = new HashMap<>();
        for (int e = 0; e < eids[g].length; e++) {
          wanted.computeIfAbsent(ByteBuffer.wrap(eids[g][e]), k -> new ArrayList<>()).add(e);
        }
        List<Integer> hits = new ArrayList<>();
        int from = firstLive(cells);
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
      ByteBuffer out = ByteBuffer.allocate(regionBytes(info) + 4 + body.size()).order(ByteOrder.LITTLE_ENDIAN);
      putRegion(out, info);
      out.putInt(count).put(body.toByteArray());
      return out.array();
    }

    /** Indexes of the wanted element IDs one segment holds (each found once). */
    static List<Integer> elements(Cell cell, Map<ByteBuffer, List<Integer>> wanted) throws IOException {
      ByteBuffer b = value(cell);
      Columns s = Columns.segment(b, b.position(), cell.getValueLength());
      if (s == null) {
        throw new DoNotRetryIOException(KEYS_ATTRIBUTE + ": a segment of row "
            + Bytes.toStringBinary(CellUtil.cloneRow(cell)) + " of " + cell.getValueLength() + " bytes is malformed");
      }
      int n = s.n;
      int offsets = s.end;
      int blob = offsets + 4 * (n + 1);
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

  /**
   * A block of n rows held as columns (gridagg/segments.py): a segment, or one row of
   * int64s (layout 1). A column of width 8 holds the values; of width 4 or 2, each
   * value minus the column's base as an int or short, NULL as the type's least value.
   */
  static final class Columns {
    final ByteBuffer b; // little-endian
    final int n;
    final int[] at, width;
    final long[] base;
    /** Where the block ends (a segment's element ID offsets begin). */
    final int end;

    Columns(ByteBuffer b, int n, int[] at, int[] width, long[] base, int end) {
      this.b = b;
      this.n = n;
      this.at = at;
      this.width = width;
      this.base = base;
      this.end = end;
    }

    /** n rows of ncols int64 columns one after another from `start`. */
    static Columns wide(ByteBuffer b, int start, int n, int ncols) {
      int[] at = new int[ncols], width = new int[ncols];
      for (int c = 0; c < ncols; c++) {
        at[c] = start + 8 * n * c;
        width[c] = 8;
      }
      return new Columns(b, n, at, width, new long[ncols], start + 8 * n * ncols);
    }

    /** The segment of `len` bytes at `start`, or null when its header does not fit them. */
    static Columns segment(ByteBuffer b, int start, int len) {
      long n = b.getInt(start) & 0xffffffffL;
      int head = b.getInt(start + 4);
      long ncols = head & 0x7fffffffL;
      long need = 8 + 8 * ncols + 8 * ((ncols + 7) / 8); // headers of a narrow segment
      if (head >= 0) { // written before narrow columns: all int64
        return 8 + 8 * n * ncols + 4 * (n + 1) > len ? null : wide(b, start + 8, (int) n, (int) ncols);
      }
      if (need > len) {
        return null;
      }
      int[] at = new int[(int) ncols], width = new int[(int) ncols];
      long[] base = new long[(int) ncols];
      long p = start + need;
      for (int c = 0; c < ncols; c++) {
        width[c] = b.get(start + 8 + 8 * (int) ncols + c);
        base[c] = b.getLong(start + 8 + 8 * c);
        if (width[c] != 2 && width[c] != 4 && width[c] != 8) {
          return null;
        }
        at[c] = (int) p;
        p += (n * width[c] + 7) / 8 * 8;
      }
      return p + 4 * (n + 1) > start + len ? null : new Columns(b, (int) n, at, width, base, (int) p);
    }

    int ncols() {
      return at.length;
    }

    /** Row r of column c (NULL: Long.MIN_VALUE). */
    long get(int c, int r) {
      if (width[c] == 8) {
        return b.getLong(at[c] + 8 * r);
      }
      if (width[c] == 4) {
        int v = b.getInt(at[c] + 4 * r);
        return v == Integer.MIN_VALUE ? Long.MIN_VALUE : v + base[c];
      }
      short v = b.getShort(at[c] + 2 * r);
      return v == Short.MIN_VALUE ? Long.MIN_VALUE : v + base[c];
    }

    /** First row whose column 0 is >= v (rows are ordered by column 0). */
    int lowerBound(long v) {
      // Mostly v lies outside the segment's span (a grid inside the query's time range):
      // two reads instead of a search.
      if (n == 0 || get(0, 0) >= v) {
        return 0;
      }
      return get(0, n - 1) < v ? n : firstAtLeast(v, 1, n - 1);
    }

    /** The first of rows from..to-1 whose column 0 is >= v (to if none). */
    int firstAtLeast(long v, int from, int to) {
      while (from < to) {
        int m = (from + to) >>> 1;
        if (get(0, m) < v) {
          from = m + 1;
        } else {
          to = m;
        }
      }
      return from;
    }
  }

  /**
   * The row loops of columns(), SIMD lanes at a time (jdk.incubator.vector: the region
   * server runs with --add-modules jdk.incubator.vector), as the embedded store's
   * compiled kernel runs them. A segment's narrow columns are read where they are stored
   * (little-endian, as values of their own width), 16 shorts or 8 ints a step; which rows
   * pass is kept as a byte a row, 0 or -1 (JDK 17 stores and loads masks of int lanes to
   * booleans slowly; bytes converted from lanes are quick). int64 columns, rare in
   * segments, are read a value at a time.
   */
  static final class Lanes {
    static final VectorSpecies<Short> SHORTS = ShortVector.SPECIES_256;
    static final VectorSpecies<Integer> INTS = IntVector.SPECIES_256;
    static final VectorSpecies<Byte> BYTES = ByteVector.SPECIES_256;
    /** As many bytes as SHORTS, as INTS has lanes. */
    static final VectorSpecies<Byte> SHORT_BYTES = ByteVector.SPECIES_128, INT_BYTES = ByteVector.SPECIES_64;
    static final ByteOrder LE = ByteOrder.LITTLE_ENDIAN;
    /** Rows a narrow column's int lanes add up before their sums move to an int64 (no overflow). */
    static final int SUM_ROWS = 1 << 16;

    /**
     * Marks pass[r - a] (-1) for rows a..z-1 whose column c lies in lo..hi (first: sets
     * every mark; else: clears those of rows that do not); false when no row can. NULL
     * never does: a narrow column's bounds become deltas above the type's least value.
     */
    static boolean test(Columns s, int c, int a, int z, long lo, long hi, byte[] pass, boolean first) {
      int w = s.width[c];
      if (lo > hi) {
        return false;
      }
      if (w == 8) {
        testRows(s.b, s.at[c] + 8 * a, 8, 0, z - a, lo, hi, pass, first);
        return true;
      }
      long least = w == 4 ? Integer.MIN_VALUE : Short.MIN_VALUE, most = w == 4 ? Integer.MAX_VALUE : Short.MAX_VALUE;
      long base = s.base[c];
      if (lo > base + most || hi < base + least + 1) {
        return false;
      }
      int dlo = (int) (Math.max(lo, base + least + 1) - base), dhi = (int) (Math.min(hi, base + most) - base);
      if (w == 4) {
        testInts(s.b, s.at[c] + 4 * a, z - a, dlo, dhi, pass, first);
      } else {
        testShorts(s.b, s.at[c] + 2 * a, z - a, (short) dlo, (short) dhi, pass, first);
      }
      return true;
    }

    // One method per width, each small enough for the JIT to inline every Vector API
    // call in it (else the lanes are boxed objects, many times slower).

    // The first test and the later ones in loops of their own: a vector chosen by a
    // condition inside the loop (first ? m : m.and(..)) at times kept the JIT from
    // compiling the store (a third of a polygon's time went to ByteVector.intoArray).
    static void testShorts(ByteBuffer b, int at, int n, short lo, short hi, byte[] pass, boolean first) {
      int i = 0, upper = SHORTS.loopBound(n);
      if (first) {
        for (; i < upper; i += SHORTS.length()) {
          inShorts(b, at + 2 * i, lo, hi).intoArray(pass, i);
        }
      } else {
        for (; i < upper; i += SHORTS.length()) {
          inShorts(b, at + 2 * i, lo, hi).and(ByteVector.fromArray(SHORT_BYTES, pass, i)).intoArray(pass, i);
        }
      }
      testRows(b, at, 2, i, n, lo, hi, pass, first);
    }

    /** -1 in the byte of each of the 16-bit values from byte `at` on that lies in lo..hi, 0 in the others. */
    static ByteVector inShorts(ByteBuffer b, int at, short lo, short hi) {
      ShortVector v = ShortVector.fromByteBuffer(SHORTS, b, at, LE);
      return (ByteVector) v.compare(VectorOperators.GE, lo).and(v.compare(VectorOperators.LE, hi)).toVector()
          .convertShape(VectorOperators.S2B, SHORT_BYTES, 0);
    }

    static void testInts(ByteBuffer b, int at, int n, int lo, int hi, byte[] pass, boolean first) {
      int i = 0, upper = INTS.loopBound(n);
      if (first) {
        for (; i < upper; i += INTS.length()) {
          inInts(b, at + 4 * i, lo, hi).intoArray(pass, i);
        }
      } else {
        for (; i < upper; i += INTS.length()) {
          inInts(b, at + 4 * i, lo, hi).and(ByteVector.fromArray(INT_BYTES, pass, i)).intoArray(pass, i);
        }
      }
      testRows(b, at, 4, i, n, lo, hi, pass, first);
    }

    /** As inShorts, of 32-bit values. */
    static ByteVector inInts(ByteBuffer b, int at, int lo, int hi) {
      IntVector v = IntVector.fromByteBuffer(INTS, b, at, LE);
      return (ByteVector) v.compare(VectorOperators.GE, lo).and(v.compare(VectorOperators.LE, hi)).toVector()
          .convertShape(VectorOperators.I2B, INT_BYTES, 0);
    }

    /**
     * The scalar test, of any width w: rows i..n-1 of the values from byte `at` on, one at
     * a time (an int64 column; the rows after a narrow column's last full lanes).
     */
    static void testRows(ByteBuffer b, int at, int w, int i, int n, long lo, long hi, byte[] pass, boolean first) {
      for (; i < n; i++) {
        long v = w == 8 ? b.getLong(at + 8 * i) : w == 4 ? b.getInt(at + 4 * i) : b.getShort(at + 2 * i);
        pass[i] = (first || pass[i] != 0) && v >= lo && v <= hi ? (byte) -1 : 0;
      }
    }

    /** How many of pass[from..to-1] are marked. */
    static int count(byte[] pass, int from, int to) {
      int n = 0, i = from;
      for (int upper = from + BYTES.loopBound(to - from); i < upper; i += BYTES.length()) {
        n += ByteVector.fromArray(BYTES, pass, i).compare(VectorOperators.NE, (byte) 0).trueCount();
      }
      for (; i < to; i++) {
        n += pass[i] != 0 ? 1 : 0;
      }
      return n;
    }

    /**
     * Column c of rows from..to-1, those marked in pass[at + r - from] and not NULL:
     * {present, least, most, high, low} as stored (a narrow column's deltas); the sum is
     * high * 2^32 + low (int64 values go in as their halves, x >> 32 and the low 32 bits).
     */
    static long[] fold(Columns s, int c, int from, int to, byte[] pass, int at) {
      int w = s.width[c];
      return w == 8 ? foldRows(s, c, from, to, pass, at, new long[] {0, Long.MAX_VALUE, Long.MIN_VALUE, 0, 0})
          : w == 4 ? foldInts(s, c, from, to, pass, at) : foldShorts(s, c, from, to, pass, at);
    }

    // Two passes over the column, the count and sum and then the least and most: in one
    // pass the four took 2.3 times as long (a 16-bit column of a 100M-row polygon: half
    // of the region server's time went here).
    static long[] foldShorts(Columns s, int c, int from, int to, byte[] pass, int at) {
      int n = to - from, p = s.at[c] + 2 * from, i = 0;
      long has = 0, sum = 0;
      for (int upper = SHORTS.loopBound(n); i < upper; ) {
        IntVector sums = IntVector.zero(INTS);
        for (int stop = Math.min(upper, i + SUM_ROWS); i < stop; i += SHORTS.length()) {
          ShortVector v = ShortVector.fromByteBuffer(SHORTS, s.b, p + 2 * i, LE);
          VectorMask<Short> m = kept(v, pass, at + i);
          has += m.trueCount();
          ShortVector kept = ShortVector.zero(SHORTS).blend(v, m);
          sums = sums.add(kept.convertShape(VectorOperators.S2I, INTS, 0)).add(kept.convertShape(VectorOperators.S2I, INTS, 1));
        }
        sum += sums.reduceLanesToLong(VectorOperators.ADD);
      }
      ShortVector least = ShortVector.broadcast(SHORTS, Short.MAX_VALUE);
      ShortVector most = ShortVector.broadcast(SHORTS, Short.MIN_VALUE);
      for (int j = 0; j < i; j += SHORTS.length()) {
        ShortVector v = ShortVector.fromByteBuffer(SHORTS, s.b, p + 2 * j, LE);
        VectorMask<Short> out = kept(v, pass, at + j).not();
        least = least.min(v.blend(Short.MAX_VALUE, out));
        most = most.max(v.blend(Short.MIN_VALUE, out));
      }
      long[] f = {has, least.reduceLanesToLong(VectorOperators.MIN), most.reduceLanesToLong(VectorOperators.MAX), 0, sum};
      return foldRows(s, c, from + i, to, pass, at + i, f);
    }

    /** The lanes of v (a 16-bit column's) marked in pass[at..] and not NULL. */
    static VectorMask<Short> kept(ShortVector v, byte[] pass, int at) {
      ShortVector marks = (ShortVector) ByteVector.fromArray(SHORT_BYTES, pass, at).convertShape(VectorOperators.B2S, SHORTS, 0);
      return marks.compare(VectorOperators.NE, (short) 0).and(v.compare(VectorOperators.NE, Short.MIN_VALUE));
    }

    static long[] foldInts(Columns s, int c, int from, int to, byte[] pass, int at) {
      int n = to - from, p = s.at[c] + 4 * from, i = 0;
      long has = 0, sum = 0;
      IntVector least = IntVector.broadcast(INTS, Integer.MAX_VALUE);
      IntVector most = IntVector.broadcast(INTS, Integer.MIN_VALUE);
      for (int upper = INTS.loopBound(n); i < upper; i += INTS.length()) {
        IntVector v = IntVector.fromByteBuffer(INTS, s.b, p + 4 * i, LE);
        IntVector marks = (IntVector) ByteVector.fromArray(INT_BYTES, pass, at + i).convertShape(VectorOperators.B2I, INTS, 0);
        VectorMask<Integer> m = marks.compare(VectorOperators.NE, 0).and(v.compare(VectorOperators.NE, Integer.MIN_VALUE));
        has += m.trueCount();
        // an int's lanes could overflow: each step's sum goes to an int64 (a reduction a step)
        sum += IntVector.zero(INTS).blend(v, m).reduceLanesToLong(VectorOperators.ADD);
        least = least.min(v.blend(Integer.MAX_VALUE, m.not()));
        most = most.max(v.blend(Integer.MIN_VALUE, m.not()));
      }
      long[] f = {has, least.reduceLanesToLong(VectorOperators.MIN), most.reduceLanesToLong(VectorOperators.MAX), 0, sum};
      return foldRows(s, c, from + i, to, pass, at + i, f);
    }

    /**
     * The scalar fold, of any width, into f (as fold() returns it): rows from..to-1 one at a
     * time (an int64 column; the rows after a narrow column's last full lanes). A value
     * goes to high and low as its halves, which add up to it for any width.
     */
    static long[] foldRows(Columns s, int c, int from, int to, byte[] pass, int at, long[] f) {
      int w = s.width[c];
      long nil = w == 8 ? Long.MIN_VALUE : w == 4 ? Integer.MIN_VALUE : Short.MIN_VALUE;
      for (int r = from, p = s.at[c] + w * from; r < to; r++, p += w) {
        long x = w == 8 ? s.b.getLong(p) : w == 4 ? s.b.getInt(p) : s.b.getShort(p);
        if (pass[at + r - from] != 0 && x != nil) {
          f[0]++;
          f[1] = Math.min(f[1], x);
          f[2] = Math.max(f[2], x);
          f[3] += x >> 32;
          f[4] += x & 0xFFFFFFFFL;
        }
      }
      return f;
    }
  }

  /** A request's polygon, as gridagg/kernels.py's point_in_polygon tests a row with it. */
  static final class Polygon {
    static final int OUTSIDE = 0, NEAR = 1, INSIDE = 2;
    final int lonCol, latCol;
    final double lonScale, latScale, eps;
    final double[] edges; // edge e: x1, y1, x2, y2 at 4 * e

    Polygon(ByteBuffer in, Request q) throws IOException {
      lonCol = q.column(in.getShort() & 0xffff);
      latCol = q.column(in.getShort() & 0xffff);
      lonScale = in.getDouble();
      latScale = in.getDouble();
      eps = in.getDouble();
      long nedges = in.getInt() & 0xffffffffL;
      if (nedges > in.remaining() / 32) {
        throw new DoNotRetryIOException(ATTRIBUTE + ": bad polygon edge count " + nedges);
      }
      edges = new double[(int) (4 * nedges)];
      in.asDoubleBuffer().get(edges);
      in.position(in.position() + 8 * edges.length);
    }

    /** Where row r of seg lies: OUTSIDE, INSIDE, or NEAR (within eps of an edge: only an exact test can say). */
    int where(Columns seg, int r) {
      double x = seg.get(lonCol, r) / lonScale, y = seg.get(latCol, r) / latScale;
      double[] e = edges;
      for (int j = 0; j < e.length; j += 4) {
        double x1 = e[j], y1 = e[j + 1], x2 = e[j + 2], y2 = e[j + 3];
        if (x < Math.min(x1, x2) - eps || x > Math.max(x1, x2) + eps || y < Math.min(y1, y2) - eps
            || y > Math.max(y1, y2) + eps) {
          continue;
        }
        double dx = x2 - x1, dy = y2 - y1, length2 = dx * dx + dy * dy;
        double t = length2 == 0 ? 0.0 : Math.min(1.0, Math.max(0.0, ((x - x1) * dx + (y - y1) * dy) / length2));
        double px = x1 + t * dx - x, py = y1 + t * dy - y;
        if (px * px + py * py <= eps * eps) {
          return NEAR;
        }
      }
      boolean inside = false; // even-odd: a ray from the point crosses the edges an odd number of times
      for (int j = 0; j < e.length; j += 4) {
        double x1 = e[j], y1 = e[j + 1], x2 = e[j + 2], y2 = e[j + 3];
        if ((y1 > y) != (y2 > y) && x < x1 + (y - y1) * (x2 - x1) / (y2 - y1)) {
          inside = !inside;
        }
      }
      return inside ? INSIDE : OUTSIDE;
    }
  }

  /** A decoded request. */
  static final class Request {
    final int layout, ncols;
    final long deadline; // epoch milliseconds; 0: none
    final int[] condCol;
    final long[] condLo, condHi;
    long lo0 = Long.MIN_VALUE, hi0 = Long.MAX_VALUE; // column 0's conditions together
    final int[] aggCol;
    int bucketCol = -1;
    long bucketBase, bucketStep = 1;
    int nbuckets;
    final int ngroups;
    int[] skipAgg = new int[0];
    boolean[] skipMax = new boolean[0], bestHas = new boolean[0];
    long[] bestVal = new long[0];
    final int nitems;
    /**
     * The request and where its key blocks begin: keys are read in place, and a key is
     * copied out (start(i), stop(i)) only by the region that holds its item. Every region
     * gets the whole request, so copying every key in each would cost a step per item and
     * region.
     */
    private final byte[] data;
    private final int startBase, stopBase;
    private final int[] startAt, stopAt;
    private final byte[][] start, stop;
    final int[] group;
    final boolean[] rowsOf;
    final long[] bounds; // item i, spec s at i * nspecs + s
    final Polygon polygon; // rows_of items' rows are tested against it; null: they come back
    final int maskBytes; // per item: which conditions its rows are tested against
    final byte[] tests; // item i's mask at i * maskBytes

    Request(byte[] data) throws IOException {
      ByteBuffer in = ByteBuffer.wrap(data).order(ByteOrder.LITTLE_ENDIAN);
      int version = in.get() & 0xff;
      if (version != VERSION) {
        throw new DoNotRetryIOException(ATTRIBUTE + ": request version " + version + ", this observer reads "
            + VERSION + " (deploy the observer that matches the client)");
      }
      layout = in.get() & 0xff;
      if (layout > 1) {
        throw new DoNotRetryIOException(ATTRIBUTE + ": unknown layout " + layout);
      }
      ncols = in.getShort() & 0xffff;
      deadline = in.getLong();
      int nconds = in.getShort() & 0xffff;
      condCol = new int[nconds];
      condLo = new long[nconds];
      condHi = new long[nconds];
      for (int j = 0; j < nconds; j++) {
        condCol[j] = column(in.getShort() & 0xffff);
        condLo[j] = in.getLong();
        condHi[j] = in.getLong();
        if (condCol[j] == 0) {
          lo0 = Math.max(lo0, condLo[j]);
          hi0 = Math.min(hi0, condHi[j]);
        }
      }
      aggCol = new int[in.getShort() & 0xffff];
      for (int j = 0; j < aggCol.length; j++) {
        aggCol[j] = column(in.getShort() & 0xffff);
      }
      int grouping = in.get() & 0xff;
      if (grouping == 1) {
        bucketCol = column(in.getShort() & 0xffff);
        bucketBase = in.getLong();
        bucketStep = in.getLong();
        nbuckets = in.getInt();
        if (bucketStep <= 0 || nbuckets < 0) {
          throw new DoNotRetryIOException(ATTRIBUTE + ": bucket step and count must be positive");
        }
      } else if (grouping != 0) {
        throw new DoNotRetryIOException(ATTRIBUTE + ": unknown grouping " + grouping);
      }
      ngroups = in.getInt();
      if (ngroups < 0 || (long) ngroups * Math.max(1, aggCol.length) > MAX_SLOTS
          || (grouping == 1 && nbuckets > ngroups)) {
        throw new DoNotRetryIOException(ATTRIBUTE + ": " + ngroups + " groups of " + aggCol.length
            + " columns is too many (or fewer than the buckets)");
      }
      if ((in.get() & 0xff) == 1) {
        int nspecs = in.getShort() & 0xffff;
        skipAgg = new int[nspecs];
        skipMax = new boolean[nspecs];
        bestHas = new boolean[nspecs];
        bestVal = new long[nspecs];
        for (int s = 0; s < nspecs; s++) {
          skipAgg[s] = in.getShort() & 0xffff;
          if (skipAgg[s] >= aggCol.length) {
            throw new DoNotRetryIOException(ATTRIBUTE + ": skip spec names aggregated column " + skipAgg[s]);
          }
          skipMax[s] = in.get() != 0;
        }
        for (int s = 0; s < nspecs; s++) {
          bestHas[s] = in.get() != 0;
          bestVal[s] = in.getLong();
        }
      }
      polygon = (in.get() & 0xff) == 1 ? new Polygon(in, this) : null;
      int nitems = in.getInt();
      if (nitems < 0 || nitems > in.remaining() / 13) { // 2 offsets, a group and rows_of each
        throw new DoNotRetryIOException(ATTRIBUTE + ": bad item count " + nitems);
      }
      this.nitems = nitems;
      this.data = data;
      startAt = offsets(in, nitems);
      stopAt = offsets(in, nitems);
      startBase = in.position();
      stopBase = startBase + startAt[nitems];
      if (stopBase + stopAt[nitems] > data.length) {
        throw new DoNotRetryIOException(ATTRIBUTE + ": key offsets outside the request");
      }
      in.position(stopBase + stopAt[nitems]);
      start = new byte[nitems][];
      stop = new byte[nitems][];
      group = new int[nitems];
      in.asIntBuffer().get(group);
      in.position(in.position() + 4 * nitems);
      if (bucketCol < 0) {
        for (int i = 0; i < nitems; i++) {
          if (group[i] < 0 || group[i] >= ngroups) {
            throw new DoNotRetryIOException(ATTRIBUTE + ": item " + i + " in group " + group[i] + " of " + ngroups);
          }
        }
      }
      rowsOf = new boolean[nitems];
      for (int i = 0; i < nitems; i++) {
        rowsOf[i] = in.get() != 0;
      }
      bounds = new long[nitems * skipAgg.length];
      in.asLongBuffer().get(bounds);
      in.position(in.position() + 8 * bounds.length);
      maskBytes = (nconds + 7) / 8;
      tests = new byte[nitems * maskBytes];
      in.get(tests);
      if (in.hasRemaining()) {
        throw new DoNotRetryIOException(ATTRIBUTE + ": " + in.remaining() + " bytes after the request");
      }
    }

    /** nitems + 1 offsets of keys in their block: from 0, never decreasing. */
    private static int[] offsets(ByteBuffer in, int nitems) throws IOException {
      int[] at = new int[nitems + 1];
      for (int i = 0; i <= nitems; i++) {
        at[i] = in.getInt();
        if (at[i] < (i == 0 ? 0 : at[i - 1])) {
          throw new DoNotRetryIOException(ATTRIBUTE + ": key offset " + at[i] + " of item " + i + " goes back");
        }
      }
      if (at[0] != 0 || at[nitems] > in.remaining()) {
        throw new DoNotRetryIOException(ATTRIBUTE + ": key offsets outside the request");
      }
      return at;
    }

    /** Item i's start key (a copy, made once). */
    byte[] start(int i) {
      if (start[i] == null) {
        start[i] = Arrays.copyOfRange(data, startBase + startAt[i], startBase + startAt[i + 1]);
      }
      return start[i];
    }

    /** Item i's stop key (a copy, made once). */
    byte[] stop(int i) {
      if (stop[i] == null) {
        stop[i] = Arrays.copyOfRange(data, stopBase + stopAt[i], stopBase + stopAt[i + 1]);
      }
      return stop[i];
    }

    /** Item i's start key compared with `key`, read in place (as Bytes.compareTo). */
    int compareStart(int i, byte[] key) {
      int at = startBase + startAt[i];
      return Bytes.compareTo(data, at, startAt[i + 1] - startAt[i], key, 0, key.length);
    }

    /** Item i's stop key compared with `key`, read in place. */
    int compareStop(int i, byte[] key) {
      int at = stopBase + stopAt[i];
      return Bytes.compareTo(data, at, stopAt[i + 1] - stopAt[i], key, 0, key.length);
    }

    /** Whether item i's stop key is empty (layout 1: to the table's end). */
    boolean openEnded(int i) {
      return stopAt[i + 1] == stopAt[i];
    }

    /** Whether item i's rows must be tested against condition j. */
    boolean tests(int i, int j) {
      return (tests[i * maskBytes + (j >> 3)] >> (j & 7) & 1) != 0;
    }

    private int column(int c) throws IOException {
      if (c >= ncols) {
        throw new DoNotRetryIOException(ATTRIBUTE + ": column " + c + " of " + ncols);
      }
      return c;
    }
  }

  /** One request's work in one region, and its answer. */
  static final class Scanner {
    final Region region;
    final Request q;
    final RegionInfo info;
    final int k;
    final long[] count, present, min, max, hi, lo;
    long rowsVisited, rowsMatched, gridsScanned, gridsSkipped;
    final long[][] rows; // rows_of items' matching rows, row-major
    final int[] nrows;
    long rowBytes;
    final RpcCall call;
    /** Whether the deadline has passed (then nothing more is read), and the items left unread. */
    boolean stopped;
    final boolean[] unread;
    int nunread;

    Scanner(Region region, Request q) {
      this.region = region;
      this.q = q;
      info = region.getRegionInfo();
      k = q.aggCol.length;
      count = new long[q.ngroups];
      present = new long[q.ngroups * k];
      min = new long[q.ngroups * k];
      max = new long[q.ngroups * k];
      hi = new long[q.ngroups * k];
      lo = new long[q.ngroups * k];
      Arrays.fill(min, Long.MAX_VALUE);
      Arrays.fill(max, Long.MIN_VALUE);
      rows = new long[q.nitems][];
      nrows = new int[q.nitems];
      unread = new boolean[q.nitems];
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
            Cell[] cells = region.get(new Get(q.start(i)).addFamily(ROWS)).rawCells();
            grid(i, cells == null ? Collections.<Cell>emptyList() : Arrays.asList(cells));
          }
        }
      } else {
        gridsInKeyOrder(mine);
      }
      if (nunread > 0) {
        STOPPED_SCANS.incrementAndGet();
        UNREAD_ITEMS.addAndGet(nunread);
      }
      return answer();
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
        throw new DoNotRetryIOException(ATTRIBUTE + ": the caller has disconnected");
      }
      if (System.currentTimeMillis() > call.getDeadline()) {
        throw new DoNotRetryIOException(ATTRIBUTE + ": past the call's deadline");
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
      if (nspecs > 0 && !q.rowsOf[i]) {
        boolean useless = true;
        for (int s = 0; s < nspecs && useless; s++) {
          int c = q.skipAgg[s];
          boolean seen = q.ngroups > 0 && present[c] > 0;
          if (!(seen || q.bestHas[s])) {
            useless = false;
            break;
          }
          long bound = q.bounds[i * nspecs + s];
          if (q.skipMax[s]) {
            long best = seen ? max[c] : q.bestVal[s];
            if (q.bestHas[s] && q.bestVal[s] > best) {
              best = q.bestVal[s];
            }
            useless = bound <= best;
          } else {
            long best = seen ? min[c] : q.bestVal[s];
            if (q.bestHas[s] && q.bestVal[s] < best) {
              best = q.bestVal[s];
            }
            useless = bound >= best;
          }
        }
        if (useless) {
          gridsSkipped++;
          return true;
        }
      }
      gridsScanned++;
      return false;
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
          .addFamily(ROWS).setFilter(new MultiRowRangeFilter(ranges));
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
      for (int c = firstLive(cells); c < cells.size(); c++) {
        segment(i, cells.get(c));
      }
    }

    /** One segment (gridagg/segments.py, read by Columns). */
    void segment(int i, Cell cell) throws IOException {
      ByteBuffer b = value(cell);
      Columns s = Columns.segment(b, b.position(), cell.getValueLength());
      if (s == null || s.ncols() != q.ncols) {
        throw new DoNotRetryIOException(ATTRIBUTE + ": a segment of row "
            + Bytes.toStringBinary(CellUtil.cloneRow(cell)) + " of " + cell.getValueLength() + " bytes is not one of "
            + q.ncols + " columns, as the request has");
      }
      rowsVisited += s.n;
      int a = q.lo0 == Long.MIN_VALUE ? 0 : s.lowerBound(q.lo0);
      int z = q.hi0 == Long.MAX_VALUE ? s.n : s.lowerBound(q.hi0 + 1);
      if (q.rowsOf[i] && q.polygon == null) {
        rows(i, s, a, z);
      } else {
        columns(i, s, a, z);
      }
    }

    /** Whether each of the rows a..z-1 columns() is at passes its item's conditions (-1) or not (0): row r at pass[r - a]. */
    byte[] pass = new byte[0];
    /** Runs of rows of one group: rows runFrom[r]..runTo[r]-1 in group runGroup[r], runRows[r] of them passing. */
    int[] runFrom = new int[1], runTo = new int[1], runGroup = new int[1], runRows = new int[1];

    /**
     * What rows() does for an aggregate, a column at a time and SIMD lanes at a time (the
     * Vector API, like the embedded store's compiled kernel): each tested condition marks
     * in `pass` which rows meet it; the rows are cut into runs of one group (the item's,
     * or one per time bucket); each aggregated column is added up a run at a time, the
     * rows that pass picked by mask, a narrow column on its deltas (the base added once
     * per run).
     */
    void columns(int i, Columns seg, int a, int z) throws IOException {
      if (z <= a || !select(i, seg, a, z) || (q.rowsOf[i] && !inPolygon(i, seg, a, z))) {
        return;
      }
      int nruns = runs(i, seg, a, z);
      for (int r = 0; r < nruns; r++) {
        runRows[r] = Lanes.count(pass, runFrom[r] - a, runTo[r] - a);
        rowsMatched += runRows[r];
        count[runGroup[r]] += runRows[r];
      }
      for (int j = 0; j < k; j++) {
        for (int r = 0; r < nruns; r++) {
          if (runRows[r] > 0) {
            fold(runGroup[r] * k + j, seg, q.aggCol[j], runFrom[r], runTo[r], a);
          }
        }
      }
    }

    /**
     * Marks in `pass` which of rows a..z-1 meet every condition of item i, but those on
     * column 0 (a..z are the rows that meet them) and those the request says every row
     * of the item meets; false when no row can.
     */
    boolean select(int i, Columns seg, int a, int z) {
      if (pass.length < z - a) {
        pass = new byte[Math.max(z - a, 2 * pass.length)];
      }
      boolean first = true;
      for (int j = 0; j < q.condCol.length; j++) {
        if (q.condCol[j] == 0 || !q.tests(i, j)) {
          continue;
        }
        if (!Lanes.test(seg, q.condCol[j], a, z, q.condLo[j], q.condHi[j], pass, first)) {
          return false;
        }
        first = false;
      }
      if (first) {
        Arrays.fill(pass, 0, z - a, (byte) -1);
      }
      return true;
    }

    /**
     * Clears in `pass` the marked rows of a..z-1 (item i's, on the polygon's edge) that
     * lie outside the polygon, and those near an edge, which come back whole instead;
     * false when no marked row is left.
     */
    boolean inPolygon(int i, Columns seg, int a, int z) throws IOException {
      boolean any = false;
      for (int r = a; r < z; r++) {
        if (pass[r - a] == 0) {
          continue;
        }
        int where = q.polygon.where(seg, r);
        if (where == Polygon.INSIDE) {
          any = true;
          continue;
        }
        pass[r - a] = 0;
        if (where == Polygon.NEAR) {
          keepRow(i, seg, r);
        }
      }
      return any;
    }

    /**
     * Cuts rows a..z-1 into runs of one group (run fields), rows outside every bucket left
     * out; returns how many. Rows are in time order, so on column 0 a bucket's rows are
     * one run and where it ends is a binary search.
     */
    int runs(int i, Columns seg, int a, int z) {
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

    /**
     * Column c of rows from..to-1 of seg, those passing (pass[r - a]) and not NULL, into
     * the aggregate at `slot`. Sums are exact: a narrow column's deltas in int64, an int64
     * column as two halves (x >> 32 and its low 32 bits), as add() keeps them.
     */
    void fold(int slot, Columns seg, int c, int from, int to, int a) {
      long[] f = Lanes.fold(seg, c, from, to, pass, from - a); // present, least, most, high, low
      if (f[0] == 0) {
        return;
      }
      long base = seg.width[c] == 8 ? 0 : seg.base[c];
      present[slot] += f[0];
      min[slot] = Math.min(min[slot], f[1] + base);
      max[slot] = Math.max(max[slot], f[2] + base);
      // a delta's value is delta + base: the base's halves go to hi and lo once per value
      hi[slot] += f[3] + f[0] * (base >> 32);
      lo[slot] += f[4] + f[0] * (base & 0xFFFFFFFFL);
    }

    /** Value x (present) into the aggregate at `slot`: sums as two halves, exact. */
    void add(int slot, long x) {
      present[slot]++;
      if (x < min[slot]) {
        min[slot] = x;
      }
      if (x > max[slot]) {
        max[slot] = x;
      }
      hi[slot] += x >> 32;
      lo[slot] += x & 0xFFFFFFFFL;
    }

    /** Layout 1: the rows of item i's key range inside this region, one cell each. */
    void rowRange(int i) throws IOException {
      byte[] rs = info.getStartKey(), re = info.getEndKey();
      byte[] from = Bytes.compareTo(q.start(i), rs) > 0 ? q.start(i) : rs;
      byte[] to = q.stop(i);
      if (re.length > 0 && (to.length == 0 || Bytes.compareTo(to, re) > 0)) {
        to = re;
      }
      Scan scan = new Scan().withStartRow(from).addFamily(ROWS);
      if (to.length > 0) {
        scan.withStopRow(to);
      }
      long[] seen = {0};
      eachRow(scan, cells -> {
        for (Cell cell : cells) {
          if (cell.getValueLength() != 8 * q.ncols) {
            throw new DoNotRetryIOException(ATTRIBUTE + ": row " + Bytes.toStringBinary(CellUtil.cloneRow(cell))
                + " has a " + cell.getValueLength() + "-byte cell, not " + q.ncols + " int64s");
          }
          ByteBuffer b = value(cell);
          rowsVisited++;
          rows(i, Columns.wide(b, b.position(), 1, q.ncols), 0, 1);
        }
        if ((++seen[0] & 0xfff) == 0) {
          checkCaller();
        }
        return true;
      });
    }

    /**
     * Rows a..z-1 of item i's rows s, row by row: for blocks of one row (layout 1) and
     * for items whose rows are asked back; segments' aggregates go through columns().
     */
    void rows(int i, Columns s, int a, int z) throws IOException {
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
        rowsMatched++;
        count[g]++;
        int slot = g * k;
        for (int j = 0; j < k; j++, slot++) {
          long v = s.get(q.aggCol[j], r);
          if (v == Long.MIN_VALUE) {
            continue; // NULL: an absent value
          }
          add(slot, v);
        }
      }
    }

    void keepRow(int i, Columns s, int r) throws IOException {
      rowBytes += 8L * q.ncols;
      if (rowBytes > MAX_ROW_BYTES) {
        throw new DoNotRetryIOException(ATTRIBUTE + ": more than " + MAX_ROW_BYTES + " bytes of rows asked back");
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

    byte[] answer() {
      int groups = 0;
      for (long c : count) {
        if (c > 0) {
          groups++;
        }
      }
      long size = regionBytes(info) + 32 + 4 + (long) groups * (12 + 40L * k) + 4 + 4 + 4L * nunread;
      int items = 0;
      for (int i = 0; i < rows.length; i++) {
        if (q.rowsOf[i] && inRegion(i) && !unread[i]) {
          items++;
          size += 8 + 8L * nrows[i] * q.ncols;
        }
      }
      ByteBuffer out = ByteBuffer.allocate((int) size).order(ByteOrder.LITTLE_ENDIAN);
      putRegion(out, info);
      out.putLong(rowsVisited).putLong(rowsMatched).putLong(gridsScanned).putLong(gridsSkipped);
      out.putInt(groups);
      for (int g = 0; g < count.length; g++) {
        if (count[g] > 0) {
          out.putInt(g).putLong(count[g]);
          for (int j = g * k; j < (g + 1) * k; j++) {
            out.putLong(present[j]).putLong(min[j]).putLong(max[j]).putLong(hi[j]).putLong(lo[j]);
          }
        }
      }
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
}
