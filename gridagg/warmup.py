"""Compiled code ready before a process answers: `warm()` compiles every kernel a query
can use (numba), or loads it from numba's on-disk cache, so that no user's query waits
for a compiler.

It answers a tiny synthetic dataset's queries through the real query path, in a
throwaway embedded store: the planner's walk over a tree, the polygon test on grid faces
and on rows, the scan kernel over segments whose columns are 2, 4 and 8 bytes wide (with
absent values), series buckets and moving windows, the day and position rollups, min/max skipping,
answers within a deadline (bounds from the tree, scans read in parts), and the kernel
over segments copied out as bytes (how the HBase store scans where its
region servers lack the observer). Numba compiles a function once per argument types,
so these are the types real queries pass (tests/test_warmup.py checks that a query of
every kind on both stores compiles nothing afterwards).

A machine's first warm-up compiles (slow, the more so the busier the cores are)
and writes numba's cache: next to the modules (`gridagg/__pycache__`), or in
NUMBA_CACHE_DIR when that is set, or in the user's cache directory when the package's
directory is read-only. Later processes load it, in a fraction of that time. `gridagg services up` and `gridagg serve` warm up
before they return or serve, and each API worker before its /healthz says ready; a
worker also reads every dataset's tree then (load_trees), which its first query of a
dataset would otherwise wait for.

    python -m gridagg.warmup      # what `gridagg serve` runs before starting its workers
"""

from __future__ import annotations

import pickle
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from gridagg.model.aggregate import NULL, PartialAggregate, ancestor_aggregates
from gridagg.model.errors import UnknownDataset
from gridagg.model.grid import grid_prefix, presplit
from gridagg.model.schema import Dataset
from gridagg.model.trips import TripCounter
from gridagg.query.planner import Planner
from gridagg.query.spec import Limits, QuerySpec, SeriesSpec
from gridagg.store.embedded import EmbeddedStore
from gridagg.store.kernels import scan_segments
from gridagg.store.scan import ScanAnswer, ScanRequest
from gridagg.tree import TreeState
from gridagg.write.split import split_rows

# Columns of every stored width: time and positions, a small nullable measure (2-byte
# deltas), a count of a few million (4 bytes) and one spanning more than 32 bits (8).
DEFINITION = {
    "name": "warmup",
    "dimensions": [
        {"name": "time", "type": "time", "min": "2000-01-01T00:00:00Z", "max": "2000-12-31T23:00:00Z"},
        {"name": "lon", "scale": 2, "min": -10, "max": 10},
        {"name": "lat", "scale": 2, "min": 40, "max": 60},
    ],
    "measures": [
        {"name": "small", "scale": 1, "min": -50, "max": 50, "nullable": True},
        {"name": "medium", "min": 0, "max": 10_000_000},
        {"name": "large", "min": -(10**15), "max": 10**15},
    ],
    "grid": {"n_size": 40, "n_threshold": 160, "l_time": "60d"},
}
ROWS = 2_000
DEADLINE = 60.0  # seconds: long enough for every part of a scan to be read
MONTH = ("2000-03-01T00:00:00Z", "2000-03-31T23:59:59Z")  # the series' span: a few points are enough
# A concave polygon: its edges cut grids (rows tested one by one), and grids lie wholly
# inside and outside it.
REGION = {"type": "Polygon", "coordinates": [[[-9, 41], [9, 41], [9, 59], [0, 50.005], [-9, 59], [-9, 41]]]}


@dataclass(frozen=True)
class Warmed:
    """What warm() did: seconds taken, compiled functions (cache misses: numba compiled
    and saved them) and functions loaded from numba's cache, and where that cache is."""

    seconds: float
    compiled: int
    loaded: int
    cache: str | None

    def __str__(self) -> str:
        """One line for people, e.g. "compiled 12 functions in 13.8 s (numba cache: ...)"."""
        if not (self.compiled or self.loaded):
            return f"nothing to compile: this process has its kernels ({self.seconds:.1f} s)"
        what = (f"compiled {self.compiled} functions" if self.compiled
                else f"loaded {self.loaded} functions from numba's cache")
        return f"{what} in {self.seconds:.1f} s" + (f" (numba cache: {self.cache})" if self.cache else "")


def warm() -> Warmed:
    """Compile (or load from numba's cache) every kernel a query can use, by answering a
    synthetic dataset's queries of every kind; returns what it did. Takes no server:
    the dataset lives in a temporary embedded store, gone on return."""
    started = time.perf_counter()
    before = _cache_counts()
    if before[2]:
        drop_unreadable_cache(Path(before[2]))
    with tempfile.TemporaryDirectory(prefix="gridagg-warmup-") as path:
        store = EmbeddedStore(path)
        try:
            _answer_every_kind(store)
        finally:
            store.close()
    after = _cache_counts()
    return Warmed(time.perf_counter() - started, after[0] - before[0], after[1] - before[1], after[2])


def drop_unreadable_cache(cache: Path) -> list[Path]:
    """Remove the entries of numba's cache directory whose index no longer unpickles (it
    names a class that moved since, after an upgrade in place); returns the indexes
    removed. numba names an index by function and line and unpickles it before it checks
    the source's stamp, so a stale one made every query of its function fail ("Can't
    get attribute 'WalkTree' on gridagg.tree") instead of compiling again."""
    dropped = []
    for index in sorted(cache.glob("*.nbi")):
        try:
            with open(index, "rb") as f:
                pickle.load(f)  # numba's version, then the pickled (stamp, overloads)
                pickle.loads(f.read())
        except Exception:  # noqa: BLE001 - whatever makes it unreadable, numba's load would fail the same way
            for data in cache.glob(index.name.removesuffix(".nbi") + ".*.nbc"):
                data.unlink(missing_ok=True)
            index.unlink(missing_ok=True)
            dropped.append(index)
    return dropped


def load_trees(engine) -> int:
    """Read every dataset's tree into `engine` (a GridEngine), as the first query of each
    would (a wait that grows with the tree's leaves); returns how many it read. A dataset
    dropped meanwhile is passed over."""
    loaded = 0
    for ds in engine.directory.datasets():
        try:
            engine.trees.tree(ds)
        except UnknownDataset:
            continue
        loaded += 1
    return loaded


def compiled_functions() -> list:
    """Every compiled function (numba dispatcher) of gridagg's modules loaded so far."""
    from numba.core.dispatcher import Dispatcher

    found = {id(value): value for name, module in list(sys.modules.items())
             if name == "gridagg" or name.startswith("gridagg.")
             for value in vars(module).values() if isinstance(value, Dispatcher)}
    return list(found.values())


def _cache_counts() -> tuple[int, int, str | None]:
    """(cache misses, cache hits, cache directory) over every compiled function."""
    misses = hits = 0
    cache = None
    for f in compiled_functions():
        stats = f.stats
        misses += sum(stats.cache_misses.values())
        hits += sum(stats.cache_hits.values())
        cache = cache or stats.cache_path
    return misses, hits, cache


class _OneTree:
    """What the planner asks of a tree cache and a directory, for one tree."""

    def __init__(self, tree: TreeState):
        self._tree = tree

    def tree(self, ds: Dataset) -> TreeState:
        return self._tree

    def round_trips(self) -> int:
        return 0


class _CopiedSegments:
    """`store`, scanned as the HBase store scans where its region servers lack the
    observer: each grid's segments copied out as bytes, then the kernel."""

    kind = "copied"
    scan_threads = 1
    names_unread = False
    reads_by_key = False

    def __init__(self, store: EmbeddedStore):
        self.store = store
        self.round_trips = TripCounter()

    def scan(self, ds: Dataset, request: ScanRequest) -> ScanAnswer:
        with self.store.env.begin(db=self.store._db(ds.name, "s")) as txn:
            cursor = txn.cursor()
            copied = [[bytes(value) for _, value in self.store._segments(cursor, grid_prefix(g))]
                      for g in request.grids]
            return scan_segments(request, copied, len(ds.columns))


def _answer_every_kind(store: EmbeddedStore) -> None:
    ds = Dataset.from_json(DEFINITION)
    tree = _load(ds, store, _rows(ds))
    box = {"lon": [-4.5, 6], "time": ["2000-02-10T00:00:00Z", "2000-11-20T12:00:00Z"]}
    every = ["count", "count:small", "sum:small", "avg:medium", "min:large", "max:lat", "avg:time"]
    for cells in (store, _CopiedSegments(store)):
        one = _OneTree(tree)
        planner = Planner(one, cells, one)
        # Exact answers, and answers within a deadline: from the tree alone (0), or read in
        # parts with bounds for what is not read yet (DEADLINE).
        for deadline in (None, 0, DEADLINE):
            for where, region in ((box, None), ({}, REGION), (box, REGION)):
                for aggregates, explain in ((every, False), (["min:medium", "max:large"], False), (every, True)):
                    planner.query(ds, QuerySpec.parse(ds, where, aggregates, region), Limits(), explain, deadline)
                for step, window in (("1d", "7d"), ("10d", None), ("6h", None)):
                    planner.series(ds, SeriesSpec.parse(ds, where, every, step, window, *MONTH, region), Limits(),
                                   deadline=deadline)
            # Time alone in whole days: the day rollup answers.
            planner.series(ds, SeriesSpec.parse(ds, {}, every, "1d", "7d", *MONTH), Limits(), deadline=deadline)
        # Position alone: the position rollup, made in the background, answers.
        for _ in range(3):
            planner.positions.settle()
            planner.query(ds, QuerySpec.parse(ds, {}, every, REGION), Limits())


def _rows(ds: Dataset) -> np.ndarray:
    """ROWS stored rows (int64, every column) spread over the dataset's domain."""
    rng = np.random.default_rng(0)
    (t0, t1), (x0, x1), (y0, y1) = ds.domain()
    small = rng.integers(-500, 501, ROWS)
    small[rng.random(ROWS) < 0.1] = NULL
    return np.stack([rng.integers(t0, t1 + 1, ROWS), rng.integers(x0, x1 + 1, ROWS) // 50 * 50,
                     rng.integers(y0, y1 + 1, ROWS) // 50 * 50, small, rng.integers(0, 10_000_001, ROWS),
                     rng.integers(-(10**15), 10**15, ROWS)], axis=1).astype(np.int64)


def _load(ds: Dataset, store: EmbeddedStore, rows: np.ndarray) -> TreeState:
    """The rows bulk-loaded into `store` as the ingest job lays them out (leaves of at
    most n_size rows); the tree over them."""
    ncols = len(ds.columns)
    store.create_dataset(ds)
    leaves, grids = {}, []
    for start in presplit(ds.domain(), ds.time_axis, ds.grid.l_time):
        inside = np.ones(len(rows), bool)
        for axis, (lo, hi) in enumerate(start.box):
            inside &= (rows[:, axis] >= lo) & (rows[:, axis] <= hi)
        values = rows[inside]
        done = split_rows(start, values, PartialAggregate.of_rows(values, ncols), ds.grid.n_size, ds.grid.n_size,
                          ds.ndim)
        for leaf, ix, agg in done.leaves:
            leaves[leaf] = agg
            if len(ix):
                grids.append((grid_prefix(leaf.grid_id), [b"%d" % i for i in ix.tolist()], values[ix]))
    store.put_grids(ds, grids)
    aggregates = {leaf.grid_id: agg for leaf, agg in leaves.items()}
    store.put_aggregates(ds, {**aggregates, **ancestor_aggregates(aggregates, ncols)})
    corners = [(leaf.grid_id, leaf.next_axis, *(v for lo_hi in leaf.box for v in lo_hi)) for leaf in leaves]
    return TreeState.build(ds, 1, None, corners, store)


def main() -> int:
    print(f"gridagg warmup: {warm()}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
