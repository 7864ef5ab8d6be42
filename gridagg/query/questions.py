"""The questions a serving process answered, sampled per dataset: what the online tuner
(gridagg.tune.online, gridagg.tune.adapt) prices the tree's leaves with.

Each walk of the planner over a whole tree offers its question: the WalkQuery it walked
(box, polygon edges, series buckets, all in stored integers: what another walk over
another tree needs) with how many leaves it cut and the rows in them. A dataset keeps a
uniform sample of at most SAMPLE_SIZE of the questions offered since the tuner last took
its sample (reservoir sampling, algorithm R), so a sample is of recent questions.

Cheap on the hot path: an offer is a counter and, for the first SAMPLE_SIZE questions
and then with falling probability, one list store. No lock: the counters are touched
under the GIL, and a count lost to a race only tilts the sample a little.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import NamedTuple

# Questions kept per dataset between two takes: enough for a tuning round to tell the
# leaves questions cut often from the rest, small enough to walk again in milliseconds.
SAMPLE_SIZE = 256


class Question(NamedTuple):
    """One question answered: `query`, the gridagg.query.walk.WalkQuery walked; `cut`, the
    leaves it read; `rows`, the rows in them."""

    query: object
    cut: int
    rows: int


@dataclass
class _Reservoir:
    seen: int = 0
    kept: list = field(default_factory=list)


class QuestionSample:
    """Per dataset name, a uniform sample of the questions offered since its last take."""

    def __init__(self, size: int = SAMPLE_SIZE):
        self.size = size
        self._by_name: dict[str, _Reservoir] = {}
        self._random = random.Random()

    def offer(self, name: str, query, cut: int, rows: int) -> None:
        """Count a question of dataset `name` (its WalkQuery, leaves cut, rows in them),
        kept with probability size / questions offered so far."""
        r = self._by_name.get(name)
        if r is None:
            r = self._by_name.setdefault(name, _Reservoir())
        r.seen += 1
        if len(r.kept) < self.size:
            r.kept.append(Question(query, cut, rows))
            return
        j = self._random.randrange(r.seen)
        if j < self.size:
            r.kept[j] = Question(query, cut, rows)

    def seen(self, name: str) -> int:
        """Questions of dataset `name` offered since its last take."""
        r = self._by_name.get(name)
        return r.seen if r is not None else 0

    def names(self) -> list[str]:
        """Datasets with questions offered since their last take."""
        return [n for n, r in list(self._by_name.items()) if r.seen]

    def forget(self, name: str) -> None:
        """Drop what was sampled of dataset `name` (dropped)."""
        self._by_name.pop(name, None)

    def take(self, name: str) -> list[Question]:
        """The sample of dataset `name` (a list of Questions); sampling starts anew."""
        r = self._by_name.pop(name, None)
        return list(r.kept) if r is not None else []
