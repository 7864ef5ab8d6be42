"""Fair settings: every system gets the same concurrency and its best setting of its own
knobs, measured.

A setting is a shape (workers x threads) and a value of each of the system's knobs
(Peer.KNOBS: DuckDB's and ClickHouse's threads per query, PostgreSQL's parallel
workers per query). The shapes the bench is given all have the same product, the
requests a system may answer at once, so each system gets the same concurrency and
chooses how to split it between processes and threads (DuckDB: as many workers as pay).
The bench serves a system at each of its settings in turn and times one run of the sum
query at the most clients (runs.py); the fastest serves the recorded runs, and the
report lists every trial.
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


def check_shapes(shapes: list[Shape]) -> None:
    """ValueError unless every shape gives the same concurrency (workers x threads)."""
    if len({s.concurrency for s in shapes}) > 1:
        raise ValueError("every shape must give the same concurrency (workers x threads), not "
                         + ", ".join(f"{s} = {s.concurrency}" for s in shapes))


def candidates(system: System, shapes: list[Shape]) -> list[Setting]:
    """Every combination of a shape and a value of each of the system's knobs."""
    names = sorted(system.knobs)
    return [Setting(shape, tuple(zip(names, values)))
            for shape in shapes for values in itertools.product(*(system.knobs[n] for n in names))]


def best(trials: list[dict]) -> Setting:
    """The setting of the fastest trial ({"setting", "rps"}; the first of equals)."""
    return max(trials, key=lambda t: t["rps"])["setting"]
