"""Fair settings: every system gets the same concurrency and its best setting of its own
knobs, measured.

A setting is a shape (workers x threads: server processes, and requests each answers at
once) and a value of each of the system's knobs (Peer.KNOBS: DuckDB's and ClickHouse's
threads per query, PostgreSQL's parallel workers per query). Every system is offered
the same shapes, so each may answer as many requests at once as any other and uses as
many workers and threads as pay it (DuckDB at two threads a query gains nothing from
eight queries at once on two cores). The bench serves a system at each of its settings
in turn and times one run of the sum query at the most clients (runs.py); the fastest
serves the recorded runs, and the report lists every trial.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from .servers import Shape
from .systems import System


@dataclass(frozen=True)
class Setting:
    shape: Shape
    knobs: tuple[tuple[str, object], ...] = ()

    def __str__(self) -> str:
        return ", ".join([f"{self.shape} (workers x threads)", *(f"{k} {v}" for k, v in self.knobs)])


def candidates(system: System, shapes: list[Shape]) -> list[Setting]:
    """Every combination of a shape and a value of each of the system's knobs."""
    names = sorted(system.knobs)
    return [Setting(shape, tuple(zip(names, values)))
            for shape in shapes for values in itertools.product(*(system.knobs[n] for n in names))]


def best(trials: list[dict]) -> Setting:
    """The setting of the fastest trial ({"setting", "rps"}; the first of equals)."""
    return max(trials, key=lambda t: t["rps"])["setting"]
