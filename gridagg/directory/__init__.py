"""The grid directory in PostgreSQL: dataset definitions, the leaf grids' boxes, the log
of what changed, writer locks, write intents and retired leaves.

GridDirectory is the one object the rest of gridagg holds; each concern is a part of its
own, a small class over the same pool of connections (database.Database):

- catalog.Catalog: the datasets' definitions and leaf counts;
- leaves.Leaves: each dataset's leaf boxes under a composite GiST index (which leaf holds
  a point, the whole tree's leaves in one snapshot);
- changes.ChangeLog: a version and a log entry per committed change, NOTIFY for other
  machines, the epoch board for this one;
- locks.WriterLocks: each dataset's writer lock and its holders' write stamps;
- intents.Intents: what a write is about to touch (gridagg.write.protocol);
- retired.Retired: leaves a split replaced, whose rows wait to be purged.

The facade's methods are what callers use; a change that spans parts (creating or
dropping a dataset, switching leaves, ending a write) runs here in one transaction.

Queries do not ask PostgreSQL for leaves: each serving process holds the whole tree in
memory (gridagg.tree) and keeps it current through the change log.
"""

from __future__ import annotations

import numpy as np

from gridagg.directory.catalog import Catalog
from gridagg.directory.changes import CHANGE_LOG_SECONDS, CHANNEL, ChangeLog
from gridagg.directory.database import Database, check_pool
from gridagg.directory.intents import Intent, Intents
from gridagg.directory.leaves import Leaves, LeavesOverlap, box_literals, parse_boxes
from gridagg.directory.locks import LOCK_STEP_SECONDS, WriterLock, WriterLocks
from gridagg.directory.retired import Retired
from gridagg.model.grid import Grid
from gridagg.model.schema import Dataset

__all__ = ["CHANGE_LOG_SECONDS", "CHANNEL", "LOCK_STEP_SECONDS", "GridDirectory", "Intent", "box_literals",
           "check_pool", "parse_boxes"]


class GridDirectory:
    """url: a PostgreSQL connection URL; up to max_connections pooled connections, every
    statement in autocommit unless grouped in a transaction here. Raises StoreUnavailable
    at once when the server is unreachable."""

    def __init__(self, url: str, max_connections: int = 8):
        self.url = url
        self._db = Database(url, max_connections)
        self.round_trips = self._db.round_trips
        self._catalog = Catalog(self._db)
        self._leaves = Leaves(self._db)
        self._changes = ChangeLog(self._db)
        self._locks = WriterLocks(self._db)
        self._intents = Intents(self._db)
        self._retired = Retired(self._db)

    @property
    def board(self):
        """The board whose epochs this directory moves on after each change (gridagg.store.epochs;
        GridEngine sets its store's), or None."""
        return self._changes.board

    @board.setter
    def board(self, board) -> None:
        self._changes.board = board

    @property
    def listening(self):
        """An Event set once `listen` hears announcements."""
        return self._changes.listening

    def connection(self):
        """A pooled autocommit connection for a `with` block (health checks)."""
        return self._db.connection()

    def close(self) -> None:
        self._changes.close()
        self._db.close()

    # -- datasets ---------------------------------------------------------------------

    def create_dataset(self, ds: Dataset, leaves: list[Grid]) -> None:
        """Record the definition and create the grid table holding these leaves
        (DatasetExists when the name is taken)."""
        with self._db.transaction() as conn:
            version = self._catalog.add(conn, ds, len(leaves))
            self._leaves.create(conn, ds)
            self._leaves.insert(conn, ds, leaves, version)
        self._changes.changed(ds.name)

    def drop_dataset(self, name: str) -> None:
        with self._db.transaction() as conn:
            for part in (self._catalog, self._retired, self._intents, self._changes, self._leaves):
                part.drop(conn, name)
        self._changes.changed(name)

    def dataset(self, name: str) -> Dataset:
        return self._catalog.dataset(name)

    def datasets(self) -> list[Dataset]:
        return self._catalog.datasets()

    def leaf_count(self, name: str) -> int:
        return self._catalog.leaf_count(name)

    def retain(self, name: str) -> str | None:
        """How long the dataset keeps its rows (a duration such as '10y'; None: for ever)."""
        return self._catalog.retain(name)

    def set_retain(self, name: str, retain: str | None) -> None:
        """Keep the dataset's rows for `retain` (checked by the caller: gridagg.write.retain), or
        for ever (None)."""
        self._catalog.set_retain(name, retain)

    def retaining(self) -> list[tuple[str, str]]:
        """(name, retain) of every dataset that keeps its rows for a while only."""
        return self._catalog.retaining()

    # -- leaves -----------------------------------------------------------------------

    def leaves(self, ds: Dataset) -> list[Grid]:
        """Every leaf grid with its box, in grid-ID order."""
        return self._leaves.all(ds)

    def grid(self, ds: Dataset, grid_id: str) -> Grid | None:
        """Leaf `grid_id`, or None when it is no leaf."""
        return self._leaves.grid(ds, grid_id)

    def grids(self, ds: Dataset, grid_ids: list[str]) -> dict[str, Grid]:
        """Those of `grid_ids` that are leaves, by ID (one round trip)."""
        return {g.grid_id: g for g in self._leaves.among(ds, grid_ids)}

    def leaves_among(self, ds: Dataset, grid_ids: list[str]) -> set[str]:
        """Those of `grid_ids` that are leaves (one round trip)."""
        return {g.grid_id for g in self._leaves.among(ds, grid_ids)}

    def overlapping_leaves(self, ds: Dataset) -> list[tuple[str, str]]:
        """Pairs of leaves whose boxes overlap (a damaged directory; one round trip)."""
        return self._leaves.overlapping(ds)

    def locate(self, ds: Dataset, points: np.ndarray) -> list[str]:
        """The leaf grid ID holding each point (rows of stored dimension values), in one
        round trip."""
        return self._leaves.locate(ds, points)

    def load_tree(self, ds: Dataset) -> tuple[int, object, list[tuple]]:
        """(version, incarnation, leaves) of a dataset in one snapshot: what
        gridagg.tree.TreeState is built from."""
        return self._leaves.tree(ds)

    def replace_leaves(self, lock: WriterLock, ds: Dataset, old: list[str], new_leaves: list[Grid],
                       changed: list[str] | None | bool = True) -> None:
        """The directory switch: in one transaction, delete the leaves `old` (each must
        still be a leaf), insert new_leaves (none may overlap another leaf:
        leaves.LeavesOverlap), adjust leaf_count, retire `old` (their rows
        are purged once no reader can need them) and log the change: the new leaves, and
        the grids `changed` when it is a list (None: any grid may have changed). The
        caller holds the writer lock, `lock`."""
        logged = None if changed is None else [g.grid_id for g in new_leaves] + ([] if changed is True else changed)
        with lock.transaction() as conn:
            version = self._changes.log(conn, ds, logged)
            if old:
                self._leaves.delete(conn, ds, old)
                self._retired.add(conn, ds.name, old)
            if new_leaves:
                self._leaves.insert(conn, ds, new_leaves, version)
                self._leaves.check_disjoint(conn, ds, [g.grid_id for g in new_leaves])
            self._catalog.count_leaves(conn, ds.name, len(new_leaves) - len(set(old)))
        self._changes.changed(ds.name)

    # -- the change log ---------------------------------------------------------------

    def changes_since(self, ds: Dataset, version: int):
        """What changed in the dataset after `version` (gridagg.directory.changes.Changes), in one
        round trip."""
        return self._changes.since(ds, version)

    def record_change(self, lock: WriterLock, ds: Dataset, grids: list[str] | None) -> None:
        """Log that the rows (and aggregates) of these leaves changed; None: any leaf
        may have (a repair, under `lock`). Readers re-read what they hold of them."""
        with lock.transaction() as conn:
            self._changes.log(conn, ds, grids)
        self._changes.changed(ds.name)

    def prune_changes(self, name: str) -> None:
        """Forget log entries older than CHANGE_LOG_SECONDS."""
        self._changes.prune(name)

    def listen(self, on_change) -> None:
        """Call on_change(announcement) for every change another process commits
        ("<dataset> <board id of the writer>"), on_change(None) when changes may have been
        missed: see changes.ChangeLog.listen."""
        self._changes.listen(on_change)

    # -- writers ----------------------------------------------------------------------

    def writer_lock(self, name: str, wait: float | None = None, healthy=None):
        """A `with` block holding the dataset's writer lock, giving the holder's
        locks.WriterLock (wait, healthy: see locks.WriterLocks.hold). What the holder
        commits below goes through it: a holder that lost the lock commits nothing."""
        return self._locks.hold(name, wait, healthy)

    def begin_intent(self, lock: WriterLock, grid_ids: list[str], rows: bytes | None = None,
                     contents: bytes | None = None) -> int:
        """Record that a write under `lock` will touch these grids of its dataset (and
        the rows an insert adds, or the rows the leaves of a change applied in place hold
        after it, each packed as one segment: gridagg.store.segments.pack); returns the
        intent's ID."""
        with lock.session() as conn:
            return self._intents.begin(conn, lock.name, grid_ids, rows, contents)

    def extend_intent(self, lock: WriterLock, intent_id: int, grid_ids: list[str]) -> None:
        """Add grids a write is about to put rows under (a split's new grids)."""
        with lock.session() as conn:
            self._intents.extend(conn, intent_id, grid_ids)

    def end_intent(self, lock: WriterLock, intent_id: int, ds: Dataset, changed: list[str] | None) -> None:
        """End a write: clear its intent and log that the leaves `changed` changed (None:
        possibly all), in one transaction, then move the epoch on."""
        with lock.transaction() as conn:
            self._intents.clear(conn, intent_id)
            self._changes.log(conn, ds, changed)
        self._changes.changed(ds.name)

    def pending_intents(self, name: str) -> list[Intent]:
        """The intents of writers that did not finish (intents.Intent; call while holding
        the writer lock)."""
        return self._intents.pending(name)

    def retired_before(self, name: str, seconds: float) -> list[str]:
        """Retired grids whose rows no query can need any more: retired more than
        `seconds` ago, by PostgreSQL's clock."""
        return self._retired.before(name, seconds)

    def forget_retired(self, name: str, grid_ids: list[str]) -> None:
        """Forget these retired grids once their rows are purged."""
        self._retired.forget(name, grid_ids)
