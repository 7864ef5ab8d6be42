package gridagg.observer;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;

/**
 * The row loops of a scan, a column at a time, on a segment's columns as they are stored
 * (a narrow column's deltas: a condition's bounds become deltas once, the base is added
 * once per fold). Which rows pass is kept as an int a row, 0 or 1, for at most CHUNK rows.
 *
 * <p>A column's values are first copied out of the cell into an array of ints (widths 2
 * and 4) or longs (width 8), and the loops over them have no branches: the JIT turns the
 * tests into SIMD instructions, several times faster than reading the buffer a value at a
 * time with a branch per row; the folds' min and max it leaves scalar, so a 16-bit column
 * is folded in the Vector API's lanes where the JVM has them (Lanes).
 */
final class RowLoops {
  /** Rows tested and added up at a time. */
  static final int CHUNK = 4096;
  /**
   * Whether 16-bit columns are folded in SIMD lanes (Lanes): where the JVM has the Vector
   * API's module (the local HBase's JVMs are started with it; an external cluster's need
   * `--add-modules jdk.incubator.vector`), else by the scalar loop, as wider columns are.
   */
  static final boolean LANES = ModuleLayer.boot().findModule("jdk.incubator.vector").isPresent();

  /** Row r - a of the rows tested: 1 when it passes, 0 when not. */
  final int[] pass = new int[CHUNK];
  private final short[] shorts = new short[CHUNK];
  private final int[] ints = new int[CHUNK];
  private final long[] longs = new long[CHUNK];

  /**
   * Marks pass[r - a] for rows a..z-1 (at most CHUNK) whose column c lies in lo..hi
   * (first: sets every mark; else: clears those of rows that do not); false when no row
   * can. NULL never does: a narrow column's bounds become deltas above the type's least.
   */
  boolean test(Segment s, int c, int a, int z, long lo, long hi, boolean first) {
    int w = s.width[c], n = z - a;
    if (lo > hi) {
      return false;
    }
    if (w == 8) {
      view(s, c, a).asLongBuffer().get(longs, 0, n);
      long span = hi - lo;
      for (int i = 0; i < n; i++) {
        long x = longs[i] - lo; // passes when x <= span as unsigned: no borrow out of span - x
        int ok = (int) (~((~span & x) | ((~span | x) & (span - x))) >>> 63);
        pass[i] = first ? ok : pass[i] & ok;
      }
      return true;
    }
    long least = w == 4 ? Integer.MIN_VALUE : Short.MIN_VALUE, most = w == 4 ? Integer.MAX_VALUE : Short.MAX_VALUE;
    long base = s.base[c];
    if (lo > base + most || hi < base + least + 1) {
      return false;
    }
    int dlo = (int) (Math.max(lo, base + least + 1) - base), dhi = (int) (Math.min(hi, base + most) - base);
    int span = dhi - dlo;
    load(s, c, a, n);
    if (first) {
      for (int i = 0; i < n; i++) {
        int x = ints[i] - dlo;
        pass[i] = ~((~span & x) | ((~span | x) & (span - x))) >>> 31;
      }
    } else {
      for (int i = 0; i < n; i++) {
        int x = ints[i] - dlo;
        pass[i] &= ~((~span & x) | ((~span | x) & (span - x))) >>> 31;
      }
    }
    return true;
  }

  /** Marks every one of the first n rows. */
  void passAll(int n) {
    java.util.Arrays.fill(pass, 0, n, 1);
  }

  /** How many of pass[from..to-1] are marked. */
  int count(int from, int to) {
    int n = 0;
    for (int i = from; i < to; i++) {
      n += pass[i];
    }
    return n;
  }

  /**
   * Column c of rows from..to-1, those marked in pass[at + r - from] and not NULL, into
   * f: {present, least, most, high, low} as stored (a narrow column's deltas); the sum is
   * high * 2^32 + low.
   */
  void fold(Segment s, int c, int from, int to, int at, long[] f) {
    int w = s.width[c], n = to - from;
    if (w == 8) {
      view(s, c, from).asLongBuffer().get(longs, 0, n);
      long has = 0, least = Long.MAX_VALUE, most = Long.MIN_VALUE, high = 0, low = 0;
      for (int i = 0; i < n; i++) {
        long x = longs[i], nil = x ^ Long.MIN_VALUE;
        long m = -(pass[at + i] & ((nil | -nil) >>> 63)); // all ones when the row counts
        has -= m;
        least = Math.min(least, x & m | ~m & Long.MAX_VALUE);
        most = Math.max(most, x & m | ~m & Long.MIN_VALUE);
        high += (x >> 32) & m;
        low += x & 0xFFFFFFFFL & m;
      }
      put(f, has, least, most, high, low);
      return;
    }
    load(s, c, from, n);
    if (w == 2 && LANES) {
      Lanes.fold16(ints, n, pass, at, f);
      return;
    }
    int nilValue = w == 4 ? Integer.MIN_VALUE : Short.MIN_VALUE;
    int has = 0, least = Integer.MAX_VALUE, most = Integer.MIN_VALUE;
    long sum = 0;
    for (int i = 0; i < n; i++) {
      int x = ints[i], nil = x ^ nilValue;
      int m = -(pass[at + i] & ((nil | -nil) >>> 31)); // all ones when the row counts
      has -= m;
      least = Math.min(least, x & m | ~m & Integer.MAX_VALUE);
      most = Math.max(most, x & m | ~m & Integer.MIN_VALUE);
      sum += x & m;
    }
    put(f, has, least, most, sum >> 32, sum & 0xFFFFFFFFL);
  }

  private static void put(long[] f, long has, long least, long most, long high, long low) {
    f[0] = has;
    f[1] = least;
    f[2] = most;
    f[3] = high;
    f[4] = low;
  }

  /** Rows r..r+n-1 of narrow column c (width 2 or 4) into ints[0..n-1]. */
  private void load(Segment s, int c, int r, int n) {
    if (s.width[c] == 4) {
      view(s, c, r).asIntBuffer().get(ints, 0, n);
      return;
    }
    view(s, c, r).asShortBuffer().get(shorts, 0, n);
    for (int i = 0; i < n; i++) {
      ints[i] = shorts[i];
    }
  }

  /** Column c of segment s from row r on, as a little-endian buffer of its own. */
  private static ByteBuffer view(Segment s, int c, int r) {
    ByteBuffer b = s.b.duplicate();
    b.position(s.at[c] + s.width[c] * r);
    return b.slice().order(ByteOrder.LITTLE_ENDIAN);
  }
}
