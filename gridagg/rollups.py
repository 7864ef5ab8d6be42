"""Day rollups: the partial aggregate of every day of a dataset, for series over time
alone.

A series whose only condition is time, in buckets of whole days, needs per bucket the
aggregate of every row of those days: the tree cannot give that without reading rows
(its grids span many days), a table of per-day aggregates can (in the manner of
TimescaleDB's continuous aggregates). Each serving process keeps one per dataset it
answers such series for, derived from the rows and kept current the way the tree is:

- built by one scan of every leaf, grouped by day (on HBase, on the region servers:
  only day aggregates come back);
- at each later use, the days the tree's recent changes touched (the data time bounds
  of the leaves the change log names, gridagg.tree.TreeState.history) are scanned
  again, only those; when the tree cannot tell (a bulk load, a repair, too many changes
  since), it is built again.

Days count from the time dimension's domain start (encoded 0), in whole 86,400 s.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import numpy as np

from .aggregate import AggArrays
from .scan import Buckets, RangeCondition, ScanRequest
from .schema import Dataset
from .tree import TreeState

DAY = 86_400


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


class DayRollups:
    """The day rollups of every dataset one planner answers series for."""

    def __init__(self, store):
        self.store = store
        self._held: dict[str, DayRollup] = {}
        self._lock = threading.Lock()

    def current(self, ds: Dataset, tree: TreeState) -> DayRollup:
        """The dataset's rollup as of the tree's version."""
        with self._lock:  # one builder at a time; the others wait and take its result
            held = self._held.get(ds.name)
            if held is not None and held.version == tree.version:
                return held
            touched = None if held is None else tree.touched_since(held.version)
            rollup = self._build(ds, tree) if touched is None else self._patch(ds, tree, held, touched)
            self._held[ds.name] = rollup
            return rollup

    def forget(self, name: str) -> None:
        with self._lock:
            self._held.pop(name, None)

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
        return self.store.scan(ds, request).aggs

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
