"""The held-out bench's questions: families of questions drawn from the data by a seed,
each a JSON body of the API (/query, or /series when it has a step) and its family's
name. The same seed and data give the same questions.

Every question is anchored on a row drawn at random (Sample.anchors), whose values lie
inside it, so that few are empty. The families (FAMILIES):
- box: ranges over a random subset of the dimensions, each between two random quantiles
  of its values (widened to hold the anchor's);
- lonlat: a lon/lat box from a station's surroundings (0.5 deg) to a continent (40 deg),
  over a time window from an hour to the whole span, or none;
- station: one station's position (a point) over a window of 1 to 60 days;
- polygon: convex and concave polygons (every other one) of 3 to 32 vertices on the
  stored lon/lat grid around the anchor, 0.5 to 30 degrees across, half within a time
  window; one in four has a vertex on a station (on the edge counts as inside);
- time: a time window alone, from an hour to the whole span, to the second, the hour
  or the day;
- series: steps of an hour to 30 days, half of them with a moving window of 2 to 14
  steps, over nothing else, a lon/lat box, a box of quantile ranges, or a polygon;
- extremes: the min or max of one column over a box whose answer is not the column's
  extreme over all the data (where a min at the column's floor would make every grid's
  answer the same): each box drawn is checked with the reference's answer.

The other families ask count and one or two sums, averages or maxima of the value
columns (never a min at a floor: that is the extremes family, checked).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import shapely

from .heldout_sql import Space

FAMILIES = ("box", "lonlat", "station", "polygon", "time", "series", "extremes")
HOUR, DAY = 3600, 86400
STEPS = (("1h", HOUR), ("6h", 6 * HOUR), ("1d", DAY), ("7d", 7 * DAY), ("30d", 30 * DAY))
MOST_POINTS = 1000  # a series' points at most (the API's limit is 10,000)
TRIES = 100  # boxes drawn at most for one question of the extremes family


@dataclass(frozen=True)
class Question:
    """A question of a family: its label ("polygon 7") and its API body."""

    family: str
    label: str
    body: dict

    @property
    def series(self) -> bool:
        return "step" in self.body

    def path(self, dataset: str) -> str:
        """Where it is POSTed for gridagg's dataset `dataset`."""
        return f"/v1/datasets/{dataset}/{'series' if self.series else 'query'}"

    def to_json(self) -> dict:
        return {"family": self.family, "label": self.label, "body": self.body}

    @classmethod
    def from_json(cls, d: dict) -> "Question":
        return cls(d["family"], d["label"], d["body"])


@dataclass(frozen=True)
class Sample:
    """What the families draw from, in stored integers: rows drawn at random (one column
    per column of the space, in its order), every station's position (lon, lat), and
    each column's least and greatest value over all the data."""

    space: Space
    rows: np.ndarray
    positions: np.ndarray
    lows: dict[str, int]
    highs: dict[str, int]

    def values(self, name: str) -> np.ndarray:
        return self.rows[:, [c.name for c in self.space.columns].index(name)]


class Drawer:
    """The questions of one seed: draw(family) gives the family's next question.
    answer(body) gives the reference's stored answers (heldout_sql.answers), asked by
    the extremes family to check its boxes."""

    def __init__(self, sample: Sample, seed: int, answer: Callable[[dict], list[dict]]):
        self.s, self.space, self.answer = sample, sample.space, answer
        self.rng = np.random.default_rng(seed)
        self.lon, self.lat = self.space.lonlat
        self.t = self.space.time
        self.span = (sample.lows[self.t.name], sample.highs[self.t.name])
        names = {self.t.name, self.lon.name, self.lat.name}
        self.values = [c.name for c in self.space.columns if c.kind == "number" and c.name not in names]
        self.dims = [c.name for c in self.space.columns if c.dimension]
        self.n = {f: 0 for f in FAMILIES}

    def draw(self, family: str) -> Question:
        self.n[family] += 1
        body = getattr(self, f"_{family}")(self._anchor())
        return Question(family, f"{family} {self.n[family]}", body)

    # -- pieces ---------------------------------------------------------------------

    def _anchor(self) -> dict[str, int]:
        row = self.s.rows[self.rng.integers(len(self.s.rows))]
        return {c.name: int(v) for c, v in zip(self.space.columns, row)}

    def _log_uniform(self, lo: float, hi: float) -> float:
        return math.exp(self.rng.uniform(math.log(lo), math.log(hi)))

    def _user(self, name: str, stored: int):
        c = self.space.column(name)
        return self.space.time_value(stored) if c.kind == "time" else c.user(stored)

    def _range(self, name: str, lo: int, hi: int) -> list:
        return [self._user(name, lo), self._user(name, hi)]

    def _window(self, at: int, shortest: float, longest: float) -> list[str]:
        """A time window holding `at`, log-uniformly from shortest to longest seconds
        wide, its ends to the second, the hour or the day."""
        width = int(self._log_uniform(shortest, max(longest, shortest)))
        lo = at - int(self.rng.uniform(0, width))
        align = int(self.rng.choice([1, HOUR, DAY]))
        lo, hi = lo // align * align, -(-(lo + width) // align) * align - 1
        return self._range(self.t.name, lo, max(hi, at))

    def _whole_span(self) -> float:
        return float(self.span[1] - self.span[0] + 1)

    def _aggregates(self, count: bool = True) -> list[str]:
        k = int(self.rng.integers(1, 3))
        picks = [f"{self.rng.choice(['sum', 'avg', 'max'])}:{self.rng.choice(self.values)}" for _ in range(k)]
        return list(dict.fromkeys((["count"] if count else []) + picks))

    def _quantile_box(self, anchor: dict, dims: list[str]) -> dict:
        where = {}
        for name in dims:
            a = self.rng.uniform(0, 0.9)
            b = self.rng.uniform(a + 0.05, 1.0)
            lo, hi = (int(round(v)) for v in np.quantile(self.s.values(name), [a, b]))
            where[name] = self._range(name, min(lo, anchor[name]), max(hi, anchor[name]))
        return where

    def _lonlat_box(self, anchor: dict, shortest: float, longest: float) -> dict:
        """A lon/lat box holding the anchor, shortest to longest degrees across (a lat
        side of half to once the lon side)."""
        deg = self._log_uniform(shortest, longest)
        out = {}
        for col, side in ((self.lon, deg), (self.lat, deg * self.rng.uniform(0.5, 1.0))):
            width = int(side * col.unit)
            lo = anchor[col.name] - int(self.rng.uniform(0, width))
            out[col.name] = self._range(col.name, max(lo, col.lo), min(lo + width, col.hi))
        return out

    # -- the families ---------------------------------------------------------------

    def _box(self, anchor: dict) -> dict:
        k = int(self.rng.integers(1, len(self.dims) + 1))
        dims = [str(d) for d in self.rng.choice(self.dims, size=k, replace=False)]
        return {"where": self._quantile_box(anchor, dims), "aggregates": self._aggregates()}

    def _lonlat(self, anchor: dict) -> dict:
        where = self._lonlat_box(anchor, 0.5, 40)
        if self.rng.random() < 0.8:
            where[self.t.name] = self._window(anchor[self.t.name], HOUR, self._whole_span())
        return {"where": where, "aggregates": self._aggregates()}

    def _station(self, anchor: dict) -> dict:
        where = {c.name: self._range(c.name, anchor[c.name], anchor[c.name]) for c in (self.lon, self.lat)}
        where[self.t.name] = self._window(anchor[self.t.name], DAY, 60 * DAY)
        return {"where": where, "aggregates": self._aggregates()}

    def _time(self, anchor: dict) -> dict:
        return {"where": {self.t.name: self._window(anchor[self.t.name], HOUR, self._whole_span())},
                "aggregates": self._aggregates()}

    def _polygon(self, anchor: dict) -> dict:
        body = {"region": self._shape(anchor, convex=self.n["polygon"] % 2 == 1), "aggregates": self._aggregates()}
        if self.rng.random() < 0.5:
            body["where"] = {self.t.name: self._window(anchor[self.t.name], DAY, self._whole_span())}
        return body

    def _series(self, anchor: dict) -> dict:
        name, step = STEPS[int(self.rng.integers(len(STEPS)))]
        most = max(2, min(MOST_POINTS, int(self._whole_span() // step)))
        points = int(self._log_uniform(2, most))
        start = anchor[self.t.name] - int(self.rng.uniform(0, points * step))
        start -= start % (DAY if step >= DAY else HOUR)
        body = {"aggregates": self._aggregates(count=False), "step": name,
                "start": self.space.time_value(start), "end": self.space.time_value(start + points * step - 1)}
        if self.rng.random() < 0.5:
            k = int(self.rng.integers(2, 15))
            number, unit = int(name[:-1]), name[-1]
            body["window"] = f"{k * number}{unit}"
        kind = int(self.rng.integers(4))
        if kind == 1:
            body["where"] = self._lonlat_box(anchor, 0.5, 40)
        elif kind == 2:
            others = [d for d in self.dims if d != self.t.name]
            k = int(self.rng.integers(1, 3))
            body["where"] = self._quantile_box(anchor, [str(d) for d in self.rng.choice(others, size=k, replace=False)])
        elif kind == 3:
            body["region"] = self._shape(anchor, convex=bool(self.rng.random() < 0.5))
        return body

    def _extremes(self, anchor: dict) -> dict:
        body = {}
        for _ in range(TRIES):
            func = str(self.rng.choice(["min", "max"]))
            name = str(self.rng.choice(self.values))
            label = f"{func}:{name}"
            kind = int(self.rng.integers(3))
            if kind == 0:
                where = self._lonlat_box(anchor, 0.5, 40)
                where[self.t.name] = self._window(anchor[self.t.name], HOUR, self._whole_span())
            elif kind == 1:
                where = self._quantile_box(anchor, [self.t.name, str(self.rng.choice(self.dims))])
            else:
                where = self._lonlat_box(anchor, 0.5, 2)
                where[self.t.name] = self._window(anchor[self.t.name], DAY, 365 * DAY)
            body = {"where": where, "aggregates": [label]}
            got = self.answer(body)[0][label]
            extreme = (self.s.lows if func == "min" else self.s.highs)[name]
            if got is not None and got != extreme:
                return body
            anchor = self._anchor()
        return body

    # -- polygons -------------------------------------------------------------------

    def _shape(self, anchor: dict, convex: bool) -> dict:
        """A GeoJSON Polygon holding the anchor's position, its vertices on the stored
        grid: no station lies on an edge between its ends unless the edge runs along a
        grid line (where a position's float and the vertices' are the same numbers, and
        the peers' exact test agrees with gridagg's on floats)."""
        while True:
            ring = self._ring(anchor, convex)
            if ring is not None:
                lon, lat = self.lon, self.lat
                coords = [[lon.user(x), lat.user(y)] for x, y in ring] + [[lon.user(ring[0][0]), lat.user(ring[0][1])]]
                return {"type": "Polygon", "coordinates": [coords]}

    def _ring(self, anchor: dict, convex: bool) -> list[tuple[int, int]] | None:
        lon, lat = self.lon, self.lat
        k = int(self.rng.integers(3, 33))
        radius = self._log_uniform(0.25, 15)
        squash = self.rng.uniform(0.5, 1.0)
        phase = self.rng.uniform(0, 2 * math.pi)
        # Angles a little apart (no gap reaches half a turn): the anchor stays inside.
        angles = phase + 2 * math.pi * (np.arange(k) + self.rng.uniform(0, 0.4, k)) / k
        radii = radius * (np.ones(k) if convex else self.rng.uniform(0.35, 1.0, k))
        x0, y0 = anchor[lon.name], anchor[lat.name]
        ring = [(int(np.clip(x0 + r * math.cos(a) * lon.unit, lon.lo, lon.hi)),
                 int(np.clip(y0 + squash * r * math.sin(a) * lat.unit, lat.lo, lat.hi))) for a, r in zip(angles, radii)]
        if self.rng.random() < 0.25:  # a vertex on the station nearest to one of them
            j = int(self.rng.integers(k))
            d = np.abs(self.s.positions - np.array(ring[j])).sum(axis=1)
            ring[j] = tuple(int(v) for v in self.s.positions[int(np.argmin(d))])
        polygon = shapely.Polygon(ring)
        if len(set(ring)) < k or not polygon.is_valid or not polygon.intersects(shapely.Point(x0, y0)):
            return None
        return None if on_diagonal_edge(ring, self.s.positions).any() else ring


def on_diagonal_edge(ring: list[tuple[int, int]], positions: np.ndarray) -> np.ndarray:
    """Which positions lie on an edge of the ring (its vertices, without the closing
    one) between its ends, on an edge along no grid line (exact: integers)."""
    px, py = positions[:, 0], positions[:, 1]
    on = np.zeros(len(positions), dtype=bool)
    for (x1, y1), (x2, y2) in zip(ring, ring[1:] + ring[:1]):
        if x1 == x2 or y1 == y2:
            continue
        inside = (px > min(x1, x2)) & (px < max(x1, x2)) & (py > min(y1, y2)) & (py < max(y1, y2))
        on |= inside & ((x2 - x1) * (py - y1) == (y2 - y1) * (px - x1))
    return on


def draw(sample: Sample, seed: int, per_family: int, answer: Callable[[dict], list[dict]],
         families: tuple[str, ...] = FAMILIES) -> list[Question]:
    """per_family questions of each family, drawn from the sample with `seed`."""
    drawer = Drawer(sample, seed, answer)
    return [drawer.draw(f) for f in families for _ in range(per_family)]
