"""Asking every region of an HBase table about some of its rows, through the Thrift1
gateway: one getRows call per region server, all at once, until every row (or every
part of a key range) has been answered by exactly one region.

A request travels as an attribute of Gets, one anchor row per region (the gateway copies
the attribute onto each Get); each region answers for what lies inside its own
[start, end) and names itself (start, end, id) in its answer (gridagg.store.hbase.scan).
Regions and the region servers holding them come from a cached list (Thrift
getTableRegions, which reads hbase:meta). With several region servers the anchors are
grouped by server and each server gets a call of its own, carrying only what its
regions hold: the calls run at once, and a server that fails fails only its call.

Coverage, never a dropped region: what no region answered, because it split, merged or
moved between the region list and the call, or because its server failed (died, is
being replaced, the region is in transition), is asked again after a fresh region list,
exactly that and nothing else. Answers of regions that overlap (a split or merge while
the calls ran) are dropped and their parts asked again; a region answering twice (two
anchors in one merged region) counts once. A failed call is repeated after a pause
(the master needs seconds to reassign a dead server's regions); when what is missing
cannot be answered within `patience` seconds the caller gets StoreUnavailable naming
it, never a partial answer.

Calls are counted in a TripCounter, labelled with the region server they went to, and
"re-asks" for those made after the first round (the plan reports them).
"""

from __future__ import annotations

import bisect
import operator
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import NamedTuple

import happybase  # noqa: F401 - importing it makes its Thrift types (Hbase_thrift) importable
import numpy as np
from Hbase_thrift import IOError as HBaseIOError
from thriftpy2.thrift import TApplicationException

# What the gateway answers when HBase failed a call (the connection is fine): an IOError,
# or an internal error of the gateway's own; getTableRegions, for one, fails so while a
# region of the table has no server (in transition: split, moved, its server dead).
FAILED_CALL = (HBaseIOError, TApplicationException)

from gridagg.model.errors import StoreUnavailable

# Pauses after a round in which a region server's call failed, seconds: growing, so a
# dead server's regions are asked about a few times a second until they are reassigned.
PAUSES = (0.1, 0.2, 0.4, 0.8)
REASK = "re-asks"  # the TripCounter label of calls made after a query's first round
FANOUT_THREADS = 32  # threads making the calls beyond each round's first, shared by the process


class Region(NamedTuple):
    """A region as the cached list has it: [start, end) (b"": the table's end) and the
    region server holding it ("host:port")."""

    start: bytes
    end: bytes
    server: str


@dataclass
class RegionCache:
    """Tables' regions as last read, in key order."""

    _regions: dict[bytes, list[Region]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def get(self, client, table: bytes, fresh: bool = False) -> list[Region]:
        """The regions of `table`; read again when `fresh` or not known (a Thrift call)."""
        with self._lock:
            known = self._regions.get(table)
        if known is None or fresh:
            known = sorted(Region(r.startKey or b"", r.endKey or b"", f"{r.serverName.decode()}:{r.port}")
                           for r in client.getTableRegions(table))
            with self._lock:
                self._regions[table] = known
        return known

    def forget(self, table: bytes) -> None:
        with self._lock:
            self._regions.pop(table, None)


class Calls:
    """getRows calls through the gateway, several at once: the first on `client` (a raw
    Thrift client the caller holds), the others each on a connection of `gateway` (a
    hbase_gateway.Gateway; None: one after another on `client`)."""

    _pool: ThreadPoolExecutor | None = None
    _pool_lock = threading.Lock()

    def __init__(self, client, gateway=None):
        self.client = client
        self.gateway = gateway

    def get_rows(self, table: bytes, batches: list[tuple[list[bytes], dict]]) -> list:
        """For each (rows, attributes) of `batches`: the rows' TRowResults, or the
        FAILED_CALL error the gateway answered with (HBase failed that call). Other
        failures (the gateway's connection) raise."""
        if self.gateway is None or len(batches) == 1:
            return [_get_rows(self.client, table, rows, attributes) for rows, attributes in batches]
        futures = [self._executor().submit(self._on_own_connection, table, rows, attributes)
                   for rows, attributes in batches[1:]]
        try:
            first = _get_rows(self.client, table, *batches[0])
        finally:
            others = [f.exception() or f.result() for f in futures]  # every call ends before we go on
        for other in others:
            if isinstance(other, BaseException) and not isinstance(other, FAILED_CALL):
                raise other
        return [first, *others]

    def _on_own_connection(self, table: bytes, rows: list[bytes], attributes: dict):
        with self.gateway.connection(slow=True, table=table) as conn:
            return _get_rows(conn.client, table, rows, attributes)

    @classmethod
    def _executor(cls) -> ThreadPoolExecutor:
        with cls._pool_lock:
            if cls._pool is None:
                cls._pool = ThreadPoolExecutor(FANOUT_THREADS, thread_name_prefix="hbase-call")
            return cls._pool


def _get_rows(client, table: bytes, rows: list[bytes], attributes: dict):
    try:
        return client.getRows(table, rows, attributes)
    except FAILED_CALL as exc:
        return exc


def each_region(calls: Calls, table: bytes, pending, attribute: bytes, request_for, decode_answer,
                regions: RegionCache, trips, patience: float, missing):
    """Asks the regions of `table` about what `pending` (Rows or Ranges) holds until every
    part of it is answered by exactly one region (see the module docstring).

    request_for(asked) makes the request sent as `attribute` about `asked` (a part of
    pending.asked()); decode_answer(value) reads an answer cell into (region, answer),
    region = (start, end, id); missing(what) is the error for regions that answered with
    their rows instead (the observer is not loaded there). Yields (asked, answer) of each
    answer to count, whose items are indexes into `asked`. Raises StoreUnavailable when
    something stays unanswered for `patience` seconds.
    """
    column = b"a:" + attribute
    began = time.monotonic()
    fresh, rounds, failures, error = False, 0, 0, ""
    while True:
        try:
            known = regions.get(calls.client, table, fresh)
        except FAILED_CALL as exc:  # a region in transition, or hbase:meta itself
            known, error = None, f"listing the regions: {_first_line(exc.message)}"
        failed, progressed = False, False
        if known is not None:
            plan = pending.plan(known)
            for server, _, _ in plan:
                trips.add(label=server)
            if rounds:
                trips.note(REASK, len(plan))
            results = calls.get_rows(table, [(anchors, {attribute: request_for(asked)})
                                             for _, anchors, asked in plan])
            for (server, anchors, asked), got in zip(plan, results):
                if isinstance(got, FAILED_CALL):
                    failed, error = True, f"{server}: {_first_line(got.message)}"
                    continue
                if len(got) < len(anchors):
                    raise missing(f"{len(anchors) - len(got)} regions")
                parts = []
                for row in got:
                    cell = row.columns.get(column)
                    if cell is None:
                        raise missing(f"the region of row {row.row!r}")
                    parts.append(decode_answer(cell.value))
                # The asked sets of a round's calls are apart: a region answering in two
                # calls answers for different items in each.
                kept = _consistent(parts)
                for _, answer in kept:
                    yield asked, answer
                pending.answered([(region[0], region[1]) for region, _ in kept], asked)
                progressed = progressed or bool(kept)
            rounds += 1
            if not pending:
                return
            if not failed:
                error = "regions moved, split or merged while they were asked"
        waited = time.monotonic() - began
        if waited >= patience:
            regions.forget(table)
            raise StoreUnavailable(f"HBase table {table.decode()}: {pending.describe()} unanswered after "
                                   f"{waited:.1f} s ({error})")
        if known is None or failed or not progressed:  # a failure, or regions still in transition
            time.sleep(min(PAUSES[min(failures, len(PAUSES) - 1)], patience - waited))
            failures += 1
        fresh = True


def _first_line(message) -> str:
    text = message.decode(errors="replace") if isinstance(message, bytes) else str(message)
    return text.strip().splitlines()[0][:300] if text.strip() else "(no message)"


def _consistent(parts: list[tuple]) -> list[tuple]:
    """The (region, answer) of one call to count: one per region, none of regions that
    overlap another (a split or merge while the call ran)."""
    unique = sorted({region: (region, answer) for region, answer in parts}.values(), key=lambda p: p[0][0])
    keep = []
    for i, part in enumerate(unique):
        region = part[0]
        before = unique[i - 1][0] if i else None
        after = unique[i + 1][0] if i + 1 < len(unique) else None
        overlaps_before = before is not None and (not before[1] or before[1] > region[0])
        overlaps_after = after is not None and (not region[1] or region[1] > after[0])
        if not (overlaps_before or overlaps_after):
            keep.append(part)
    return keep


class Rows:
    """Items that are one row each (a grid row; a lookup's grid), as far as no region has
    answered for them yet. What is asked keeps the items' order (skipping visits them in
    it); regions are matched against the keys in key order, by bisection."""

    def __init__(self, keys: list[bytes]):
        self.keys = keys
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
    def items(items, asked: np.ndarray):
        """`items` (hbase_scan.Items) as far as `asked` names them."""
        return items if len(asked) == len(items) else items.take(asked)

    @staticmethod
    def item_of(asked: np.ndarray) -> list[int]:
        return asked.tolist()

    def _span(self, rs: bytes, re: bytes) -> tuple[int, int]:
        """Positions (in key order) of the keys inside region [rs, re)."""
        return bisect.bisect_left(self.sorted, rs), bisect.bisect_left(self.sorted, re) if re else len(self.sorted)

    def plan(self, known: list[Region]) -> list[tuple[str, list[bytes], np.ndarray]]:
        """The calls of a round, one per region server (by `known`) that holds unanswered
        items: (server, an anchor row inside each of its regions that holds some, the
        items asked, in their own order)."""
        first_ask = not self.done.any()  # most requests: each region's first key, no mask to read
        anchors: dict[str, list[bytes]] = {}
        spans: dict[str, list[np.ndarray]] = {}
        for rs, re, server in known:
            a, z = self._span(rs, re)
            if a == z:
                continue
            if first_ask:
                at = a
            else:
                waiting = np.flatnonzero(~self.done[self.order[a:z]])
                if not len(waiting):
                    continue
                at = a + int(waiting[0])
            anchors.setdefault(server, []).append(self.sorted[at] or b"\0")  # an empty row key is no row
            spans.setdefault(server, []).append(self.order[a:z])
        if len(anchors) <= 1:  # one server (standalone): every unanswered item, in one call
            return [(server, rows, self.asked()) for server, rows in anchors.items()]
        plan = []
        for server, rows in anchors.items():
            asked = np.sort(np.concatenate(spans[server]))
            plan.append((server, rows, asked if first_ask else asked[~self.done[asked]]))
        return plan

    def answered(self, regions: list[tuple[bytes, bytes]], asked: np.ndarray) -> None:
        """These regions [start, end) (none overlapping) answered a request about `asked`."""
        mine = None
        if len(asked) < len(self.keys):
            mine = np.zeros(len(self.keys), bool)
            mine[asked] = True
        for rs, re in regions:
            a, z = self._span(rs, re)
            inside = self.order[a:z]
            self.done[inside if mine is None else inside[mine[inside]]] = True

    def describe(self) -> str:
        waiting = np.flatnonzero(~self.done)
        keys = sorted(self.keys[i] for i in waiting[:1000].tolist())
        return f"{len(waiting)} rows ({keys[0]!r} .. {keys[-1]!r})"


@dataclass
class _Piece:
    """A part of item `item` no region has answered yet: [start, stop), stop None = to the end."""

    item: int
    start: bytes
    stop: bytes | None


class Ranges:
    """Items that are key ranges (ROW_CELLS), as far as no region has answered for them
    yet: pieces of them, each cut where regions end."""

    def __init__(self, items):
        pieces = [_Piece(i, start, stop or None) for i, (start, stop) in enumerate(zip(items.starts, items.stops))]
        self.pieces = [p for p in pieces if p.stop is None or p.start < p.stop]  # an empty range holds no row

    def __bool__(self) -> bool:
        return bool(self.pieces)

    def asked(self) -> list[_Piece]:
        return self.pieces

    @staticmethod
    def items(items, asked: list[_Piece]):
        """Each piece as far as it reaches, with its item's other properties."""
        return items.take(np.array([p.item for p in asked], np.int64), [p.start for p in asked],
                          [p.stop or b"" for p in asked])

    @staticmethod
    def item_of(asked: list[_Piece]) -> list[int]:
        return [p.item for p in asked]

    def plan(self, known: list[Region]) -> list[tuple[str, list[bytes], list[_Piece]]]:
        """The calls of a round, one per region server (by `known`) whose regions hold a
        part of some piece: (server, a row key inside each such region, the pieces
        inside its regions). Pieces are cut where regions of `known` begin, so each
        server is asked about pieces of its own."""
        self.pieces = [q for p in self.pieces for q in _cut(p, [r.start for r in known[1:]])]
        anchors: dict[str, list[bytes]] = {}
        asked: dict[str, list[_Piece]] = {}
        for rs, re, server in known:
            inside = [p for p in self.pieces if p.start >= rs and (not re or p.start < re)]
            if inside:
                anchors.setdefault(server, []).append(inside[0].start or b"\0")  # an empty row key is no row
                asked.setdefault(server, []).extend(inside)
        return [(server, rows, asked[server]) for server, rows in anchors.items()]

    def answered(self, regions: list[tuple[bytes, bytes]], asked: list[_Piece]) -> None:
        """These regions [start, end) (none overlapping) answered a request about the
        pieces `asked`: what of those lies outside every one of them stays."""
        mine = {id(p) for p in asked}
        left = []
        for p in self.pieces:
            rest = [p]
            if id(p) in mine:
                for rs, re in regions:
                    rest = [q for r in rest for q in _outside(r, rs, re or None)]
            left += rest
        self.pieces = left

    def describe(self) -> str:
        return f"{len(self.pieces)} key ranges ({self.pieces[0].start!r} ..)"


def _cut(p: _Piece, starts: list[bytes]) -> list[_Piece]:
    """Piece p cut at each of `starts` (ascending) that lies strictly inside it."""
    out, start = [], p.start
    for s in starts:
        if s > start and (p.stop is None or s < p.stop):
            out.append(_Piece(p.item, start, s))
            start = s
    out.append(_Piece(p.item, start, p.stop))
    return out


def _outside(p: _Piece, rs: bytes, re: bytes | None) -> list[_Piece]:
    """What of piece p lies outside the region [rs, re)."""
    out = []
    if p.start < rs:
        out.append(_Piece(p.item, p.start, rs if p.stop is None or p.stop > rs else p.stop))
    if re is not None and (p.stop is None or p.stop > re):
        out.append(_Piece(p.item, max(p.start, re), p.stop))
    return out
