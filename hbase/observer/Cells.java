package gridagg.observer;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.List;
import org.apache.hadoop.hbase.ByteBufferExtendedCell;
import org.apache.hadoop.hbase.Cell;
import org.apache.hadoop.hbase.CellUtil;
import org.apache.hadoop.hbase.DoNotRetryIOException;
import org.apache.hadoop.hbase.util.Bytes;

/** Reading a grid row's cells: which are live, and a cell's value where it lies. */
final class Cells {
  private Cells() {}

  /** Index of the first live segment of a grid row's cells (its last base segment). */
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

  /** A cell's segment, or DoNotRetryIOException naming the row when it is not one of ncols columns. */
  static Segment segment(Cell cell, int ncols, String what) throws IOException {
    ByteBuffer b = value(cell);
    Segment s = Segment.parse(b, b.position(), cell.getValueLength());
    if (s == null || (ncols >= 0 && s.ncols() != ncols)) {
      throw new DoNotRetryIOException(what + ": a segment of row " + Bytes.toStringBinary(CellUtil.cloneRow(cell))
          + " of " + cell.getValueLength() + " bytes is not " + (ncols >= 0 ? "one of " + ncols + " columns" : "one"));
    }
    return s;
  }
}
