"""Which peer datasets exist: a small catalog table, bench_peers, in the directory's
PostgreSQL (the bench's own: gridagg never reads it).

A peer dataset (kind, name) holds the rows of a dataset definition in one peer; the
bench's app (app.py) looks its definition up to answer a query.
"""

from __future__ import annotations

import json
import threading

from psycopg_pool import ConnectionPool

from gridagg.model.schema import Dataset

DDL = """
CREATE TABLE IF NOT EXISTS bench_peers (
    kind         text NOT NULL,
    name         text NOT NULL,
    definition   jsonb NOT NULL,
    row_count    bigint NOT NULL DEFAULT 0,
    load_seconds double precision,
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (kind, name)
)
"""


class PeerRegistry:
    def __init__(self, url: str):
        self.pool = ConnectionPool(url, min_size=1, max_size=2, kwargs={"autocommit": True}, open=True)
        with self.pool.connection() as conn:
            conn.execute(DDL)
        self._cache: dict[tuple[str, str], Dataset] = {}
        self._lock = threading.Lock()

    def close(self) -> None:
        self.pool.close()

    def register(self, kind: str, ds: Dataset, row_count: int = 0, load_seconds: float | None = None) -> None:
        """Record (or replace) peer dataset (kind, ds.name)."""
        with self.pool.connection() as conn:
            conn.execute(
                "INSERT INTO bench_peers (kind, name, definition, row_count, load_seconds) "
                "VALUES (%s, %s, %s, %s, %s) ON CONFLICT (kind, name) DO UPDATE SET "
                "definition = EXCLUDED.definition, row_count = EXCLUDED.row_count, "
                "load_seconds = EXCLUDED.load_seconds, created_at = now()",
                (kind, ds.name, json.dumps(ds.to_json()), row_count, load_seconds))
        with self._lock:
            self._cache.pop((kind, ds.name), None)

    def unregister(self, kind: str, name: str) -> None:
        with self.pool.connection() as conn:
            conn.execute("DELETE FROM bench_peers WHERE kind = %s AND name = %s", (kind, name))
        with self._lock:
            self._cache.pop((kind, name), None)

    def lookup(self, kind: str, name: str) -> Dataset | None:
        """The definition of peer dataset (kind, name), or None. Found ones are cached
        (a definition never changes while it exists)."""
        hit = self._cache.get((kind, name))
        if hit is None:
            with self.pool.connection() as conn:
                row = conn.execute("SELECT definition FROM bench_peers WHERE kind = %s AND name = %s",
                                   (kind, name)).fetchone()
            if row is None:
                return None
            hit = Dataset.from_json(row[0])
            with self._lock:
                self._cache[(kind, name)] = hit
        return hit
