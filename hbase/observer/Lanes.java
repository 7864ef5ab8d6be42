package gridagg.observer;

import jdk.incubator.vector.IntVector;
import jdk.incubator.vector.VectorMask;
import jdk.incubator.vector.VectorOperators;
import jdk.incubator.vector.VectorSpecies;

/**
 * A fold of 16-bit deltas in SIMD lanes (the Vector API): the JIT leaves a scalar loop's
 * min and max reductions unvectorized, and these lanes make the fold several times faster
 * than it. Loaded only where the region server's JVM has the jdk.incubator.vector module
 * (RowLoops.LANES).
 */
final class Lanes {
  private static final VectorSpecies<Integer> SPECIES = IntVector.SPECIES_PREFERRED;

  private Lanes() {}

  /**
   * Of values[0..n-1] (16-bit deltas widened to ints, NULL Short.MIN_VALUE), those marked
   * in pass[at..at+n-1] and not NULL, into f: {present, least, most, high, low} (the sum
   * is high * 2^32 + low). n values of 16 bits add up within an int for n up to 2^16.
   */
  static void fold16(int[] values, int n, int[] pass, int at, long[] f) {
    IntVector least = IntVector.broadcast(SPECIES, Integer.MAX_VALUE);
    IntVector most = IntVector.broadcast(SPECIES, Integer.MIN_VALUE);
    IntVector sum = IntVector.zero(SPECIES), has = IntVector.zero(SPECIES), one = IntVector.broadcast(SPECIES, 1);
    int i = 0;
    for (int end = SPECIES.loopBound(n); i < end; i += SPECIES.length()) {
      IntVector x = IntVector.fromArray(SPECIES, values, i);
      VectorMask<Integer> counts = IntVector.fromArray(SPECIES, pass, at + i).compare(VectorOperators.NE, 0)
          .and(x.compare(VectorOperators.NE, Short.MIN_VALUE));
      least = least.lanewise(VectorOperators.MIN, x, counts);
      most = most.lanewise(VectorOperators.MAX, x, counts);
      sum = sum.add(x, counts);
      has = has.add(one, counts);
    }
    int present = has.reduceLanes(VectorOperators.ADD), low = least.reduceLanes(VectorOperators.MIN);
    int high = most.reduceLanes(VectorOperators.MAX), total = sum.reduceLanes(VectorOperators.ADD);
    for (; i < n; i++) {
      int x = values[i];
      if (pass[at + i] != 0 && x != Short.MIN_VALUE) {
        present++;
        low = Math.min(low, x);
        high = Math.max(high, x);
        total += x;
      }
    }
    f[0] = present;
    f[1] = low;
    f[2] = high;
    f[3] = (long) total >> 32;
    f[4] = total & 0xFFFFFFFFL;
  }
}
