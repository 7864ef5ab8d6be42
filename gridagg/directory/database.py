"""The directory's PostgreSQL: a pool of autocommit connections, reported as a store.

Every part of the directory (gridagg.directory) runs its statements through one Database:
`connection()` lends a connection for a block, `transaction()` one inside a transaction,
and `round_trips` counts the statements a thread sent (a query's plan reports them).
"""

from __future__ import annotations

from contextlib import contextmanager
from importlib import resources

import psycopg
from psycopg_pool import ConnectionPool

from gridagg.model.errors import StoreUnavailable
from gridagg.model.trips import TripCounter


def check_pool(pool: ConnectionPool) -> None:
    """Test a pool's idle connections and replace the broken ones (after a failure)."""
    try:
        pool.check()
    except Exception:  # best effort: the server may still be down
        pass


class Database:
    """url: a PostgreSQL connection URL; up to max_connections pooled connections. A
    server that is down is reported at once as StoreUnavailable, not after the pool's
    15 s of retries and a warning for each. The catalog's tables (sql/catalog.sql) are
    made if missing."""

    def __init__(self, url: str, max_connections: int = 8):
        self.url = url
        try:
            psycopg.connect(url, connect_timeout=5).close()
        except psycopg.OperationalError as exc:
            reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise StoreUnavailable(f"PostgreSQL at {url} is unreachable: {reason}") from exc
        self.pool = ConnectionPool(url, min_size=1, max_size=max_connections, kwargs={"autocommit": True},
                                   open=False)
        try:
            self.pool.open(wait=True, timeout=15)
        except Exception as exc:  # the pool raises its own timeout type
            raise StoreUnavailable(f"PostgreSQL at {url} is unreachable: {exc}") from exc
        self.round_trips = TripCounter()
        with self.connection() as conn:
            conn.execute(resources.files("gridagg.directory").joinpath("catalog.sql").read_text())

    @contextmanager
    def connection(self):
        """A pooled autocommit connection for the block; StoreUnavailable when the server
        is unreachable."""
        try:
            # Short: while PostgreSQL is down, callers should hear so quickly.
            with self.pool.connection(timeout=5) as conn:
                yield conn
        except psycopg.OperationalError as exc:
            # Connections are not tested on every checkout (a round trip per query);
            # after a failure, the idle ones are tested and broken ones replaced.
            check_pool(self.pool)
            raise StoreUnavailable(f"PostgreSQL is unreachable: {exc}") from exc

    @contextmanager
    def transaction(self):
        """A connection inside one transaction for the block (counted as one round trip):
        committed when the block ends, rolled back when it raises."""
        with self.connection() as conn, conn.transaction():
            self.round_trips.add()
            yield conn

    def execute(self, statement, params=None) -> list[tuple]:
        """One statement in autocommit, counted as a round trip: its rows (none for a
        statement that returns no rows)."""
        with self.connection() as conn:
            self.round_trips.add()
            cur = conn.execute(statement, params)
            return cur.fetchall() if cur.description is not None else []

    def close(self) -> None:
        self.pool.close()
