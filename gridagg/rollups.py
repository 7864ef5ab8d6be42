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

Each serving process keeps one of each per dataset it answers such questions for,
derived from the rows and kept current the way the tree is:

- built by one scan of every leaf, grouped by day, or by longitude (on HBase, on the
  region servers: only group aggregates come back);
- at each later use, the days (or positions) the tree's recent changes touched (the
  data bounds of the leaves the change log names, gridagg.tree.TreeState.history) are
  scanned again, only those; when the tree cannot tell (a bulk load, a repair, too many
  changes since), it is built again.

Days count from the time dimension's domain start (encoded 0), in whole 86,400 s.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass

import numpy as np

from . import parts
from .aggregate import AggArrays
from .errors import StoreUnavailable
from .scan import Buckets, RangeCondition, ScanRequest
from .schema import Dataset
from .tree import TreeState

log = logging.getLogger(__name__)

DAY = 86_400
# Groups of one position scan: every column's aggregate per group, 21 MB at 8 columns.
POSITION_GROUPS = 65_536
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


class PositionRollups(_Background):
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

    def _cells(self, ds: Dataset, tree: TreeState, area) -> PositionCells:
        """The cells of the rows whose position lies in area (lon_lo, lon_hi, lat_lo,
        lat_hi), grouped by longitude. Where some longitude holds several positions, a
        second scan grouped by latitude finds latitudes that hold one position each; a
        longitude whose rows all lie in such positions is cut into them (a few of several
        thousand stations share both a longitude and a latitude with others: those stay
        whole until a question cuts them)."""
        x, y = ds.lonlat_axes
        box, aggs = self._scan(ds, tree, area, x)
        cells = PositionCells(tree.version, box, aggs)
        shared = np.flatnonzero(~cells.points(np.arange(len(box))) & (box[:, 0] == box[:, 1]))
        if not len(shared):
            return cells
        bands = PositionCells(tree.version, *self._scan(ds, tree, area, y))
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

    def _scan(self, ds: Dataset, tree: TreeState, box, axis: int) -> tuple[np.ndarray, AggArrays]:
        """The cells of the rows whose position lies in box (lon_lo, lon_hi, lat_lo,
        lat_hi): one scan of the leaves there, grouped along `axis` (the lon or lat
        dimension) in at most POSITION_GROUPS groups of equal width, in calls of about
        SCAN_ROWS rows one after another, on one thread (the serving threads keep the
        others)."""
        x, y = ds.lonlat_axes
        ncols = len(ds.columns)
        xlo, xhi, ylo, yhi = (int(v) for v in box)
        leaves = np.flatnonzero((tree.left < 0) & (tree.aggs.count > 0) & (tree.dlo[:, x] <= xhi)
                                & (tree.dhi[:, x] >= xlo) & (tree.dlo[:, y] <= yhi) & (tree.dhi[:, y] >= ylo))
        if not len(leaves) or xlo > xhi:
            return np.zeros((0, 4), np.int64), AggArrays.empty(0, ncols)
        lo, hi = (xlo, xhi) if axis == x else (ylo, yhi)
        step = -(-(hi - lo + 1) // POSITION_GROUPS)
        count = -(-(hi - lo + 1) // step)
        request = ScanRequest([tree.ids[i] for i in leaves.tolist()],
                              [RangeCondition(x, xlo, xhi), RangeCondition(y, ylo, yhi)], list(range(ncols)),
                              ngroups=count, buckets=Buckets(axis, lo, step, count))
        aggs = self._grouped(ds, request, tree.aggs.count[leaves])
        aggs = aggs.take(np.flatnonzero(aggs.count > 0))
        # Every row has a position: the lon and lat columns' min and max are its cell's box.
        return np.stack([aggs.mins[:, x], aggs.maxs[:, x], aggs.mins[:, y], aggs.maxs[:, y]], axis=1), aggs

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
