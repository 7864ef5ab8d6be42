"""Round-trip counting per thread, so each query can report what it cost per store."""

from __future__ import annotations

import threading


class _Count(threading.local):
    # A class default, not getattr(local, "n", 0): a thread-local's missing attribute
    # costs a formatted AttributeError, four per query that made no round trip.
    n = 0


class TripCounter:
    def __init__(self):
        self._local = _Count()

    def __call__(self) -> int:
        """Round trips made by the calling thread so far."""
        return self._local.n

    def add(self, n: int = 1) -> None:
        self._local.n += n
