package gridagg.observer;

import java.nio.ByteBuffer;
import java.util.Arrays;

/**
 * What one region's scan adds up and counts: per group (one per item's group, or per
 * bucket) the count of rows, and per aggregated column the values present, the least
 * and greatest and the sum as two halves (high: x >> 32, low: the low 32 bits; they
 * add up exactly whatever the values), as gridagg/model/aggregate.py keeps them; and
 * what the scan read and reused.
 */
final class Sums {
  final int k; // aggregated columns
  final long[] count, present, min, max, hi, lo; // group g, column j at g * k + j
  long rowsRead, rowsMatched, gridsScanned, gridsSkipped, blocksReused, rowsInReusedBlocks, rowsInGrids;

  Sums(int ngroups, int k) {
    this.k = k;
    count = new long[ngroups];
    present = new long[ngroups * k];
    min = new long[ngroups * k];
    max = new long[ngroups * k];
    hi = new long[ngroups * k];
    lo = new long[ngroups * k];
    Arrays.fill(min, Long.MAX_VALUE);
    Arrays.fill(max, Long.MIN_VALUE);
  }

  /** Value x (present) into the aggregate at `slot`. */
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

  /**
   * A fold of a column's stored values (RowLoops.fold's {present, least, most, high,
   * low}) into the aggregate at `slot`; `base` is what the stored values are deltas from
   * (0 for an int64 column): a delta's value is delta + base, so the base's halves go to
   * the sums once per value.
   */
  void addFold(int slot, long[] f, long base) {
    if (f[0] == 0) {
      return;
    }
    present[slot] += f[0];
    min[slot] = Math.min(min[slot], f[1] + base);
    max[slot] = Math.max(max[slot], f[2] + base);
    hi[slot] += f[3] + f[0] * (base >> 32);
    lo[slot] += f[4] + f[0] * (base & 0xFFFFFFFFL);
  }

  /** Tree node `node`'s aggregate (segment s's, aggregated columns aggCol) into `group`. */
  void addNode(Segment s, int node, int group, int[] aggCol) {
    long n = s.stat(node, 0, Segment.PRESENT); // dimensions are never NULL: column 0's values are the node's rows
    count[group] += n;
    rowsMatched += n;
    blocksReused += s.link(node, Segment.END) - s.link(node, Segment.FIRST);
    rowsInReusedBlocks += n;
    int slot = group * k;
    for (int j = 0; j < k; j++, slot++) {
      int c = aggCol[j];
      long has = s.stat(node, c, Segment.PRESENT);
      if (has == 0) {
        continue;
      }
      present[slot] += has;
      min[slot] = Math.min(min[slot], s.stat(node, c, Segment.MIN));
      max[slot] = Math.max(max[slot], s.stat(node, c, Segment.MAX));
      hi[slot] += s.stat(node, c, Segment.HIGH);
      lo[slot] += s.stat(node, c, Segment.LOW);
    }
  }

  /** Groups with rows. */
  int groups() {
    int groups = 0;
    for (long c : count) {
      if (c > 0) {
        groups++;
      }
    }
    return groups;
  }

  /** The bytes write() puts. */
  long bytes() {
    return 56 + 4 + (long) groups() * (12 + 40L * k);
  }

  /** The answer's counts and groups (gridagg/store/hbase/scan.py says the format). */
  void write(ByteBuffer out) {
    out.putLong(rowsRead).putLong(rowsMatched).putLong(gridsScanned).putLong(gridsSkipped);
    out.putLong(blocksReused).putLong(rowsInReusedBlocks).putLong(rowsInGrids);
    out.putInt(groups());
    for (int g = 0; g < count.length; g++) {
      if (count[g] > 0) {
        out.putInt(g).putLong(count[g]);
        for (int j = g * k; j < (g + 1) * k; j++) {
          out.putLong(present[j]).putLong(min[j]).putLong(max[j]).putLong(hi[j]).putLong(lo[j]);
        }
      }
    }
  }
}
