"""The held-out bench's own reading of a question (loadtest/bench/heldout.py): the data
space from the ingest config's TOML, a question's JSON body as SQL over the stored
integers, and the answers as the API documents them (docs/api.md), written without
gridagg's parsers, so that a wrong reading in gridagg cannot also be what it is checked
against.

The reading:
- a column with scale s stores round(value * 10**s); a time column stores seconds since
  its dimension's `min`; a row with a value outside its column's [min, max] is not
  loaded (the ingest job quarantines it);
- where: {dimension: [lo, hi]}, both ends inclusive, null for an open end, each bound
  the decimal it writes (a JSON number as the shortest decimal that reads back as it;
  times ISO 8601, UTC when no zone is named, or seconds since 1970);
- region: a GeoJSON Polygon whose vertices lie on the stored grid of the lon/lat
  dimensions (the held-out families draw them so); a point on an edge counts as inside.
  The test is exact integer arithmetic: a crossing count (even-odd) over the edges (or
  the peer's own point-in-polygon function, exact off the boundary), or the point on an
  edge (the cross product 0 within the edge's box);
- aggregates: "count", and "count", "sum", "min", "max", "avg" of a column; no row:
  count 0, sum 0, min, max and avg None;
- series: step and window durations ("6h", "7d", or seconds), start and end; point i
  stands for the bucket [start + i*step, start + (i+1)*step), the points run from start
  to the bucket holding end, and each aggregates the window of window/step buckets
  ending with its own.

Answers come in stored integers (an avg as a Fraction), as gridagg's in-process results,
and in user units (`decode`), as its JSON answers.
"""

from __future__ import annotations

import math
import re
import tomllib
from dataclasses import dataclass
from datetime import datetime, timezone
from decimal import Decimal
from fractions import Fraction
from pathlib import Path

import numpy as np

DURATION = re.compile(r"^(\d+)([smhd])$")
UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
# The narrowest SQL integer type holding a column's stored domain.
INTEGER_TYPES = (("SMALLINT", 2**15), ("INTEGER", 2**31), ("BIGINT", 2**63))
LONLAT = (("longitude", "latitude"), ("lon", "lat"))


def seconds(value: object) -> Fraction:
    """A time as seconds since 1970: ISO 8601 text (UTC when no zone is named) or a number."""
    if isinstance(value, str):
        stamp = datetime.fromisoformat(value.replace("Z", "+00:00"))
        if stamp.tzinfo is None:
            stamp = stamp.replace(tzinfo=timezone.utc)
        delta = stamp - datetime(1970, 1, 1, tzinfo=timezone.utc)
        return Fraction(delta.days * 86400 + delta.seconds) + Fraction(delta.microseconds, 10**6)
    return exact(value)


def exact(value: object) -> Fraction:
    """A number as the decimal it writes."""
    if isinstance(value, bool):
        raise TypeError(f"{value!r} is no number")
    if isinstance(value, float):
        return Fraction(Decimal(repr(value)))
    return Fraction(Decimal(str(value).strip()) if isinstance(value, str) else value)


def duration(value: object) -> int:
    """Seconds of a step or window: an int, or text such as '6h'."""
    if isinstance(value, int):
        return value
    m = DURATION.match(str(value))
    if not m:
        raise ValueError(f"{value!r} is no duration")
    return int(m.group(1)) * UNITS[m.group(2)]


@dataclass(frozen=True)
class Column:
    """A column of the data space: its name, the archive's field it comes from, kind
    ("time" or "number"), scale, and its stored domain [lo, hi]."""

    name: str
    source: str
    kind: str
    scale: int
    lo: int
    hi: int
    dimension: bool

    @property
    def unit(self) -> int:
        return 10**self.scale

    @property
    def sql_type(self) -> str:
        """The narrowest integer type that holds the stored domain (time: BIGINT)."""
        if self.kind == "time":
            return "BIGINT"
        return next(t for t, limit in INTEGER_TYPES if -limit <= self.lo and self.hi < limit)

    def stored(self, value: object, upper: bool) -> int:
        """A bound as a stored integer: the smallest stored value at or above a lower
        bound, the largest at or below an upper one."""
        v = seconds(value) if self.kind == "time" else exact(value) * self.unit
        return math.floor(v) if upper else math.ceil(v)

    def user(self, stored: int):
        """A stored value as a body writes it: ISO text for a time, else the decimal."""
        if self.kind == "time":
            return datetime.fromtimestamp(stored, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        return stored if self.scale == 0 else stored / self.unit


@dataclass(frozen=True)
class Space:
    """The data space of an ingest config (its dimensions and measures)."""

    name: str
    columns: tuple[Column, ...]
    epoch: int  # the time dimension's min, seconds since 1970: what time values count from

    @classmethod
    def from_toml(cls, path: Path) -> "Space":
        data = tomllib.loads(Path(path).read_text())
        columns, epoch = [], 0
        for dimension, specs in ((True, data.get("dimensions", [])), (False, data.get("measures", []))):
            for spec in specs:
                kind = spec.get("type", "number")
                if kind == "time":
                    if spec.get("format", "iso") != "epoch":
                        raise ValueError(f"{spec['name']}: the held-out bench reads time from epoch seconds only")
                    epoch = int(seconds(spec["min"]))
                    lo, hi = 0, int(seconds(spec["max"])) - epoch
                    scale = 0
                else:
                    scale = int(spec.get("scale", 0))
                    lo, hi = math.ceil(exact(spec["min"]) * 10**scale), math.floor(exact(spec["max"]) * 10**scale)
                columns.append(Column(spec["name"], spec.get("source", spec["name"]), kind, scale, lo, hi, dimension))
        return cls(data["dataset"]["name"], tuple(columns), epoch)

    def column(self, name: str) -> Column:
        for c in self.columns:
            if c.name == name:
                return c
        raise KeyError(f"{name!r} is not a column of {self.name}")

    @property
    def time(self) -> Column:
        return next(c for c in self.columns if c.kind == "time")

    @property
    def lonlat(self) -> tuple[Column, Column]:
        names = {c.name for c in self.columns if c.dimension}
        for lon, lat in LONLAT:
            if lon in names and lat in names:
                return self.column(lon), self.column(lat)
        raise KeyError(f"{self.name} has no lon/lat dimensions")

    def time_value(self, stored: int) -> str:
        """A stored time as ISO text."""
        return self.time.user(stored + self.epoch)

    def stored_time(self, value: object, upper: bool) -> int:
        return self.time.stored(value, upper) - self.epoch

    def select_archive(self, source: str) -> str:
        """SQL reading the archive's rows (FROM `source`) as stored integers, one column
        per column of the space in its order, the rows outside a column's domain left out."""
        exprs, keep = [], []
        for c in self.columns:
            src = f'"{c.source}"'
            value = f"{src} - {self.epoch}" if c.kind == "time" else f"round({src} * {c.unit})"
            exprs.append(f'CAST({value} AS {c.sql_type}) AS "{c.name}"')
            keep.append(f"{value} BETWEEN {c.lo} AND {c.hi}")
        return f"SELECT {', '.join(exprs)} FROM {source} WHERE {' AND '.join(keep)}"


@dataclass(frozen=True)
class Dialect:
    """What differs between the SQL peers: integer division of a non-negative number,
    and a point-in-polygon function of their own (None: none), over integer points and
    vertices, whose answer for a point on the boundary may be either."""

    name: str
    div: str  # a format of (expr, divisor)
    point_in_polygon: str | None = None  # a format of (x, y, the vertices as "(x, y), ...")


DUCKDB = Dialect("duckdb", "(({}) // {})")
# ClickHouse's own test answers twice as fast as the crossing count in SQL; it is exact
# for integers off the boundary (their floats are exact, and a grid point off an edge
# lies far above the rounding of its arithmetic), and the edges are tested apart.
CLICKHOUSE = Dialect("clickhouse", "intDiv({}, {})", "pointInPolygon(({}, {}), [{}])")
POSTGRES = Dialect("pg", "(({}) / {})")
DIALECTS = {d.name: d for d in (DUCKDB, CLICKHOUSE, POSTGRES)}


@dataclass(frozen=True)
class Statement:
    """A question as SQL: `sql`, whose row(s) hold count(*) then `exprs`' values (after
    the bucket for a series); the aggregates' labels; for a series its buckets."""

    sql: str
    exprs: tuple[str, ...]
    labels: tuple[str, ...]
    points: int = 0  # a series' points (0: a plain query)
    width: int = 1  # buckets per window


def _needs(space: Space, labels: list[str]) -> list[str]:
    """The SQL aggregates the labels need besides count(*), each once."""
    out: list[str] = []
    for label in labels:
        func, _, name = label.partition(":")
        if not name:
            continue
        space.column(name)
        wanted = {"count": ["count"], "sum": ["sum"], "avg": ["sum", "count"], "min": ["min"], "max": ["max"]}[func]
        for f in wanted:
            expr = f'{f}("{name}")'
            if expr not in out:
                out.append(expr)
    return out


def box_terms(space: Space, where: dict | None) -> list[str]:
    """The WHERE terms of a box, in stored integers."""
    terms = []
    for name, (lo, hi) in (where or {}).items():
        c = space.column(name)
        stored = space.stored_time if c.kind == "time" else c.stored
        low = c.lo if lo is None else stored(lo, upper=False)
        high = c.hi if hi is None else stored(hi, upper=True)
        terms.append(f'"{name}" BETWEEN {low} AND {high}')
    return terms


def polygon_terms(space: Space, region: dict, dialect: Dialect = DUCKDB) -> list[str]:
    """The WHERE terms of a Polygon with its vertices on the stored lon/lat grid: its
    bounding box, and the exact test with the boundary inside: the even-odd crossing
    count (or the dialect's own point-in-polygon function), or a point on an edge."""
    lon, lat = space.lonlat
    if region.get("type") != "Polygon" or len(region["coordinates"]) != 1:
        raise ValueError("the held-out peers read a Polygon of one ring")
    ring = []
    for x, y in region["coordinates"][0]:
        sx, sy = exact(x) * lon.unit, exact(y) * lat.unit
        if sx.denominator != 1 or sy.denominator != 1:
            raise ValueError(f"vertex {[x, y]} is not on the stored lon/lat grid")
        ring.append((int(sx), int(sy)))
    if ring[0] != ring[-1]:
        ring.append(ring[0])
    xs, ys = [p[0] for p in ring], [p[1] for p in ring]
    px, py = f'CAST("{lon.name}" AS BIGINT)', f'CAST("{lat.name}" AS BIGINT)'
    crossings, edges = [], []
    for (x1, y1), (x2, y2) in zip(ring, ring[1:]):
        a, b = x2 - x1, y2 - y1
        # a*(py - y1) - b*(px - x1): 0 on the edge's line, its sign the side of it
        side = f"(({a}) * {py} - ({b}) * {px} + ({b * x1 - a * y1}))"
        if b > 0:
            crossings.append(f"CAST(({py} >= {y1} AND {py} < {y2} AND {side} > 0) AS INTEGER)")
        elif b < 0:
            crossings.append(f"CAST(({py} >= {y2} AND {py} < {y1} AND {side} < 0) AS INTEGER)")
        edges.append(f"({side} = 0 AND {px} BETWEEN {min(x1, x2)} AND {max(x1, x2)} "
                     f"AND {py} BETWEEN {min(y1, y2)} AND {max(y1, y2)})")
    if dialect.point_in_polygon:
        vertices = ", ".join(f"({x}, {y})" for x, y in ring[:-1])
        interior = dialect.point_in_polygon.format(f'"{lon.name}"', f'"{lat.name}"', vertices)
    else:
        interior = f"(({' + '.join(crossings) or '0'}) % 2 = 1)"
    inside = " OR ".join([interior, *edges])
    return [f'"{lon.name}" BETWEEN {min(xs)} AND {max(xs)}', f'"{lat.name}" BETWEEN {min(ys)} AND {max(ys)}',
            f"({inside})"]


def statement(space: Space, body: dict, table: str, dialect: Dialect) -> Statement:
    """A question's body (a series when it has a step) as SQL over `table`."""
    labels = list(body["aggregates"])
    exprs = _needs(space, labels)
    terms = box_terms(space, body.get("where"))
    if body.get("region") is not None:
        terms += polygon_terms(space, body["region"], dialect)
    select = ", ".join(["count(*)", *exprs])
    if "step" not in body:
        where = f" WHERE {' AND '.join(terms)}" if terms else ""
        return Statement(f"SELECT {select} FROM {table}{where}", tuple(exprs), tuple(labels))
    step = duration(body["step"])
    width = duration(body.get("window") or step) // step
    t = space.time.name
    first = space.stored_time(body["start"], upper=False)
    last = space.stored_time(body["end"], upper=True)
    points = (last - first) // step + 1
    base = first - (width - 1) * step
    terms.append(f'"{t}" BETWEEN {base} AND {base + (points + width - 1) * step - 1}')
    bucket = dialect.div.format(f'"{t}" - {base}', step)
    return Statement(f"SELECT {bucket} AS b, {select} FROM {table} WHERE {' AND '.join(terms)} GROUP BY b",
                     tuple(exprs), tuple(labels), points, width)


def _value(label: str, got: dict):
    """One aggregate's stored answer from the SQL aggregates' values (by expression)."""
    func, _, name = label.partition(":")
    if not name:
        return got["count(*)"]
    if func == "count":
        return got[f'count("{name}")']
    if func == "sum":
        return got[f'sum("{name}")']
    if func == "avg":
        n = got[f'count("{name}")']
        return Fraction(got[f'sum("{name}")'], n) if n else None
    return got[f'{func}("{name}")']


def _number(v):
    return None if v is None else int(v)


def answers(st: Statement, rows: list[tuple]) -> list[dict]:
    """The stored-integer answers of a statement's rows: label -> value, one dict per
    point of a series (one for a plain query)."""
    names = ["count(*)", *st.exprs]
    if not st.points:
        row = rows[0] if rows else (0,) * len(names)
        got = {n: _number(v) for n, v in zip(names, row)}
        got = {n: (v or 0) if n.startswith(("count", "sum")) else v for n, v in got.items()}
        return [{label: _value(label, got) for label in st.labels}]
    nb = st.points + st.width - 1
    per = {}
    big = np.iinfo(np.int64)
    for n in names:
        fill = big.max if n.startswith("min") else big.min if n.startswith("max") else 0
        per[n] = np.full(nb, fill, dtype=object if n.startswith("sum") else np.int64)
    for row in rows:
        b = int(row[0])
        for n, v in zip(names, row[1:]):
            if v is not None:
                per[n][b] = int(v)
    windows = {}
    for n, arr in per.items():
        if n.startswith(("min", "max")):
            view = np.lib.stride_tricks.sliding_window_view(arr, st.width)
            windows[n] = view.min(axis=1) if n.startswith("min") else view.max(axis=1)
        else:
            total = np.concatenate([[0], np.cumsum(arr)])
            windows[n] = total[st.width:] - total[:-st.width]
    counts = windows["count(*)"]
    out = []
    for i in range(st.points):
        got = {n: int(w[i]) for n, w in windows.items()}
        for n in got:
            if n.startswith(("min", "max")) and not counts[i]:
                got[n] = None
        out.append({label: _value(label, got) for label in st.labels})
    return out


def decode(space: Space, label: str, value):
    """A stored answer in user units, as the API's JSON gives it: a count as it is; a
    sum, min or max divided by 10**scale (a whole number at scale 0); an avg the mean of
    the stored values so divided (whole when it is)."""
    func, _, name = label.partition(":")
    if value is None or func == "count" or not name:
        return value
    c = space.column(name)
    if c.kind == "time":
        raise ValueError(f"{label}: the held-out bench asks no aggregate of time")
    if isinstance(value, Fraction):
        n, d = value.numerator, value.denominator
        if c.scale == 0:
            return n if d == 1 else n / d
        return n / (d * c.unit)
    return value if c.scale == 0 else value / c.unit


def user_answers(space: Space, stored: list[dict]) -> list[dict]:
    """decode() of every answer of every point."""
    return [{label: decode(space, label, v) for label, v in point.items()} for point in stored]
