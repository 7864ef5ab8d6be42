"""Write stamps: the timestamps a store puts on the cells a write makes.

A writer killed while a request of its is on the way (held and retried by the HBase
Thrift gateway while HBase is away) can have that request land after the next writer
has recovered what it left. Stamps fence such late writes off. Every holder of a
dataset's writer lock reserves a span of stamps in PostgreSQL, after every span of
earlier holders (GridDirectory.writer_lock), and stamps each of its writes with the next
one. The next writer's recovery then masks what a dead holder may still land (HBase: a
delete marker at a later stamp hides cells with earlier stamps whenever they arrive;
a newer version of a cell hides an older one), so a late write changes nothing.

Stamps are nanoseconds of PostgreSQL's clock, moved on when spans are reserved faster
than the clock runs: cells keep a sensible time, and every stamp is later than the
milliseconds HBase would put on a cell itself.
"""

from __future__ import annotations

import threading
import time
from typing import Callable


class WriteStamps:
    """Increasing stamps for one writer: next() is later than every stamp handed out
    before, here and by earlier holders of the writer lock. `reserve()` returns a new
    span (first, end) of stamps, later than every span reserved before."""

    def __init__(self, reserve: Callable[[], tuple[int, int]]):
        self._reserve = reserve
        self._lock = threading.Lock()
        self._next, self._end = reserve()

    def next(self) -> int:
        with self._lock:
            if self._next >= self._end:
                self._next, self._end = self._reserve()
            self._next += 1
            return self._next - 1

    @classmethod
    def local(cls) -> "WriteStamps":
        """Stamps of this process's clock, for writes outside any writer lock (tests,
        tools): no fence, but as late as a fenced writer's."""
        last = [0]

        def reserve() -> tuple[int, int]:
            first = max(time.time_ns(), last[0])
            last[0] = first + SPAN
            return first, last[0]

        return cls(reserve)

    @classmethod
    def fixed(cls, stamp: int) -> "WriteStamps":
        """One stamp for every write: how the tasks of a bulk load stamp their writes
        (each task writes grids of its own, so they never mask each other)."""
        return cls(lambda: (stamp, stamp + 1))  # a span of one, reserved again at each next()


SPAN = 1 << 16  # stamps one reservation holds: far more than a write needs
