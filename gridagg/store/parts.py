"""A large scan cut into parts that run at once: the embedded store's kernel runs without
the GIL, and HBase's region servers answer concurrent calls in handlers of their own, so
a scan of millions of rows finishes in about the time of its largest part.

A part is a range [g0, g1) of the request's grids (ScanRequest.part); its answer keys the
rows it hands back by grid index within the part, so merging shifts them by g0.

A scan read against a deadline (gridagg.query.planner's progress) goes in small parts instead,
read in order, a few at once, each counted as it finishes (`chunks`, `read_until`); to a
store that stops at the deadline itself and names what it left unread (HBase), as one
scan cut as above, whose partial answer arrives by the deadline.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait

import numpy as np

from gridagg.store.scan import ScanAnswer, ScanRequest

# Rows of a part: below this many a scan stays whole (handing work to another thread
# costs more than it saves).
PARALLEL_ROWS = 200_000

# Thread pools by use: a scan read against a deadline (read_until) runs in one, and a part
# of a scan cut in parts (answer_in_parts: HBase's, inside such a scan) in another. With
# one pool for both, two scans holding its threads waited for their parts queued behind
# them, for ever: every later read timed out.
_pools: dict[str, ThreadPoolExecutor] = {}
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
    futures = [(g0, _executor("scan-part", threads).submit(answer, g0, g1)) for g0, g1 in parts[1:]]
    try:
        out = answer(*parts[0])
    finally:
        wait([f for _, f in futures])  # parts may read what the caller keeps alive
    for g0, future in futures:
        out.merge(future.result(), offset=g0)
    return out


def chunks(rows: Sequence[int], most: int) -> list[tuple[int, int]]:
    """Ranges [i0, i1) covering grids that hold rows[i] rows each, in order, each of at
    most `most` rows (or one grid, when it alone holds more)."""
    out, begun, held = [], 0, 0
    for i, n in enumerate(np.asarray(rows, np.int64).tolist()):
        if held and held + n > most:
            out.append((begun, i))
            begun, held = i, 0
        held += n
    if begun < len(rows):
        out.append((begun, len(rows)))
    return out


def read_until(scan: Callable[[ScanRequest], ScanAnswer], requests: list[ScanRequest], until: float,
               threads: int, margin: float = 0.0) -> Iterator[tuple[int, ScanAnswer]]:
    """(i, scan(requests[i])) as each request is answered, in the order they finish;
    `threads` at once, started in order, until every one is answered or
    time.monotonic() reaches `until`. Then requests not started are dropped and those
    running are told to stop (ScanRequest.stop): their answers are not given. A store
    that sees the requests' `deadline` (HBase's region servers) gets `until` less
    `margin` seconds, so that the answers of scans it stopped there, which name the
    grids left unread (ScanAnswer.unread), arrive by `until`: those are given too; a
    stopped answer that names nothing is not."""
    stop = np.zeros(1, np.uint8)
    wall = time.time() + (until - time.monotonic()) - margin
    for r in requests:
        r.stop, r.deadline = stop, wall
    pool = _executor("scan-read", threads)
    waiting = list(enumerate(requests))
    running: dict = {}
    try:
        while waiting or running:
            while waiting and len(running) < threads:
                i, r = waiting.pop(0)
                running[pool.submit(scan, r)] = i
            left = until - time.monotonic()
            if left <= 0:
                return
            done, _ = wait(running, timeout=left, return_when=FIRST_COMPLETED)
            for f in done:
                i = running.pop(f)
                answer = f.result()
                if not answer.stopped or answer.unread is not None:
                    yield i, answer
    finally:
        stop[0] = 1  # what still runs stops at its next grid


class Lead:
    """How much sooner than a caller's deadline reading stops, learned from the answers
    given against one: making the answer from what was read (merging, bounding the rest)
    takes time after reading stops, and a store's answer can arrive after the time it
    was told to stop (as HBase's region servers' answers do). An answer is
    aimed to be made AIM of its deadline early, for the caller's own work after it (the
    result's values, its JSON). One later than that sets the lead to the one it ran with
    plus its lateness; one that came earlier gives back RELAX of its spare time, so a
    lead that one stalled answer raised falls again, even while every read finishes in
    time. Without the learned lead most answers at a tight deadline came late
    on large datasets. Shared by the threads of a process: a lost update
    only delays the learning."""

    AIM = 0.05
    RELAX = 0.1

    def __init__(self):
        self.seconds = 0.0

    def before(self, deadline: float) -> float:
        """The lead (seconds) to stop reading by, for a deadline of `deadline` seconds:
        at most half of it."""
        return min(self.seconds, deadline / 2)

    def learn(self, used: float, took: float, deadline: float) -> None:
        """After an answer that read rows against a deadline: `used`, the lead it ran with
        (from before()); `took`, the seconds it took against `deadline`."""
        late = took - deadline * (1 - self.AIM)
        self.seconds = used + late if late > 0 else max(0.0, used + self.RELAX * late)


def _executor(use: str, threads: int) -> ThreadPoolExecutor:
    """The pool of `use` (its threads' name), with at least `threads` threads."""
    with _pool_lock:
        pool = _pools.get(use)
        if pool is None or pool._max_workers < threads:
            pool = _pools[use] = ThreadPoolExecutor(threads, thread_name_prefix=use)
        return pool
