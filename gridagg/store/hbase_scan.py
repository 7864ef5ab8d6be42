"""Requests answered on the HBase region servers (hbase/GridScanObserver.java): the wire
formats, and the one Thrift call that asks every region concerned.

A request names items: grid rows (layout SEGMENTS, gridagg's store) or key ranges
[start, stop) of rows that hold one row each (layout ROW_CELLS, HBase alone). It travels
as the attribute "gridagg.scan" of Gets, one anchor row per region (Thrift getRows:
the gateway copies the attribute onto each Get); each region answers for the items
inside its own [start, end) with one cell "a:gridagg.scan".

Request (all little-endian):
    u8 version = 3, u8 layout, u16 ncols
    u16 nconds, then per condition: u16 col, i64 lo, i64 hi          (lo <= v <= hi)
    u16 naggcols, then u16 col each
    u8 grouping: 0 = by the item's group; 1 = by bucket, then u16 col, i64 base, i64 step,
       u32 nbuckets
    u32 ngroups
    u8 skip: 0, or 1 then u16 nspecs, per spec u16 aggcol index and u8 is_max, then per
       spec u8 has and i64 best
    u32 nitems, then the items a column at a time (each column one array, so a request
       of many items is packed without a step per item):
       u32 x (nitems + 1) offsets of the start keys in their block, the same of the stop
       keys, the start keys' block, the stop keys' block (SEGMENTS: every stop key
       empty; ROW_CELLS: empty = to the table's end), u32 group x nitems, u8 rows_of x
       nitems, i64 bound x nitems x nspecs (item-major), and (nconds + 7) / 8 bytes per
       item: bit j (of byte j / 8, from its lowest bit) set when the item's rows must be
       tested against condition j (clear: its grid's box lies inside that condition's
       range, so every row meets it)
Answer of one region:
    u8 version = 3
    u16 len + region start key, u16 len + region end key, i64 region id
    i64 rows visited, rows matched, grids (items) scanned, grids skipped
    u32 n, then per group with rows: u32 group, i64 count, per aggcol i64 present, min,
       max, hi, lo
    u32 n, then per rows_of item: u32 item index, u32 nrows, nrows x ncols i64

Lookup (attribute "gridagg.keys", answer cell "a:gridagg.keys"): what a write to grid
rows must know, without the rows crossing the wire.
    request: u8 version = 3, u32 ngrids, then per grid: u16 len + row key, u32 neids, then
       per element ID u16 len + bytes
    answer: u8 version = 3, the region as above, u32 n, then per grid of the region:
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
import operator
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
VERSION = 3
SEGMENTS, ROW_CELLS = 0, 1
ATTEMPTS = 4  # region lists tried before giving up (each after the regions moved)


class ObserverMissing(StoreUnavailable):
    """A region answered a scan request with its row: GridScanObserver is not loaded there."""


@dataclass
class Items:
    """What a request names, a column per property, an entry per item: item i is the grid
    row starts[i] (stops None), or the key range [starts[i], stops[i]) (b"": to the end);
    its group (default 0); whether its rows come back (default not); its bound for each
    skip spec, an (n, nspecs) array; the conditions its rows are tested against, an
    (n, nconds) bool array (None: every one)."""

    starts: list[bytes]
    stops: list[bytes] | None = None
    groups: np.ndarray | None = None
    rows_of: np.ndarray | None = None
    bounds: np.ndarray | None = None
    tests: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.starts)

    def take(self, idx: np.ndarray, starts: list[bytes] | None = None, stops: list[bytes] | None = None) -> "Items":
        """Items idx[0], idx[1], ... (with other keys, when given)."""
        cut = lambda a: None if a is None else a[idx]  # noqa: E731
        return Items([self.starts[i] for i in idx.tolist()] if starts is None else starts,
                     stops if stops is not None else None if self.stops is None else [self.stops[i] for i in idx.tolist()],
                     cut(self.groups), cut(self.rows_of), cut(self.bounds), cut(self.tests))


def items_of(request: ScanRequest, keys: list[bytes]) -> Items:
    """The items of a store request: request.grids[i] read from row keys[i]."""
    return Items(keys, None, request.groups, request.rows_of,
                 request.skip.bounds if request.skip is not None else None, request.tested)


def encode(layout: int, ncols: int, request: ScanRequest, items: Items) -> bytes:
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
    n = len(items)
    out.append(struct.pack("<I", n))
    stops = items.stops if items.stops is not None else []
    for keys in (items.starts, stops):
        offsets = np.zeros(n + 1, "<u4")
        if keys:
            np.cumsum(list(map(len, keys)), out=offsets[1:])
        out.append(offsets.tobytes())
    out += [b"".join(items.starts), b"".join(stops)]
    out.append((np.zeros(n, "<u4") if items.groups is None else items.groups.astype("<u4")).tobytes())
    out.append((np.zeros(n, "u1") if items.rows_of is None else items.rows_of.astype("u1")).tobytes())
    if nspecs:
        out.append(np.ascontiguousarray(items.bounds, "<i8").tobytes())
    mask = (len(request.conditions) + 7) // 8
    if items.tests is None:
        out.append(b"\xff" * (mask * n))
    elif mask:
        out.append(np.packbits(items.tests, axis=1, bitorder="little").tobytes())
    return b"".join(out)


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
    found = np.frombuffer(data, _groups_found(naggcols), count=ngot, offset=at)
    at += found.nbytes
    groups = found["group"].astype(np.int64)
    if ngot and groups.max() >= ngroups:
        raise StoreUnavailable(f"GridScanObserver answered for group {groups.max()} of a request of {ngroups}")
    stats = found["stats"]
    # Copied out of the answer: compiled code takes writable, contiguous arrays (the types
    # gridagg.warmup compiles it for; read-only views of the answer would compile anew).
    aggs = AggArrays(found["count"].copy(), *(stats[:, :, j].copy() for j in range(5)))  # present, mins, maxs, hi, lo
    (nrows_of,) = struct.unpack_from("<I", data, at)
    at += 4
    rows: dict[int, np.ndarray] = {}
    for _ in range(nrows_of):
        item, n = struct.unpack_from("<II", data, at)
        at += 8
        rows[item] = np.frombuffer(data, "<i8", count=n * ncols, offset=at).reshape(n, ncols).astype(np.int64)
        at += 8 * n * ncols
    return Part(region, Found(groups, ScanAnswer(aggs, rows, *costs)))


@functools.lru_cache(maxsize=64)
def _groups_found(naggcols: int) -> np.dtype:
    """An answer's record of one group (making a dtype costs tens of microseconds)."""
    return np.dtype([("group", "<u4"), ("count", "<i8"), ("stats", "<i8", (naggcols, 5))])


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


def ask(client, table: bytes, layout: int, ncols: int, request: ScanRequest, items: Items,
        regions: RegionCache, trips) -> ScanAnswer:
    """The answer to `request` over `items` from the regions of `table`, in one Thrift
    call when the cached region list is right (more when regions have moved: each call
    counted in `trips`, a TripCounter)."""
    answer = ScanAnswer(AggArrays.empty(request.ngroups, len(request.columns)))
    rows: dict[int, list[np.ndarray]] = {}
    pending = _Rows(items.starts) if layout == SEGMENTS else _Ranges(items)

    def request_for(asked) -> bytes:
        return encode(layout, ncols, request, pending.items(items, asked))

    def decode_answer(data: bytes) -> Part:
        return decode(data, request.ngroups, len(request.columns), ncols)

    for asked, part in _each_region(client, table, pending, ATTRIBUTE, request_for, decode_answer, regions, trips):
        found = part.answer
        item_of = pending.item_of(asked)
        for j, got in found.answer.rows.items():
            rows.setdefault(item_of[j], []).append(got)
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
    pending = _Rows([key for key, _ in grids])

    def request_for(asked: np.ndarray) -> bytes:
        parts = [struct.pack("<BI", VERSION, len(asked))]
        for i in asked.tolist():
            key, eids = grids[i]
            parts.append(struct.pack("<H", len(key)) + key + struct.pack("<I", len(eids)))
            parts += [struct.pack("<H", len(e)) + e for e in eids]
        return b"".join(parts)

    for asked, part in _each_region(client, table, pending, KEYS, request_for, _decode_lookup, regions, trips):
        for j, found in part.answer.items():
            out[int(asked[j])] = found
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


def _each_region(client, table: bytes, pending, attribute: bytes, request_for, decode_answer,
                 regions: RegionCache, trips):
    """Asks the regions of `table` about what `pending` (_Rows or _Ranges) holds
    (request_for(pending.asked()) makes the request sent as `attribute`; decode_answer(value)
    reads an answer cell into a Part) until every part of it is answered by exactly one
    region. Yields (what was asked, Part) of each answer to count; a Part's items are
    indexes into what was asked."""
    column = b"a:" + attribute
    for attempt in range(ATTEMPTS):
        if not pending:
            return
        known = regions.get(client, table, fresh=attempt > 0)
        anchors = pending.anchors(known)
        asked = pending.asked()
        trips.add()
        results = client.getRows(table, anchors, {attribute: request_for(asked)})
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
        answered = _consistent(parts)
        for part in answered:
            yield asked, part
        pending.answered([(p.region[0], p.region[1]) for p in answered])
    if pending:
        regions.forget(table)
        raise StoreUnavailable(f"HBase table {table.decode()}: regions kept moving, parts of a "
                               f"{attribute.decode()} request unanswered after {ATTEMPTS} region lists")


def observer_answers(client, table: bytes) -> bool:
    """Whether the region holding the first row of `table` answers a scan request (one
    Thrift call): whether GridScanObserver is loaded for the table."""
    probe = encode(SEGMENTS, 0, ScanRequest([], [], []), Items([]))
    return any(ANSWER in r.columns for r in client.getRows(table, [b"\0"], {ATTRIBUTE: probe}))


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


class _Rows:
    """Items that are one row each (a grid row; a lookup's grid), as far as no region has
    answered for them yet. What is asked keeps the items' order (skipping visits them in
    it); regions are matched against the keys in key order, by bisection."""

    def __init__(self, keys: list[bytes]):
        if all(map(operator.lt, keys, keys[1:])):  # as the planner lists grids: no sort
            self.order, self.sorted = np.arange(len(keys)), keys
        else:
            self.order = np.array(sorted(range(len(keys)), key=keys.__getitem__), np.int64)
            self.sorted = [keys[i] for i in self.order.tolist()]
        self.done = np.zeros(len(keys), bool)

    def __bool__(self) -> bool:
        return not self.done.all()

    def asked(self) -> np.ndarray:
        """The items not yet answered, in their own order."""
        return np.flatnonzero(~self.done)

    @staticmethod
    def items(items: Items, asked: np.ndarray) -> Items:
        return items if len(asked) == len(items) else items.take(asked)

    @staticmethod
    def item_of(asked: np.ndarray) -> list[int]:
        return asked.tolist()

    def _span(self, rs: bytes, re: bytes) -> tuple[int, int]:
        """Positions (in key order) of the keys inside region [rs, re)."""
        return bisect.bisect_left(self.sorted, rs), bisect.bisect_left(self.sorted, re) if re else len(self.sorted)

    def anchors(self, known: list[tuple[bytes, bytes]]) -> list[bytes]:
        """One row key inside each region (by `known`) that holds an unanswered item."""
        out = []
        first_ask = not self.done.any()  # most requests: each region's first key, no mask to read
        for rs, re in known:
            a, z = self._span(rs, re)
            if first_ask:
                at = a if a < z else None
            else:
                waiting = np.flatnonzero(~self.done[self.order[a:z]])
                at = a + int(waiting[0]) if len(waiting) else None
            if at is not None:
                out.append(self.sorted[at] or b"\0")  # an empty row key is not a row
        return out

    def answered(self, regions: list[tuple[bytes, bytes]]) -> None:
        for rs, re in regions:
            a, z = self._span(rs, re)
            self.done[self.order[a:z]] = True


@dataclass
class _Piece:
    """A part of item `item` no region has answered yet: [start, stop), stop None = to the end."""

    item: int
    start: bytes
    stop: bytes | None


class _Ranges:
    """Items that are key ranges (ROW_CELLS), as far as no region has answered for them
    yet: pieces of them, each cut where regions end."""

    def __init__(self, items: Items):
        pieces = [_Piece(i, start, stop or None) for i, (start, stop) in enumerate(zip(items.starts, items.stops))]
        self.pieces = [p for p in pieces if p.stop is None or p.start < p.stop]  # an empty range holds no row

    def __bool__(self) -> bool:
        return bool(self.pieces)

    def asked(self) -> list[_Piece]:
        return self.pieces

    @staticmethod
    def items(items: Items, asked: list[_Piece]) -> Items:
        """Each piece as far as it reaches, with its item's other properties."""
        return items.take(np.array([p.item for p in asked], np.int64), [p.start for p in asked],
                          [p.stop or b"" for p in asked])

    @staticmethod
    def item_of(asked: list[_Piece]) -> list[int]:
        return [p.item for p in asked]

    def anchors(self, known: list[tuple[bytes, bytes]]) -> list[bytes]:
        """One row key inside each region (by `known`) that holds a part of some piece."""
        anchors = []
        for rs, re in known:
            for p in self.pieces:
                if (p.stop is None or p.stop > rs) and (not re or p.start < re):
                    key = max(p.start, rs) or b"\0"  # an empty row key is not a row
                    if not re or key < re:
                        anchors.append(key)
                    break
        return anchors

    def answered(self, regions: list[tuple[bytes, bytes]]) -> None:
        for rs, re in regions:
            self.pieces = [q for p in self.pieces for q in _outside(p, rs, re or None)]


def _outside(p: _Piece, rs: bytes, re: bytes | None) -> list[_Piece]:
    """What of piece p lies outside the region [rs, re)."""
    out = []
    if p.start < rs:
        out.append(_Piece(p.item, p.start, rs if p.stop is None or p.stop > rs else p.stop))
    if re is not None and (p.stop is None or p.stop > re):
        out.append(_Piece(p.item, max(p.start, re), p.stop))
    return out
