"""A calibration of a store's cost model (gridagg.tune.costmodel) on this machine:
`gridagg tune --calibrate`, and `gridagg services up` once when no model is stored.

Two scratch datasets of the same random rows (3 dimensions, one measure), one with small
leaves and one with large, so that cut grids and rows read vary apart; random boxes of
many sizes over both, each timed warm several times (the median kept), and the model
fitted to (cut grids, rows in them, reused aggregates, ms) of every box. The scratch
datasets are dropped afterwards.

A cut grid costs more once the data outgrows the CPU's caches, and a JVM still warming
up prices rows too dear: so both stores are calibrated on 1,000,000 rows, where a model
fitted on 100,000 rows misjudged a large tree's cut grids and the trees tuned with it
read many more leaves.
"""

from __future__ import annotations

import random
import statistics
import time
from datetime import datetime, timezone

import numpy as np

from gridagg.model.errors import UnknownDataset
from gridagg.model.schema import Column, Dataset, GridParams
from gridagg.tune import costmodel

ROWS = {"embedded": 1_000_000, "hbase": 1_000_000}  # rows of each scratch dataset, by store
N_SIZES = (50, 2500)  # leaves of about 30-50 and 1,500-2,500 rows: cut grids and rows move apart
BOXES = 40  # per dataset
REPEAT = 5  # timed runs per box (the median kept), after one warm-up run
SPAN = 1_000_000  # each dimension's domain: 0 .. SPAN
PREFIX = "gridagg_calibration_n"
# Rows per insert: each insert splits its full leaves once, so smaller batches split the
# small-leaf dataset's leaves over and over, and its inserts took several times longer.
BATCH = 100_000


def scratch_dataset(n_size: int, prefix: str = PREFIX) -> Dataset:
    """The calibration's dataset with leaves of at most about n_size rows."""
    dims = tuple(Column(name, lo=0, hi=SPAN) for name in ("x", "y", "z"))
    return Dataset(f"{prefix}{n_size}", dims, (Column("v", lo=0, hi=1000),), GridParams(n_size, 10 * n_size))


def rows(n: int, seed: int = 1) -> np.ndarray:
    """n random rows (x, y, z, v) as stored integers."""
    rng = np.random.default_rng(seed)
    return np.column_stack([rng.integers(0, SPAN + 1, (n, 3)), rng.integers(0, 1001, n)]).astype(np.int64)


def boxes(n: int = BOXES, seed: int = 2) -> list[dict]:
    """n `where` objects: each dimension a range of 5-95% of its domain."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        where = {}
        for name in ("x", "y", "z"):
            width = int(SPAN * rng.uniform(0.05, 0.95))
            lo = rng.randint(0, SPAN - width)
            where[name] = [lo, lo + width]
        out.append(where)
    return out


def calibrate(engine, nrows: int, progress=lambda message: None,
              prefix: str = PREFIX) -> costmodel.CostModel:
    """Measure and fit the cost model of the store of `engine` (a gridagg.engine.GridEngine)
    over scratch datasets of `nrows` rows (ROWS gives each store's) named `prefix` +
    N_size (progress(message) hears what happens); returns the model (not stored:
    costmodel.save does)."""
    samples = []
    for n_size in N_SIZES:
        ds = scratch_dataset(n_size, prefix)
        _drop(engine, ds.name)
        try:
            started = time.monotonic()
            load(engine, ds, rows(nrows))
            progress(f"{ds.name}: {nrows:,} rows loaded in {time.monotonic() - started:.1f} s")
            samples += timed(engine, ds.name, boxes())
            progress(f"{ds.name}: {BOXES} boxes timed {REPEAT} times each")
        finally:
            _drop(engine, ds.name)
    measured = datetime.now(timezone.utc).replace(microsecond=0).isoformat()
    return costmodel.fit(np.array(samples, dtype=float), engine.store.kind, measured)


def load(engine, ds: Dataset, values: np.ndarray) -> None:
    """Create dataset `ds` and insert `values` (stored integers) into it."""
    engine.create_dataset(ds)
    ids = [b"c%07d" % i for i in range(len(values))]
    for at in range(0, len(values), BATCH):
        engine.insert_encoded(ds, ids[at : at + BATCH], values[at : at + BATCH])


def timed(engine, name: str, wheres: list[dict]) -> list[tuple[int, int, int, float]]:
    """(cut grids, rows in them, reused aggregates, median ms) of the sum over each box of
    `wheres` on dataset `name`, timed warm REPEAT times."""
    out = []
    for where in wheres:
        answer = engine.query(name, where, ["sum:v", "count"])  # warm: tree, caches
        times = []
        for _ in range(REPEAT):
            t0 = time.perf_counter()
            engine.query(name, where, ["sum:v", "count"])
            times.append((time.perf_counter() - t0) * 1000)
        plan = answer.plan
        out.append((plan.scanned_grids_after, plan.rows_in_scanned_grids, plan.reused_grids_after,
                    statistics.median(times)))
    return out


def _drop(engine, name: str) -> None:
    try:
        engine.drop_dataset(name)
    except UnknownDataset:
        pass
