package gridagg.observer;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.Arrays;
import org.apache.hadoop.hbase.DoNotRetryIOException;
import org.apache.hadoop.hbase.util.Bytes;

/** A decoded gridagg.store.scan request (its format: gridagg/store/hbase/scan.py). */
final class ScanRequest {
  /** Aggregate slots (groups x aggregated columns) one request may ask for. */
  static final long MAX_SLOTS = 1L << 24;
  static final String WHAT = GridScanObserver.SCAN_ATTRIBUTE;

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

  ScanRequest(byte[] data) throws IOException {
    ByteBuffer in = ByteBuffer.wrap(data).order(ByteOrder.LITTLE_ENDIAN);
    int version = in.get() & 0xff;
    if (version != GridScanObserver.VERSION) {
      throw new DoNotRetryIOException(WHAT + ": request version " + version + ", this observer reads "
          + GridScanObserver.VERSION + " (deploy the observer that matches the client)");
    }
    layout = in.get() & 0xff;
    if (layout > 1) {
      throw new DoNotRetryIOException(WHAT + ": unknown layout " + layout);
    }
    ncols = in.getShort() & 0xffff;
    deadline = in.getLong();
    int nconds = in.getShort() & 0xffff;
    condCol = new int[nconds];
    condLo = new long[nconds];
    condHi = new long[nconds];
    for (int j = 0; j < nconds; j++) {
      condCol[j] = column(in.getShort() & 0xffff, ncols);
      condLo[j] = in.getLong();
      condHi[j] = in.getLong();
      if (condCol[j] == 0) {
        lo0 = Math.max(lo0, condLo[j]);
        hi0 = Math.min(hi0, condHi[j]);
      }
    }
    aggCol = new int[in.getShort() & 0xffff];
    for (int j = 0; j < aggCol.length; j++) {
      aggCol[j] = column(in.getShort() & 0xffff, ncols);
    }
    int grouping = in.get() & 0xff;
    if (grouping == 1) {
      bucketCol = column(in.getShort() & 0xffff, ncols);
      bucketBase = in.getLong();
      bucketStep = in.getLong();
      nbuckets = in.getInt();
      if (bucketStep <= 0 || nbuckets < 0) {
        throw new DoNotRetryIOException(WHAT + ": bucket step and count must be positive");
      }
    } else if (grouping != 0) {
      throw new DoNotRetryIOException(WHAT + ": unknown grouping " + grouping);
    }
    ngroups = in.getInt();
    if (ngroups < 0 || (long) ngroups * Math.max(1, aggCol.length) > MAX_SLOTS
        || (grouping == 1 && nbuckets > ngroups)) {
      throw new DoNotRetryIOException(WHAT + ": " + ngroups + " groups of " + aggCol.length
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
          throw new DoNotRetryIOException(WHAT + ": skip spec names aggregated column " + skipAgg[s]);
        }
        skipMax[s] = in.get() != 0;
      }
      for (int s = 0; s < nspecs; s++) {
        bestHas[s] = in.get() != 0;
        bestVal[s] = in.getLong();
      }
    }
    polygon = (in.get() & 0xff) == 1 ? new Polygon(in, ncols) : null;
    int nitems = in.getInt();
    if (nitems < 0 || nitems > in.remaining() / 13) { // 2 offsets, a group and rows_of each
      throw new DoNotRetryIOException(WHAT + ": bad item count " + nitems);
    }
    this.nitems = nitems;
    this.data = data;
    startAt = offsets(in, nitems);
    stopAt = offsets(in, nitems);
    startBase = in.position();
    stopBase = startBase + startAt[nitems];
    if (stopBase + stopAt[nitems] > data.length) {
      throw new DoNotRetryIOException(WHAT + ": key offsets outside the request");
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
          throw new DoNotRetryIOException(WHAT + ": item " + i + " in group " + group[i] + " of " + ngroups);
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
      throw new DoNotRetryIOException(WHAT + ": " + in.remaining() + " bytes after the request");
    }
  }

  /** nitems + 1 offsets of keys in their block: from 0, never decreasing. */
  private static int[] offsets(ByteBuffer in, int nitems) throws IOException {
    int[] at = new int[nitems + 1];
    for (int i = 0; i <= nitems; i++) {
      at[i] = in.getInt();
      if (at[i] < (i == 0 ? 0 : at[i - 1])) {
        throw new DoNotRetryIOException(WHAT + ": key offset " + at[i] + " of item " + i + " goes back");
      }
    }
    if (at[0] != 0 || at[nitems] > in.remaining()) {
      throw new DoNotRetryIOException(WHAT + ": key offsets outside the request");
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

  /** The bytes the answer's aggregates take (what RegionScan reserves of the scans' budget). */
  long answerBytes() {
    return (long) ngroups * (8 + 40L * aggCol.length);
  }

  static int column(int c, int ncols) throws IOException {
    if (c >= ncols) {
      throw new DoNotRetryIOException(WHAT + ": column " + c + " of " + ncols);
    }
    return c;
  }
}
