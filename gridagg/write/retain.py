"""Retention: a dataset's `retain` (a duration such as "10y") drops its rows older than
that, at every round of `gridagg retain NAME` and of the serving process's schedule
(`Rounds`, every GRIDAGG_RETAIN_EVERY seconds), as a change of kind "retain" (gridagg.write.change).

A round needs no row of the grids wholly older than the cutoff: their leaves are
emptied from the tree alone, and the emptied subtrees fold into one leaf each. Only the
leaves the cutoff cuts (rows on both sides of it) are read.
"""

from __future__ import annotations

import logging
import math
import re
import threading
from datetime import datetime, timedelta, timezone

import numpy as np

from gridagg.model.errors import InvalidInput
from gridagg.model.schema import Dataset
from gridagg.tree import TreeState
from gridagg.write.change import Content

log = logging.getLogger(__name__)

# A retention: a whole number and a unit, days (d), weeks (w) or calendar years (y).
RETAIN = re.compile(r"^\s*([1-9][0-9]{0,4})\s*([dwy])\s*$")
UNITS = {"d": "days", "w": "weeks", "y": "years"}
# Seconds a round waits for a dataset's writer lock (held by an insert or a bulk load).
WRITER_WAIT = 5.0


def parse(value: object, field: str = "retain") -> str:
    """A retention as stored (such as "10y"), checked; InvalidInput naming `field`."""
    match = RETAIN.match(value) if isinstance(value, str) else None
    if match is None:
        raise InvalidInput(f"{field} must be a whole number and a unit, d (days), w (weeks) or y (years), such as "
                           f"'10y' or '90d', not {value!r}", field=field)
    return f"{int(match[1])}{match[2]}"


def check(ds: Dataset, retain: str | None, field: str = "retain") -> str | None:
    """`retain` checked for dataset `ds` (which needs a time dimension); None stays None."""
    if retain is None:
        return None
    if ds.time_axis is None:
        raise InvalidInput(f"dataset {ds.name} has no time dimension: {field} needs one", field=field)
    return parse(retain, field)


def cutoff(ds: Dataset, retain: str, now: datetime) -> int:
    """The first stored time dataset `ds` keeps at `now` (an aware datetime) under
    `retain`: rows before it are older than the retention."""
    n, unit = int(retain[:-1]), retain[-1]
    if unit == "y":
        try:
            start = now.replace(year=now.year - n)
        except ValueError:  # 29 February of a year without one
            start = now.replace(year=now.year - n, day=28)
    else:
        start = now - timedelta(**{UNITS[unit]: n})
    col = ds.dimensions[ds.time_axis]
    return min(max(math.ceil((start - col.epoch) / timedelta(seconds=1)), col.enc_lo), col.enc_hi + 1)


def older_than(write, tree: TreeState, first: int | None) -> dict[str, Content]:
    """The leaves a retention keeping stored times from `first` on touches (None: none),
    each with what it keeps: a leaf whose rows are all older is emptied unread."""
    if first is None:
        return {}
    t = write.ds.time_axis
    out = {}
    for i in np.flatnonzero((tree.left < 0) & (tree.aggs.count > 0) & (tree.dlo[:, t] < first)).tolist():
        g = tree.ids[i]
        if tree.dhi[i, t] < first:
            out[g] = Content.emptied(tree, g)
            continue
        eids, values = write.store.read_grid(write.ds, g)
        gone = values[:, t] < first
        if gone.any():
            out[g] = Content.without(eids, values, gone, write.ds.ndim)
    return out


class Rounds:
    """Retention rounds of every dataset that has a `retain`, over `engine` (a
    gridagg.engine.GridEngine), now and then every `every` seconds, in a daemon thread:
    how a serving process keeps its datasets' retention. start() begins, stop() ends
    (waiting for a round in progress). A round that fails is logged and tried again at
    the next; one that finds the writer lock held for WRITER_WAIT seconds waits for the
    next."""

    def __init__(self, engine, every: float):
        self.engine, self.every = engine, every
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="gridagg-retain", daemon=True)

    def start(self) -> "Rounds":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def _run(self) -> None:
        while not self._stop.is_set():
            for name, _ in self._retaining():
                try:
                    self.engine.retain(name, wait=WRITER_WAIT)
                except Exception:  # noqa: BLE001 - a server away, a dataset dropped meanwhile: the next round
                    log.exception("the retention round of %s failed; the next one runs as usual", name)
            self._stop.wait(self.every)

    def _retaining(self) -> list[tuple[str, str]]:
        try:
            return self.engine.directory.retaining()
        except Exception:  # noqa: BLE001 - PostgreSQL away: the next round
            log.exception("the retention round failed; the next one runs as usual")
            return []


def start(engine, settings) -> Rounds | None:
    """Rounds of `engine` started as `settings` say (retain_every seconds; None when 0)."""
    if not settings.retain_every:
        return None
    return Rounds(engine, settings.retain_every).start()


def now() -> datetime:
    return datetime.now(timezone.utc)
