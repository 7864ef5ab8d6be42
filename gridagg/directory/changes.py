"""The change log (gridagg_changes): what every committed change of a dataset touched,
and how other processes hear of it.

Every committed change takes a new version for its dataset and, in the same transaction,
logs the leaves whose rows or aggregates it changed (None: possibly any). A process
holding the tree at version v asks, in one round trip, what changed after v
(`since`). After the commit the writer moves the dataset's epoch on the machine's board
(gridagg.store.epochs), so local readers learn of it without a round trip; readers on other
machines hear of it through NOTIFY (`listen`).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import psycopg
from psycopg import sql

from gridagg.directory import leaves
from gridagg.directory.database import Database
from gridagg.model.errors import UnknownDataset
from gridagg.model.schema import Dataset

# The NOTIFY channel every change of a dataset is announced on (payload: its name and the
# board of the writer).
CHANNEL = "gridagg_changes"

# How long the change log keeps an entry. A process that has not looked at a dataset for
# longer reloads its tree instead of catching up.
CHANGE_LOG_SECONDS = 600


@dataclass
class Changes:
    """What changed in a dataset's directory after some version (ChangeLog.since)."""

    version: int
    incarnation: object  # differs when the dataset was dropped and made again
    complete: bool  # False: the log no longer reaches back that far
    leaves: list[tuple]  # (grid_id, next_dim, lo_0, hi_0, ...) of leaves added since
    touched: list[str] | None  # leaves whose rows changed since; None: possibly all


class ChangeLog:
    def __init__(self, db: Database):
        self.db = db
        # The board whose epochs this log moves on after each change (set by GridEngine
        # from its store; None: no board).
        self.board = None
        self._listener: threading.Thread | None = None
        self._stop_listening = threading.Event()
        self.listening = threading.Event()

    def log(self, conn, ds: Dataset, grids: list[str] | None) -> int:
        """In the caller's transaction: take a new version for the dataset and log that
        these leaves changed (None: possibly all of them); returns the version. Call
        `changed` once the transaction is committed."""
        version = conn.execute(
            "UPDATE gridagg_datasets SET version = nextval('gridagg_directory_versions') WHERE name = %s "
            "RETURNING version", (ds.name,)).fetchone()
        if version is None:
            raise UnknownDataset(ds.name)
        conn.execute("INSERT INTO gridagg_changes (dataset, version, grids) VALUES (%s, %s, %s)",
                     (ds.name, version[0], grids))
        # Sent at commit: the dataset, and the board this writer moves (gridagg.tree).
        conn.execute("SELECT pg_notify(%s, %s)", (CHANNEL, f"{ds.name} {self.board.id if self.board else ''}"))
        return version[0]

    def changed(self, name: str) -> None:
        """After a change of the dataset is committed: move its epoch on."""
        if self.board is not None:
            self.board.advance(name)

    @staticmethod
    def drop(conn, name: str) -> None:
        conn.execute("DELETE FROM gridagg_changes WHERE dataset = %s", (name,))

    def prune(self, name: str) -> None:
        """Forget log entries older than CHANGE_LOG_SECONDS."""
        self.db.execute(
            "WITH gone AS (DELETE FROM gridagg_changes WHERE dataset = %(n)s "
            "  AND at < clock_timestamp() - make_interval(secs => %(s)s) RETURNING version) "
            "UPDATE gridagg_datasets SET pruned = greatest(pruned, (SELECT max(version) FROM gone)) "
            "WHERE name = %(n)s AND EXISTS (SELECT 1 FROM gone)",
            {"n": name, "s": CHANGE_LOG_SECONDS})

    def since(self, ds: Dataset, version: int):
        """What changed in the dataset after `version` (Changes), in one
        round trip."""

        stmt = sql.SQL(
            "SELECT d.version, {incarnation}, d.pruned <= %(v)s, "
            "(SELECT CASE WHEN bool_or(c.grids IS NULL) THEN NULL ELSE "
            "        coalesce(array_agg(DISTINCT x), '{{}}') END "
            "   FROM gridagg_changes c LEFT JOIN LATERAL unnest(c.grids) x ON true "
            "  WHERE c.dataset = d.name AND c.version > %(v)s), "
            "(SELECT json_agg(json_build_array(g.grid_id, g.next_dim, {corners})) "
            "   FROM {table} g WHERE g.version > %(v)s) "
            "FROM gridagg_datasets d WHERE d.name = %(name)s"
        ).format(incarnation=leaves.INCARNATION, corners=leaves.corners(ds),
                 table=leaves.table(ds.name))
        try:
            rows = self.db.execute(stmt, {"v": version, "name": ds.name})
        except psycopg.errors.UndefinedTable:  # dropped meanwhile
            raise UnknownDataset(ds.name) from None
        if not rows:
            raise UnknownDataset(ds.name)
        current, incarnation, complete, touched, added = rows[0]
        return Changes(current, incarnation, bool(complete), leaves.leaf_rows(ds, added or []),
                       None if touched is None and current != version else list(touched or []))

    def listen(self, on_change) -> None:
        """Call on_change(announcement) whenever a process commits a change of a dataset
        ("<dataset> <board id of the writer>"), and on_change(None) when changes may have
        been missed (listening began, or the connection was lost): PostgreSQL's NOTIFY, on
        a connection and thread of their own, reconnecting until close(). `listening` is
        set once the first LISTEN stands. This is how a process on another machine, with
        a board of its own, learns of a change within milliseconds."""
        if self._listener is not None:
            return
        self._listener = threading.Thread(target=self._listen, args=(on_change,), name="gridagg-listen",
                                          daemon=True)
        self._listener.start()

    def _listen(self, on_change) -> None:
        while not self._stop_listening.is_set():
            try:
                with psycopg.connect(self.db.url, autocommit=True, connect_timeout=5) as conn:
                    conn.execute(f"LISTEN {CHANNEL}")
                    on_change(None)
                    self.listening.set()
                    while not self._stop_listening.is_set():
                        for note in conn.notifies(timeout=1.0):
                            on_change(note.payload)
            except Exception:  # noqa: BLE001 - the server went away: try again shortly
                on_change(None)
                self._stop_listening.wait(1.0)

    def close(self) -> None:
        self._stop_listening.set()
