"""Round-trip counting per thread, so each query can report what it cost per store: in
all, and by label (a store names what its calls went to, e.g. HBase's region servers)."""

from __future__ import annotations

import threading


class _Count(threading.local):
    # Class defaults, not getattr(local, "n", 0): a thread-local's missing attribute
    # costs a formatted AttributeError, four per query that made no round trip.
    n = 0
    labels: dict | None = None  # made at the thread's first labelled count


class TripCounter:
    def __init__(self):
        self._local = _Count()

    def __call__(self) -> int:
        """Round trips made by the calling thread so far."""
        return self._local.n

    def add(self, n: int = 1, label: str | None = None) -> None:
        """Count n round trips of the calling thread (under `label` too, when given)."""
        self._local.n += n
        if label is not None:
            self.note(label, n)

    def note(self, label: str, n: int = 1) -> None:
        """Count n under `label` alone (something about trips counted already)."""
        local = self._local
        if local.labels is None:
            local.labels = {}
        local.labels[label] = local.labels.get(label, 0) + n

    def labelled(self) -> dict[str, int]:
        """The calling thread's counts by label so far (a copy)."""
        labels = self._local.labels
        return {} if labels is None else dict(labels)

    @staticmethod
    def since(before: dict[str, int], now: dict[str, int]) -> dict[str, int]:
        """The counts by label made between two labelled() copies."""
        return {label: n - before.get(label, 0) for label, n in now.items() if n != before.get(label, 0)}
