"""Choosing N_size for a dataset from the store's cost model (gridagg.tune.costmodel), the
data's size and a default workload: what a bulk load does for a dataset whose config
gives no n_size.

For each candidate N_size the tree a bulk load would build is built on a sample of the
rows (gridagg.write.split.split_rows on the pre-split leaves, N_size scaled by the sample's
share of the rows), and each question of the workload is walked over its leaves' data
bounds as the planner walks them: leaves inside are answered from aggregates (folded
into the highest grid inside), leaves cut are read. The model prices each question
(cut grids, rows in them scaled to the whole data, reused aggregates); the largest
candidate whose questions cost on average at most the model's median misfit (at least
NEAR) times the least is chosen: a finer tree loads slower and holds more leaves, for a
gain the model cannot tell from its own error (a calibration may predict a smaller
N_size faster than a larger one by less than its median misfit).

The default workload is shaped after the questions a dashboard asks of a sensor archive
(the bench's paper boxes and dashboard, and the families of its held-out mode), over any
dataset's dimensions:
- ten boxes of one twenty-first of the time span (the paper's 360 days of 21 years) at
  spread positions, every other dimension cut to its middle so that a box selects about
  1% of the rows (the paper's fixed ranges);
- one such time window alone (a year of a twenty-year archive), and windows of about a
  day and a month;
- all the time, two other dimensions each cut to their middle half (value ranges);
- all the time, every other dimension cut to its middle 80% (a polygon over most
  stations, as a box);
- around rows of the sample, drawn by a fixed seed: boxes of a few dimensions between
  quantiles over windows of a month to years; boxes over longitude and latitude from a
  station's surroundings to a continent, over windows of days to all the time;
- the whole domain.
A dataset without a time dimension takes its first dimension in time's place; one
without longitude and latitude, its two first other dimensions in their place.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gridagg.model.aggregate import PartialAggregate
from gridagg.model.grid import presplit
from gridagg.model.schema import Dataset
from gridagg.tune.costmodel import CostModel
from gridagg.write.split import split_rows

CANDIDATES = (250, 500, 1000, 2000, 4000, 8000, 16000)
SAMPLE_ROWS = 200_000  # rows a choice is made on (a uniform sample of larger data)
MIN_ROWS = 100_000  # fewer rows keep the default: they hardly fill a few leaves of any candidate
MIN_SCALED = 8  # a candidate's leaves must hold at least this many sample rows to be judged
NEAR = 1.05  # a smaller N_size is chosen only if predicted at least this much faster than a larger one


@dataclass
class Choice:
    """The chosen N_size, the mean predicted milliseconds per question of each candidate
    judged, the factor `near` within which a larger N_size was kept, and what it rests on."""

    n_size: int
    store: str
    rows: int
    questions: int
    predicted: dict[int, float]
    near: float = NEAR

    def why(self) -> str:
        """One line for people: what was chosen and why (stored with the dataset)."""
        others = ", ".join(f"{n}: {ms:.2f}" for n, ms in sorted(self.predicted.items()))
        return (f"chosen by gridagg for the {self.store} store's cost model, {self.rows:,} rows and the default "
                f"workload ({self.questions} questions): predicted ms per question by n_size {others} "
                f"(the largest within {self.near - 1:.0%} of the least: the model's median misfit, at least "
                f"{NEAR - 1:.0%})")


def default_workload(ds: Dataset, sample: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
    """The default workload's questions as (lo, hi) boxes of stored integers over ds's
    dimensions, from `sample` ((m, ndim) stored values of the dimensions)."""
    ndim = ds.ndim
    t = ds.time_axis if ds.time_axis is not None else 0
    others = [d for d in range(ndim) if d != t]
    dom = np.array(ds.domain(), dtype=np.int64)
    t_lo, t_hi = int(sample[:, t].min()), int(sample[:, t].max())
    window = max(1, (t_hi - t_lo) // 21)

    def middle(d: int, share: float) -> tuple[int, int]:
        q = (1 - share) / 2
        return int(np.quantile(sample[:, d], q)), int(np.quantile(sample[:, d], 1 - q))

    def box(t_range=None, ranges=None):
        lo, hi = dom[:, 0].copy(), dom[:, 1].copy()
        if t_range is not None:
            lo[t], hi[t] = t_range
        for d, (a, b) in (ranges or {}).items():
            lo[d], hi[d] = a, b
        return lo, hi

    out = []
    share = (0.01 * 21) ** (1 / len(others)) if others else 1.0
    paper = {d: middle(d, min(share, 1.0)) for d in others}
    for k in range(10):
        start = t_lo + (t_hi - t_lo - window) * k // 9
        out.append(box((start, start + window), paper))
    mid = t_lo + (t_hi - t_lo - window) // 2
    for span in (window, max(1, window // 12), max(1, window // 365)):  # a year, a month, a day
        out.append(box((mid, mid + span)))
    if len(others) >= 2:
        out.append(box(None, {d: middle(d, 0.5) for d in others[:2]}))
    if others:
        out.append(box(None, {d: middle(d, 0.8) for d in others}))
    out += _around_rows(ds, sample, box, t, others, window)
    out.append(box())
    return out


ROW_QUESTIONS = 8  # questions of each kind drawn around the sample's rows


def _around_rows(ds: Dataset, sample: np.ndarray, box, t: int, others: list[int], window: int) -> list:
    """Boxes around rows of `sample`, drawn by a fixed seed (the same choice every time):
    a few dimensions between quantiles, and longitude and latitude (else the two first
    other dimensions) at sizes from a station's surroundings to a continent's share of
    their spread, each over a window of time of its own."""
    if not others or not len(sample):
        return []
    rng = np.random.default_rng(20_240_601)
    position = list(ds.lonlat_axes) if ds.lonlat_axes is not None else others[:2]
    spread = {d: max(1, int(sample[:, d].max()) - int(sample[:, d].min())) for d in position}
    quantiles = {d: np.quantile(sample[:, d], np.linspace(0, 1, 21)) for d in others}
    out = []
    for _ in range(ROW_QUESTIONS):
        row = sample[rng.integers(len(sample))]
        span = int(window * np.exp(rng.uniform(np.log(1 / 12), np.log(10))))
        start = int(row[t]) - int(rng.integers(0, span + 1))
        picked = rng.choice(others, size=min(len(others), int(rng.integers(1, 4))), replace=False)
        ranges = {}
        for d in picked.tolist():
            a, b = sorted(rng.choice(21, 2, replace=False))
            ranges[d] = (min(int(quantiles[d][a]), int(row[d])), max(int(quantiles[d][b]), int(row[d])))
        out.append(box((start, start + span), ranges))
        share = np.exp(rng.uniform(np.log(0.005), np.log(0.4)))  # of each position dimension's spread
        span = int(window * np.exp(rng.uniform(np.log(1 / 365), np.log(21))))
        start = int(row[t]) - int(rng.integers(0, span + 1))
        out.append(box((start, start + span), {d: (int(row[d]) - int(share * spread[d] / 2),
                                                   int(row[d]) + int(share * spread[d] / 2)) for d in position}))
    return out


def estimate(ds: Dataset, sample: np.ndarray, total_rows: int, n_size: int,
             boxes: list[tuple[np.ndarray, np.ndarray]]) -> list[tuple[int, float, int]] | None:
    """(cut grids, rows in them, reused aggregates) of each box on the tree a bulk load of
    `total_rows` rows like `sample` ((m, ndim) stored values) would build at `n_size`;
    None when the sample is too small to judge leaves that size."""
    m = len(sample)
    scaled = n_size * m / total_rows if total_rows > m else n_size
    if scaled < MIN_SCALED:
        return None
    limit = max(1, int(round(scaled)))
    weight = total_rows / m if total_rows > m else 1.0
    ndim = ds.ndim
    # The pre-split leaves differ in time alone: each one's rows are a run of the sample
    # ordered by time (filtering the whole sample per leaf took a large share of a choice).
    t = ds.time_axis if ds.time_axis is not None else 0
    by_time = sample[np.argsort(sample[:, t], kind="stable")]
    times = by_time[:, t]
    ids, los, his, counts = [], [], [], []
    for top in presplit(ds.domain(), ds.time_axis, ds.grid.l_time):
        t_lo, t_hi = top.box[t]
        a, b = np.searchsorted(times, t_lo, "left"), np.searchsorted(times, t_hi, "right")
        if a == b:
            continue
        rows = by_time[a:b]
        split = split_rows(top, rows, PartialAggregate.of_rows(rows, ndim), limit, limit, ndim, aggregates=False)
        for leaf, ix, _ in split.leaves:
            ids.append(leaf.grid_id)
            los.append(rows[ix].min(axis=0))
            his.append(rows[ix].max(axis=0))
            counts.append(len(ix) * weight)
    l_lo, l_hi, l_count = np.array(los), np.array(his), np.array(counts)
    # Every grid from the root down to the leaves, with its data bounds (the union of
    # its leaves'): the walk stops at the highest grid inside a box.
    prefixes = np.array([g[:k] for g in ids for k in range(1, len(g) + 1)])
    leaf_of = np.repeat(np.arange(len(ids)), [len(g) for g in ids])
    names, grid_of = np.unique(prefixes, return_inverse=True)
    order = np.argsort(grid_of, kind="stable")
    starts = np.flatnonzero(np.r_[True, np.diff(grid_of[order]) > 0])
    g_lo = np.minimum.reduceat(l_lo[leaf_of[order]], starts)
    g_hi = np.maximum.reduceat(l_hi[leaf_of[order]], starts)
    up = np.array([g[:-1] for g in names.tolist()])
    at = np.minimum(np.searchsorted(names, up), len(names) - 1)
    parent = np.where(names[at] == up, at, -1)
    out = []
    for lo, hi in boxes:
        meets = np.all((l_lo <= hi) & (l_hi >= lo), axis=1)
        inside_leaf = np.all((l_lo >= lo) & (l_hi <= hi), axis=1)
        cut = meets & ~inside_leaf
        inside = np.all((g_lo >= lo) & (g_hi <= hi), axis=1)
        top_inside = inside & ~np.where(parent >= 0, inside[np.maximum(parent, 0)], False)
        out.append((int(cut.sum()), float(l_count[cut].sum()), int(top_inside.sum())))
    return out


def choose(ds: Dataset, model: CostModel, sample: np.ndarray, total_rows: int,
           candidates=CANDIDATES) -> Choice:
    """The N_size `pick` takes from the model's prices of the default workload on each
    candidate's tree of ds's data (`sample`: (m, ndim) stored values of the dimensions,
    a uniform sample of `total_rows` rows), within the model's misfit of the least."""
    boxes = default_workload(ds, sample)
    predicted = {}
    for n in candidates:
        found = estimate(ds, sample, total_rows, n, boxes)
        if found is not None:
            predicted[n] = float(np.mean([model.predict(g, r, u) for g, r, u in found]))
    if not predicted:  # data too large for the sample to judge any: the largest leaves
        predicted = {max(candidates): float("nan")}
    near = max(NEAR, model.spread)
    return Choice(pick(predicted, near), model.store, total_rows, len(boxes), predicted, near)


def pick(predicted: dict[int, float], near: float = NEAR) -> int:
    """Of {N_size: predicted ms per question}, the largest N_size predicted at most
    `near` times the least (a lone candidate, judged or not, is its own pick)."""
    least = min(predicted.values())
    return max(n for n, ms in predicted.items() if not ms > least * near)
