"""Requests answered on the HBase region servers (hbase/observer, GridScanObserver): the wire
formats, and the one Thrift call that asks every region concerned.

A request names items: grid rows (layout SEGMENTS, gridagg's store) or key ranges
[start, stop) of rows that hold one row each (layout ROW_CELLS, HBase alone). It travels
as the attribute "gridagg.store.scan" of Gets, one anchor row per region (Thrift getRows:
the gateway copies the attribute onto each Get); each region answers for the items
inside its own [start, end) with one cell "a:gridagg.store.scan".

Request (all little-endian):
    u8 version = 6, u8 layout, u16 ncols
    i64 deadline: milliseconds since the epoch after which the answer is no longer wanted
       (ScanRequest.deadline, rounded down; 0: none)
    u16 nconds, then per condition: u16 col, i64 lo, i64 hi          (lo <= v <= hi)
    u16 naggcols, then u16 col each
    u8 grouping: 0 = by the item's group; 1 = by bucket, then u16 col, i64 base, i64 step,
       u32 nbuckets
    u32 ngroups
    u8 skip: 0, or 1 then u16 nspecs, per spec u16 aggcol index and u8 is_max, then per
       spec u8 has and i64 best
    u8 polygon: 0, or 1 then u16 lon col, u16 lat col, f64 lon scale, f64 lat scale, f64
       eps, u32 nedges, then per edge f64 x1, y1, x2, y2 (ScanRequest.polygon: the rows of
       rows_of items are tested against it on the region server, and only those within
       eps of an edge come back; without one every matching row of theirs does)
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
    u8 version = 6
    u16 len + region start key, u16 len + region end key, i64 region id
    i64 rows read, rows matched, grids (items) scanned, grids skipped, blocks answered
       from their aggregates (gridagg.store.blocks), rows in those blocks, rows in the
       grids scanned
    u32 n, then per group with rows: u32 group, i64 count, per aggcol i64 present, min,
       max, hi, lo
    u32 n, then per rows_of item read: u32 item index, u32 nrows, nrows x ncols i64
    u32 n, then u32 item index x n: the region's items left unread (the deadline passed)

Deadlines: a region checks the deadline before each item and, once it has passed, reads
no more and names the rest unread: the answer is exact for the items it read, and the
caller keeps bounds for the others (ScanAnswer.unread). The deadline is absolute wall
time: on one machine both sides read the same clock, and time spent queued in the
gateway or the region server counts against it (a remaining duration would start only
when the region begins); across machines HBase already needs the clocks to agree.

Lookup (attribute "gridagg.keys", answer cell "a:gridagg.keys"): what a write to grid
rows must know, without the rows crossing the wire.
    request: u8 version = 6, u32 ngrids, then per grid: u16 len + row key, u32 neids, then
       per element ID u16 len + bytes
    answer: u8 version = 6, the region as above, u32 n, then per grid of the region:
       u32 grid index, u32 ncells, per cell its 8-byte qualifier (the segment number,
       big-endian) and u32 value length, u32 nfound, then u32 index of each element ID
       its live segments hold

Stop counts (attribute "gridagg.stats", answer cell "a:gridagg.stats"): request u8
version = 6; answer u8 version = 6, the region as above, i64 scans stopped by their
deadline and i64 items they left unread, since the region server started.

Coverage: every item (every part of a range) must be answered by exactly one region;
gridagg.store.hbase.regions asks the regions (one call per region server, all at once)
until it is, asking again exactly what a region that moved, split, merged or whose
server failed left unanswered.
"""

from __future__ import annotations

import functools
import struct
from dataclasses import dataclass

import numpy as np

from gridagg.model.aggregate import AggArrays
from gridagg.model.errors import StoreUnavailable
from gridagg.store import segments
from gridagg.store.hbase.regions import Calls, Ranges, RegionCache, Rows, each_region
from gridagg.store.scan import ScanAnswer, ScanRequest

ATTRIBUTE = b"gridagg.store.scan"
ANSWER = b"a:gridagg.store.scan"
KEYS = b"gridagg.keys"
STATS = b"gridagg.stats"
VERSION = 6
SEGMENTS, ROW_CELLS = 0, 1
NONE_UNREAD = np.zeros(0, np.int64)  # a region's answer that left nothing unread (never written to)


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
    specs over `items` (request.grids is not read), to stop at request.deadline."""
    deadline = 0 if request.deadline is None else int(request.deadline * 1000)  # down: never before it
    out = [struct.pack("<BBHqH", VERSION, layout, ncols, deadline, len(request.conditions))]
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
    p = request.polygon
    if p is None:
        out.append(b"\0")
    else:
        edges = np.ascontiguousarray(p.edges, "<f8")
        out.append(struct.pack("<BHHdddI", 1, p.lon_column, p.lat_column, p.lon_scale, p.lat_scale, p.eps, len(edges)))
        out.append(edges.tobytes())
    n = len(items)
    out.append(struct.pack("<I", n))
    stops = items.stops if items.stops is not None else []
    for keys in (items.starts, stops):
        offsets = np.zeros(n + 1, "<u4")
        if keys:
            np.fromiter(map(len, keys), "<u4", n).cumsum(out=offsets[1:])
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
class Found:
    """What one region found for a scan request: its records of the groups it found rows
    in, as they came (added up by `aggregates`, the records of every region at once: a
    region's answer alone holds a few groups, and numpy's calls cost more than their
    work there); what the scan cost there (ScanAnswer's counts); rows keyed by the
    request's item index; `unread`, the request's items it left unread (its deadline
    passed)."""

    records: bytes
    costs: tuple[int, ...]  # rows read, rows matched, grids scanned and skipped, blocks reused, rows in them, rows in the grids
    rows: dict[int, np.ndarray]
    unread: np.ndarray


def decode(data: bytes, naggcols: int, ncols: int) -> tuple[tuple[bytes, bytes, int], Found]:
    """One region's answer cell to a scan request: (its region as (start, end, id),
    what it found)."""
    region, at = _region_of(data)
    costs = struct.unpack_from("<7q", data, at)
    (ngot,) = struct.unpack_from("<I", data, at + 56)
    at += 60
    records = data[at : at + ngot * _groups_found(naggcols).itemsize]
    at += len(records)
    (nrows_of,) = struct.unpack_from("<I", data, at)
    at += 4
    rows: dict[int, np.ndarray] = {}
    for _ in range(nrows_of):
        item, n = struct.unpack_from("<II", data, at)
        at += 8
        rows[item] = np.frombuffer(data, "<i8", count=n * ncols, offset=at).reshape(n, ncols).astype(np.int64)
        at += 8 * n * ncols
    (nunread,) = struct.unpack_from("<I", data, at)
    unread = np.frombuffer(data, "<u4", count=nunread, offset=at + 4).astype(np.int64) if nunread else NONE_UNREAD
    return region, Found(records, costs, rows, unread)


def aggregates(records: bytes, ngroups: int, naggcols: int) -> tuple[np.ndarray, AggArrays]:
    """Group records (Found.records, of any regions, one after another) of a request of
    ngroups groups: (the group of each, their aggregates, a row each)."""
    found = np.frombuffer(records, _groups_found(naggcols))
    groups = found["group"].astype(np.int64)
    if len(groups) and groups.max() >= ngroups:
        raise StoreUnavailable(f"GridScanObserver answered for group {groups.max()} of a request of {ngroups}")
    stats = found["stats"]
    # Copied out of the answer: compiled code takes writable, contiguous arrays (the types
    # gridagg.warmup compiles it for; read-only views of the answer would compile anew).
    return groups, AggArrays(found["count"].copy(), *(stats[:, :, j].copy() for j in range(5)))  # present, mins, ...


@functools.lru_cache(maxsize=64)
def _groups_found(naggcols: int) -> np.dtype:
    """An answer's record of one group (making a dtype costs tens of microseconds)."""
    return np.dtype([("group", "<u4"), ("count", "<i8"), ("stats", "<i8", (naggcols, 5))])


def ask(calls: Calls, table: bytes, layout: int, ncols: int, request: ScanRequest, items: Items,
        regions: RegionCache, trips, patience: float) -> ScanAnswer:
    """The answer to `request` over `items` from the regions of `table`: one call per
    region server when the cached region list is right (more when regions moved: each
    counted in `trips`, a TripCounter). StoreUnavailable when a part stays unanswered
    for `patience` seconds (hbase_regions.each_region). Items a region left unread (past
    request.deadline) make the answer `stopped`, with their indexes in `unread`."""
    naggcols = len(request.columns)
    answer = ScanAnswer(AggArrays.empty(request.ngroups, naggcols))
    records: list[bytes] = []
    rows: dict[int, list[np.ndarray]] = {}
    unread: list[np.ndarray] = []
    pending = Rows(items.starts) if layout == SEGMENTS else Ranges(items)

    def request_for(asked) -> bytes:
        return encode(layout, ncols, request, pending.items(items, asked))

    def decode_answer(data: bytes):
        return decode(data, naggcols, ncols)

    for asked, found in each_region(calls, table, pending, ATTRIBUTE, request_for, decode_answer, regions, trips,
                                    patience, _missing(table, ATTRIBUTE)):
        item_of = pending.item_of(asked)
        for j, got in found.rows.items():
            rows.setdefault(item_of[j], []).append(got)
        if len(found.unread):
            unread.append(np.asarray(item_of, np.int64)[found.unread])
        records.append(found.records)
        visited, matched, scanned, skipped, blocks, in_blocks, in_grids = found.costs
        answer.rows_visited, answer.rows_matched = answer.rows_visited + visited, answer.rows_matched + matched
        answer.grids_scanned, answer.grids_skipped = answer.grids_scanned + scanned, answer.grids_skipped + skipped
        answer.blocks_reused += blocks
        answer.rows_in_reused_blocks += in_blocks
        answer.rows_in_grids += in_grids
    answer.aggs.add_into(*aggregates(b"".join(records), request.ngroups, naggcols))
    answer.rows = {i: (np.concatenate(r) if len(r) > 1 else r[0]) for i, r in rows.items()}
    if unread:  # a key range cut by regions is unread when any piece of it is
        answer.stopped, answer.unread = True, np.unique(np.concatenate(unread))
    return answer


def lookup(calls: Calls, table: bytes, grids: list[tuple[bytes, object]], regions: RegionCache,
           trips, patience: float) -> list[tuple[list[tuple[int, int]], set[int]]]:
    """What a write to grid rows must know, from the regions of `table` (one call per
    region server when the cached region list is right): for each (grid row key,
    element IDs), the row's "r" cells as (segment number, value length) in number
    order, and the indexes of those element IDs (an Arrow binary array) its live segments
    hold."""
    out: list[tuple[list[tuple[int, int]], set[int]]] = [([], set()) for _ in grids]
    pending = Rows([key for key, _ in grids])

    def request_for(asked: np.ndarray) -> bytes:
        parts = [struct.pack("<BI", VERSION, len(asked))]
        for i in asked.tolist():
            key, eids = grids[i]
            parts += [struct.pack("<H", len(key)) + key + struct.pack("<I", len(eids)), length_prefixed(eids)]
        return b"".join(parts)

    for asked, found in each_region(calls, table, pending, KEYS, request_for, _decode_lookup, regions, trips,
                                    patience, _missing(table, KEYS)):
        for j, got in found.items():
            out[int(asked[j])] = got
    return out


def length_prefixed(eids) -> bytes:
    """Element IDs (an Arrow binary array) as a lookup request lists them: u16 length and
    the bytes of each, one after another, packed without a Python step per ID."""
    offsets = segments.id_offsets(eids).astype(np.int64)
    lengths = np.diff(offsets)
    out = np.empty(2 * len(lengths) + int(offsets[-1] - offsets[0]), np.uint8)
    heads = 2 * np.arange(len(lengths)) + (offsets[:-1] - offsets[0])
    body = np.ones(len(out), bool)
    body[heads] = body[heads + 1] = False
    out[heads], out[heads + 1] = lengths & 0xFF, lengths >> 8
    if offsets[-1] > offsets[0]:
        out[body] = np.frombuffer(eids.buffers()[2], np.uint8, int(offsets[-1] - offsets[0]), int(offsets[0]))
    return out.tobytes()


def _missing(table: bytes, attribute: bytes):
    """The error for regions that answered a request with their rows (what: which)."""
    def error(what: str) -> ObserverMissing:
        return ObserverMissing(f"{what} of HBase table {table.decode()} answered a {attribute.decode()} request "
                               "with rows: GridScanObserver is not loaded for them")
    return error


def _decode_lookup(data: bytes) -> tuple[tuple[bytes, bytes, int], dict]:
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
    return region, found


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


def stop_counts(client, table: bytes, regions: RegionCache) -> tuple[int, int]:
    """Scans stopped by their deadline, and the items they left unread, summed over the
    region servers holding `table` (one Thrift call, an anchor row per server; counted
    since each server started)."""
    anchors = {r.server: r.start or b"\0" for r in regions.get(client, table, fresh=True)}
    got = client.getRows(table, list(anchors.values()), {STATS: bytes([VERSION])})
    if len(got) < len(anchors) or any(b"a:" + STATS not in r.columns for r in got):
        raise _missing(table, STATS)("regions")
    counts = [struct.unpack_from("<qq", cell.value, _region_of(cell.value)[1])
              for cell in (r.columns[b"a:" + STATS] for r in got)]
    return sum(c[0] for c in counts), sum(c[1] for c in counts)


def observer_answers(client, table: bytes) -> bool:
    """Whether the region holding the first row of `table` answers a scan request (one
    Thrift call): whether GridScanObserver is loaded for the table."""
    probe = encode(SEGMENTS, 0, ScanRequest([], [], []), Items([]))
    return any(ANSWER in r.columns for r in client.getRows(table, [b"\0"], {ATTRIBUTE: probe}))
