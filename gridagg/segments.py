"""Segments: how both cell stores keep a grid's rows, many rows per stored value.

A grid's rows live in a few segments (one per write, merged now and then). A segment is
one byte string, all little-endian:

    u32 n, u32 ncols                  header
    ncols x n int64                   the columns one after another, rows ordered by
                                      column 0 (time, in a dataset that has one), so a
                                      range of it is a binary search, not a scan
    (n + 1) x u32                     offsets of each row's element ID in the blob
    blob                              the element IDs

Reading a segment's columns is a view of the stored bytes, no copy; the kernels
(gridagg.kernels, and the HBase region servers' GridScanObserver) read it as it is.
"""

from __future__ import annotations

import struct

import numpy as np

HEAD = struct.Struct("<II")  # rows, columns


def pack(eids: list[bytes], values: np.ndarray) -> bytes:
    """Rows as one segment: values[i] (an int64 row) belongs to element eids[i]."""
    n, ncols = values.shape
    order = np.argsort(values[:, 0], kind="stable") if n else np.zeros(0, dtype=np.int64)
    eids = [eids[i] for i in order.tolist()]
    offsets = np.zeros(n + 1, dtype="<u4")
    np.cumsum([len(e) for e in eids], out=offsets[1:])
    columns = np.ascontiguousarray(values[order].T, dtype="<i8")
    return b"".join((HEAD.pack(n, ncols), columns.tobytes(), offsets.tobytes(), b"".join(eids)))


def rows(data) -> int:
    return HEAD.unpack_from(data)[0]


def columns(data) -> np.ndarray:
    """The (ncols, n) columns of a segment, without copying (valid while `data` is)."""
    n, ncols = HEAD.unpack_from(data)
    return np.frombuffer(data, dtype="<i8", count=n * ncols, offset=HEAD.size).reshape(ncols, n)


def values(data) -> np.ndarray:
    """The (n, ncols) rows of a segment (a view, valid while `data` is)."""
    return columns(data).T


def eids(data) -> list[bytes]:
    n, ncols = HEAD.unpack_from(data)
    at = HEAD.size + 8 * n * ncols
    offsets = np.frombuffer(data, dtype="<u4", count=n + 1, offset=at).tolist()
    blob = bytes(data[at + 4 * (n + 1) :])
    return [blob[offsets[i] : offsets[i + 1]] for i in range(n)]


def rows_of(segments) -> dict[bytes, np.ndarray]:
    """Element ID -> row of every row in these segments (later segments win)."""
    out: dict[bytes, np.ndarray] = {}
    for data in segments:
        out.update(zip(eids(data), values(data).copy()))
    return out
