"""Requests answered on the HBase region servers (hbase/GridScanObserver.java): the wire
formats, and the one Thrift call that asks every region concerned.

A request names items: grid rows (layout SEGMENTS, gridagg's store) or key ranges
[start, stop) of rows that hold one row each (layout ROW_CELLS, HBase alone). It travels
as the attribute "gridagg.scan" of Gets, one anchor row per region (Thrift getRows:
the gateway copies the attribute onto each Get); each region answers for the items
inside its own [start, end) with one cell "a:gridagg.scan".

Request (all little-endian):
    u8 version = 2, u8 layout, u16 ncols
    u16 nconds, then per condition: u16 col, i64 lo, i64 hi          (lo <= v <= hi)
    u16 naggcols, then u16 col each
    u8 grouping: 0 = by the item's group; 1 = by bucket, then u16 col, i64 base, i64 step,
       u32 nbuckets
    u32 ngroups
    u8 skip: 0, or 1 then u16 nspecs, per spec u16 aggcol index and u8 is_max, then per
       spec u8 has and i64 best
    u32 nitems, then per item: u16 len + start key, u16 len + stop key (SEGMENTS: empty;
       ROW_CELLS: empty = to the table's end), u32 group, u8 rows_of, per spec i64 bound,
       (nconds + 7) / 8 bytes: bit j (of byte j / 8, from its lowest bit) set when the
       item's rows must be tested against condition j (clear: its grid's box lies inside
       that condition's range, so every row meets it)
Answer of one region:
    u8 version = 2
    u16 len + region start key, u16 len + region end key, i64 region id
    i64 rows visited, rows matched, grids (items) scanned, grids skipped
    u32 n, then per group with rows: u32 group, i64 count, per aggcol i64 present, min,
       max, hi, lo
    u32 n, then per rows_of item: u32 item index, u32 nrows, nrows x ncols i64

Lookup (attribute "gridagg.keys", answer cell "a:gridagg.keys"): what a write to grid
rows must know, without the rows crossing the wire.
    request: u8 version = 2, u32 ngrids, then per grid: u16 len + row key, u32 neids, then
       per element ID u16 len + bytes
    answer: u8 version = 2, the region as above, u32 n, then per grid of the region:
       u32 grid index, u32 ncells, per cell its 8-byte qualifier (the segment number,
       big-endian) and u32 value length, u32 nfound, then u32 index of each element ID
       its live segments hold

Coverage: every item (every part of a range) must be answered by exactly one region.
Regions come from a cached list (Thrift getTableRegions); each answer names its region,
so a region asked twice through stale anchors (after a merge) counts once, answers of
regions that overlap (a merge or split while the call ran) are dropped, and what no
region answered (after a split or move) is asked again with a fresh region list.
"""

from __future__ import annotations

import bisect
import functools
import struct
import threading
from dataclasses import dataclass, field

import numpy as np

from ..aggregate import AggArrays
from ..errors import StoreUnavailable
from ..scan import ScanAnswer, ScanRequest

ATTRIBUTE = b"gridagg.scan"
ANSWER = b"a:gridagg.scan"
KEYS = b"gridagg.keys"
VERSION = 2
SEGMENTS, ROW_CELLS = 0, 1
ATTEMPTS = 4  # region lists tried before giving up (each after the regions moved)


class ObserverMissing(StoreUnavailable):
    """A region answered a scan request with its row: GridScanObserver is not loaded there."""


@dataclass
class Item:
    """What one request item names: a grid row (stop empty) or the key range [start,
    stop) (stop empty: to the end); its group; whether its rows come back; its bound
    for each skip spec; the conditions its rows are tested against, as the request's
    bit mask (None: every one)."""

    start: bytes
    stop: bytes = b""
    group: int = 0
    rows_of: bool = False
    bounds: tuple[int, ...] = ()
    tests: bytes | None = None


def items_of(request: ScanRequest, keys: list[bytes]) -> list[Item]:
    """The items of a store request: request.grids[i] read from row keys[i]."""
    groups = request.group_of_grids().tolist()
    rows_of = request.rows_of.tolist() if request.rows_of is not None else [False] * len(keys)
    bounds = request.skip.bounds.tolist() if request.skip is not None else [()] * len(keys)
    if request.tested is None:
        tests = [None] * len(keys)
    else:
        packed = np.packbits(request.tested, axis=1, bitorder="little")
        flat, w = packed.tobytes(), packed.shape[1]
        tests = [flat[i : i + w] for i in range(0, len(flat), w)] if w else [b""] * len(keys)
    return [Item(k, b"", g, r, tuple(b), t) for k, g, r, b, t in zip(keys, groups, rows_of, bounds, tests)]


def encode(layout: int, ncols: int, request: ScanRequest, items: list[Item]) -> bytes:
    """A request for GridScanObserver: `request`'s conditions, columns, grouping and skip
    specs over `items` (request.grids is not read)."""
    out = [struct.pack("<BBHH", VERSION, layout, ncols, len(request.conditions))]
    out += [struct.pack("<Hqq", c.column, c.lo, c.hi) for c in request.conditions]
    out.append(struct.pack(f"<H{len(request.columns)}H", len(request.columns), *request.columns))
    b = request.buckets
    out.append(struct.pack("<B", 0) if b is None else struct.pack("<BHqqI", 1, b.column, b.base, b.step, b.count))
    out.append(struct.pack("<I", request.ngroups))
    skip = request.skip
    nspecs = 0 if skip is None else len(skip.specs)
    if skip is None:
        out.append(b"\0")
    else:
        out.append(struct.pack("<BH", 1, nspecs))
        out += [struct.pack("<HB", request.columns.index(c), is_max) for c, is_max in skip.specs]
        out += [struct.pack("<Bq", best is not None, 0 if best is None else best) for best in skip.best]
    out.append(struct.pack("<I", len(items)))
    mask = (len(request.conditions) + 7) // 8
    every = b"\xff" * mask
    for it in items:
        out.append(_item_struct(len(it.start), len(it.stop), nspecs, mask).pack(
            len(it.start), it.start, len(it.stop), it.stop, it.group, it.rows_of, *it.bounds,
            every if it.tests is None else it.tests))
    return b"".join(out)


@functools.lru_cache(maxsize=4096)
def _item_struct(start: int, stop: int, nspecs: int, mask: int) -> struct.Struct:
    """The layout of one request item with keys of these lengths (one pack per item)."""
    return struct.Struct(f"<H{start}sH{stop}sIB{nspecs}q{mask}s")


@dataclass
class Part:
    """One region's answer: its region (start, end, id) and what it found (a scan's
    Found, a lookup's dict)."""

    region: tuple[bytes, bytes, int]
    answer: object


@dataclass
class Found:
    """What one region found for a scan request: its answer, rows keyed by the request's
    item index, whose aggregates are those of the groups it found rows in (row j is group
    groups[j])."""

    groups: np.ndarray
    answer: ScanAnswer


def decode(data: bytes, ngroups: int, naggcols: int, ncols: int) -> Part:
    """One region's answer cell to a scan request of ngroups groups."""
    region, at = _region_of(data)
    costs = struct.unpack_from("<qqqq", data, at)
    (ngot,) = struct.unpack_from("<I", data, at + 32)
    at += 36
    found = np.frombuffer(data, np.dtype([("group", "<u4"), ("count", "<i8"), ("stats", "<i8", (naggcols, 5))]),
                          count=ngot, offset=at)
    at += found.nbytes
    groups = found["group"].astype(np.int64)
    if ngot and groups.max() >= ngroups:
        raise StoreUnavailable(f"GridScanObserver answered for group {groups.max()} of a request of {ngroups}")
    stats = found["stats"]
    aggs = AggArrays(found["count"], *(stats[:, :, j] for j in range(5)))  # present, mins, maxs, hi, lo
    (nrows_of,) = struct.unpack_from("<I", data, at)
    at += 4
    rows: dict[int, np.ndarray] = {}
    for _ in range(nrows_of):
        item, n = struct.unpack_from("<II", data, at)
        at += 8
        rows[item] = np.frombuffer(data, "<i8", count=n * ncols, offset=at).reshape(n, ncols).astype(np.int64)
        at += 8 * n * ncols
    return Part(region, Found(groups, ScanAnswer(aggs, rows, *costs)))


@dataclass
class _Piece:
    """A part of item `item` no region has answered yet: [start, stop), stop None = to the end."""

    item: int
    start: bytes
    stop: bytes | None


@dataclass
class RegionCache:
    """Tables' regions as last read ((start, end) pairs in key order), for anchors."""

    _regions: dict[bytes, list[tuple[bytes, bytes]]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def get(self, client, table: bytes, fresh: bool = False) -> list[tuple[bytes, bytes]]:
        """The regions of `table`; read again when `fresh` or not known (a Thrift call)."""
        with self._lock:
            known = self._regions.get(table)
        if known is None or fresh:
            known = sorted((r.startKey or b"", r.endKey or b"") for r in client.getTableRegions(table))
            with self._lock:
                self._regions[table] = known
        return known

    def forget(self, table: bytes) -> None:
        with self._lock:
            self._regions.pop(table, None)


def ask(client, table: bytes, layout: int, ncols: int, request: ScanRequest, items: list[Item],
        regions: RegionCache, trips) -> ScanAnswer:
    """The answer to `request` over `items` from the regions of `table`, in one Thrift
    call when the cached region list is right (more when regions have moved: each call
    counted in `trips`, a TripCounter)."""
    answer = ScanAnswer(AggArrays.empty(request.ngroups, len(request.columns)))
    rows: dict[int, list[np.ndarray]] = {}
    if layout == SEGMENTS:  # each item one row
        pieces = [_Piece(i, it.start, it.start + b"\0") for i, it in enumerate(items)]

        def request_for(asked: list[_Piece]) -> bytes:
            return encode(layout, ncols, request, [items[p.item] for p in asked])
    else:
        pieces = [_Piece(i, it.start, it.stop or None) for i, it in enumerate(items)]
        pieces = [p for p in pieces if p.stop is None or p.start < p.stop]  # an empty range holds no row

        def request_for(asked: list[_Piece]) -> bytes:
            return encode(layout, ncols, request, [_sent(items[p.item], p) for p in asked])

    def decode_answer(data: bytes) -> Part:
        return decode(data, request.ngroups, len(request.columns), ncols)

    for asked, part in _each_region(client, table, pieces, ATTRIBUTE, request_for, decode_answer, regions, trips,
                                    rows_only=layout == SEGMENTS):
        found = part.answer
        for j, got in found.answer.rows.items():
            rows.setdefault(asked[j].item, []).append(got)
        found.answer.rows = {}
        answer.merge(found.answer, groups=found.groups)
    answer.rows = {i: (np.concatenate(r) if len(r) > 1 else r[0]) for i, r in rows.items()}
    return answer


def lookup(client, table: bytes, grids: list[tuple[bytes, list[bytes]]], regions: RegionCache,
           trips) -> list[tuple[list[tuple[int, int]], set[int]]]:
    """What a write to grid rows must know, from the regions of `table` (in one Thrift
    call when the cached region list is right): for each (grid row key, element IDs),
    the row's "r" cells as (segment number, value length) in number order, and the
    indexes of those element IDs its live segments hold."""
    out: list[tuple[list[tuple[int, int]], set[int]]] = [([], set()) for _ in grids]
    pieces = [_Piece(i, key, key + b"\0") for i, (key, _) in enumerate(grids)]

    def request_for(asked: list[_Piece]) -> bytes:
        parts = [struct.pack("<BI", VERSION, len(asked))]
        for p in asked:
            key, eids = grids[p.item]
            parts.append(struct.pack("<H", len(key)) + key + struct.pack("<I", len(eids)))
            parts += [struct.pack("<H", len(e)) + e for e in eids]
        return b"".join(parts)

    for asked, part in _each_region(client, table, pieces, KEYS, request_for, _decode_lookup, regions, trips,
                                    rows_only=True):
        for j, found in part.answer.items():
            out[asked[j].item] = found
    return out


def _decode_lookup(data: bytes) -> Part:
    region, at = _region_of(data)
    (n,) = struct.unpack_from("<I", data, at)
    at += 4
    found = {}
    for _ in range(n):
        grid, ncells = struct.unpack_from("<II", data, at)
        at += 8
        cells = [struct.unpack_from(">QI", data, at + 12 * c) for c in range(ncells)]
        at += 12 * ncells
        (nfound,) = struct.unpack_from("<I", data, at)
        found[grid] = (cells, set(struct.unpack_from(f"<{nfound}I", data, at + 4)))
        at += 4 + 4 * nfound
    return Part(region, found)


def _region_of(data: bytes) -> tuple[tuple[bytes, bytes, int], int]:
    """An answer's region (start, end, id) and where the rest of it begins."""
    if data[0] != VERSION:
        raise StoreUnavailable(f"GridScanObserver answered in version {data[0]}, this client reads {VERSION}")
    (n,) = struct.unpack_from("<H", data, 1)
    start, at = data[3 : 3 + n], 3 + n
    (n,) = struct.unpack_from("<H", data, at)
    end, at = data[at + 2 : at + 2 + n], at + 2 + n
    (region_id,) = struct.unpack_from("<q", data, at)
    return (start, end, region_id), at + 8


def _each_region(client, table: bytes, pieces: list[_Piece], attribute: bytes, request_for, decode_answer,
                 regions: RegionCache, trips, rows_only: bool = False):
    """Asks the regions of `table` about `pieces` (request_for(pieces) makes the request
    sent as `attribute`; decode_answer(value) reads an answer cell into a Part) until
    every piece is answered by exactly one region. Yields (the pieces asked, Part) of
    each answer to count; a Part's items are indexes into the pieces asked. rows_only:
    every piece is one row (a grid row), which one region answers whole."""
    column = b"a:" + attribute
    for attempt in range(ATTEMPTS):
        if not pieces:
            return
        known = regions.get(client, table, fresh=attempt > 0)
        anchors = _anchors(known, pieces)
        trips.add()
        results = client.getRows(table, anchors, {attribute: request_for(pieces)})
        parts = []
        for row in results:
            cell = row.columns.get(column)
            if cell is None:
                raise ObserverMissing(f"the region of row {row.row!r} of HBase table {table.decode()} answered a "
                                      f"{attribute.decode()} request with its row: GridScanObserver is not loaded for it")
            parts.append(decode_answer(cell.value))
        if len(results) < len(anchors):
            raise ObserverMissing(f"{len(anchors) - len(results)} regions of HBase table {table.decode()} did not "
                                  f"answer a {attribute.decode()} request: GridScanObserver is not loaded for them")
        asked = pieces
        answered = _consistent(parts)
        for part in answered:
            yield asked, part
        if rows_only:
            pieces = _unanswered_rows(pieces, [(p.region[0], p.region[1]) for p in answered])
        else:
            for part in answered:
                rs, re, _ = part.region
                pieces = [q for p in pieces for q in _outside(p, rs, re or None)]
    if pieces:
        regions.forget(table)
        raise StoreUnavailable(f"HBase table {table.decode()}: regions kept moving, {len(pieces)} parts of a "
                               f"{attribute.decode()} request unanswered after {ATTEMPTS} region lists")


def observer_answers(client, table: bytes) -> bool:
    """Whether the region holding the first row of `table` answers a scan request (one
    Thrift call): whether GridScanObserver is loaded for the table."""
    probe = encode(SEGMENTS, 0, ScanRequest([], [], []), [])
    return any(ANSWER in r.columns for r in client.getRows(table, [b"\0"], {ATTRIBUTE: probe}))


def _sent(item: Item, piece: _Piece) -> Item:
    """A key range item as far as the piece asked of it reaches."""
    return Item(piece.start, piece.stop or b"", item.group, item.rows_of, item.bounds, item.tests)


def _anchors(known: list[tuple[bytes, bytes]], pieces: list[_Piece]) -> list[bytes]:
    """One row key inside each region (by `known`) that holds a part of some piece."""
    anchors = []
    for rs, re in known:
        for p in pieces:
            if (p.stop is None or p.stop > rs) and (not re or p.start < re):
                key = max(p.start, rs) or b"\0"  # an empty row key is not a row
                if not re or key < re:
                    anchors.append(key)
                break
    return anchors


def _consistent(parts: list[Part]) -> list[Part]:
    """The parts to count: one per region, none of regions that overlap another."""
    unique = list({p.region: p for p in parts}.values())
    unique.sort(key=lambda p: p.region[0])
    keep = []
    for i, p in enumerate(unique):
        before = unique[i - 1].region if i else None
        after = unique[i + 1].region if i + 1 < len(unique) else None
        overlaps_before = before is not None and (not before[1] or before[1] > p.region[0])
        overlaps_after = after is not None and (not p.region[1] or p.region[1] > after[0])
        if not (overlaps_before or overlaps_after):
            keep.append(p)
    return keep


def _unanswered_rows(pieces: list[_Piece], answered: list[tuple[bytes, bytes]]) -> list[_Piece]:
    """The pieces, each one row, that none of the answered regions (sorted by start, none
    overlapping another; an empty end is the table's end) holds."""
    starts = [rs for rs, _ in answered]
    out = []
    for p in pieces:
        i = bisect.bisect_right(starts, p.start) - 1
        if i < 0 or answered[i][1] and p.start >= answered[i][1]:
            out.append(p)
    return out


def _outside(p: _Piece, rs: bytes, re: bytes | None) -> list[_Piece]:
    """What of piece p lies outside the region [rs, re)."""
    out = []
    if p.start < rs:
        out.append(_Piece(p.item, p.start, rs if p.stop is None or p.stop > rs else p.stop))
    if re is not None and (p.stop is None or p.stop > re):
        out.append(_Piece(p.item, max(p.start, re), p.stop))
    return out
