"""Fault points: named places in the write paths where a test makes a writer fail.

The product calls ``faults.hit(POINT)`` at each point of ``POINTS``. Nothing happens
unless a test armed that point, for a whole process through the setting GRIDAGG_FAULTS
(``point=action,...``; read at the first hit) or for a block of code with
``with faults.armed("point=action"):``. The actions:

raise  raise FaultInjected there, as a failing store call would
kill   SIGKILL the process there: a crash at a known point, nothing cleaned up

Disarmed, a point costs one lookup in an empty dict. Adding a point: a name and a line
in ``POINTS``, and a ``hit`` call where the product reaches it.
"""

from __future__ import annotations

import contextlib
import os
import signal

POINTS = {
    "insert.rows_written": "an insert has written its rows, not yet their aggregates",
    "split.children_written": "a split has written its children's rows and aggregates, "
                              "not yet switched the directory",
    "ingest.rows_written": "the bulk load has written its rows, not yet the aggregates",
    "ingest.directory_switched": "the bulk load has switched the directory and not yet returned",
}
ACTIONS = ("raise", "kill")


class FaultInjected(Exception):
    """Raised at an armed fault point whose action is "raise"."""


_armed: dict[str, str] | None = None  # point -> action; None until the setting is read


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
    armed = _armed if _armed is not None else _from_settings()
    if point in armed:
        _act(point, armed[point])


@contextlib.contextmanager
def armed(spec: str):
    """Arm the points of `spec` (as GRIDAGG_FAULTS) in this process for the block."""
    global _armed
    before = _armed if _armed is not None else _from_settings()
    _armed = {**before, **parse(spec)}
    try:
        yield
    finally:
        _armed = before


def _from_settings() -> dict[str, str]:
    global _armed
    from gridagg.config import Settings  # here: config imports this module

    _armed = dict(Settings.from_env().faults)
    return _armed


def _act(point: str, action: str) -> None:
    if action == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    raise FaultInjected(f"fault point {point}")
