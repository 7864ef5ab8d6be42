"""Rollups: tables of partial aggregates derived from the rows, for questions the tree
cannot answer without reading rows.

Day rollups hold the partial aggregate of every day of a dataset, for series over time
alone. A series whose only condition is time, in buckets of whole days, needs per bucket
the aggregate of every row of those days: the tree cannot give that without reading rows
(its grids span many days), a table of per-day aggregates can (in the manner of
TimescaleDB's continuous aggregates).

Position rollups hold the rows cut by position, for questions over longitude and
latitude alone (a box or a polygon over the map, every other dimension whole). Sensor
rows share a few thousand positions, one per station, while the tree's leaves each span
many stations, so such a question reads most rows where the polygon cuts the tree. A
cell holds the rows whose position lies in its box (the data bounds of those rows); a
question adds up the cells inside it; the cells it cuts that are not yet single
positions are refined, by one grouped scan each, for the next question. The position
rollup is made in the background (a question never waits for it: the tree answers
meanwhile). A series of time alone makes the day rollup as it asks (it waits); a plain
question over time alone in whole days (a month, a year) takes it once made, and has it
made in the background otherwise.

Month rollups hold the same cells per calendar month (UTC), for questions over position
within whole months (a box or polygon over the map within a year, every other dimension
whole): the tree's leaves each span many stations, so such a question reads the rows
of most leaves its time range holds; the month's cells added up need none. Made in the
background like the position rollup (a scan grouped by longitude per month, then by
latitude where stations share a longitude), refined where a question cuts a cell of
several positions, kept within MONTH_CELLS_BYTES per dataset (else not made: the tree
answers).

Each serving process keeps one of each per dataset it answers such questions for,
derived from the rows and kept current the way the tree is:

- built by one scan of every leaf, grouped by day, or by longitude (on HBase, on the
  region servers: only group aggregates come back);
- at each later use, the days (positions, months) the tree's recent changes touched
  (the data bounds of the leaves the change log names, gridagg.tree.TreeState.history)
  are scanned again, only those; when the tree cannot tell (a bulk load, a repair, too
  many changes since), it is built again.

Days count from the time dimension's domain start (encoded 0), in whole 86,400 s.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, replace
from datetime import timedelta

import numpy as np

from gridagg.model.aggregate import AggArrays
from gridagg.model.errors import StoreUnavailable
from gridagg.model.schema import Dataset
from gridagg.store import parts
from gridagg.store.scan import Buckets, RangeCondition, ScanRequest
from gridagg.tree import TreeState

log = logging.getLogger(__name__)

DAY = 86_400
# Groups of one position scan: every column's aggregate per group, 21 MB at 8 columns.
POSITION_GROUPS = 65_536
# Bytes of one process's month cells of a dataset (thousands of stations over a few years
# fit well within it): a month rollup that would hold more is not made, the tree answers.
MONTH_CELLS_BYTES = 256 << 20
# Rows of one store call of a rollup's scan, one call after another: short calls leave
# the store free for questions meanwhile (HBase's region servers too).
SCAN_ROWS = 2_000_000


@dataclass
class DayRollup:
    version: int  # the tree version it reflects
    first: int  # day number of row 0
    aggs: AggArrays  # one row per day, every column

    def days(self, first: int, count: int) -> AggArrays:
        """Rows of days first .. first+count-1 (days it does not hold are empty)."""
        out = AggArrays.empty(count, self.aggs.present.shape[1])
        a, b = max(first, self.first), min(first + count, self.first + len(self.aggs))
        if a < b:
            src = np.arange(a - self.first, b - self.first)
            out.add_into(src + (self.first - first), self.aggs, rows=src)
        return out


class _Background:
    """Rollups of every dataset one planner answers questions for, made by background
    threads: one job per dataset at a time, each keeping what it returns; a dataset's
    builds and patches rest REST times as long as its last one took (rows arriving all
    the time would otherwise keep a core scanning, and a store that is away is not asked
    again at once)."""

    REST = 4
    what = "rollup"  # what the log calls it

    def __init__(self, store):
        self.store = store
        self._held: dict = {}
        self._jobs: dict[str, threading.Thread] = {}
        self._rest_until: dict[str, float] = {}
        self._forgotten = 0  # forget() calls so far: a job started before one keeps nothing
        self._closing = threading.Event()
        self._lock = threading.Lock()

    def settle(self, timeout: float | None = None) -> None:
        """Wait for the background work started so far (tests, benchmarks)."""
        for job in list(self._jobs.values()):
            job.join(timeout)

    def forget(self, name: str) -> None:
        with self._lock:
            self._held.pop(name, None)
            self._rest_until.pop(name, None)
            self._forgotten += 1

    def close(self) -> None:
        """Stop the background work (at its next store call) and wait for it: before the
        store closes."""
        self._closing.set()
        self.settle()

    def _resting(self, name: str) -> bool:
        return time.monotonic() < self._rest_until.get(name, 0.0)

    def _start(self, name: str, work, *args) -> None:
        """Run work(*args) in the background unless the dataset's last job is still running
        (the caller holds the lock). work returns the rollup to keep, or None."""
        job = self._jobs.get(name)
        if self._closing.is_set() or job is not None and job.is_alive():
            return
        forgotten = self._forgotten

        def run():
            try:
                made = work(*args)
            except _Closing:
                return
            except Exception:  # the store unreachable, the dataset dropped: a later question asks again
                log.exception("%s of %s not made", self.what, name)
                return
            with self._lock:
                if made is not None and self._forgotten == forgotten:
                    self._held[name] = made

        self._jobs[name] = job = threading.Thread(target=run, name=f"gridagg-rollup-{name}", daemon=True)
        job.start()

    def _timed(self, name: str, work, *args):
        """work(*args), after which the dataset's jobs rest (see the class); failed too."""
        started = time.monotonic()
        try:
            return work(*args)
        finally:
            now = time.monotonic()
            with self._lock:
                self._rest_until[name] = now + self.REST * (now - started)

    def _grouped(self, ds: Dataset, request: ScanRequest, rows: np.ndarray) -> AggArrays:
        """The request's aggregates per group, its leaves (holding `rows` rows each) read in
        calls of about SCAN_ROWS rows one after another; stopped when the rollups close."""
        aggs = AggArrays.empty(request.ngroups, len(ds.columns))
        for g0, g1 in parts.cut(rows, -(-int(rows.sum()) // SCAN_ROWS)):
            if self._closing.is_set():
                raise _Closing(f"{ds.name}: the server is closing")
            answer = self.store.scan(ds, request.part(g0, g1))
            if answer.stopped:
                raise StoreUnavailable(f"the store stopped scanning {ds.name} for a rollup before the end")
            aggs.add_into(np.arange(request.ngroups), answer.aggs)
        return aggs


class DayRollups(_Background):
    """The day rollups of every dataset one planner answers questions over time for."""

    what = "day rollup"

    def __init__(self, store):
        super().__init__(store)
        self._making = threading.Lock()  # one maker at a time; the others wait and take its result

    def current(self, ds: Dataset, tree: TreeState) -> DayRollup:
        """The dataset's rollup as of the tree's version, made now if need be (a series
        waits for it)."""
        with self._making:
            with self._lock:
                held, forgotten = self._held.get(ds.name), self._forgotten
            if held is not None and held.version == tree.version:
                return held
            touched = None if held is None else tree.touched_since(held.version)
            rollup = self._build(ds, tree) if touched is None else self._patch(ds, tree, held, touched)
            with self._lock:
                if self._forgotten == forgotten:  # a dataset dropped meanwhile keeps nothing
                    self._held[ds.name] = rollup
            return rollup

    def made(self, ds: Dataset, tree: TreeState) -> DayRollup | None:
        """The dataset's rollup as of the tree's version, or None: it is then made in the
        background for the questions after (a plain question never waits for it)."""
        with self._lock:
            held = self._held.get(ds.name)
            if held is not None and held.version == tree.version:
                return held
            if not self._resting(ds.name):
                self._start(ds.name, self._timed, ds.name, self.current, ds, tree)
            return None

    def _span(self, tree: TreeState, nodes: np.ndarray, t: int) -> tuple[int, int]:
        """The days the rows of these grids fall on: [first, last] (first > last: none)."""
        lo, hi = tree.dlo[nodes, t], tree.dhi[nodes, t]
        has = lo <= hi
        if not has.any():
            return 0, -1
        return int(lo[has].min()) // DAY, int(hi[has].max()) // DAY

    def _scan(self, ds: Dataset, tree: TreeState, first: int, last: int) -> AggArrays:
        """Day aggregates of days first..last, read from the rows of every leaf there."""
        t = ds.time_axis
        ncols = len(ds.columns)
        count = last - first + 1
        leaves = np.flatnonzero((tree.left < 0) & (tree.dlo[:, t] <= (last + 1) * DAY - 1)
                                & (tree.dhi[:, t] >= first * DAY) & (tree.aggs.count > 0))
        if not len(leaves) or count <= 0:
            return AggArrays.empty(max(count, 0), ncols)
        request = ScanRequest([tree.ids[i] for i in leaves.tolist()],
                              [RangeCondition(t, first * DAY, (last + 1) * DAY - 1)], list(range(ncols)),
                              ngroups=count, buckets=Buckets(t, first * DAY, DAY, count))
        return self._grouped(ds, request, tree.aggs.count[leaves])

    def _build(self, ds: Dataset, tree: TreeState) -> DayRollup:
        first, last = self._span(tree, np.array([tree.root]), ds.time_axis)
        return DayRollup(tree.version, first, self._scan(ds, tree, first, last))

    def _patch(self, ds: Dataset, tree: TreeState, held: DayRollup, touched: set[str]) -> DayRollup:
        nodes = np.array([tree.index[g] for g in touched if g in tree.index], np.int64)
        if not len(nodes):
            return DayRollup(tree.version, held.first, held.aggs)
        t = ds.time_axis
        first, last = self._span(tree, np.array([tree.root]), t)
        lo, hi = self._span(tree, nodes, t)
        if first < held.first or last >= held.first + len(held.aggs):  # the data grew past the days held
            return self._build(ds, tree)
        aggs = held.aggs.take(slice(None))
        if lo <= hi:
            fresh = self._scan(ds, tree, lo, hi)
            rows = np.arange(lo - held.first, hi - held.first + 1)
            for name in AggArrays.FIELDS:
                part = getattr(aggs, name).copy()
                part[rows] = getattr(fresh, name)
                setattr(aggs, name, part)
        return DayRollup(tree.version, held.first, aggs)


@dataclass
class PositionCells:
    """The rows cut by position: cell i holds the rows whose (lon, lat) lie in
    box[i] = (lon_lo, lon_hi, lat_lo, lat_hi) (stored values, the data bounds of those
    rows), their aggregate over every column is aggs row i. Cells do not overlap. A cell
    whose box is a point holds the rows of one position."""

    version: int  # the tree version it reflects
    box: np.ndarray  # (cells, 4) int64
    aggs: AggArrays

    def points(self, cells: np.ndarray) -> np.ndarray:
        """Which of these cells are single positions."""
        b = self.box[cells]
        return (b[:, 0] == b[:, 1]) & (b[:, 2] == b[:, 3])

    def replaced(self, drop: np.ndarray, box: np.ndarray, aggs: AggArrays) -> "PositionCells":
        """These cells without the cells `drop` (indexes), with the cells (box, aggs) added."""
        keep = np.setdiff1d(np.arange(len(self.box)), drop)
        return PositionCells(self.version, np.concatenate([self.box[keep], box]),
                             AggArrays.concat([self.aggs.take(keep), aggs]))


class _PositionScans(_Background):
    """Cells of rows by position, made by grouped scans (see PositionRollups), over all
    time or within a time window."""

    def _cells(self, ds: Dataset, tree: TreeState, area, window: tuple[int, int] | None = None) -> PositionCells:
        """The cells of the rows whose position lies in area (lon_lo, lon_hi, lat_lo,
        lat_hi), and whose time lies in window (stored [lo, hi]; None: any), grouped by
        longitude. Where some longitude holds several positions, a second scan grouped by
        latitude finds latitudes that hold one position each; a longitude whose rows all
        lie in such positions is cut into them (a few of several thousand stations share
        both a longitude and a latitude with others: those stay whole until a question
        cuts them)."""
        x, y = ds.lonlat_axes
        box, aggs = self._scan(ds, tree, area, x, window)
        cells = PositionCells(tree.version, box, aggs)
        shared = np.flatnonzero(~cells.points(np.arange(len(box))) & (box[:, 0] == box[:, 1]))
        if not len(shared):
            return cells
        bands = PositionCells(tree.version, *self._scan(ds, tree, area, y, window))
        single = np.flatnonzero(bands.points(np.arange(len(bands.box))))
        single = single[np.argsort(bands.box[single, 0], kind="stable")]
        at = bands.box[single, 0]
        cut, into = [], []
        for i in shared.tolist():
            mine = single[np.searchsorted(at, box[i, 0], "left"):np.searchsorted(at, box[i, 0], "right")]
            if bands.aggs.count[mine].sum() == aggs.count[i]:  # its rows all lie in these positions
                cut.append(i)
                into.append(mine)
        if not cut:
            return cells
        into = np.concatenate(into)
        return cells.replaced(np.array(cut), bands.box[into], bands.aggs.take(into))

    def _scan(self, ds: Dataset, tree: TreeState, box, axis: int,
              window: tuple[int, int] | None = None) -> tuple[np.ndarray, AggArrays]:
        """The cells of the rows whose position lies in box (lon_lo, lon_hi, lat_lo,
        lat_hi) and time in window (None: any): one scan of the leaves there, grouped
        along `axis` (the lon or lat dimension) in at most POSITION_GROUPS groups of
        equal width, in calls of about SCAN_ROWS rows one after another, on one thread
        (the serving threads keep the others)."""
        x, y = ds.lonlat_axes
        ncols = len(ds.columns)
        xlo, xhi, ylo, yhi = (int(v) for v in box)
        there = ((tree.left < 0) & (tree.aggs.count > 0) & (tree.dlo[:, x] <= xhi) & (tree.dhi[:, x] >= xlo)
                 & (tree.dlo[:, y] <= yhi) & (tree.dhi[:, y] >= ylo))
        conditions = [RangeCondition(x, xlo, xhi), RangeCondition(y, ylo, yhi)]
        if window is not None:
            t = ds.time_axis
            there &= (tree.dlo[:, t] <= window[1]) & (tree.dhi[:, t] >= window[0])
            conditions.append(RangeCondition(t, *window))
        leaves = np.flatnonzero(there)
        if not len(leaves) or xlo > xhi:
            return np.zeros((0, 4), np.int64), AggArrays.empty(0, ncols)
        lo, hi = (xlo, xhi) if axis == x else (ylo, yhi)
        step = -(-(hi - lo + 1) // POSITION_GROUPS)
        count = -(-(hi - lo + 1) // step)
        request = ScanRequest([tree.ids[i] for i in leaves.tolist()], conditions, list(range(ncols)),
                              ngroups=count, buckets=Buckets(axis, lo, step, count))
        aggs = self._grouped(ds, request, tree.aggs.count[leaves])
        aggs = aggs.take(np.flatnonzero(aggs.count > 0))
        # Every row has a position: the lon and lat columns' min and max are its cell's box.
        return np.stack([aggs.mins[:, x], aggs.maxs[:, x], aggs.mins[:, y], aggs.maxs[:, y]], axis=1), aggs


class PositionRollups(_PositionScans):
    """The position rollups of every dataset one planner answers questions over position
    for. A question never waits for one: what a question finds missing (the cells as of
    the tree's version, or cells it cuts refined) is made by a background thread."""

    what = "position rollup"

    def current(self, ds: Dataset, tree: TreeState) -> PositionCells | None:
        """The dataset's cells as of the tree's version, or None (they are being made)."""
        with self._lock:
            held = self._held.get(ds.name)
            if held is not None and held.version == tree.version:
                return held
            if not self._resting(ds.name):
                self._start(ds.name, self._timed, ds.name, self._bring, ds, tree, held)
            return None

    def refine(self, ds: Dataset, tree: TreeState, cells: PositionCells, which: np.ndarray) -> None:
        """Have the cells `which` of cells (current) replaced by the cells one grouped scan
        of each one's box finds."""
        with self._lock:
            self._start(ds.name, self._refine, ds, tree, cells, which)

    def _bring(self, ds: Dataset, tree: TreeState, held: PositionCells | None) -> PositionCells:
        """The cells as of the tree's version: held patched where the change log tells
        which leaves changed, else built anew."""
        touched = None if held is None else tree.touched_since(held.version)
        if touched is None:
            return self._cells(ds, tree, _bounds(ds, tree, [tree.root]))
        return self._patch(ds, tree, held, touched)

    def _refine(self, ds: Dataset, tree: TreeState, cells: PositionCells, which: np.ndarray) -> PositionCells | None:
        if self._held.get(ds.name) is not cells:  # changed meanwhile: a later question asks again
            return None
        x, y = ds.lonlat_axes
        boxes, found = zip(*(self._scan(ds, tree, cells.box[i], x if cells.box[i, 0] < cells.box[i, 1] else y)
                             for i in which.tolist()))
        return cells.replaced(which, np.concatenate(boxes), AggArrays.concat(list(found)))

    def _patch(self, ds: Dataset, tree: TreeState, held: PositionCells, touched: set[str]) -> PositionCells:
        """held brought to the tree's version: the cells that meet the touched leaves'
        positions dropped and their area scanned again."""
        area = _bounds(ds, tree, [tree.index[g] for g in touched if g in tree.index])
        if area[0] > area[1]:
            return PositionCells(tree.version, held.box, held.aggs)
        b = held.box
        while True:  # grow the area until every cell it meets lies inside it
            meets = np.flatnonzero((b[:, 0] <= area[1]) & (b[:, 1] >= area[0]) & (b[:, 2] <= area[3])
                                   & (b[:, 3] >= area[2]))
            m = b[meets]
            grown = np.array([m[:, 0].min(initial=area[0]), m[:, 1].max(initial=area[1]),
                              m[:, 2].min(initial=area[2]), m[:, 3].max(initial=area[3])], np.int64)
            if (grown == area).all():
                break
            area = grown
        fresh = self._cells(ds, tree, area)
        return PositionCells(tree.version, held.box, held.aggs).replaced(meets, fresh.box, fresh.aggs)


@dataclass
class MonthCells:
    """The rows cut by position within each calendar month (UTC): cell i holds the rows
    of the month window lo[i]..hi[i] (stored times) whose (lon, lat) lie in box[i], their
    aggregate over every column is aggs row i; within a month, cells are made as a
    position rollup's (PositionRollups._cells)."""

    version: int  # the tree version it reflects
    lo: np.ndarray  # (cells,) int64: the first stored time of the cell's month
    hi: np.ndarray  # (cells,) int64: its last
    box: np.ndarray  # (cells, 4) int64
    aggs: AggArrays
    too_large: bool = False  # past MONTH_CELLS_BYTES: no cells kept, no question answered

    @property
    def nbytes(self) -> int:
        return self.lo.nbytes + self.hi.nbytes + self.box.nbytes + sum(getattr(self.aggs, f).nbytes
                                                                        for f in AggArrays.FIELDS)

    def within(self, lo: int, hi: int) -> tuple[np.ndarray, PositionCells]:
        """The cells of the months inside lo..hi (stored times): their indexes, and
        they as position cells."""
        pick = np.flatnonzero((self.lo >= lo) & (self.hi <= hi))
        return pick, PositionCells(self.version, self.box[pick], self.aggs.take(pick))

    def take(self, keep: np.ndarray) -> "MonthCells":
        """The cells `keep` (indexes)."""
        return MonthCells(self.version, self.lo[keep], self.hi[keep], self.box[keep], self.aggs.take(keep))

    @staticmethod
    def joined(version: int, parts: list["MonthCells"], ncols: int) -> "MonthCells":
        """The cells of every part, as of tree version `version`."""
        if not parts:
            return MonthCells(version, np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros((0, 4), np.int64),
                              AggArrays.empty(0, ncols))
        return MonthCells(version, *(np.concatenate([getattr(p, f) for p in parts]) for f in ("lo", "hi", "box")),
                          AggArrays.concat([p.aggs for p in parts]))


def month_windows(col, lo: int, hi: int) -> list[tuple[int, int]]:
    """The calendar months (UTC) that stored times lo..hi of time column `col` meet, as
    stored [first, last] windows, cut to the column's domain."""
    out, start = [], _month_of(col, lo)
    while start <= hi and start <= col.enc_hi:
        end = _month_of(col, start + 32 * DAY) - 1  # 32 days on: inside the next month
        out.append((max(start, col.enc_lo), min(end, col.enc_hi)))
        start = end + 1
    return out


def in_whole_months(col, lo: int, hi: int) -> bool:
    """Whether stored times lo..hi of time column `col` are whole calendar months (UTC):
    each end a month's edge, or the domain's (which holds no rows past it)."""
    return lo <= hi and (lo == col.enc_lo or _month_of(col, lo) == lo) and (
        hi == col.enc_hi or _month_of(col, hi + 1) == hi + 1)


def _month_of(col, v: int) -> int:
    """The first stored time of the calendar month holding stored time v: the first v'
    whose instant (the column's epoch + v' seconds) lies in that month."""
    at = col.epoch + timedelta(seconds=v)
    start = at.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    return -((col.epoch - start) // timedelta(seconds=1))  # seconds from the epoch, rounded up


class MonthRollups(_PositionScans):
    """The month rollups of every dataset one planner answers questions over position
    and whole months for (a box or polygon over the map within a year, say): per
    calendar month, the cells a position rollup would make of that month's rows. A
    question never waits for one: a background thread makes it, the tree answers
    meanwhile; it is kept current as the position rollup is (the months the changed
    leaves' rows span are made again)."""

    what = "month rollup"

    def current(self, ds: Dataset, tree: TreeState) -> MonthCells | None:
        """The dataset's month cells as of the tree's version, or None (being made, or
        too large to keep)."""
        with self._lock:
            held = self._held.get(ds.name)
            if held is not None and held.version == tree.version:
                return None if held.too_large else held
            if not self._resting(ds.name):
                self._start(ds.name, self._timed, ds.name, self._bring, ds, tree, held)
            return None

    def refine(self, ds: Dataset, tree: TreeState, made: MonthCells, which: np.ndarray) -> None:
        """Have the cells `which` of made (current) replaced by the cells one grouped scan
        of each one's box within its month finds."""
        with self._lock:
            self._start(ds.name, self._refine, ds, tree, made, which)

    def _refine(self, ds: Dataset, tree: TreeState, made: MonthCells, which: np.ndarray) -> MonthCells | None:
        if self._held.get(ds.name) is not made:  # changed meanwhile: a later question asks again
            return None
        x, y = ds.lonlat_axes
        found = [_in_month(self._scan(ds, tree, made.box[i], x if made.box[i, 0] < made.box[i, 1] else y,
                                      (int(made.lo[i]), int(made.hi[i]))), made.lo[i], made.hi[i])
                 for i in which.tolist()]
        kept = made.take(np.setdiff1d(np.arange(len(made.box)), which))
        return MonthCells.joined(made.version, [kept, *found], len(ds.columns))

    def _bring(self, ds: Dataset, tree: TreeState, held: MonthCells | None) -> MonthCells:
        """The cells as of the tree's version: held with the months the change log names
        (and those the data grew into) made again, else every month made anew."""
        col = ds.dimensions[ds.time_axis]
        span = month_windows(col, *self._times(ds, tree, [tree.root]))
        touched = None if held is None or held.too_large else tree.touched_since(held.version)
        if touched is None:
            redo, parts = span, []
        else:
            nodes = [tree.index[g] for g in touched if g in tree.index]
            made = set(held.lo.tolist())
            redo = set(month_windows(col, *self._times(ds, tree, nodes))) | {w for w in span if w[0] not in made}
            parts = [held.take(np.flatnonzero(~np.isin(held.lo, [w[0] for w in redo])))]
        area = _bounds(ds, tree, [tree.root])
        held_bytes = sum(p.nbytes for p in parts)
        for w in sorted(redo):
            parts.append(_in_month(self._cells(ds, tree, area, w), *w))
            held_bytes += parts[-1].nbytes
            if held_bytes > MONTH_CELLS_BYTES:
                log.info("month rollup of %s not kept: more than %d MB", ds.name, MONTH_CELLS_BYTES >> 20)
                return replace(MonthCells.joined(tree.version, [], len(ds.columns)), too_large=True)
        return MonthCells.joined(tree.version, parts, len(ds.columns))

    @staticmethod
    def _times(ds: Dataset, tree: TreeState, nodes) -> tuple[int, int]:
        """The stored times these grids' rows span (lo > hi: none)."""
        t = ds.time_axis
        nodes = np.asarray(nodes, np.int64)
        has = nodes[tree.dlo[nodes, t] <= tree.dhi[nodes, t]]
        if not len(has):
            return 0, -1
        return int(tree.dlo[has, t].min()), int(tree.dhi[has, t].max())


def _in_month(cells, lo: int, hi: int) -> MonthCells:
    """Position cells (a PositionCells, or a box and aggregates) as cells of the month
    window lo..hi (their version is the joined cells')."""
    box, aggs = (cells.box, cells.aggs) if isinstance(cells, PositionCells) else cells
    n = len(box)
    return MonthCells(-1, np.full(n, lo, np.int64), np.full(n, hi, np.int64), box, aggs)


class _Closing(StoreUnavailable):
    """The rollups are closing: background work stops (a series asking meanwhile hears
    the store is going away)."""


def _bounds(ds: Dataset, tree: TreeState, nodes) -> np.ndarray:
    """(lon_lo, lon_hi, lat_lo, lat_hi): the data bounds of these grids' rows (lo > hi:
    none)."""
    x, y = ds.lonlat_axes
    nodes = np.asarray(nodes, np.int64)
    has = nodes[tree.dlo[nodes, x] <= tree.dhi[nodes, x]]
    if not len(has):
        return np.array([0, -1, 0, -1], np.int64)
    return np.array([tree.dlo[has, x].min(), tree.dhi[has, x].max(), tree.dlo[has, y].min(), tree.dhi[has, y].max()],
                    np.int64)
