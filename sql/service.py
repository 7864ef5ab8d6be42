"""What one server process answers with: its settings, its engine (built on the first
question, as each HTTP API worker builds its own, so that a server started while
PostgreSQL is away recovers by itself), the limits of one question (the HTTP API's),
the datasets' names, and the catalog (sql/mirror.py) kept as the datasets are."""

from __future__ import annotations

import threading
import time

from gridagg.config import Settings
from gridagg.engine import GridEngine
from gridagg.model.schema import Dataset
from gridagg.query.spec import Limits

from .mirror import CatalogMirror

NAMES_SECONDS = 1.0  # how long the datasets' names are taken as known before they are read again


class Service:
    def __init__(self, settings: Settings, engine: GridEngine | None = None):
        self.settings = settings
        self.limits = Limits(settings.max_query_ms, settings.max_points, settings.max_vertices)
        self._engine = engine
        self._lock = threading.Lock()
        self.mirror = CatalogMirror(settings.effective_pg_url)
        self._names: tuple[float, frozenset[str]] = (0.0, frozenset())

    def engine(self) -> GridEngine:
        if self._engine is None:
            with self._lock:
                if self._engine is None:
                    self._engine = GridEngine.open(self.settings)
        return self._engine

    def datasets(self) -> list[Dataset]:
        """Every dataset, by name."""
        found = sorted(self.engine().directory.datasets(), key=lambda ds: ds.name)
        self._names = (time.monotonic(), frozenset(ds.name for ds in found))
        return found

    def is_dataset(self, name: str) -> bool:
        """Whether a dataset has this name (names read at most NAMES_SECONDS ago, and again
        for a name not among them)."""
        when, names = self._names
        if name in names and time.monotonic() - when < NAMES_SECONDS:
            return True
        return name in {ds.name for ds in self.datasets()}

    def synced_mirror(self) -> CatalogMirror:
        """The catalog, its tables those of the datasets now."""
        self.mirror.sync(self.datasets())
        return self.mirror

    def authorized(self, password: str | None) -> bool:
        """Whether a password may read: the read token (or the write token) when a read
        token is set, as the HTTP API's bearer token; anything when none is."""
        import hmac

        token = self.settings.read_token
        if not token:
            return True
        given = (password or "").encode()
        ok = hmac.compare_digest(given, token.encode())
        if self.settings.write_token:
            ok = hmac.compare_digest(given, self.settings.write_token.encode()) or ok
        return ok
