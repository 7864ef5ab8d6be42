package gridagg.observer;

/**
 * The row loops of a scan, a column at a time, on a segment's columns as they are stored
 * (a narrow column's deltas: a condition's bounds become deltas once, the base is added
 * once per fold). Which rows pass is kept as a byte a row, 0 or 1.
 */
final class RowLoops {
  private RowLoops() {}

  /**
   * Marks pass[r - a] for rows a..z-1 whose column c lies in lo..hi (first: sets every
   * mark; else: clears those of rows that do not); false when no row can. NULL never does:
   * a narrow column's bounds become deltas above the type's least value.
   */
  static boolean test(Segment s, int c, int a, int z, long lo, long hi, byte[] pass, boolean first) {
    int w = s.width[c];
    if (lo > hi) {
      return false;
    }
    int p = s.at[c];
    if (w == 8) {
      for (int r = a; r < z; r++) {
        long v = s.b.getLong(p + 8 * r);
        pass[r - a] = (byte) ((first || pass[r - a] != 0) && v >= lo && v <= hi ? 1 : 0);
      }
      return true;
    }
    long least = w == 4 ? Integer.MIN_VALUE : Short.MIN_VALUE, most = w == 4 ? Integer.MAX_VALUE : Short.MAX_VALUE;
    long base = s.base[c];
    if (lo > base + most || hi < base + least + 1) {
      return false;
    }
    int dlo = (int) (Math.max(lo, base + least + 1) - base), dhi = (int) (Math.min(hi, base + most) - base);
    if (w == 4) {
      for (int r = a; r < z; r++) {
        int v = s.b.getInt(p + 4 * r);
        pass[r - a] = (byte) ((first || pass[r - a] != 0) && v >= dlo && v <= dhi ? 1 : 0);
      }
    } else {
      for (int r = a; r < z; r++) {
        int v = s.b.getShort(p + 2 * r);
        pass[r - a] = (byte) ((first || pass[r - a] != 0) && v >= dlo && v <= dhi ? 1 : 0);
      }
    }
    return true;
  }

  /** How many of pass[from..to-1] are marked. */
  static int count(byte[] pass, int from, int to) {
    int n = 0;
    for (int i = from; i < to; i++) {
      n += pass[i];
    }
    return n;
  }

  /**
   * Column c of rows from..to-1, those marked in pass[at + r - from] and not NULL, into
   * f: {present, least, most, high, low} as stored (a narrow column's deltas); the sum is
   * high * 2^32 + low (a value goes in as its halves, x >> 32 and its low 32 bits, which
   * add up to it for any width).
   */
  static void fold(Segment s, int c, int from, int to, byte[] pass, int at, long[] f) {
    int w = s.width[c], p = s.at[c];
    long has = 0, least = Long.MAX_VALUE, most = Long.MIN_VALUE, high = 0, low = 0;
    if (w == 2) { // the common case: 16-bit deltas, whose sum over a block fits a long
      for (int r = from, i = at; r < to; r++, i++) {
        int x = s.b.getShort(p + 2 * r);
        if (pass[i] != 0 && x != Short.MIN_VALUE) {
          has++;
          least = Math.min(least, x);
          most = Math.max(most, x);
          low += x;
        }
      }
      f[0] = has;
      f[1] = least;
      f[2] = most;
      f[3] = low >> 32;
      f[4] = low & 0xFFFFFFFFL;
      return;
    }
    long nil = w == 8 ? Long.MIN_VALUE : Integer.MIN_VALUE;
    for (int r = from, i = at; r < to; r++, i++) {
      long x = w == 8 ? s.b.getLong(p + 8 * r) : s.b.getInt(p + 4 * r);
      if (pass[i] != 0 && x != nil) {
        has++;
        least = Math.min(least, x);
        most = Math.max(most, x);
        high += x >> 32;
        low += x & 0xFFFFFFFFL;
      }
    }
    f[0] = has;
    f[1] = least;
    f[2] = most;
    f[3] = high;
    f[4] = low;
  }
}
