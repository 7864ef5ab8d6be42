"""Query execution the HTTP layer adds on top of the engine: polygon regions and time
series. Both follow the engine's Algorithm 3 with a different notion of "fully inside":

- a leaf is reusable when it lies inside the query box, its lon/lat face lies inside
  the polygon (if any), and (for series) its time range falls in one bucket; reusable
  leaves are answered from their stored partial aggregates, sibling pairs folded into
  their parent (4.6.1) within each bucket;
- every other leaf that touches the box and the polygon is scanned in bounded batches:
  the store filters the box, the polygon test is vectorized here, and series rows are
  grouped by bucket with numpy;
- leaves outside the polygon are skipped.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable, Hashable

import numpy as np

from gridagg.aggregate import PartialAggregate
from gridagg.engine import GridEngine
from gridagg.errors import InvalidInput, WorkLimitExceeded
from gridagg.grid import Box, Grid, collapse_siblings, grid_prefix, prefix_range
from gridagg.query import QueryPlan, QuerySpec
from gridagg.schema import Dataset, parse_duration
from gridagg.store import RangeCondition

from .regions import EDGE, INSIDE, OUTSIDE, Region


# --------------------------------------------------------------------------- evaluation


@dataclass
class Evaluation:
    plan: QueryPlan = field(default_factory=QueryPlan)
    inside_region: int = 0
    edge_region: int = 0
    outside_region: int = 0

    def plan_json(self, count: int | None, region: bool) -> dict:
        out = self.plan.to_json(count)
        if region:
            out["region"] = {"leaves_inside": self.inside_region, "leaves_on_edge": self.edge_region,
                             "leaves_outside": self.outside_region}
        return out


def evaluate(
    engine: GridEngine,
    ds: Dataset,
    box: Box,
    region: Region | None,
    reuse_key: Callable[[Grid], Hashable | None],
    on_aggregate: Callable[[Hashable, PartialAggregate], None],
    on_rows: Callable[[np.ndarray], None],
    max_scan_rows: int | None,
    max_grids: int | None = None,
) -> Evaluation:
    """Run Algorithm 3 over box (stored units) and region. reuse_key(leaf) gives the
    group a fully selected leaf's aggregate belongs to (None: scan it instead);
    on_aggregate(key, agg) receives reused aggregates, on_rows(rows) selected raw rows."""
    started = time.perf_counter()
    pg0, kv0 = engine.directory.round_trips(), engine.store.round_trips()
    ev = Evaluation()
    plan = ev.plan
    if any(lo > hi for lo, hi in box):
        plan.total_grids = engine.directory.leaf_count(ds.name)
        return _finish(ev, engine, pg0, kv0, started)
    touched, plan.total_grids = engine.directory.intersecting(ds, box)
    leaves = [g for g, _ in touched]
    if max_grids is not None and len(leaves) > max_grids:
        raise WorkLimitExceeded(
            f"the query touches {len(leaves)} grids, more than the limit of {max_grids}; narrow it")
    groups: dict[Hashable, set[str]] = {}
    scan: list[str] = []
    for leaf in leaves:
        state = INSIDE if region is None else region.classify(leaf.box)
        if region is not None:
            if state == INSIDE:
                ev.inside_region += 1
            elif state == EDGE:
                ev.edge_region += 1
            else:
                ev.outside_region += 1
        if state == OUTSIDE:
            continue
        key = reuse_key(leaf) if (state == INSIDE and leaf.contains_box(box)) else None
        if key is None:
            scan.append(leaf.grid_id)
        else:
            groups.setdefault(key, set()).add(leaf.grid_id)
    plan.reused_grids_before = sum(len(v) for v in groups.values())
    reused = {key: collapse_siblings(ids) for key, ids in groups.items()}
    plan.reused_grids_after = sum(len(v) for v in reused.values())
    wanted = [g for ids in reused.values() for g in ids] + scan
    aggs = engine.store.get_aggregates(ds, wanted) if wanted else {}
    for key, ids in reused.items():
        for g in ids:
            if g in aggs and aggs[g].count:
                plan.rows_in_reused_grids += aggs[g].count
                on_aggregate(key, aggs[g])
    plan.scanned_grids_before = len(scan)
    candidates = [g for g in scan if g in aggs and aggs[g].count > 0]
    need = sum(aggs[g].count for g in candidates)
    if max_scan_rows is not None and need > max_scan_rows:
        raise WorkLimitExceeded(
            f"the query would scan {need} rows, more than the limit of {max_scan_rows}; narrow it")
    domain = ds.domain()
    where = [RangeCondition(i, lo, hi) for i, (lo, hi) in enumerate(box) if (lo, hi) != domain[i]]
    for g in candidates:
        plan.scanned_grids_after += 1
        plan.rows_in_scanned_grids += aggs[g].count
        for _, rows in engine.store.scan_rows(ds, *prefix_range(grid_prefix(g)), where, with_keys=False):
            if len(rows) and region is not None:
                rows = rows[region.mask(rows)]
            if len(rows):
                plan.rows_matched_by_scans += len(rows)
                on_rows(rows)
        engine.check_deadline(started)
    return _finish(ev, engine, pg0, kv0, started)


def _finish(ev: Evaluation, engine: GridEngine, pg0: int, kv0: int, started: float) -> Evaluation:
    ev.plan.round_trips = {
        "postgresql": engine.directory.round_trips() - pg0,
        engine.store.kind: engine.store.round_trips() - kv0,
    }
    ev.plan.elapsed_ms = round((time.perf_counter() - started) * 1000, 3)
    return ev


# --------------------------------------------------------------------------- answers


def user_values(ds: Dataset, aggregates, agg: PartialAggregate) -> dict:
    return decode_values(ds, aggregates, {a.label: a.value(agg) for a in aggregates})


def decode_values(ds: Dataset, aggregates, values: dict) -> dict:
    """Stored-integer answers in user units (like QueryResult.to_user), refusing with a
    400 the one answer that has none: a sum of timestamps beyond the calendar."""
    out = {}
    for a in aggregates:
        v = values[a.label]
        if a.func == "count":
            out[a.label] = v
            continue
        try:
            out[a.label] = ds.columns[a.col].decode(v)
        except (OverflowError, ValueError):
            raise InvalidInput(f"{a.label}: the answer is not a representable timestamp; "
                               "sum over a time column is rarely meaningful", field="aggregates") from None
    return out


def region_query(engine: GridEngine, ds: Dataset, spec: QuerySpec, region: Region,
                 max_scan_rows: int | None, max_grids: int | None) -> dict:
    """A box-and-polygon query: {"results", "count", "plan"}."""
    ncols = len(ds.columns)
    total = PartialAggregate.empty(ncols)
    ev = evaluate(
        engine, ds, region.narrow(spec.box), region,
        reuse_key=lambda leaf: 0,
        on_aggregate=lambda _key, agg: total.merge(agg),
        on_rows=lambda rows: total.merge(PartialAggregate.of_rows(rows, ncols)),
        max_scan_rows=max_scan_rows, max_grids=max_grids,
    )
    return {"results": user_values(ds, spec.aggregates, total), "count": total.count,
            "plan": ev.plan_json(total.count, region=True)}


# --------------------------------------------------------------------------- series


def group_by_bucket(rows: np.ndarray, buckets: np.ndarray, ncols: int) -> list[tuple[int, PartialAggregate]]:
    """Exact partial aggregates of rows grouped by their bucket number, vectorized."""
    order = np.argsort(buckets, kind="stable")
    rows, buckets = rows[order], buckets[order]
    keys, starts = np.unique(buckets, return_index=True)
    counts = np.diff(np.append(starts, len(rows)))
    mins = np.minimum.reduceat(rows, starts, axis=0)
    maxs = np.maximum.reduceat(rows, starts, axis=0)
    # Exact sums: high and low 32 bits summed apart stay far inside int64.
    high = np.add.reduceat(rows >> 32, starts, axis=0)
    low = np.add.reduceat(rows & 0xFFFFFFFF, starts, axis=0)
    out = []
    for i, k in enumerate(keys.tolist()):
        sums = [(int(h) << 32) + int(lo) for h, lo in zip(high[i], low[i])]
        out.append((k, PartialAggregate(int(counts[i]), sums, [int(v) for v in mins[i]],
                                        [int(v) for v in maxs[i]])))
    return out


def sliding(buckets: list[PartialAggregate], w: int) -> list[PartialAggregate]:
    """Merges of every run of w consecutive buckets, with O(1) merges per window
    (blocks of w: a window is the suffix of one block plus the prefix of the next)."""
    nb = len(buckets)
    if w == 1:
        return list(buckets)
    prefix: list[PartialAggregate] = [None] * nb  # type: ignore[list-item]
    suffix: list[PartialAggregate] = [None] * nb  # type: ignore[list-item]
    ncols = len(buckets[0].sums)
    for b0 in range(0, nb, w):
        b1 = min(b0 + w, nb)
        acc = PartialAggregate.empty(ncols)
        for k in range(b0, b1):
            acc = acc.copy().merge(buckets[k])
            prefix[k] = acc
        acc = PartialAggregate.empty(ncols)
        for k in range(b1 - 1, b0 - 1, -1):
            acc = acc.copy().merge(buckets[k])
            suffix[k] = acc
    out = []
    for a in range(0, nb - w + 1):
        b = a + w - 1
        out.append(suffix[a] if a % w == 0 else suffix[a].copy().merge(prefix[b]))
    return out


def series_query(engine: GridEngine, ds: Dataset, body: dict, region: Region | None,
                 max_scan_rows: int | None, max_grids: int | None, max_points: int) -> dict:
    """Bucketed or moving-window aggregates over the time dimension.

    Point i stands for the bucket [start + i*step, start + (i+1)*step) and aggregates the
    rows of the window of `window` seconds ending with that bucket (window defaults to
    step: plain buckets). Points run from start to the bucket holding end."""
    t = ds.time_axis
    if t is None:
        raise InvalidInput(f"dataset {ds.name} has no time dimension", field="step")
    tcol = ds.dimensions[t]
    if "step" not in body:
        raise InvalidInput("step is required, e.g. '1d'", field="step")
    step = parse_duration(body["step"], "step")
    window = parse_duration(body["window"], "window") if body.get("window") is not None else step
    if window % step:
        raise InvalidInput(f"window ({window}s) must be a whole number of steps ({step}s)", field="window")
    w = window // step
    spec = QuerySpec.parse(ds, body.get("where"), body.get("aggregates"))
    tlo, thi = spec.box[t]
    start = tcol.encode_bound(body["start"], upper=False) if body.get("start") is not None else tlo
    end = tcol.encode_bound(body["end"], upper=True) if body.get("end") is not None else thi
    start = max(start, tcol.enc_lo) if body.get("start") is None else start
    end = min(end, tcol.enc_hi) if body.get("end") is None else end
    if start > end:
        raise InvalidInput("start is after end", field="start")
    n = (end - start) // step + 1
    if n > max_points:
        raise InvalidInput(f"the series would have {n} points, more than the limit of {max_points}; "
                           "use a larger step or a shorter span", field="step")
    nb = n + w - 1
    base = start - (w - 1) * step
    box = list(spec.box)
    box[t] = (max(tlo, base), min(thi, base + nb * step - 1))
    box = tuple(box)
    if region is not None:
        box = region.narrow(box)
    ncols = len(ds.columns)
    buckets = [PartialAggregate.empty(ncols) for _ in range(nb)]

    def reuse_key(leaf: Grid):
        lo, hi = leaf.box[t]
        k = (lo - base) // step
        return k if k == (hi - base) // step and 0 <= k < nb else None

    def on_aggregate(k, agg):
        buckets[k].merge(agg)

    def on_rows(rows):
        for k, agg in group_by_bucket(rows, (rows[:, t] - base) // step, ncols):
            buckets[k].merge(agg)

    ev = evaluate(engine, ds, box, region, reuse_key, on_aggregate, on_rows, max_scan_rows, max_grids)
    points = []
    for i, agg in enumerate(sliding(buckets, w)):
        lo = base + i * step  # window start; the point's own bucket starts at start + i*step
        points.append({
            "time": tcol.decode(start + i * step),
            "window": [tcol.decode(lo), tcol.decode(start + (i + 1) * step - 1)],
            "count": agg.count,
            "results": user_values(ds, spec.aggregates, agg),
        })
    selected = sum(b.count for b in buckets)
    plan = ev.plan_json(selected, region=region is not None)
    plan["buckets"] = nb
    return {"step": step, "window": window, "points": points, "plan": plan}
