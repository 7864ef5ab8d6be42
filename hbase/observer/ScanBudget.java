package gridagg.observer;

import java.io.IOException;
import org.apache.hadoop.hbase.DoNotRetryIOException;

/**
 * The heap the scans of one region server may hold at once for what they answer (their
 * groups' aggregates and the rows they hand back): a share of the JVM's maximum heap,
 * beside the block cache and the memstores. A scan reserves what it will hold before it
 * holds it and waits, in line, while the others hold the rest; it gives it back when its
 * answer is made. A scan that alone would need more than the whole budget is refused.
 */
final class ScanBudget {
  /** The share of the maximum heap the scans' answers may hold at once. */
  static final double SHARE = 0.1;
  static final long BYTES = (long) (Runtime.getRuntime().maxMemory() * SHARE);
  private static long held;

  private ScanBudget() {}

  /** Reserves `bytes`, waiting until `deadline` (epoch ms; 0: no limit) for the others to give some back. */
  static synchronized void reserve(long bytes, long deadline, String what) throws IOException {
    if (bytes > BYTES) {
      throw new DoNotRetryIOException(what + " would hold " + bytes + " bytes, more than the " + BYTES
          + " bytes all scans of this region server may hold at once (" + (int) (SHARE * 100) + "% of its heap)");
    }
    while (held + bytes > BYTES) {
      long wait = deadline == 0 ? 1000 : deadline - System.currentTimeMillis();
      if (wait <= 0) {
        throw new IOException(what + ": the region server's scans held their whole budget of " + BYTES
            + " bytes until the call's deadline");
      }
      try {
        ScanBudget.class.wait(Math.min(wait, 1000));
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new IOException(what + ": interrupted while waiting for the scans' budget", e);
      }
    }
    held += bytes;
  }

  static synchronized void release(long bytes) {
    held -= bytes;
    ScanBudget.class.notifyAll();
  }
}
