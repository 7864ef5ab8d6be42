"""What one server process answers with: its settings, its engine (built on the first
question, as each HTTP API worker builds its own, so that a server started while
PostgreSQL is away recovers by itself), the limits of one question (the HTTP API's),
and the datasets for the catalog."""

from __future__ import annotations

import threading

from gridagg.config import Settings
from gridagg.engine import GridEngine
from gridagg.model.schema import Dataset
from gridagg.query.spec import Limits


class Service:
    def __init__(self, settings: Settings, engine: GridEngine | None = None):
        self.settings = settings
        self.limits = Limits(settings.max_scan_rows, settings.max_grids, settings.max_points, settings.max_vertices)
        self._engine = engine
        self._lock = threading.Lock()

    def engine(self) -> GridEngine:
        if self._engine is None:
            with self._lock:
                if self._engine is None:
                    self._engine = GridEngine.open(self.settings)
        return self._engine

    def datasets(self) -> list[Dataset]:
        """Every dataset, by name."""
        return sorted(self.engine().directory.datasets(), key=lambda ds: ds.name)

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
