"""The grid engine: the paper's Algorithms 1 (insert), 2 (split) and 3 (query).

GridEngine ties the grid directory (PostgreSQL) to a cell store (embedded or HBase).

Every write (an insert with its splits here, a bulk load in ingest.job) follows the one
write protocol of gridagg.write.protocol: writer lock, recovery of what dead writers left, intent,
rows, aggregates, directory switch, end. A split leaves the old leaf's rows in place for
2 x max_query_seconds, so a query still walking the old tree finds every row, once.
"""

from __future__ import annotations

import os
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from itertools import compress

import numpy as np

from gridagg.directory import GridDirectory
from gridagg.directory.leaves import LeavesOverlap
from gridagg.model.aggregate import PartialAggregate, ancestor_aggregates
from gridagg.model.errors import (
    InvalidInput,
    StoreUnavailable,
    UnknownDataset,
    WorkLimitExceeded,
)
from gridagg.model.grid import Grid, ancestors, element_of, grid_of, presplit
from gridagg.model.schema import REFUSE, Dataset
from gridagg.query.planner import Planner, rollup_answers
from gridagg.query.spec import Limits, QueryResult, QuerySpec, SeriesResult, SeriesSpec
from gridagg.store import CellStore, open_store
from gridagg.tree import DatasetReplaced, TreeCache
from gridagg.tune import costmodel
from gridagg.write import change
from gridagg.write import correct as corrections
from gridagg.write import delete as deletes
from gridagg.write import protocol as writes
from gridagg.write import retain as retention
from gridagg.write.leafsplit import split_leaf

# Answers as they improve (query_steps, series_steps) come at most this often: each is
# the whole answer, and a long series' can be megabytes.
STEP_SECONDS = 0.1


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
    """directory: a GridDirectory; store: a CellStore (or both from settings: `open`).
    Work limits (None: none): max_ms, the milliseconds of work a query may cost, as
    `costs` (the store's cost model, gridagg.tune.costmodel; None: none) predicts them;
    max_query_seconds, how long a query may run. writer_wait: how long an insert waits
    for the dataset's writer lock while another writer holds it."""

    def __init__(
        self,
        directory: GridDirectory,
        store: CellStore,
        max_ms: float | None = None,
        max_query_seconds: float = 60.0,
        writer_wait: float = 60.0,
        costs=None,
    ):
        self.directory = directory
        self.store = store
        directory.board = store.board  # writers move its epochs; readers read them
        self.trees = TreeCache(directory, store, store.board)
        self.planner = Planner(self.trees, store, directory, costs)
        self.max_ms = max_ms
        self.max_query_seconds = max_query_seconds
        self.writer_wait = writer_wait
        self._datasets: dict[str, Dataset] = {}

    @classmethod
    def open(cls, settings, max_connections: int = 8) -> "GridEngine":
        """An engine on the PostgreSQL and the store `settings` name (a pool of up to
        max_connections to PostgreSQL); close() closes both, as does a `with` block.
        StoreUnavailable names the one that is away in its `component` ("store" or
        "postgresql"); nothing stays open after it."""
        try:
            store = open_store(settings)
        except StoreUnavailable as exc:
            exc.component = "store"
            raise
        try:
            directory = GridDirectory(settings.effective_pg_url, max_connections)
        except BaseException as exc:
            if isinstance(exc, StoreUnavailable):
                exc.component = "postgresql"
            store.close()
            raise
        return cls(directory, store, max_query_seconds=settings.max_query_seconds,
                   costs=costmodel.load(settings.data_dir, store.kind))

    def close(self) -> None:
        """Close the store and the directory (background work stopped first)."""
        self.planner.positions.close()
        self.planner.months.close()
        self.planner.rollups.close()
        self.store.close()
        self.directory.close()

    def __enter__(self) -> "GridEngine":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

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
        """Drop a dataset and everything of it: its rows and aggregates (the store frees
        their space: LMDB reuses the pages, HBase deletes the table's files), its
        directory, change log, intents and retention, and this process's tree, tree
        file and rollups of it. Under its writer lock, so that no write lands meanwhile;
        the store's part first, so that a drop that fails half way leaves the dataset
        listed, to be dropped again. Its epoch stays (it never repeats a value)."""
        with self.directory.writer_lock(name):
            self.store.drop_dataset(name)
            self.directory.drop_dataset(name)
        self._datasets.pop(name, None)
        self.trees.drop(name)
        self.planner.rollups.forget(name)
        self.planner.positions.forget(name)
        self.planner.months.forget(name)
        self.planner.sample.forget(name)

    def dataset(self, name: str) -> Dataset:
        """The definition of a dataset (cached: definitions never change)."""
        ds = self._datasets.get(name)
        if ds is None:
            ds = self._datasets[name] = self.directory.dataset(name)
        return ds

    # -- Algorithm 1: insert -----------------------------------------------------------

    def insert(self, name: str, rows: list[dict], replace: bool = False) -> InsertResult:
        """Insert rows given as {column: value} (plus an optional "id", the element ID;
        without one a random ID is made). Invalid rows are refused one by one with a
        reason and nothing of them is written; valid rows are stored. With `replace`, a
        row whose element ID is stored replaces that row (correct_encoded; the result is
        a CorrectResult)."""
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
        if replace:
            result = CorrectResult(**vars(result))
        if encoded:
            store = self.correct_encoded if replace else self.insert_encoded
            stored = store(ds, ids, np.array(encoded, dtype=np.int64))
            result.stored, result.duplicates, result.splits = stored.stored, stored.duplicates, stored.splits
            if replace:
                result.replaced = stored.replaced
        return result

    def insert_encoded(self, ds: Dataset, element_ids: list[bytes], values: np.ndarray) -> InsertResult:
        """Insert already encoded rows (an (m, ncols) int64 array inside the domain)."""
        result = InsertResult()
        # Bounded, and short while the store does not answer: an insert is a request
        # someone waits for; behind a failing writer it would only fail later.
        with self.writing(ds, "insert", self.writer_wait, lambda: self.store.answers(ds)) as write:
            # A key seen twice in the batch, or already stored, is a duplicate element.
            leaf_of, keys, keep = writes.unstored_rows(self.directory, self.store, ds, element_ids, values)
            result.duplicates = len(keys) - len(keep)
            if not keep:
                return result
            values = values[keep]
            keys = [keys[i] for i in keep]
            leaf_of = [leaf_of[i] for i in keep]
            write.intend(sorted(set(leaf_of)), ([element_ids[i] for i in keep], values))
            write.put_rows(keys, values)
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
            write.put_aggregates(merged)

            for g in by_leaf:
                if merged[g].count > ds.grid.n_threshold:
                    result.splits += self._split(write, g, merged[g])
            write.end(sorted(by_leaf))
        return result

    @contextmanager
    def writing(self, ds: Dataset, kind: str, wait: float | None = None, healthy=None):
        """A Write of dataset `ds` (gridagg.write.protocol: the one protocol of every writer) for a
        `with` block: the writer lock taken, dead writers' leftovers recovered, retired
        rows purged."""
        try:
            with writes.writing(self.directory, self.store, ds, kind, self.purge_after_seconds, wait,
                                healthy) as write:
                yield write
        except LeavesOverlap:
            self.trees.start_over(ds.name)  # the tree it was planned on was not the directory's
            raise

    # -- Algorithm 2: split ------------------------------------------------------------

    def _split(self, write: writes.Write, grid_id: str, agg: PartialAggregate) -> int:
        """Split leaf grid_id past N_threshold (gridagg.write.leafsplit), recursing while a child
        holds more than N_size rows, as part of `write`. Returns the number of grids split
        (0 when every row is the same point)."""
        return split_leaf(write, grid_id, agg, write.ds.grid.n_threshold, write.ds.grid.n_size)

    # -- Algorithm 3: query (gridagg.query.planner) ------------------------------------------

    def query(self, name: str, where: dict | None, aggregates: list[str], region: dict | None = None,
              explain: bool = False, limits: Limits | None = None, deadline: float | None = None) -> QueryResult:
        """Aggregates over the rows inside a box, and inside a polygon region when one is
        given (a GeoJSON Polygon or MultiPolygon over the lon/lat dimensions); see
        QuerySpec.parse for the inputs. With explain, the plan lists the grids used.
        limits: this query's work limits (default: the engine's). deadline: seconds the
        answer may take (0: from the tree alone, no store call); past it the answer holds
        bounds instead of what was not read (QueryResult.progress). None: exact, always.
        Over longitude and latitude alone (every time, every other dimension whole), or
        over time alone in whole days, the answer comes from the position or day rollup
        once a background thread has made it (gridagg.query.rollups), exact at once, deadline or
        not; the tree answers meanwhile."""
        limits = limits or self.limits
        return self._timed(lambda: self._asked(name, lambda ds: self.planner.query(
            ds, QuerySpec.parse(ds, where, aggregates, region, limits), limits, explain, deadline)))

    def settle(self, timeout: float | None = None) -> None:
        """Wait for the work questions started in the background: the rollups
        (gridagg.query.rollups) they found missing or to refine. Benchmarks measure after it."""
        self.planner.positions.settle(timeout)
        self.planner.months.settle(timeout)
        self.planner.rollups.settle(timeout)

    def series(self, name: str, where: dict | None, aggregates: list[str], step, window=None, start=None,
               end=None, region: dict | None = None, explain: bool = False, limits: Limits | None = None,
               deadline: float | None = None) -> SeriesResult:
        """Aggregates per time bucket of `step` (e.g. "1d"), or over a moving `window` of
        whole steps ending with each bucket, from start to end; see SeriesSpec. limits:
        this series' limits (default: the engine's); deadline: as for query."""
        limits = limits or self.limits
        return self._timed(lambda: self._asked(name, lambda ds: self.planner.series(
            ds, SeriesSpec.parse(ds, where, aggregates, step, window, start, end, region, limits), limits, explain,
            deadline)))

    def query_steps(self, name: str, where: dict | None, aggregates: list[str], region: dict | None = None,
                    explain: bool = False, limits: Limits | None = None, deadline: float | None = None):
        """query()'s answer as it improves: from the tree at once, then as parts of the
        scan are read (at most one answer each STEP_SECONDS), until exact or past
        `deadline` seconds (None: until exact, within max_query_seconds). Yields
        QueryResults; the request is checked first."""
        limits = limits or self.limits
        spec = self._asked(name, lambda ds: (ds, QuerySpec.parse(ds, where, aggregates, region, limits)))
        return self.planner.progress(*spec, None, limits, explain, self._patience(deadline), STEP_SECONDS)

    def series_steps(self, name: str, where: dict | None, aggregates: list[str], step, window=None, start=None,
                     end=None, region: dict | None = None, explain: bool = False, limits: Limits | None = None,
                     deadline: float | None = None):
        """series()'s answer as it improves (SeriesResults), as query_steps."""
        limits = limits or self.limits
        ds, series = self._asked(name, lambda ds: (ds, SeriesSpec.parse(
            ds, where, aggregates, step, window, start, end, region, limits)))
        deadline = self._patience(deadline)
        if rollup_answers(ds, series):  # exact at once
            return iter([self.planner.series(ds, series, limits, explain, deadline)])
        return self.planner.progress(ds, series.query, series, limits, explain, deadline, STEP_SECONDS)

    def _patience(self, deadline: float | None) -> float:
        return self.max_query_seconds if deadline is None else min(deadline, self.max_query_seconds)

    def _asked(self, name: str, answer):
        """answer(definition of dataset `name`), asked again with the definition read
        anew when the dataset was dropped and made again meanwhile; a dataset no longer
        there is forgotten."""
        try:
            return answer(self.dataset(name))
        except DatasetReplaced:
            self._datasets.pop(name, None)
            return answer(self.dataset(name))
        except UnknownDataset:
            self._datasets.pop(name, None)
            self.trees.forget(name)
            raise

    def run(self, ds: Dataset, spec: QuerySpec) -> QueryResult:
        """query() for a parsed QuerySpec."""
        return self._timed(lambda: self.planner.query(ds, spec, self.limits))

    @property
    def limits(self) -> Limits:
        return Limits(self.max_ms)

    def _timed(self, answer):
        """answer(), or WorkLimitExceeded when it took longer than max_query_seconds."""
        started = time.perf_counter()
        result = answer()
        # Rows of split leaves are kept for 2 x max_query_seconds; a query running
        # longer could have missed them, so it fails instead of answering wrongly.
        if time.perf_counter() - started > self.max_query_seconds:
            raise WorkLimitExceeded(
                f"the query ran longer than {self.max_query_seconds:g} s; narrow the box"
            )
        return result

    # -- checks --------------------------------------------------------------------------

    def check(self, name: str) -> list[str]:
        """Differences between the stored aggregates and the rows (a full scan), and
        damage to the tree: an empty list means every leaf's and ancestor's aggregate is
        exact, every row lies under a leaf (or under a split leaf awaiting its purge),
        no two leaves overlap and no element ID is stored under two leaves."""
        ds = self.dataset(name)
        ncols = len(ds.columns)
        expected = {g.grid_id: PartialAggregate.empty(ncols) for g in self.directory.leaves(ds)}
        retired = set(self.directory.retired_before(name, 0))
        stray = 0
        hashes = []  # of the element IDs stored under leaves, to find one stored twice
        for keys, rows in self.store.scan_rows(ds, b"", b"\xff" * 2):
            owners = np.array([grid_of(k) for k in keys])
            for owner in np.unique(owners):
                mine = owners == owner
                if owner in expected:
                    expected[owner].merge(PartialAggregate.of_rows(rows[mine], ncols))
                    hashes.append(np.fromiter((hash(element_of(k)) for k in compress(keys, mine)), np.int64))
                elif owner not in retired:
                    stray += int(mine.sum())
        expected.update(ancestor_aggregates(expected, ncols))
        stored = self.store.get_aggregates(ds, list(expected))
        problems = [f"{stray} rows lie under no leaf"] if stray else []
        problems += [f"leaves {a} and {b} overlap" for a, b in self.directory.overlapping_leaves(ds)]
        problems += self._stored_twice(ds, set(expected), np.concatenate(hashes) if hashes else np.empty(0, np.int64))
        for g in sorted(expected, key=lambda x: (len(x), x)):
            have = stored.get(g, PartialAggregate.empty(ncols))
            if have != expected[g]:
                problems.append(f"grid {g}: stored count {have.count}, its rows {expected[g].count}")
        return problems

    def _stored_twice(self, ds: Dataset, leaves: set[str], hashes: np.ndarray) -> list[str]:
        """The element IDs stored under two leaves (or twice), given the hashes of those
        of every row under a leaf: a hash seen twice is looked into again, by element ID."""
        seen, counts = np.unique(hashes, return_counts=True)
        twice = set(seen[counts > 1].tolist())
        if not twice:
            return []
        where: dict[bytes, list[str]] = {}
        for keys, _ in self.store.scan_rows(ds, b"", b"\xff" * 2):
            for k in keys:
                g, e = grid_of(k), element_of(k)
                if g in leaves and hash(e) in twice:
                    where.setdefault(e, []).append(g)
        return [f"element ID {e!r} stored under {len(gs)} leaves: {', '.join(gs)}"
                for e, gs in sorted(where.items()) if len(gs) > 1]

    def repair(self, name: str) -> int:
        """Recompute every aggregate from the rows (under the writer lock) and clear
        leftover intents. Returns the number of leaves rebuilt."""
        ds = self.dataset(name)
        with self.directory.writer_lock(name) as lock:
            writes.recover(self.directory, self.store, ds, lock)
            self.store.settle()
            leaves = [g.grid_id for g in self.directory.leaves(ds)]
            writes.rebuild_aggregates(self.store, ds, leaves, lock.stamps)
            self.directory.record_change(lock, ds, None)
        return len(leaves)

    # -- changes: deletes, corrections, retention (gridagg.write.change) -------------------

    def delete(self, name: str, where: dict | None = None, region: dict | None = None,
               ids: list | None = None, wait: float | None = None) -> change.Changed:
        """Delete the rows inside a box and region (where, region: as for query; where {}
        spans everything) or, given `ids` (element IDs, strings or integers), the rows
        with those element IDs (within where and region when given too: only the leaves
        there are looked at). Returns what the change did (rows_before - rows_after rows
        went). wait: seconds to wait for the writer lock (None: the engine's
        writer_wait; math.inf: as long as it takes)."""
        ds = self.dataset(name)
        if ids is None and where is None and region is None:
            raise InvalidInput("a delete needs the rows' ids, or a where box or region (where {} takes every row)",
                               field="where")
        spec = QuerySpec.parse(ds, where, ["count"], region)
        element_ids = None if ids is None else _element_ids(ids)
        inside = None if spec.region is None else spec.region.mask
        with self._changing(ds, "delete", wait) as (write, tree):
            if spec.empty:
                contents = {}
            elif element_ids is not None:
                box = None if where is None and region is None else spec.box
                contents = deletes.with_ids(write, tree, element_ids, box, inside)
            else:
                contents = deletes.in_box(write, tree, spec.box, inside,
                                          None if spec.region is None else _covering(ds, spec.region))
            return change.apply(write, tree, contents)

    def correct_encoded(self, ds: Dataset, element_ids: list[bytes], values: np.ndarray,
                        wait: float | None = None) -> "CorrectResult":
        """Store already encoded rows (an (m, ncols) int64 array inside the domain), each
        replacing the stored row of its element ID (gridagg.write.correct) or added."""
        with self._changing(ds, "correct", wait) as (write, tree):
            found = corrections.corrected(write, element_ids, values)
            change.apply(write, tree, found.contents)
        return CorrectResult(stored=found.added, duplicates=found.unchanged, replaced=found.replaced)

    def retain(self, name: str, now=None, wait: float | None = None) -> change.Changed:
        """Drop the rows of dataset `name` older than its retention (keep_for) at `now`
        (an aware datetime; default now), and fold what changes left behind: a
        retention round (gridagg.write.retain). A dataset kept for ever is only tidied."""
        ds = self.dataset(name)
        keep = self.directory.retain(name)
        first = None if keep is None else retention.cutoff(ds, keep, now or retention.now())
        with self._changing(ds, "retain", wait) as (write, tree):
            return change.apply(write, tree, retention.older_than(write, tree, first), fold_all=True)

    def keep_for(self, name: str, retain: str | None) -> str | None:
        """Keep dataset `name`'s rows for `retain` (a duration such as "10y", checked:
        gridagg.write.retain.parse) from now on, or for ever (None); returns it as
        stored. Rows already older go at the next retention round."""
        ds = self.dataset(name)
        retain = retention.check(ds, retain)
        self.directory.set_retain(name, retain)
        return retain

    @contextmanager
    def _changing(self, ds: Dataset, kind: str, wait: float | None):
        """(a Write of kind `kind`, the dataset's tree, current under its lock) for a
        `with` block; wait: as for delete."""
        wait = self.writer_wait if wait is None else wait
        with self.writing(ds, kind, wait, lambda: self.store.answers(ds)) as write:
            yield write, self.trees.tree(ds)

    # -- inspection ---------------------------------------------------------------------

    def leaves(self, name: str) -> list[tuple[Grid, PartialAggregate]]:
        """Every leaf grid with its stored aggregate."""
        ds = self.dataset(name)
        grids = self.directory.leaves(ds)
        aggs = self.store.get_aggregates(ds, [g.grid_id for g in grids])
        ncols = len(ds.columns)
        return [(g, aggs.get(g.grid_id, PartialAggregate.empty(ncols))) for g in grids]


@dataclass
class CorrectResult(InsertResult):
    """An insert's result with `replace` (GridEngine.correct_encoded): stored, rows added;
    replaced, rows that replaced the stored row of their element ID; duplicates, rows
    equal to the stored row (nothing changed). splits stays 0: a correction cuts the
    leaves it touches itself (gridagg.write.change)."""

    replaced: int = 0


def _covering(ds: Dataset, region) -> deletes.Covers:
    """Whether `region` (a gridagg.query.regions.Region) holds every point of a box of
    stored dimension values: the box between the floats of its bounds lies in the
    polygon (exact: gridagg.query.regions)."""
    import shapely

    x, y = ds.lonlat_axes

    def covers(lo: np.ndarray, hi: np.ndarray) -> bool:
        box = shapely.box(lo[x] / region.lon_scale, lo[y] / region.lat_scale, hi[x] / region.lon_scale,
                          hi[y] / region.lat_scale)
        return bool(region.geom.covers(box))

    return covers


def _element_ids(given: object) -> list[bytes]:
    """A delete's element IDs: a non-empty list of non-empty strings or integers."""
    if not isinstance(given, list) or not given or any(e is None for e in given):
        raise InvalidInput("ids must be a non-empty list of element IDs, each a non-empty string or integer",
                           field="ids")
    return [_element_id(e) for e in given]


def _element_id(given: object) -> bytes:
    if given is None:
        return os.urandom(8).hex().encode()
    if not isinstance(given, (str, int)) or isinstance(given, bool) or str(given) == "":
        raise InvalidInput("id must be a non-empty string or integer", field="id")
    return str(given).encode()
