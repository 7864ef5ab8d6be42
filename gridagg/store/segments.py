"""Segments: how both cell stores keep a grid's rows, many rows per stored value.

A grid's rows live in a few segments (one per write, merged now and then). A segment is
one byte string, all little-endian:

    u32 n, u32 ncols | NARROW | BLOCKED          header
    ncols x i64 base                             per column
    ncols x u8 width, 0-padded to a multiple of 8 bytes
    if BLOCKED: u32 nblocks, u32 nnodes,
                (nblocks + 1) x u32 first row of each block and n, 0-padded to 8 bytes,
                nnodes x 4 x u32: the block tree's nodes in preorder, each its first
                block, the block after its last, its right child (0: a block) and 0,
                nnodes x ncols x 5 x i64: per node and column its least and greatest
                value, values present, the sum's high and low halves (gridagg.store.blocks)
    per column: n values of its width, 0-padded to a multiple of 8 bytes; rows block
                after block, in column-0 order inside a block (time, in a dataset
                that has one), so a range of it is a binary search, not a scan
    (n + 1) x u32                                offsets of each row's element ID in the blob
    blob                                         the element IDs

A column of width 8 holds the stored int64s themselves (base 0). A column of width 2 or
4 holds each value minus the column's base (its least value) as int16 or int32, and NULL
as the type's least value: a grid's rows span a small part of each column's domain, so
most columns take a quarter or half the bytes, and a scan, which reads columns from
memory as fast as memory goes, reads that much less. A segment without BLOCKED (rows
packed without their dataset's dimensions, or written before blocks existed) is one run
in column-0 order with no block tree; one without NARROW holds every column at width 8,
one after another, with no bases nor widths. Every kind is read as it is.

The kernels (gridagg.store.kernels, and the HBase region servers' GridScanObserver) read
a segment where it lies; columns() and values() here decode it into int64 rows.
"""

from __future__ import annotations

import struct

import numba
import numpy as np

from gridagg.model.aggregate import NULL
from gridagg.model.schema import Dataset
from gridagg.store import blocks

HEAD = struct.Struct("<II")  # rows, columns (| NARROW | BLOCKED)
NARROW = 1 << 31
BLOCKED = 1 << 30
COLUMNS = BLOCKED - 1  # the bits of the column count
# Values of a narrow column lie within +-LIMIT, so a query bound minus a base never
# overflows int64 (the kernels rely on it).
LIMIT = 1 << 61
_TYPES = {2: np.dtype("<i2"), 4: np.dtype("<i4"), 8: np.dtype("<i8")}


def _pad8(nbytes: int) -> int:
    return -nbytes % 8


def _width(column: np.ndarray) -> tuple[int, int]:
    """(width, base) for a column of int64s: the narrowest type whose range above its
    least value holds the column's non-NULL values with room for NULL."""
    present = column[column != NULL]
    if not len(present):
        return 2, 0
    least, most = int(present.min()), int(present.max())
    if least < -LIMIT or most > LIMIT:
        return 8, 0
    span = most - least
    for width in (2, 4):
        if span <= np.iinfo(_TYPES[width]).max:
            return width, least
    return 8, 0


def element_ids(eids):
    """Element IDs as an Arrow binary array (given one, or a sequence of bytes): how
    segments are packed without a Python step per row."""
    import pyarrow as pa

    return eids if isinstance(eids, pa.Array) else pa.array(eids, pa.binary())


def id_offsets(eids) -> np.ndarray:
    """The n + 1 offsets of an Arrow binary array's values in its data buffer."""
    return np.frombuffer(eids.buffers()[1], dtype=np.int32)[eids.offset : eids.offset + len(eids) + 1]


def pack(eids, values: np.ndarray, ds: Dataset | None = None) -> bytes:
    """Rows as one segment: values[i] (an int64 row) belongs to element eids[i] (a
    sequence of bytes or an Arrow binary array). With `ds`, the rows' dataset, they are
    cut into blocks over its dimensions (gridagg.store.blocks), a station's rows together
    where it has longitude and latitude; without, they are one run in column-0 order."""
    import pyarrow as pa

    eids = element_ids(eids)
    n = values.shape[0]
    if not n:
        return assemble(values.reshape(0, values.shape[1]), np.zeros(1, "<u4"), b"")
    values = np.ascontiguousarray(values, np.int64)
    if ds is not None:
        order, starts, links = blocks.order(values, ds.ndim, blocks.BLOCK_ROWS, blocks.FEWEST_ROWS,
                                            np.array(ds.lonlat_axes or (), np.int64))
        tree = (starts, links)
    else:
        order, tree = np.argsort(values[:, 0], kind="stable"), None
    if (order[1:] != order[:-1] + 1).any():  # rows given in their order need no gather
        eids, values = eids.take(pa.array(order)), values[order]
    offsets = id_offsets(eids)
    blob = eids.buffers()[2][offsets[0]:offsets[-1]].to_pybytes()  # only this array's IDs, of a slice too
    return assemble(values, offsets - offsets[0], blob, tree)


def assemble(rows: np.ndarray, offsets: np.ndarray, blob: bytes, tree: tuple | None = None) -> bytes:
    """A segment of (n, ncols) int64 rows already in their order (column-0 order, or
    block after block with `tree`: the first row of each block and n, and the block
    tree's links, as gridagg.store.blocks.order makes them), row i's element ID being
    blob[offsets[i]:offsets[i + 1]] (offsets from 0)."""
    n, ncols = rows.shape
    columns = np.ascontiguousarray(rows.T, dtype="<i8")
    shapes = [_width(col) for col in columns]
    flags = NARROW | (BLOCKED if tree is not None else 0)
    parts = [HEAD.pack(n, ncols | flags), np.array([b for _, b in shapes], "<i8").tobytes(),
             bytes(w for w, _ in shapes) + bytes(_pad8(ncols))]
    if tree is not None:
        starts, links = tree
        first = np.asarray(starts, "<u4")
        parts += [HEAD.pack(len(first) - 1, len(links)), first.tobytes(), bytes(_pad8(4 * len(first))),
                  np.asarray(links, "<u4").tobytes(),
                  blocks.table(np.ascontiguousarray(rows, np.int64), np.asarray(starts, np.int64),
                               links).astype("<i8").tobytes()]
    for col, (width, base) in zip(columns, shapes):
        if width < 8:
            kind = _TYPES[width]
            col = np.where(col == NULL, np.iinfo(kind).min, col - base).astype(kind)
        parts += [col.tobytes(), bytes(_pad8(n * width))]
    return b"".join(parts + [np.asarray(offsets, "<u4").tobytes(), blob])


def _layout(data) -> tuple[int, list[tuple[int, int, int]], int]:
    """(n, [(offset, width, base) of each column], offset of the element ID offsets)."""
    n, head = HEAD.unpack_from(data)
    ncols = head & COLUMNS
    if not head & NARROW:  # written before NARROW: int64 columns one after another
        return n, [(HEAD.size + 8 * n * c, 8, 0) for c in range(ncols)], HEAD.size + 8 * n * ncols
    bases = struct.unpack_from(f"<{ncols}q", data, HEAD.size)
    at = HEAD.size + 8 * ncols
    widths = bytes(data[at : at + ncols])
    at += ncols + _pad8(ncols)
    if head & BLOCKED:
        nblocks, nnodes = HEAD.unpack_from(data, at)
        at += HEAD.size + 4 * (nblocks + 1) + _pad8(4 * (nblocks + 1)) + 4 * blocks.LINKS * nnodes
        at += 8 * blocks.STATS * nnodes * ncols
    out = []
    for width, base in zip(widths, bases):
        out.append((at, width, base))
        at += n * width + _pad8(n * width)
    return n, out, at


def block_tree(data) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """(first row of each block and n, the tree's (nnodes, blocks.LINKS) links, (nnodes,
    ncols, blocks.STATS) int64 node bounds and aggregates) of a segment cut into blocks,
    else None."""
    n, head = HEAD.unpack_from(data)
    ncols = head & COLUMNS
    if not head & BLOCKED:
        return None
    at = HEAD.size + 8 * ncols + ncols + _pad8(ncols)
    nblocks, nnodes = HEAD.unpack_from(data, at)
    at += HEAD.size
    starts = np.frombuffer(data, "<u4", nblocks + 1, at).astype(np.int64)
    at += 4 * (nblocks + 1) + _pad8(4 * (nblocks + 1))
    links = np.frombuffer(data, "<u4", nnodes * blocks.LINKS, at).reshape(nnodes, blocks.LINKS).astype(np.int64)
    at += 4 * blocks.LINKS * nnodes
    stats = np.frombuffer(data, "<i8", nnodes * ncols * blocks.STATS, at).reshape(nnodes, ncols, blocks.STATS)
    return starts, links, stats.astype(np.int64)


def rows(data) -> int:
    return HEAD.unpack_from(data)[0]


def columns(data) -> np.ndarray:
    """The (ncols, n) int64 columns of a segment (a copy)."""
    n, layout, _ = _layout(data)
    out = np.empty((len(layout), n), np.int64)
    for c, (at, width, base) in enumerate(layout):
        col = np.frombuffer(data, dtype=_TYPES[width], count=n, offset=at)
        out[c] = col if width == 8 else np.where(col == np.iinfo(_TYPES[width]).min, NULL, col.astype(np.int64) + base)
    return out


def values(data) -> np.ndarray:
    """The (n, ncols) int64 rows of a segment (a copy)."""
    return columns(data).T


def id_array(data):
    """The element IDs of a segment's rows as an Arrow binary array (a copy)."""
    import pyarrow as pa

    n, _, at = _layout(data)
    offsets = np.frombuffer(data, dtype="<u4", count=n + 1, offset=at).astype(np.int32)
    blob = bytes(data[at + 4 * (n + 1) :])
    return pa.BinaryArray.from_buffers(pa.binary(), n, [None, pa.py_buffer(offsets), pa.py_buffer(blob)])


def eids(data) -> list[bytes]:
    return id_array(data).to_pylist()


def joined(segments, ncols: int):
    """(element IDs as one Arrow binary array, (m, ncols) int64 rows) of these segments'
    rows, one segment after another: a grid's rows moved to other grids without a Python
    step per row."""
    import pyarrow as pa

    segments = list(segments)
    if not segments:
        return pa.array([], pa.binary()), np.empty((0, ncols), np.int64)
    return pa.concat_arrays([id_array(s) for s in segments]), np.concatenate([values(s) for s in segments])


def id_hashes(eids) -> np.ndarray:
    """A 64-bit hash of each element ID of an Arrow string or binary array (chunked or
    not; none null), the same in every process (Python's own hash() is salted per
    process). All 64 bits are mixed: the ingest job's dedupe pass tells rows apart by
    hash within a bucket, which its low bits name, so the rest must not repeat by chance
    (a 35-bit hash did in a large load, and every bucket took the slow path)."""
    import pyarrow as pa

    arr = eids.combine_chunks() if isinstance(eids, pa.ChunkedArray) else eids
    if len(arr) == 0:
        return np.zeros(0, dtype=np.uint64)
    offsets = np.frombuffer(arr.buffers()[1], dtype=np.int32)[arr.offset:arr.offset + len(arr) + 1]
    return _hash_runs(offsets, np.frombuffer(arr.buffers()[2], dtype=np.uint8))


@numba.njit(cache=True, nogil=True)
def _hash_runs(offsets, data):
    """One pass over the bytes (numpy's vectorized form took a large share of the ingest
    job's read pass's CPU): a polynomial of each run's bytes, then splitmix64's finalizer."""
    out = np.empty(len(offsets) - 1, dtype=np.uint64)
    prime, s1, s2 = np.uint64(1099511628211), np.uint64(30), np.uint64(27)
    m1, m2, s3 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB), np.uint64(31)
    for i in range(len(out)):
        h, w = np.uint64(0), np.uint64(1)
        for j in range(offsets[i], offsets[i + 1]):
            w *= prime
            h += np.uint64(data[j]) * w
        h = (h ^ (h >> s1)) * m1
        h = (h ^ (h >> s2)) * m2
        out[i] = h ^ (h >> s3)
    return out


@numba.njit(cache=True, nogil=True)
def repeats(hashes) -> bool:
    """Whether any of `hashes` (uint64, well mixed: id_hashes) occurs twice, by one pass
    over an open-addressing table indexed by their high bits: sorting them took several
    times as long (a bucket of the ingest job's dedupe pass)."""
    bits = 1
    while (1 << bits) < 2 * len(hashes):
        bits += 1
    table = np.zeros(1 << bits, np.uint64)
    taken = np.zeros(1 << bits, np.bool_)
    shift, mask = np.uint64(64 - bits), np.uint64((1 << bits) - 1)
    for h in hashes:
        i = h >> shift
        while taken[i]:
            if table[i] == h:
                return True
            i = (i + np.uint64(1)) & mask
        taken[i], table[i] = True, h
    return False


def last_of_each(eids, values: np.ndarray):
    """Rows (eids: an Arrow binary array) with an element ID given twice kept once: the
    last of them."""
    import pyarrow as pa

    if not repeats(id_hashes(eids)):  # distinct hashes: distinct IDs (pc.count_distinct took longer)
        return eids, values
    keep = pa.array(list(dict(zip(eids.to_pylist(), range(len(eids)))).values()), pa.int64())
    return eids.take(keep), values[keep.to_numpy()]


def holds_any(segments, eids) -> bool:
    """Whether any of eids (an Arrow binary array) is an element ID of these segments'
    rows: read from their IDs alone, no row decoded."""
    import pyarrow as pa
    import pyarrow.compute as pc

    stored = [id_array(s) for s in segments]
    return bool(stored) and pc.any(pc.is_in(eids, value_set=pa.concat_arrays(stored))).as_py() is True


def rows_of(segments) -> dict[bytes, np.ndarray]:
    """Element ID -> row of every row in these segments (later segments win)."""
    out: dict[bytes, np.ndarray] = {}
    for data in segments:
        out.update(zip(eids(data), values(data)))
    return out
