"""Fault points: named places in the write paths where a test makes a writer fail.

The product calls ``faults.hit(POINT)`` at each point of ``POINTS``. Nothing happens
unless a test armed that point: for a whole `gridagg` command through the setting
GRIDAGG_FAULTS (``point=action,...``; the command's main calls ``arm``), or for a block
of code with ``with faults.armed("point=action"):``. The actions:

raise  raise FaultInjected there, as a failing store call would
kill   SIGKILL the process there: a crash at a known point, nothing cleaned up

Disarmed, a point costs one lookup in an empty dict. Adding a point: a name and a line
in ``POINTS``, and a ``hit`` call where the product reaches it.
"""

from __future__ import annotations

import contextlib
import os
import signal

# The steps of the write protocol (gridagg.write.protocol), for each kind of write.
POINTS = {
    f"{kind}.{step}": f"{what} {meaning}"
    for kind, what in (("insert", "an insert"), ("ingest", "a bulk load"), ("tune", "a merge or split in place"),
                       ("delete", "a delete"), ("correct", "a correction"), ("retain", "a retention round"))
    for step, meaning in (
        ("rows_written", "has written rows, not yet their aggregates"),
        ("switching", "has written the rows and aggregates of its new grids, not yet switched the directory"),
        ("switched", "has switched the directory, not yet ended its intent"),
    )
}
ACTIONS = ("raise", "kill")


class FaultInjected(Exception):
    """Raised at an armed fault point whose action is "raise"."""


_armed: dict[str, str] = {}  # point -> action


def parse(text: str) -> dict[str, str]:
    """{point: action} of a spec such as "insert.rows_written=raise,ingest.rows_written=kill".
    Raises ValueError whose message completes "GRIDAGG_FAULTS ..."."""
    spec: dict[str, str] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        point, eq, action = item.partition("=")
        if not eq:
            raise ValueError(f"must be point=action items separated by commas, not {item!r}")
        if point not in POINTS:
            raise ValueError(f"names no fault point {point!r} (the points: {', '.join(POINTS)})")
        if action not in ACTIONS:
            raise ValueError(f"must give {point} the action {' or '.join(ACTIONS)}, not {action!r}")
        spec[point] = action
    return spec


def hit(point: str) -> None:
    """The product has reached `point` (a key of POINTS): act if a test armed it."""
    if point in _armed:
        _act(point, _armed[point])


def arm(points) -> None:
    """Arm these (point, action) pairs for the rest of the process (a command arms those
    of its settings, Settings.faults)."""
    _armed.update(points)


@contextlib.contextmanager
def armed(spec: str):
    """Arm the points of `spec` (as GRIDAGG_FAULTS) in this process for the block."""
    global _armed
    before = _armed
    _armed = {**before, **parse(spec)}
    try:
        yield
    finally:
        _armed = before


def _act(point: str, action: str) -> None:
    if action == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    raise FaultInjected(f"fault point {point}")
