"""How the HBase store keeps a grid's rows in the grid's HBase row.

One HBase row per grid, key = the grid's key prefix (gridagg.model.grid.grid_prefix). Family
"r" holds the grid's rows as segments (gridagg.store.segments), one segment per cell;
qualifier = an 8-byte big-endian segment number. Numbers grow with every write to the
row, and the lowest bit marks a base segment: a base segment and the segments after it
replace every segment before it. So a row's live segments are its last base segment and
all after it (all of them when there is no base).

Why bases: HBase applies a Put or a Delete to one row atomically, but the Thrift1
gateway turns one mutateRow of puts and deletes into a Delete and then a Put, two steps
a reader can fall between. Replacing segments therefore takes one Put of a base segment
(readers see the old segments or the new ones, never both, never neither); the replaced
cells are deleted afterwards, and until then readers pass over them.

The region servers' GridScanObserver reads rows by the same rule.
"""

from __future__ import annotations

import struct

import numpy as np

from gridagg.store import blocks, segments

FAMILY = b"r"
SEGMENT_BYTES = 1 << 20  # a segment's size bound: cells stay far below hbase.server.keyvalue.maxsize
MAX_SEGMENTS = 8  # live segments per grid; a write that would make more rewrites the grid
# HFile block size of family "r": HBase's default. A segment larger than it is a block of
# its own, so a grid's rows are a block or a few; a read of one grid does not take in its
# neighbours', and the block cache holds blocks of a size the JVM's collector handles
# well (hbase/jvm.py, REGION_SERVER_FLAGS).
BLOCK_BYTES = 64 << 10
# Data block encoding of family "r". A query reads a few grids here and there, and in a
# block that big HBase found each by stepping over the cells before it (decoding every
# cell's lengths and MVCC number): a large share of the region server's CPU on the
# paper's sums. ROW_INDEX_V1 keeps cells as they are and adds a row index to each block.
ROW_ENCODING = "ROW_INDEX_V1"
NUMBER = struct.Struct(">Q")


def qualifier(number: int) -> bytes:
    return NUMBER.pack(number)


def column(number: int) -> bytes:
    """The "r:<qualifier>" column name of segment `number` (what Thrift calls a column)."""
    return FAMILY + b":" + qualifier(number)


def is_base(number: int) -> bool:
    return number & 1 == 1


def numbered(cells: dict[bytes, bytes]) -> list[tuple[int, bytes]]:
    """(number, segment) of a row's "r:" cells as Thrift returns them (column -> value),
    in number order."""
    cut = len(FAMILY) + 1
    return sorted((NUMBER.unpack(col[cut:])[0], value) for col, value in cells.items() if col[:cut] == FAMILY + b":")


def live(stored: list[tuple]) -> list[tuple]:
    """The live segments of a row's (number, segment) list in number order (or of any
    list of tuples that start with segment numbers)."""
    first = 0
    for i, (number, _) in enumerate(stored):
        if is_base(number):
            first = i
    return stored[first:]


def next_numbers(stored: list[tuple], count: int, base: bool) -> list[int]:
    """Numbers for `count` new segments after the stored ones: the first one a base
    segment if `base`, the others plain."""
    n = (stored[-1][0] >> 1) + 1 if stored else 0
    return [((n + i) << 1) | (1 if base and i == 0 else 0) for i in range(count)]


def rows_per_segment(ncols: int, eid_bytes: float) -> int:
    """How many rows of ncols values and element IDs of eid_bytes bytes (on average)
    fill a segment, with its block tree."""
    return max(1, int(SEGMENT_BYTES // (8 * ncols + 4 + eid_bytes + blocks.tree_bytes_per_row(ncols))))


def pack(eids, values: np.ndarray, ds) -> list[bytes]:
    """Rows of dataset `ds` (a Dataset) as segments of at most about SEGMENT_BYTES
    each (at least one, maybe empty); eids: a sequence of bytes or an Arrow binary array."""
    import pyarrow as pa

    eids = segments.element_ids(eids)
    n = len(eids)
    if n == 0:
        return [segments.pack(eids, np.asarray(values, np.int64).reshape(0, values.shape[1]))]
    offsets = segments.id_offsets(eids)
    per = rows_per_segment(values.shape[1], (int(offsets[-1]) - int(offsets[0])) / n)
    if n <= per:
        return [segments.pack(eids, values, ds)]
    # Rows in column-0 order first: each segment then covers its own stretch of column 0.
    order = np.argsort(values[:, 0], kind="stable")
    return [segments.pack(eids.take(pa.array(part)), values[part], ds) for part in np.array_split(order, -(-n // per))]


def too_many(live_sizes: list[int], new: list[bytes]) -> bool:
    """Whether adding segments `new` to a grid whose live segments have these sizes
    (bytes) would leave more than MAX_SEGMENTS beyond what its size needs."""
    size = sum(live_sizes) + sum(len(s) for s in new)
    return len(live_sizes) + len(new) > MAX_SEGMENTS + size // SEGMENT_BYTES


def write(stored: list[tuple[int, bytes]], eids: list[bytes], values: np.ndarray, ds):
    """What a write of rows (eids, values) to a grid whose row holds `stored` segments
    puts: ((number, segment) list, numbers of the cells it replaces, whether it rewrites
    the grid). Segments of their own, unless the write repeats a stored element ID or
    would leave too many live segments: then a rewrite of the whole grid, starting with
    a base segment, which replaces every stored cell."""
    live_segments = live(stored)
    dead = [n for n, _ in stored[: len(stored) - len(live_segments)]]
    new = pack(eids, values, ds)
    rows = rows_of(live_segments) if live_segments else {}
    if live_segments and (too_many([len(s) for _, s in live_segments], new) or any(e in rows for e in eids)):
        rows.update(zip(eids, values))
        keep = list(rows)
        new = pack(keep, np.array([rows[e] for e in keep]), ds)
        return list(zip(next_numbers(stored, len(new), base=True), new)), [n for n, _ in stored], True
    return list(zip(next_numbers(stored, len(new), base=False), new)), dead, False


def rows_of(live_segments: list[tuple[int, bytes]]) -> dict[bytes, np.ndarray]:
    """Element ID -> row of a grid's live segments."""
    return segments.rows_of(seg for _, seg in live_segments)
