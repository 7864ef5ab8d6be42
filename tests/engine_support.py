"""Helpers for engine tests: opening an engine on a given store, and the brute-force
oracle every answer is checked against."""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from gridagg.aggregate import NULL, PartialAggregate
from gridagg.directory import GridDirectory
from gridagg.engine import GridEngine
from gridagg.query import QuerySpec
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


def oracle(rows: np.ndarray, spec: QuerySpec) -> tuple[dict, int]:
    """Brute-force answers (stored integers, Fraction for avg) and the selected count."""
    if len(rows):
        mask = np.ones(len(rows), dtype=bool)
        for axis, (lo, hi) in enumerate(spec.box):
            mask &= (rows[:, axis] >= lo) & (rows[:, axis] <= hi)
        sel = rows[mask]
    else:
        sel = rows
    out = {}
    n = len(sel)
    for a in spec.aggregates:
        if a.func == "count":
            out[a.label] = n
            continue
        col = [int(v) for v in sel[:, a.col]] if n else []
        if a.func == "sum":
            out[a.label] = sum(col)
        elif a.func == "min":
            out[a.label] = min(col) if col else None
        elif a.func == "max":
            out[a.label] = max(col) if col else None
        else:
            out[a.label] = Fraction(sum(col), n) if col else None
    return out, n


def check_answer(result, rows: np.ndarray) -> None:
    """The engine's answer equals brute force, and its statistics add up."""
    expected, n = oracle(rows, result.spec)
    assert result.values == expected
    if result.count is not None:
        assert result.count == n
        assert result.plan.rows_in_reused_grids + result.plan.rows_matched_by_scans == n
    plan = result.plan
    assert plan.reused_grids_after <= plan.reused_grids_before
    assert plan.scanned_grids_after <= plan.scanned_grids_before


def check_tree(engine: GridEngine, name: str, rows: np.ndarray) -> None:
    """Every leaf's and every ancestor's stored aggregate equals brute force over the
    rows in its box; leaves tile the rows; no leaf is over N_threshold unless all its
    rows are one point."""
    from gridagg.aggregate import PartialAggregate

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
