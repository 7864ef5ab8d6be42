"""Helpers for engine tests: opening an engine on a given store, its answers against the
oracle (tests/oracle.py), its tree against brute force."""

from __future__ import annotations

import random

import numpy as np
import oracle

from gridagg.directory import GridDirectory
from gridagg.engine import GridEngine
from gridagg.model.aggregate import NULL, PartialAggregate
from gridagg.store import open_store
from gridagg.store.embedded import EmbeddedStore


def column_aggregate(rows: np.ndarray, columns, ncols: int) -> PartialAggregate:
    """The aggregate of `rows` (an (m, ncols) int64 array) over `columns`, brute force:
    count of rows, then per column values present (NULL = -2**63 is absent), sum, min, max."""
    agg = PartialAggregate.empty(ncols)
    agg.count = len(rows)
    for c in columns:
        vals = [int(v) for v in rows[:, c] if v != NULL]
        agg.present[c], agg.sums[c] = len(vals), sum(vals)
        agg.mins[c], agg.maxs[c] = (min(vals), max(vals)) if vals else (None, None)
    return agg


def open_engine(settings, store: str, tmp_path) -> GridEngine:
    """A GridEngine on the real PostgreSQL and the named store ("embedded" keeps its
    LMDB files under tmp_path)."""
    if store == "embedded":
        cells = EmbeddedStore(tmp_path)
    else:
        cells = open_store(settings.with_(store=store))
    return GridEngine(GridDirectory(settings.effective_pg_url), cells)


def check_query(engine: GridEngine, name: str, table: oracle.Table, rows: list[dict], request: dict):
    """The engine's answer to a request as a user writes it ({"where", "aggregates",
    "region"}) equals the oracle's over rows (as table.rows gives them), as the HTTP API
    writes it (QueryResult.to_json) and exactly in stored units; its plan adds up.
    Returns the QueryResult."""
    result = engine.query(name, request.get("where"), request["aggregates"], request.get("region"))
    want = oracle.query(table, rows, request)
    oracle.check_answer(result.to_json(engine.dataset(name)), want, request)
    oracle.check_stored(table, result.values, want["results"], request)
    plan = result.plan
    assert plan.reused_grids_after <= plan.reused_grids_before
    assert plan.scanned_grids_after <= plan.scanned_grids_before
    return result


def from_position_rollup(ask, rollups, answered=lambda result: result.plan.rollup_positions is not None):
    """ask() again until its answer comes from the position rollup, which a background
    thread makes meanwhile (rollups: the engine's gridagg.query.rollups.PositionRollups; up to
    a refinement per try); returns that answer."""
    for _ in range(6):
        result = ask()
        if answered(result):
            return result
        rollups.settle()
    raise AssertionError("the position rollup never answered")


def check_series(engine: GridEngine, name: str, table: oracle.Table, rows: list[dict], request: dict):
    """As check_query, for a series request (a query's fields and step, window, start,
    end). Returns the SeriesResult."""
    result = engine.series(name, request.get("where"), request["aggregates"], request["step"],
                           request.get("window"), request.get("start"), request.get("end"), request.get("region"))
    oracle.check_series(result.to_json(engine.dataset(name)), oracle.series(table, rows, request), request)
    return result


def check_random_boxes(engine: GridEngine, name: str, table: oracle.Table, rows: list[dict], aggregates: list[str],
                       n: int, seed: int) -> None:
    """check_query of n random boxes as a user writes them: each dimension, half the time,
    from one of the rows' values to another (decimal text, ISO 8601 times), an end left
    open now and then."""
    rng = random.Random(seed)
    values = {d: sorted({r[d] for r in rows}) for d in table.dimensions}
    for _ in range(n):
        where = {}
        for d in table.dimensions:
            if rng.random() < 0.5:
                continue
            ends = sorted(rng.choice(values[d]) for _ in range(2))
            where[d] = [None if rng.random() < 0.1 else table.write(d, v) for v in ends]
        check_query(engine, name, table, rows, {"where": where, "aggregates": aggregates})


def check_tree(engine: GridEngine, name: str, rows: np.ndarray) -> None:
    """Every leaf's and every ancestor's stored aggregate equals brute force over the
    rows in its box; leaves tile the rows; no leaf is over N_threshold unless all its
    rows are one point."""
    from gridagg.model.aggregate import PartialAggregate

    ds = engine.dataset(name)
    ncols = len(ds.columns)
    leaves = engine.leaves(name)
    covered = 0
    for grid, agg in leaves:
        mask = np.ones(len(rows), dtype=bool)
        for axis, (lo, hi) in enumerate(grid.box):
            mask &= (rows[:, axis] >= lo) & (rows[:, axis] <= hi)
        expected = PartialAggregate.of_rows(rows[mask], ncols)
        assert agg == expected, f"leaf {grid.grid_id}"
        covered += int(mask.sum())
        if agg.count > ds.grid.n_threshold:
            assert all(lo == hi for lo, hi in zip(agg.mins[: ds.ndim], agg.maxs[: ds.ndim]))
    assert covered == len(rows)
    # Ancestors: each is the merge of its leaves.
    by_ancestor: dict[str, PartialAggregate] = {}
    for grid, agg in leaves:
        for i in range(1, len(grid.grid_id)):
            by_ancestor.setdefault(grid.grid_id[:i], PartialAggregate.empty(ncols)).merge(agg)
    stored = engine.store.get_aggregates(ds, list(by_ancestor))
    for gid, expected in by_ancestor.items():
        if expected.count:
            assert stored[gid] == expected, f"ancestor {gid}"
