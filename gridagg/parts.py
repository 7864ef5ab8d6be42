"""A large scan cut into parts that run at once: the embedded store's kernel runs without
the GIL, and HBase's region servers answer concurrent calls in handlers of their own, so
a scan of millions of rows finishes in about the time of its largest part.

A part is a range [g0, g1) of the request's grids (ScanRequest.part); its answer keys the
rows it hands back by grid index within the part, so merging shifts them by g0.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, wait

import numpy as np

from .scan import ScanAnswer

# Rows of a part: below this many a scan stays whole (handing work to another thread
# costs more than it saves).
PARALLEL_ROWS = 200_000

_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def cut(rows: Sequence[int], threads: int) -> list[tuple[int, int]]:
    """Grid ranges [g0, g1) covering grids that hold rows[i] rows each, in order: up to
    `threads` parts of about equal rows, each at least PARALLEL_ROWS."""
    rows = np.asarray(rows, np.int64)
    n = min(threads, int(rows.sum()) // PARALLEL_ROWS)
    if n <= 1:  # most scans: no cumulative sums to find
        return [(0, len(rows))]
    held = np.zeros(len(rows) + 1, np.int64)
    np.cumsum(rows, out=held[1:])
    total = int(held[-1])
    # Part k begins at the first grid with at least k/n of the rows before it.
    bounds = np.searchsorted(held, np.arange(n + 1) * total / n, "left")
    bounds[0], bounds[-1] = 0, len(rows)
    return [(int(a), int(b)) for a, b in zip(bounds[:-1], bounds[1:]) if a < b] or [(0, len(rows))]


def answer_in_parts(parts: list[tuple[int, int]], answer: Callable[[int, int], ScanAnswer],
                    threads: int) -> ScanAnswer:
    """answer(g0, g1) of every part, the first in the calling thread and the others in a
    pool of `threads`, merged into one answer of the whole request."""
    futures = [(g0, _executor(threads).submit(answer, g0, g1)) for g0, g1 in parts[1:]]
    try:
        out = answer(*parts[0])
    finally:
        wait([f for _, f in futures])  # parts may read what the caller keeps alive
    for g0, future in futures:
        out.merge(future.result(), offset=g0)
    return out


def _executor(threads: int) -> ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None or _pool._max_workers < threads:
            _pool = ThreadPoolExecutor(threads, thread_name_prefix="scan-part")
        return _pool
