"""Which baseline views exist: a small catalog table in the directory's PostgreSQL.

A view "X__pg" or "X__hbase" holds the same rows as gridagg dataset X (or any rows with
X's definition) in one of the baselines. The HTTP API looks names up here to route a
query to the backend that serves it.
"""

from __future__ import annotations

import json
import threading

from psycopg_pool import ConnectionPool

from ..schema import Dataset
from . import common

DDL = """
CREATE TABLE IF NOT EXISTS gridagg_baselines (
    name        text PRIMARY KEY,
    backend     text NOT NULL,
    source      text NOT NULL,
    definition  jsonb NOT NULL,
    row_count   bigint NOT NULL DEFAULT 0,
    load_seconds double precision,
    created_at  timestamptz NOT NULL DEFAULT now()
)
"""


class BaselineRegistry:
    def __init__(self, url: str):
        self.pool = ConnectionPool(url, min_size=1, max_size=2, kwargs={"autocommit": True}, open=True)
        with self.pool.connection() as conn:
            conn.execute(DDL)
        self._cache: dict[str, tuple[str, Dataset]] = {}
        self._lock = threading.Lock()

    def close(self) -> None:
        self.pool.close()

    def register(self, source: Dataset, kind: str, row_count: int, load_seconds: float | None) -> Dataset:
        """Record the view of `source` in backend `kind`; returns its definition."""
        name = common.view_name(source.name, kind)
        spec = source.to_json()
        spec["name"] = name
        ds = Dataset.from_json(spec)
        with self.pool.connection() as conn:
            conn.execute(
                "INSERT INTO gridagg_baselines (name, backend, source, definition, row_count, load_seconds) "
                "VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (name) DO UPDATE SET backend = EXCLUDED.backend, "
                "source = EXCLUDED.source, definition = EXCLUDED.definition, row_count = EXCLUDED.row_count, "
                "load_seconds = EXCLUDED.load_seconds, created_at = now()",
                (name, kind, source.name, json.dumps(spec), row_count, load_seconds))
        with self._lock:
            self._cache.pop(name, None)
        return ds

    def unregister(self, name: str) -> None:
        with self.pool.connection() as conn:
            conn.execute("DELETE FROM gridagg_baselines WHERE name = %s", (name,))
        with self._lock:
            self._cache.pop(name, None)

    def lookup(self, name: str) -> tuple[str, Dataset] | None:
        """(backend kind, definition) of a registered view, or None. Found views are
        cached (a view's definition never changes while it exists)."""
        hit = self._cache.get(name)
        if hit is not None:
            return hit
        if not any(name.endswith(s) for s in common.SUFFIX.values()):
            return None
        with self.pool.connection() as conn:
            row = conn.execute("SELECT backend, definition FROM gridagg_baselines WHERE name = %s",
                               (name,)).fetchone()
        if row is None:
            return None
        hit = (row[0], Dataset.from_json(row[1]))
        with self._lock:
            self._cache[name] = hit
        return hit

    def views(self) -> list[dict]:
        with self.pool.connection() as conn:
            rows = conn.execute("SELECT name, backend, source, row_count, load_seconds FROM gridagg_baselines "
                                "ORDER BY name").fetchall()
        return [dict(zip(("name", "backend", "source", "row_count", "load_seconds"), r)) for r in rows]
