package gridagg.observer;

import java.nio.ByteBuffer;

/**
 * A segment's rows held as columns where they lie (gridagg/store/segments.py), or one
 * row of int64s (layout 1). A column of width 8 holds the values; of width 4 or 2, each
 * value minus the column's base as an int or short, NULL as the type's least value.
 * A segment cut into blocks (gridagg/store/blocks.py) has a block tree: per block its
 * first row; per node (in preorder) its first block, the block after its last and its
 * right child (0: a block; the left child is the next node); and per node and column its
 * least and greatest value, values present and the sum's high and low halves. Rows are
 * in column-0 order inside each block (inside the whole segment when it has no blocks).
 */
final class Segment {
  static final int NARROW = 1 << 31, BLOCKED = 1 << 30, COLUMNS = BLOCKED - 1;
  static final int STATS = 5, MIN = 0, MAX = 1, PRESENT = 2, HIGH = 3, LOW = 4;
  static final int LINKS = 4, FIRST = 0, END = 1, RIGHT = 2;

  final ByteBuffer b; // little-endian
  final int n;
  final int[] at, width;
  final long[] base;
  /** Where the columns end (a segment's element ID offsets begin). */
  final int end;
  /** Blocks and tree nodes (0: no tree), where the blocks' first rows, the links and the node table lie. */
  final int nblocks, nnodes, startsAt, linksAt, tableAt;

  private Segment(ByteBuffer b, int n, int[] at, int[] width, long[] base, int end, int nblocks, int nnodes,
                  int startsAt, int linksAt, int tableAt) {
    this.b = b;
    this.n = n;
    this.at = at;
    this.width = width;
    this.base = base;
    this.end = end;
    this.nblocks = nblocks;
    this.nnodes = nnodes;
    this.startsAt = startsAt;
    this.linksAt = linksAt;
    this.tableAt = tableAt;
  }

  /** n rows of ncols int64 columns one after another from `start`. */
  static Segment wide(ByteBuffer b, int start, int n, int ncols) {
    int[] at = new int[ncols], width = new int[ncols];
    for (int c = 0; c < ncols; c++) {
      at[c] = start + 8 * n * c;
      width[c] = 8;
    }
    return new Segment(b, n, at, width, new long[ncols], start + 8 * n * ncols, 0, 0, 0, 0, 0);
  }

  /** The segment of `len` bytes at `start`, or null when its header does not fit them. */
  static Segment parse(ByteBuffer b, int start, int len) {
    long n = b.getInt(start) & 0xffffffffL;
    int head = b.getInt(start + 4);
    long ncols = head & COLUMNS;
    if ((head & NARROW) == 0) { // written before narrow columns: all int64
      return 8 + 8 * n * ncols + 4 * (n + 1) > len ? null : wide(b, start + 8, (int) n, (int) ncols);
    }
    long p = start + 8 + 8 * ncols + 8 * ((ncols + 7) / 8);
    int nblocks = 0, nnodes = 0, startsAt = 0, linksAt = 0, tableAt = 0;
    if ((head & BLOCKED) != 0) {
      if (p + 8 > start + len) {
        return null;
      }
      long blocks = b.getInt((int) p) & 0xffffffffL, nodes = b.getInt((int) p + 4) & 0xffffffffL;
      startsAt = (int) p + 8;
      linksAt = (int) (startsAt + (4 * (blocks + 1) + 7) / 8 * 8);
      tableAt = (int) (linksAt + 4L * LINKS * nodes);
      p = tableAt + 8L * STATS * nodes * ncols;
      if (p > start + len || blocks == 0 || nodes == 0) {
        return null;
      }
      nblocks = (int) blocks;
      nnodes = (int) nodes;
    }
    if (p > start + len) {
      return null;
    }
    int[] at = new int[(int) ncols], width = new int[(int) ncols];
    long[] base = new long[(int) ncols];
    for (int c = 0; c < ncols; c++) {
      width[c] = b.get(start + 8 + 8 * (int) ncols + c);
      base[c] = b.getLong(start + 8 + 8 * c);
      if (width[c] != 2 && width[c] != 4 && width[c] != 8) {
        return null;
      }
      at[c] = (int) p;
      p += (n * width[c] + 7) / 8 * 8;
    }
    if (p + 4 * (n + 1) > start + len) {
      return null;
    }
    Segment s = new Segment(b, (int) n, at, width, base, (int) p, nblocks, nnodes, startsAt, linksAt, tableAt);
    return nblocks == 0 || s.blockStart(nblocks) == n ? s : null;
  }

  int ncols() {
    return at.length;
  }

  /** The first row of block k (k = nblocks: n). */
  int blockStart(int k) {
    return b.getInt(startsAt + 4 * k);
  }

  /** Link `what` (FIRST, END, RIGHT) of tree node i. */
  int link(int i, int what) {
    return b.getInt(linksAt + 4 * (LINKS * i + what));
  }

  /** Statistic `what` (MIN .. LOW) of column c of tree node i. */
  long stat(int i, int c, int what) {
    return b.getLong(tableAt + 8 * ((i * at.length + c) * STATS + what));
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

  /** The first of rows from..to-1 (in column-0 order) whose column 0 is >= v (to if none). */
  int firstAtLeast(long v, int from, int to) {
    if (from >= to || get(0, from) >= v) {
      return from;
    }
    if (get(0, to - 1) < v) {
      return to;
    }
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
