"""The write protocol: how every writer changes a dataset (inserts, their splits, bulk loads,
deletes, corrections and retention: gridagg.write.change).

A write holds the dataset's writer lock (a PostgreSQL advisory lock) from its first step
to its last, and goes through these steps in this order:

1. recover: finish what writers that died left behind (below), and purge the rows of
   leaves split long enough ago that no query can still need them;
2. intend: record every grid the write will put rows under (`Write.intend`: the leaves
   it touches first, the grids a split makes later), and an insert's new rows (or what
   the leaves of a change applied in place hold after it);
3. rows: write rows, stamped (`Write.put_rows` by key, `Write.put_grids` grid by grid;
   a bulk load's executors write them and the driver says so with `Write.rows_written`);
4. aggregates: write the aggregates of the touched leaves and their ancestors;
5. switch: replace leaves by new ones in the directory, in one transaction (splits);
6. end: clear the intent and log the change, in one transaction, and move the dataset's
   epoch on (`Write.end`). Only now is the write acknowledged.

A writer that dies between 2 and 6 leaves its intent behind. The next writer's step 1
(or `gridagg repair`) finds it and, still under the lock, seals the leaves it names (a
request of the dead writer still on its way lands masked: gridagg.model.stamps), clears the
rows under the grids it meant to make that never became leaves, stores the rows of an
insert that did not land (HBase applies a put of many grid rows row by row: a writer
killed during it, or an HBase failing under it, leaves some stored and some not), writes
again the rows of the leaves of a change applied in place, and recomputes the
aggregates of its leaves from their rows and of their ancestors from their children.
So an insert or a change applied in place ends fully counted once its intent is
recorded, and any other write fully counted or not at all, whichever step it died in.

Fault points (gridagg.write.faults) sit at the same steps for every kind of write:
"<kind>.rows_written" (rows written, aggregates not), "<kind>.switching" (a split's or
load's new grids written, directory not switched) and "<kind>.switched" (directory
switched, intent not ended), where kind is "insert", "ingest", "tune" (merges in
place: gridagg.tune.merge; splits in place: gridagg.tune.adapt), "delete", "correct" or
"retain" (gridagg.write.change).
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Callable

import numpy as np

from gridagg.directory.locks import WriterLock
from gridagg.model.aggregate import PartialAggregate
from gridagg.model.grid import (
    Grid,
    ancestors,
    grid_of,
    grid_prefix,
    prefix_range,
    row_key,
    split_key,
    subtree_range,
)
from gridagg.model.schema import Dataset
from gridagg.model.stamps import WriteStamps
from gridagg.store import segments
from gridagg.write import faults

KINDS = ("insert", "ingest", "tune", "delete", "correct", "retain")


class Write:
    """One write of dataset `ds` in progress, under its writer lock (see the module
    docstring). Made by `writing`; its methods are the protocol's steps 2-6."""

    def __init__(self, directory, store, ds: Dataset, kind: str, lock: WriterLock):
        self.directory, self.store, self.ds, self.kind = directory, store, ds, kind
        self.lock = lock
        self.stamps = lock.stamps
        self.intent: int | None = None
        self.ended = False

    def intend(self, grid_ids: list[str], rows: tuple[list[bytes], np.ndarray] | None = None,
               contents: tuple[list[bytes], np.ndarray] | None = None) -> None:
        """Record that rows will be written under these grids (before writing them). rows:
        an insert's (element IDs, (m, ncols) values) it adds, with its first intent: a
        recovery stores those that did not land. contents: a change applied in place
        (rewrite_grids), every row the leaves `grid_ids` hold after it as (row keys,
        values), with its first intent: a recovery writes them again."""
        if self.intent is None:
            packed = None if rows is None else segments.pack(*rows)
            kept = None if contents is None else segments.pack(*contents)
            self.intent = self.directory.begin_intent(self.lock, list(grid_ids), packed, kept)
        else:
            self.directory.extend_intent(self.lock, self.intent, list(grid_ids))

    def put_rows(self, keys: list[bytes], values: np.ndarray) -> None:
        """Write rows (row keys, an (m, ncols) int64 array) under grids intended before."""
        self._check_intended()
        self.store.put_rows(self.ds, keys, values, self.stamps)
        self.rows_written()

    def put_grids(self, grids: list[tuple[bytes, object, np.ndarray]]) -> None:
        """Write rows grid by grid (CellStore.put_grids: key prefix, element IDs, values
        of each) under grids intended before."""
        self._check_intended()
        self.store.put_grids(self.ds, grids, self.stamps)
        self.rows_written()

    def rewrite_grids(self, grids: list[tuple[bytes, object, np.ndarray]]) -> None:
        """Make the rows of grids intended before exactly these (CellStore.rewrite_grids:
        key prefix, element IDs, values of each): a change applied in place."""
        self._check_intended()
        self.store.rewrite_grids(self.ds, grids, self.stamps)
        self.rows_written()

    def rows_written(self) -> None:
        """Rows are written (by this process or, for a bulk load, by its executors)."""
        self._check_intended()
        faults.hit(f"{self.kind}.rows_written")

    def put_aggregates(self, aggregates: dict[str, PartialAggregate],
                       put: Callable[[dict[str, PartialAggregate]], None] | None = None) -> None:
        """Write these grids' aggregates: into the store, or through `put` (a bulk load
        hands them to the region servers with its rows)."""
        self._check_intended()
        if put is None:
            self.store.put_aggregates(self.ds, aggregates, self.stamps)
        else:
            put(aggregates)

    def switch(self, old: list[str], new_leaves: list[Grid], changed: list[str] | None | bool = True) -> None:
        """Replace the leaves `old` by `new_leaves` in the directory, in one transaction;
        their rows and aggregates must be written. The change log names the new leaves,
        and the grids `changed` too when it is a list (None: any grid may have changed;
        True: only the new leaves)."""
        self._check_intended()
        faults.hit(f"{self.kind}.switching")
        if old or new_leaves:  # a load that split nothing has nothing to switch
            self.directory.replace_leaves(self.lock, self.ds, old, new_leaves, changed)
        faults.hit(f"{self.kind}.switched")

    def end(self, changed: list[str] | None) -> None:
        """Clear the intent and log that the rows of the leaves `changed` changed (None:
        possibly any leaf), in one transaction: the write is done."""
        self._check_intended()
        self.directory.end_intent(self.lock, self.intent, self.ds, changed)
        self.ended = True

    def abandon(self) -> None:
        """Give the write up without dying (a bulk load that failed): recover what it
        wrote now, as the next writer would, so no reader sees half of it meanwhile.
        Best effort: if the store fails too, the intent stays for the next writer."""
        if self.intent is not None and not self.ended:
            try:
                recover(self.directory, self.store, self.ds, self.lock)
                self.ended = True
            except Exception:  # noqa: BLE001 - the next writer recovers it then
                pass

    def _check_intended(self) -> None:
        if self.intent is None or self.ended:
            raise RuntimeError("a write step outside its intent: intend() first, nothing after end()")


@contextmanager
def writing(directory, store, ds: Dataset, kind: str, purge_after: float, wait: float | None = None,
            healthy: Callable[[], bool] | None = None):
    """A Write of dataset `ds` (kind "insert" or "ingest") for the duration of the block:
    takes the writer lock (wait and healthy: see GridDirectory.writer_lock), recovers what
    dead writers left and purges the rows of leaves split more than `purge_after` seconds
    ago. A block that leaves without ending a write it began leaves its intent for the next
    writer to recover, as a crash would."""
    if kind not in KINDS:
        raise ValueError(f"a write is one of {KINDS}, not {kind!r}")
    with directory.writer_lock(ds.name, wait, healthy) as lock:
        recover(directory, store, ds, lock)
        purge_retired(directory, store, ds, lock.stamps, purge_after)
        yield Write(directory, store, ds, kind, lock)


def recover(directory, store, ds: Dataset, lock: WriterLock) -> None:
    """Finish what dead writers left: seal the leaves their intents name and recompute
    their aggregates; clear the rows of grids they meant to make that never became leaves
    (the caller holds the writer lock, `lock`)."""
    stamps = lock.stamps
    pending = directory.pending_intents(ds.name)
    if not pending:
        return
    store.settle()  # the dead writer's last commit, before reading its rows
    leaves = {g.grid_id for g in directory.leaves(ds)}
    retired = set(directory.retired_before(ds.name, 0))  # their purge clears them
    for intent in pending:
        rebuilt = sorted({g for g in intent.grids if g in leaves})
        store.seal_grids(ds, rebuilt, stamps)
        store.clear_grids(ds, sorted(set(intent.grids) - leaves - retired), stamps)
        if intent.contents is not None:
            store.rewrite_grids(ds, contents_of(intent.contents, rebuilt), stamps)
        if intent.rows is not None:
            added = complete_rows(directory, store, ds, segments.eids(intent.rows), segments.values(intent.rows), stamps)
            rebuilt = sorted(set(rebuilt) | added)
        rebuild_aggregates(store, ds, rebuilt, stamps, keep=retired)
        # Rows may have left the data's edge: caches of them start over (gridagg.write.change).
        directory.end_intent(lock, intent.id, ds, None if intent.contents is not None else rebuilt)


def contents_of(packed: bytes, grid_ids: list[str]) -> list[tuple[bytes, object, np.ndarray]]:
    """The rows a change applied in place leaves in each of these grids (Write.intend's
    `contents`, packed), as CellStore.rewrite_grids takes them."""
    import pyarrow as pa

    keys, values = segments.eids(packed), segments.values(packed)
    by_grid: dict[bytes, list[int]] = {grid_prefix(g): [] for g in grid_ids}
    eids = []
    for i, key in enumerate(keys):
        prefix, eid = split_key(key)
        eids.append(eid)
        if prefix in by_grid:
            by_grid[prefix].append(i)
    return [(prefix, pa.array([eids[i] for i in idx], pa.binary()), values[idx]) for prefix, idx in by_grid.items()]


def unstored_rows(directory, store, ds: Dataset, element_ids: list[bytes],
                  values: np.ndarray) -> tuple[list[str], list[bytes], list[int]]:
    """Where rows (element IDs, (m, ncols) values) belong and which are new: each row's
    leaf as the directory has it now, its row key, and the indexes of the rows whose key
    is neither stored nor taken by an earlier row of the same batch, in order."""
    leaf_of = directory.locate(ds, values[:, : ds.ndim])
    keys = [row_key(g, e) for g, e in zip(leaf_of, element_ids)]
    first: dict[bytes, int] = {}
    for i, k in enumerate(keys):
        first.setdefault(k, i)
    stored = store.existing_keys(ds, list(first))
    return leaf_of, keys, [i for k, i in first.items() if k not in stored]


def complete_rows(directory, store, ds: Dataset, element_ids: list[bytes], values: np.ndarray,
                  stamps: WriteStamps) -> set[str]:
    """Store the rows of a dead insert (its element IDs and values) that did not land, each
    under the leaf that holds it now (a split of the insert may have moved it); returns
    those leaves."""
    leaf_of, keys, missing = unstored_rows(directory, store, ds, element_ids, values)
    if missing:
        store.put_rows(ds, [keys[i] for i in missing], values[missing], stamps)
    return set(leaf_of)


def rebuild_aggregates(store, ds: Dataset, leaf_ids: list[str], stamps: WriteStamps,
                       keep: set[str] = frozenset()) -> None:
    """Recompute these leaves' aggregates from their rows (after clearing rows stored under
    grids below them, which no leaf owns, but retired grids' in `keep`), then every
    ancestor's from its two children, deepest first."""
    ncols = len(ds.columns)
    fresh: dict[str, PartialAggregate] = {}
    for g in leaf_ids:
        clear_subtree(store, ds, g, stamps, keep)
        agg = PartialAggregate.empty(ncols)
        for _, rows in store.scan_rows(ds, *prefix_range(grid_prefix(g))):
            agg.merge(PartialAggregate.of_rows(rows, ncols))
        fresh[g] = agg
    store.put_aggregates(ds, fresh, stamps)
    for a in sorted({a for g in leaf_ids for a in ancestors(g)}, key=len, reverse=True):
        merged = PartialAggregate.empty(ncols)
        for kid in store.get_aggregates(ds, [a + "0", a + "1"]).values():
            merged.merge(kid)
        store.put_aggregates(ds, {a: merged}, stamps)


def clear_subtree(store, ds: Dataset, grid_id: str, stamps: WriteStamps, keep: set[str] = frozenset()) -> None:
    """Delete the rows stored under the grids below leaf `grid_id` (not its own): what a
    split that died before its directory switch wrote there. Rows of the grids in `keep`
    stay: leaves a merge retired (gridagg.tune.merge), which queries holding the tree from
    before it still read until they are purged."""
    for half in ("0", "1"):
        keys = [k for batch, _ in store.scan_rows(ds, *subtree_range(grid_id + half)) for k in batch
                if grid_of(k) not in keep]
        if keys:
            store.delete_rows(ds, keys, stamps)


def purge_retired(directory, store, ds: Dataset, stamps: WriteStamps, after: float) -> None:
    """Delete the rows of leaves split more than `after` seconds ago (no query can need
    them any more) and forget old change log entries (the caller holds the writer lock)."""
    due = directory.retired_before(ds.name, after)
    if due:
        # A retired grid that is a leaf again (merged back: gridagg.tune.merge) holds live rows.
        live = directory.leaves_among(ds, list(due))
        store.clear_grids(ds, [g for g in due if g not in live], stamps)
        directory.forget_retired(ds.name, due)
    directory.prune_changes(ds.name)
