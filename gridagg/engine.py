"""The grid engine: the paper's Algorithms 1 (insert), 2 (split) and 3 (query).

GridEngine ties the grid directory (PostgreSQL) to a cell store (embedded or HBase).
Writers of one dataset take its writer lock, so concurrent inserts from several
processes never lose an update and a grid is never split twice.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field

import numpy as np

from .aggregate import PartialAggregate
from .directory import GridDirectory
from .errors import InvalidInput, WorkLimitExceeded
from .grid import (
    Grid,
    ancestors,
    children,
    choose_cut,
    collapse_siblings,
    element_of,
    grid_prefix,
    prefix_range,
    presplit,
    row_key,
)
from .query import QueryPlan, QueryResult, QuerySpec
from .schema import Dataset
from .store import CellStore, RangeCondition


@dataclass
class InsertResult:
    """stored: rows written; duplicates: rows whose element ID was already stored (not
    written again); rejected: (row index, field, reason) of rows refused; splits: grids
    split by this insert."""

    stored: int = 0
    duplicates: int = 0
    rejected: list[tuple[int, str | None, str]] = field(default_factory=list)
    splits: int = 0


class GridEngine:
    """directory: a GridDirectory; store: a CellStore. Both stay owned by the caller."""

    def __init__(self, directory: GridDirectory, store: CellStore, max_scan_rows: int | None = None):
        self.directory = directory
        self.store = store
        self.max_scan_rows = max_scan_rows
        self._datasets: dict[str, Dataset] = {}

    # -- datasets ---------------------------------------------------------------------

    def create_dataset(self, ds: Dataset) -> Dataset:
        """Create a dataset: its pre-split grid table and its store tables."""
        self.store.create_dataset(ds)
        leaves = presplit(ds.domain(), ds.time_axis, ds.grid.l_time)
        self.directory.create_dataset(ds, leaves)
        return ds

    def drop_dataset(self, name: str) -> None:
        self.directory.drop_dataset(name)
        self.store.drop_dataset(name)
        self._datasets.pop(name, None)

    def dataset(self, name: str) -> Dataset:
        """The definition of a dataset (cached: definitions never change)."""
        ds = self._datasets.get(name)
        if ds is None:
            ds = self._datasets[name] = self.directory.dataset(name)
        return ds

    # -- Algorithm 1: insert -----------------------------------------------------------

    def insert(self, name: str, rows: list[dict]) -> InsertResult:
        """Insert rows given as {column: value} (plus an optional "id", the element ID;
        without one a random ID is made). Invalid rows are refused one by one with a
        reason and nothing of them is written; valid rows are stored."""
        ds = self.dataset(name)
        result = InsertResult()
        ids: list[bytes] = []
        encoded: list[list[int]] = []
        for i, row in enumerate(rows):
            try:
                values = ds.encode_row(row)
                eid = _element_id(row.get("id"))
            except InvalidInput as exc:
                result.rejected.append((i, exc.field, exc.detail))
                continue
            ids.append(eid)
            encoded.append(values)
        if encoded:
            stored = self.insert_encoded(ds, ids, np.array(encoded, dtype=np.int64))
            result.stored, result.duplicates, result.splits = stored.stored, stored.duplicates, stored.splits
        return result

    def insert_encoded(self, ds: Dataset, element_ids: list[bytes], values: np.ndarray) -> InsertResult:
        """Insert already encoded rows (an (m, ncols) int64 array inside the domain)."""
        result = InsertResult()
        with self.directory.writer_lock(ds.name):
            leaf_of = self.directory.locate(ds, values[:, : ds.ndim])
            keys = [row_key(g, e) for g, e in zip(leaf_of, element_ids)]
            # A key seen twice in the batch, or already stored, is a duplicate element.
            first: dict[bytes, int] = {}
            for i, k in enumerate(keys):
                first.setdefault(k, i)
            existing = self.store.existing_keys(ds, list(first))
            keep = [i for k, i in first.items() if k not in existing]
            result.duplicates = len(keys) - len(keep)
            if not keep:
                return result
            values = values[keep]
            keys = [keys[i] for i in keep]
            leaf_of = [leaf_of[i] for i in keep]
            self.store.put_rows(ds, keys, values)
            result.stored = len(keep)

            # Aggregate deltas of each touched leaf and of all its ancestors.
            by_leaf: dict[str, list[int]] = {}
            for i, g in enumerate(leaf_of):
                by_leaf.setdefault(g, []).append(i)
            ncols = len(ds.columns)
            deltas: dict[str, PartialAggregate] = {}
            for g, idx in by_leaf.items():
                d = PartialAggregate.of_rows(values[idx], ncols)
                for a in [*ancestors(g), g]:
                    deltas.setdefault(a, PartialAggregate.empty(ncols)).merge(d)
            current = self.store.get_aggregates(ds, list(deltas))
            merged = {g: current.get(g, PartialAggregate.empty(ncols)).merge(d) for g, d in deltas.items()}
            self.store.put_aggregates(ds, merged)

            for g in by_leaf:
                if merged[g].count > ds.grid.n_threshold:
                    result.splits += self._split(ds, g, merged[g])
        return result

    # -- Algorithm 2: split ------------------------------------------------------------

    def _split(self, ds: Dataset, grid_id: str, agg: PartialAggregate) -> int:
        """Split leaf grid_id, recursing while a child holds more than N_size rows.
        Returns the number of grids split (0 when every row is the same point)."""
        grid = self.directory.grid(ds, grid_id)
        if choose_cut(grid.next_axis, agg.count, agg.sums, agg.mins, agg.maxs, ds.ndim) is None:
            return 0
        keys: list[bytes] = []
        parts: list[np.ndarray] = []
        for k, v in self.store.scan_rows(ds, *prefix_range(grid_prefix(grid_id))):
            keys.extend(k)
            parts.append(v)
        values = np.concatenate(parts) if parts else np.empty((0, len(ds.columns)), dtype=np.int64)

        new_aggs: dict[str, PartialAggregate] = {}
        final: list[tuple[Grid, np.ndarray]] = []
        splits = self._partition(ds, grid, np.arange(len(values)), values, agg, new_aggs, final)

        new_keys = [b""] * len(values)
        for leaf, idx in final:
            for i in idx:
                new_keys[i] = row_key(leaf.grid_id, element_of(keys[i]))
        # New rows and aggregates first, then the directory switch, then old rows go:
        # until the switch, readers see the old leaf and its rows, all still present.
        self.store.put_rows(ds, new_keys, values)
        self.store.put_aggregates(ds, new_aggs)
        self.directory.replace_leaf(ds, grid_id, [leaf for leaf, _ in final])
        self.store.delete_rows(ds, keys)
        return splits

    def _partition(self, ds, grid, idx, values, agg, new_aggs, final) -> int:
        cut = choose_cut(grid.next_axis, agg.count, agg.sums, agg.mins, agg.maxs, ds.ndim)
        if cut is None:
            final.append((grid, idx))
            return 0
        axis, at = cut
        ncols = len(ds.columns)
        lower_mask = values[idx, axis] <= at
        splits = 1
        for child, part in zip(children(grid, axis, at, ds.ndim), (idx[lower_mask], idx[~lower_mask])):
            child_agg = PartialAggregate.of_rows(values[part], ncols)
            new_aggs[child.grid_id] = child_agg
            if child_agg.count > ds.grid.n_size:
                splits += self._partition(ds, child, part, values, child_agg, new_aggs, final)
            else:
                final.append((child, part))
        return splits

    # -- Algorithm 3: query ------------------------------------------------------------

    def query(self, name: str, where: dict | None, aggregates: list[str]) -> QueryResult:
        """Aggregates over the rows inside a box; see QuerySpec.parse for the inputs."""
        ds = self.dataset(name)
        return self.run(ds, QuerySpec.parse(ds, where, aggregates))

    def run(self, ds: Dataset, spec: QuerySpec) -> QueryResult:
        started = time.perf_counter()
        pg0, kv0 = self.directory.round_trips(), self.store.round_trips()
        plan = QueryPlan()
        ncols = len(ds.columns)
        total = PartialAggregate.empty(ncols)
        count_known = True
        if not spec.empty:
            grids, plan.total_grids = self.directory.intersecting(ds, spec.box)
            inside = {g for g, full in grids if full}
            partial = [g for g, full in grids if not full]
            reused = collapse_siblings(inside)
            plan.reused_grids_before, plan.reused_grids_after = len(inside), len(reused)
            aggs = self.store.get_aggregates(ds, [*reused, *partial]) if (reused or partial) else {}
            for g in reused:
                if g in aggs:
                    total.merge(aggs[g])
            plan.rows_in_reused_grids = total.count
            plan.scanned_grids_before = len(partial)
            count_known = self._scan_partial(ds, spec, partial, aggs, total, plan)
        else:
            plan.total_grids = self.directory.leaf_count(ds.name)
        values = {a.label: a.value(total) for a in spec.aggregates}
        plan.round_trips = {
            "postgresql": self.directory.round_trips() - pg0,
            self.store.kind: self.store.round_trips() - kv0,
        }
        plan.elapsed_ms = round((time.perf_counter() - started) * 1000, 3)
        return QueryResult(spec, values, total.count if count_known else None, plan)

    def _scan_partial(self, ds, spec, partial, aggs, total, plan) -> bool:
        """Scan the partially overlapping grids into total. Returns whether total.count
        is exact (it is not when min/max-only queries skipped grids with rows)."""
        ncols = len(ds.columns)
        minmax_only = all(a.func in ("min", "max") for a in spec.aggregates)
        candidates = [g for g in partial if g in aggs and aggs[g].count > 0]
        if minmax_only:
            # 4.6.2: visit grids likely to hold the answer first, so later ones skip.
            a0 = spec.aggregates[0]
            if a0.func == "min":
                candidates.sort(key=lambda g: aggs[g].mins[a0.col])
            else:
                candidates.sort(key=lambda g: -aggs[g].maxs[a0.col])
        else:
            need = sum(aggs[g].count for g in candidates)
            if self.max_scan_rows is not None and need > self.max_scan_rows:
                raise WorkLimitExceeded(
                    f"the query would scan {need} rows, more than the limit of {self.max_scan_rows}; "
                    "narrow the box",
                )
        where = [RangeCondition(i, lo, hi) for i, (lo, hi) in enumerate(spec.box) if (lo, hi) != ds.domain()[i]]
        skipped_with_rows = False
        for g in candidates:
            stored = aggs[g]
            if minmax_only and total.count and all(_cannot_improve(a, stored, total) for a in spec.aggregates):
                skipped_with_rows = True
                continue
            plan.scanned_grids_after += 1
            plan.rows_in_scanned_grids += stored.count
            for _, rows in self.store.scan_rows(ds, *prefix_range(grid_prefix(g)), where):
                if len(rows):
                    plan.rows_matched_by_scans += len(rows)
                    total.merge(PartialAggregate.of_rows(rows, ncols))
        return not skipped_with_rows

    # -- inspection ---------------------------------------------------------------------

    def leaves(self, name: str) -> list[tuple[Grid, PartialAggregate]]:
        """Every leaf grid with its stored aggregate."""
        ds = self.dataset(name)
        grids = self.directory.leaves(ds)
        aggs = self.store.get_aggregates(ds, [g.grid_id for g in grids])
        ncols = len(ds.columns)
        return [(g, aggs.get(g.grid_id, PartialAggregate.empty(ncols))) for g in grids]


def _cannot_improve(a, stored: PartialAggregate, best: PartialAggregate) -> bool:
    if a.func == "min":
        return stored.mins[a.col] >= best.mins[a.col]
    return stored.maxs[a.col] <= best.maxs[a.col]


def _element_id(given: object) -> bytes:
    if given is None:
        return os.urandom(8).hex().encode()
    if not isinstance(given, (str, int)) or isinstance(given, bool) or str(given) == "":
        raise InvalidInput("id must be a non-empty string or integer", field="id")
    return str(given).encode()
