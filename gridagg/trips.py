"""Round-trip counting per thread, so each query can report what it cost per store."""

from __future__ import annotations

import threading


class TripCounter:
    def __init__(self):
        self._local = threading.local()

    def __call__(self) -> int:
        """Round trips made by the calling thread so far."""
        return getattr(self._local, "n", 0)

    def add(self, n: int = 1) -> None:
        self._local.n = self() + n
