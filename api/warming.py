"""A server worker's warm-up: its query kernels compiled or loaded (gridagg.warmup) in a
background thread as the worker starts, while /healthz answers 503 "warming" with a
Retry-After, so that a load balancer, `gridagg demo` and the bench send no query before
the worker can answer it at full speed.

A query that arrives meanwhile is answered anyway: numba compiles one function at a time
for the whole process, so it waits for what it needs and nothing is compiled twice.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from flask import current_app

log = logging.getLogger("gridagg.api")

RETRY_AFTER_SECONDS = 1  # loading cached kernels takes a few tenths of a second


class Warming:
    """Whether this process is still warming up; `run` (e.g. gridagg.warmup.warm) runs in
    a thread of its own, None: nothing to warm."""

    def __init__(self, run: Callable[[], object] | None):
        self._done = threading.Event()
        if run is None:
            self._done.set()
            return
        threading.Thread(target=self._run, args=(run,), name="gridagg-warmup", daemon=True).start()

    @property
    def done(self) -> bool:
        return self._done.is_set()

    def _run(self, run: Callable[[], object]) -> None:
        try:
            log.info("warmed up: %s", run())
        except Exception:  # a bug; the worker still answers, its first queries compiling
            log.exception("warming up failed; queries compile their kernels as they come")
        finally:
            self._done.set()


def warming() -> Warming:
    return current_app.extensions["gridagg.warming"]
