"""The grid engine: the paper's Algorithms 1 (insert), 2 (split) and 3 (query).

GridEngine ties the grid directory (PostgreSQL) to a cell store (embedded or HBase).

Concurrency and crashes:
- Writers of one dataset take its writer lock (a PostgreSQL advisory lock), so
  concurrent inserts from several processes never lose an update and a grid is never
  split twice.
- A split writes the children's rows and aggregates, then switches the directory in one
  transaction, and leaves the old rows in place: they are purged only after
  2 x max_query_seconds. A query that listed the old leaf finishes (or is aborted) within
  max_query_seconds, so it always finds every row it expects, counted once.
- Each write records an intent (the leaves it touches) before writing and clears it
  after. The next writer (or `repair`) finds intents left by a crashed writer and
  recomputes those leaves' aggregates from their rows, and their ancestors from their
  children: a crashed write's rows end up either fully counted or, if never stored, not
  at all.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field

import numpy as np

from .aggregate import PartialAggregate, ancestor_aggregates
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
    subtree_range,
)
from .query import QueryPlan, QueryResult, QuerySpec
from .schema import REFUSE, Dataset
from .scan import RangeCondition, ScanRequest, Skip
from .store import CellStore


@dataclass
class InsertResult:
    """stored: rows written; duplicates: rows whose element ID was already stored (not
    written again); rejected: (row index, field, reason) of rows refused; splits: grids
    split by this insert; rounded: values rounded per column with a rounding policy,
    among the rows not refused."""

    stored: int = 0
    duplicates: int = 0
    rejected: list[tuple[int, str | None, str]] = field(default_factory=list)
    splits: int = 0
    rounded: dict[str, int] = field(default_factory=dict)


class GridEngine:
    """directory: a GridDirectory; store: a CellStore. Both stay owned by the caller."""

    def __init__(
        self,
        directory: GridDirectory,
        store: CellStore,
        max_scan_rows: int | None = None,
        max_query_seconds: float = 60.0,
    ):
        self.directory = directory
        self.store = store
        directory.epochs = store  # a store with directory epochs spares queries a round trip
        self.max_scan_rows = max_scan_rows
        self.max_query_seconds = max_query_seconds
        self._datasets: dict[str, Dataset] = {}

    @property
    def purge_after_seconds(self) -> float:
        """How long the rows of a split leaf outlive the split."""
        return 2 * self.max_query_seconds

    # -- datasets ---------------------------------------------------------------------

    def create_dataset(self, ds: Dataset, store_tables: bool = True) -> Dataset:
        """Create a dataset: its pre-split grid table and its store tables (unless
        store_tables is False: the bulk ingest makes an HBase table while it runs)."""
        if store_tables:
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
        result = InsertResult(rounded={c.name: 0 for c in ds.columns if c.rounding != REFUSE})
        ids: list[bytes] = []
        encoded: list[list[int]] = []
        for i, row in enumerate(rows):
            try:
                values, rounded = ds.encode_row(row)
                eid = _element_id(row.get("id"))
            except InvalidInput as exc:
                result.rejected.append((i, exc.field, exc.detail))
                continue
            ids.append(eid)
            encoded.append(values)
            for c in rounded:
                result.rounded[ds.columns[c].name] += 1
        if encoded:
            stored = self.insert_encoded(ds, ids, np.array(encoded, dtype=np.int64))
            result.stored, result.duplicates, result.splits = stored.stored, stored.duplicates, stored.splits
        return result

    def insert_encoded(self, ds: Dataset, element_ids: list[bytes], values: np.ndarray) -> InsertResult:
        """Insert already encoded rows (an (m, ncols) int64 array inside the domain)."""
        result = InsertResult()
        with self.directory.writer_lock(ds.name):
            self._recover(ds)
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
            intent = self.directory.begin_intent(ds.name, sorted(set(leaf_of)))
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
            self.directory.end_intent(intent)
            self.purge_retired(ds)
        return result

    # -- Algorithm 2: split ------------------------------------------------------------

    def _split(self, ds: Dataset, grid_id: str, agg: PartialAggregate) -> int:
        """Split leaf grid_id, recursing while a child holds more than N_size rows.
        Returns the number of grids split (0 when every row is the same point)."""
        grid = self.directory.grid(ds, grid_id)
        if choose_cut(grid.next_axis, agg.count, agg.sums, agg.mins, agg.maxs, ds.ndim) is None:
            return 0
        # Rows a crashed earlier split left under this leaf's descendants would be
        # counted twice once a child with that ID exists: clear them first.
        self._delete_range_rows(ds, *subtree_range(grid_id + "0"))
        self._delete_range_rows(ds, *subtree_range(grid_id + "1"))
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
        # New rows and aggregates first, then the directory switch; the old rows stay
        # for queries that still see the old leaf, and are purged later.
        self.store.put_rows(ds, new_keys, values)
        self.store.put_aggregates(ds, new_aggs)
        self.directory.replace_leaves(ds, [grid_id], [leaf for leaf, _ in final])
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
            inside = {g.grid_id for g, full in grids if full}
            partial = [g for g, full in grids if not full]
            reused = collapse_siblings(inside)
            plan.reused_grids_before, plan.reused_grids_after = len(inside), len(reused)
            aggs = self.store.get_aggregates(ds, [*reused, *(g.grid_id for g in partial)]) if (reused or partial) else {}
            for g in reused:
                if g in aggs:
                    total.merge(aggs[g])
            plan.rows_in_reused_grids = total.count
            plan.scanned_grids_before = len(partial)
            count_known = self._scan_partial(ds, spec, partial, aggs, total, plan, started)
        else:
            plan.total_grids = self.directory.leaf_count(ds.name)
        values = {a.label: a.value(total) for a in spec.aggregates}
        plan.round_trips = {
            "postgresql": self.directory.round_trips() - pg0,
            self.store.kind: self.store.round_trips() - kv0,
        }
        plan.elapsed_ms = round((time.perf_counter() - started) * 1000, 3)
        return QueryResult(spec, values, total.count if count_known else None, plan)

    def _scan_partial(self, ds, spec, partial: list[Grid], aggs, total, plan, started) -> bool:
        """Scan the partially overlapping grids into total. Returns whether total.count
        is exact (it is not when min/max-only queries skipped grids with rows)."""
        minmax_only = all(a.func in ("min", "max") for a in spec.aggregates)
        candidates = [g for g in partial if g.grid_id in aggs and aggs[g.grid_id].count > 0]
        if minmax_only:
            # 4.6.2: visit grids likely to hold the answer first, so later ones skip.
            a0 = spec.aggregates[0]
            if a0.func == "min":
                candidates.sort(key=lambda g: aggs[g.grid_id].mins[a0.col])
            else:
                candidates.sort(key=lambda g: -aggs[g.grid_id].maxs[a0.col])
        else:
            need = sum(aggs[g.grid_id].count for g in candidates)
            if self.max_scan_rows is not None and need > self.max_scan_rows:
                raise WorkLimitExceeded(
                    f"the query would scan {need} rows, more than the limit of {self.max_scan_rows}; "
                    "narrow the box",
                )
        domain = ds.domain()
        where = [RangeCondition(i, lo, hi) for i, (lo, hi) in enumerate(spec.box) if (lo, hi) != domain[i]]
        columns = sorted({a.col for a in spec.aggregates if a.col is not None})
        skip = None
        if minmax_only:
            specs = [(a.col, a.func == "max") for a in spec.aggregates]
            bounds = np.array([[aggs[g.grid_id].maxs[c] if m else aggs[g.grid_id].mins[c] for c, m in specs]
                               for g in candidates], np.int64).reshape(len(candidates), len(specs))
            skip = Skip(specs, bounds, [(total.maxs[c] if m else total.mins[c]) for c, m in specs])
        if candidates:
            found = self.store.scan(ds, ScanRequest([g.grid_id for g in candidates], where, columns, skip=skip))
            plan.scanned_grids_after += found.grids_scanned
            plan.rows_in_scanned_grids += found.rows_visited
            plan.rows_matched_by_scans += found.rows_matched
            total.merge(found.aggs.aggregate(0, columns, len(ds.columns)))
            return not found.grids_skipped
        return True

    def check_deadline(self, started: float) -> None:
        """Raise WorkLimitExceeded when a query that began at `started`
        (time.perf_counter) has run past max_query_seconds."""
        # Rows of split leaves are kept for 2 x max_query_seconds; a query running
        # longer could miss them, so it stops instead of answering wrongly.
        if time.perf_counter() - started > self.max_query_seconds:
            raise WorkLimitExceeded(
                f"the query ran longer than {self.max_query_seconds:g} s; narrow the box"
            )

    # -- crash safety -------------------------------------------------------------------

    def _recover(self, ds: Dataset) -> None:
        """Finish what crashed writers left (the caller holds the writer lock)."""
        pending = self.directory.pending_intents(ds.name)
        if not pending:
            return
        leaves = {g.grid_id for g in self.directory.leaves(ds)}
        for intent_id, grids in pending:
            self._rebuild_aggregates(ds, [g for g in grids if g in leaves])
            self.directory.end_intent(intent_id)

    def _rebuild_aggregates(self, ds: Dataset, leaf_ids: list[str]) -> None:
        """Recompute these leaves' aggregates from their rows, then every ancestor's
        from its two children, deepest first."""
        ncols = len(ds.columns)
        fresh: dict[str, PartialAggregate] = {}
        for g in leaf_ids:
            self._delete_range_rows(ds, *subtree_range(g + "0"))
            self._delete_range_rows(ds, *subtree_range(g + "1"))
            agg = PartialAggregate.empty(ncols)
            for _, rows in self.store.scan_rows(ds, *prefix_range(grid_prefix(g))):
                agg.merge(PartialAggregate.of_rows(rows, ncols))
            fresh[g] = agg
        self.store.put_aggregates(ds, fresh)
        for a in sorted({a for g in leaf_ids for a in ancestors(g)}, key=len, reverse=True):
            kids = self.store.get_aggregates(ds, [a + "0", a + "1"])
            merged = PartialAggregate.empty(ncols)
            for k in kids.values():
                merged.merge(k)
            self.store.put_aggregates(ds, {a: merged})

    def purge_retired(self, ds: Dataset) -> None:
        """Delete the rows of leaves split long enough ago that no query needs them
        (the caller holds the writer lock; every write does this at its end)."""
        due = self.directory.retired_before(ds.name, self.purge_after_seconds)
        for g in due:
            self._delete_range_rows(ds, *prefix_range(grid_prefix(g)))
        if due:
            self.directory.forget_retired(ds.name, due)

    def _delete_range_rows(self, ds: Dataset, start: bytes, stop: bytes) -> int:
        keys = [k for batch, _ in self.store.scan_rows(ds, start, stop) for k in batch]
        if keys:
            self.store.delete_rows(ds, keys)
        return len(keys)

    def check(self, name: str) -> list[str]:
        """Differences between the stored aggregates and the rows (a full scan): an empty
        list means every leaf's and ancestor's aggregate is exact and every row lies
        under a leaf (or under a split leaf awaiting its purge)."""
        ds = self.dataset(name)
        ncols = len(ds.columns)
        expected = {g.grid_id: PartialAggregate.empty(ncols) for g in self.directory.leaves(ds)}
        retired = set(self.directory.retired_before(name, 0))
        stray = 0
        for keys, rows in self.store.scan_rows(ds, b"", b"\xff" * 2):
            owners = np.array([k[1 : k.index(b"-", 1)].decode() for k in keys])
            for owner in np.unique(owners):
                if owner in expected:
                    expected[owner].merge(PartialAggregate.of_rows(rows[owners == owner], ncols))
                elif owner not in retired:
                    stray += int((owners == owner).sum())
        expected.update(ancestor_aggregates(expected, ncols))
        stored = self.store.get_aggregates(ds, list(expected))
        problems = [f"{stray} rows lie under no leaf"] if stray else []
        for g in sorted(expected, key=lambda x: (len(x), x)):
            have = stored.get(g, PartialAggregate.empty(ncols))
            if have != expected[g]:
                problems.append(f"grid {g}: stored count {have.count}, its rows {expected[g].count}")
        return problems

    def repair(self, name: str) -> int:
        """Recompute every aggregate from the rows (under the writer lock) and clear
        leftover intents. Returns the number of leaves rebuilt."""
        ds = self.dataset(name)
        with self.directory.writer_lock(name):
            leaves = [g.grid_id for g in self.directory.leaves(ds)]
            self._rebuild_aggregates(ds, leaves)
            for intent_id, _ in self.directory.pending_intents(name):
                self.directory.end_intent(intent_id)
        return len(leaves)

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
