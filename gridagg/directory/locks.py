"""The writer lock of each dataset and its holders' write stamps (gridagg.model.stamps).

The lock is a PostgreSQL advisory lock, so it spans processes and dies with a crashed
writer's connection. Each holder reserves spans of stamps (gridagg_stamps), later than
every span of earlier holders.

A holder can lose the lock while it runs: when PostgreSQL restarts or the connection
breaks, the session ends and the lock with it, and another writer may take it at once.
So whatever a holder commits to PostgreSQL under the lock (its intents, the directory
switch, the change log; its stamp spans) goes through the session that holds it
(WriterLock.session): a holder that lost the lock commits nothing more, and reserves
no stamp later than the next holder's, so its late store writes stay masked.
"""

from __future__ import annotations

import time
from contextlib import contextmanager

import psycopg

from gridagg.directory.database import Database
from gridagg.model.errors import StoreUnavailable
from gridagg.model.stamps import SPAN, WriteStamps

# A writer waiting for the writer lock looks at the store's health this often.
LOCK_STEP_SECONDS = 1.0


class WriterLock:
    """The writer lock of dataset `name`, held on connection `conn` (WriterLocks.hold):
    `stamps`, the holder's WriteStamps, and session() and transaction(), for what it
    commits under the lock."""

    def __init__(self, name: str, conn):
        self.name, self._conn = name, conn
        self.stamps = WriteStamps(self._reserve_stamps)

    @contextmanager
    def session(self):
        """The session holding the lock (an autocommit connection: each statement commits
        by itself), for the block. StoreUnavailable when it has ended: the lock is lost,
        and nothing more is committed."""
        try:
            yield self._conn
        except psycopg.OperationalError as exc:
            raise StoreUnavailable(f"the writer lock of dataset {self.name!r} was lost ({exc}); "
                                   "nothing more of this write is committed: retry it") from exc

    @contextmanager
    def transaction(self):
        """A transaction on the session holding the lock, for the block: committed when it
        ends, rolled back when it raises (StoreUnavailable as for session)."""
        with self.session() as conn, conn.transaction():
            yield conn

    def _reserve_stamps(self) -> tuple[int, int]:
        with self.session() as conn:
            end = conn.execute(
                "WITH now AS (SELECT (extract(epoch FROM clock_timestamp()) * 1e9)::bigint AS ns) "
                "INSERT INTO gridagg_stamps AS s (dataset, reserved) SELECT %(n)s, ns + %(span)s FROM now "
                "ON CONFLICT (dataset) DO UPDATE SET reserved = greatest(s.reserved, excluded.reserved - %(span)s) "
                "+ %(span)s RETURNING reserved",
                {"n": self.name, "span": SPAN},
            ).fetchone()[0]
        return end - SPAN, end


class WriterLocks:
    def __init__(self, db: Database):
        self.db = db

    @contextmanager
    def hold(self, name: str, wait: float | None = None, healthy=None):
        """Hold the writer lock of dataset `name` for the block; gives the WriterLock.

        wait: None waits as long as another writer holds the lock (bulk loads,
        repair); else the seconds to wait before StoreUnavailable. healthy: called
        after each second of waiting; False (the store the holder writes to does not
        answer, so the holder is failing too) ends the wait at once with
        StoreUnavailable instead of queueing behind a failing writer."""
        key = f"gridagg:{name}"
        with self.db.connection() as conn:
            if not conn.execute("SELECT pg_try_advisory_lock(hashtextextended(%s, 0))", (key,)).fetchone()[0]:
                self._wait(conn, name, key, wait, healthy)
            try:
                yield WriterLock(name, conn)
            finally:
                try:
                    conn.execute("SELECT pg_advisory_unlock(hashtextextended(%s, 0))", (key,))
                except psycopg.OperationalError:
                    pass  # the session has ended, and the lock with it

    @staticmethod
    def _wait(conn, name: str, key: str, wait: float | None, healthy) -> None:
        started = time.monotonic()
        while True:
            try:
                # A session lock taken in a transaction outlives it; the timeout does not.
                with conn.transaction():
                    conn.execute("SELECT set_config('lock_timeout', %s, true)",
                                 (f"{LOCK_STEP_SECONDS * 1000:.0f}ms",))
                    conn.execute("SELECT pg_advisory_lock(hashtextextended(%s, 0))", (key,))
                return
            except psycopg.errors.LockNotAvailable:
                waited = time.monotonic() - started
                if healthy is not None and not healthy():
                    raise StoreUnavailable(
                        f"another writer holds the writer lock of dataset {name!r} and the store does not "
                        f"answer (waited {waited:.1f} s); retry later") from None
                if wait is not None and waited >= wait:
                    raise StoreUnavailable(
                        f"another writer has held the writer lock of dataset {name!r} for the {wait:g} s "
                        "this write may wait; retry later") from None
