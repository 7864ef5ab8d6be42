"""A server worker's warm-up, in a background thread as the worker starts: its query
kernels compiled or loaded (gridagg.warmup), then its engine built and every dataset's
tree read. Meanwhile /healthz answers 503 "warming" with a Retry-After, so that a load
balancer, `gridagg demo` and the bench send no query before the server can answer it at
full speed.

A server's workers share a directory (SHARED_DIR_ENV: `gridagg serve` and the bench make
one per server, for the metrics too), where each warming worker keeps a marker file: a
worker says it is warm only when no other live worker of its server is warming, since
the server hands a query to any of them (one handed to a worker still warming waits
for that worker's warm-up, however warm the others are).

A query that arrives meanwhile is answered anyway: numba compiles one function at a time
for the whole process, and one thread reads a tree while the others wait for it, so
nothing is done twice.
"""

from __future__ import annotations

import logging
import os
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path

from flask import current_app

from gridagg.model.errors import GridaggError
from gridagg.warmup import load_trees, warm

from .state import EngineHolder

log = logging.getLogger("gridagg.api")

RETRY_AFTER_SECONDS = 1  # loading cached kernels takes a few tenths of a second
SHARED_DIR_ENV = "PROMETHEUS_MULTIPROC_DIR"
MARKER = "gridagg-warming-"  # + the warming worker's process ID + "-" + a unique part


class Warming:
    """Whether this worker, or another of its server, is still warming up. `run` runs in
    a thread of its own (None: nothing to warm); `shared`: the directory the server's
    workers share (None: this process alone)."""

    def __init__(self, run: Callable[[], object] | None, shared: Path | None = None):
        self._done = threading.Event()
        self._shared = shared
        if run is None:
            self._done.set()
            return
        marker = None
        if shared is not None:
            fd, name = tempfile.mkstemp(prefix=f"{MARKER}{os.getpid()}-", dir=shared)
            os.close(fd)
            marker = Path(name)
        threading.Thread(target=self._run, args=(run, marker), name="gridagg-warmup", daemon=True).start()

    @property
    def done(self) -> bool:
        """This worker is warm, and so is every other live worker of its server."""
        return self._done.is_set() and not any(_alive(int(m.name[len(MARKER):].split("-")[0]))
                                               for m in self._markers())

    def _markers(self) -> list[Path]:
        return [] if self._shared is None else list(self._shared.glob(MARKER + "*"))

    def _run(self, run: Callable[[], object], marker: Path | None) -> None:
        try:
            log.info("warmed up: %s", run())
        except Exception:  # a bug; the worker still answers, its first queries compiling
            log.exception("warming up failed; queries compile their kernels as they come")
        finally:
            if marker is not None:
                marker.unlink(missing_ok=True)
            self._done.set()

    @classmethod
    def of_server(cls, run: Callable[[], object] | None) -> "Warming":
        """A Warming that shares its markers with the server's other workers (in the
        directory SHARED_DIR_ENV names, when set)."""
        shared = os.environ.get(SHARED_DIR_ENV)
        return cls(run, Path(shared) if shared else None)


def _alive(pid: int) -> bool:
    """Whether process `pid` runs (a worker killed while warming leaves its marker)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # runs, as another user
        return True
    return True


def warming() -> Warming:
    return current_app.extensions["gridagg.warming"]


def warm_worker(engines: EngineHolder) -> str:
    """What a server worker does before it says it is ready: the kernels, then the engine
    and every dataset's tree. Stores that cannot be reached now leave the trees to the
    first queries (/healthz reports the stores). Returns what it did, in words."""
    kernels = warm()
    try:
        return f"{kernels}; {load_trees(engines.get())} dataset trees read"
    except GridaggError as exc:
        return f"{kernels}; dataset trees not read: {exc.detail}"
