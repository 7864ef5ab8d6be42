package gridagg.observer;

import java.io.IOException;
import java.nio.ByteBuffer;
import org.apache.hadoop.hbase.DoNotRetryIOException;

/**
 * A request's polygon, tested as gridagg/store/polygon.py tests it: rows of segments
 * (where), and blocks by their bounds (face). Edges are rows x1, y1, x2, y2 of every ring
 * in user units: a stored value divided by its column's scale.
 */
final class Polygon {
  static final int OUTSIDE = 0, NEAR = 1, INSIDE = 2;
  final int lonCol, latCol;
  final double lonScale, latScale, eps;
  final double[] edges; // edge e: x1, y1, x2, y2 at 4 * e

  Polygon(ByteBuffer in, int ncols) throws IOException {
    lonCol = ScanRequest.column(in.getShort() & 0xffff, ncols);
    latCol = ScanRequest.column(in.getShort() & 0xffff, ncols);
    lonScale = in.getDouble();
    latScale = in.getDouble();
    eps = in.getDouble();
    long nedges = in.getInt() & 0xffffffffL;
    if (nedges > in.remaining() / 32) {
      throw new DoNotRetryIOException(GridScanObserver.SCAN_ATTRIBUTE + ": bad polygon edge count " + nedges);
    }
    edges = new double[(int) (4 * nedges)];
    in.asDoubleBuffer().get(edges);
    in.position(in.position() + 8 * edges.length);
  }

  /** Where row r of seg lies: OUTSIDE, INSIDE, or NEAR (within eps of an edge: only an exact test can say). */
  int where(Segment seg, int r) {
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
    return evenOdd(x, y) ? INSIDE : OUTSIDE;
  }

  /** Whether (x, y) lies inside by the even-odd rule (points on an edge go either way). */
  boolean evenOdd(double x, double y) {
    boolean inside = false;
    double[] e = edges;
    for (int j = 0; j < e.length; j += 4) {
      double x1 = e[j], y1 = e[j + 1], x2 = e[j + 2], y2 = e[j + 3];
      if ((y1 > y) != (y2 > y) && x < x1 + (y - y1) * (x2 - x1) / (y2 - y1)) {
        inside = !inside;
      }
    }
    return inside;
  }

  /**
   * Where the rectangle lon xlo..xhi by lat ylo..yhi (stored values) lies: OUTSIDE,
   * INSIDE, or NEAR (an edge comes within eps of it, or the test cannot tell).
   */
  int face(long xlo, long xhi, long ylo, long yhi) {
    double xl = xlo / lonScale - eps, xh = xhi / lonScale + eps, yl = ylo / latScale - eps, yh = yhi / latScale + eps;
    double[] e = edges;
    for (int j = 0; j < e.length; j += 4) {
      double x1 = e[j], y1 = e[j + 1], x2 = e[j + 2], y2 = e[j + 3];
      if (Math.max(x1, x2) < xl || Math.min(x1, x2) > xh || Math.max(y1, y2) < yl || Math.min(y1, y2) > yh) {
        continue;
      }
      if ((xl <= x1 && x1 <= xh && yl <= y1 && y1 <= yh) || (xl <= x2 && x2 <= xh && yl <= y2 && y2 <= yh)) {
        return NEAR;
      }
      // The segment's line passes through the rectangle when its corners are not all
      // strictly on one side of it.
      double dx = x2 - x1, dy = y2 - y1;
      double c1 = dx * (yl - y1) - dy * (xl - x1), c2 = dx * (yl - y1) - dy * (xh - x1);
      double c3 = dx * (yh - y1) - dy * (xl - x1), c4 = dx * (yh - y1) - dy * (xh - x1);
      if (!((c1 > 0 && c2 > 0 && c3 > 0 && c4 > 0) || (c1 < 0 && c2 < 0 && c3 < 0 && c4 < 0))) {
        return NEAR;
      }
    }
    // No edge near: the rectangle is all in or all out; its centre says which.
    return evenOdd(0.5 * (xlo / lonScale + xhi / lonScale), 0.5 * (ylo / latScale + yhi / latScale)) ? INSIDE : OUTSIDE;
  }
}
