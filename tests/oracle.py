"""The tests' own oracle: the answers a user expects from gridagg, computed exactly from
rows and requests as the user writes them, by this module's own reading of the
documented API (docs/api.md; the request fields' descriptions in
/openapi.json). It uses none of gridagg's parsers, encoders or region code, so a wrong
reading of a bound, a time, a step or a polygon's edge in gridagg cannot also be the
expectation it is checked against.

The reading:
- a number is the decimal it writes: an int or Decimal as such, text as a decimal, a
  float (a JSON number) as the shortest decimal that reads back as it (0.1 is a tenth);
- a time is ISO 8601 text (UTC when it names no zone), a datetime, or seconds since
  1970; times are compared as exact seconds since 1970;
- values are held as Decimals (exact for all of these, and compared fast), added up
  without rounding;
- a row holds a value per column; None, an absent key or blank text is a missing value;
- where: {dimension: [lo, hi]}, both ends inclusive, null for an open end; a dimension
  left out spans its whole domain;
- region: a GeoJSON Polygon or MultiPolygon (or a Feature holding one) over the
  dimensions named lon and lat (or longitude and latitude); a row is selected when the
  polygon covers its point (the edge counts as inside), the point being the doubles
  nearest its lon and lat, as a client parsing them gets them;
- aggregates: "count" counts the rows, "count:c" the rows with a value of c; "sum:c",
  "min:c", "max:c", "avg:c" go over the values present (no value: sum 0, the others
  None). A sum of times is the column's min plus the sum of the times' distances from it;
- a series: step and window are whole seconds or a number and a unit (s, m, h, d), the
  window a whole number of steps (one step when left out). Point i stands for the bucket
  [start + i*step, start + (i+1)*step) and aggregates the selected rows of the window
  that ends with it, [start + (i+1)*step - window, start + (i+1)*step - 1]; points run
  from start to the bucket holding end. Left out, start is the start of where's time
  range, end its end (within the dataset's domain). Times are whole seconds from the
  time column's min, so start is the first such second at or after it, end the last at
  or before it.

query() and series() answer with numbers as Fractions, times as Instants, counts as ints;
a request gridagg must refuse raises Refused naming the field (lo above hi, a window that
is not a whole number of steps, a start after the end). check_answer and check_series
compare those answers with the ones gridagg writes as JSON (the HTTP API's bodies,
`gridagg query --json`, QueryResult.to_json): a count exactly, a number as the double
nearest to the exact answer (or exactly, when written as an int), a time to the
microsecond its text carries; check_stored with the engine's own, in stored units,
exactly.
"""

from __future__ import annotations

import math
import re
from bisect import bisect_left, bisect_right
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from decimal import Context, Decimal, Inexact, localcontext
from fractions import Fraction

import shapely
from shapely.geometry import shape

UNIX = datetime(1970, 1, 1, tzinfo=timezone.utc)
DURATION = re.compile(r"^\s*([0-9]+)\s*([smhd])\s*$")
UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
REGION_AXES = (("lon", "lat"), ("longitude", "latitude"))
NULL = -(2**63)  # how gridagg stores a missing value (docs/ingest.md: nullable measures)
EXACT = Context(prec=500, traps=[Inexact])  # sums of test values never round; if one did, it raises


class Refused(ValueError):
    """A request gridagg must refuse, with the field its error names."""

    def __init__(self, field: str, why: str):
        super().__init__(f"{field}: {why}")
        self.field = field


@dataclass(frozen=True, order=True)
class Instant:
    """A time: exact seconds since 1970-01-01T00:00:00Z."""

    seconds: Fraction

    def __str__(self) -> str:
        return (UNIX + timedelta(seconds=float(self.seconds))).isoformat().replace("+00:00", "Z")


def number(value: object) -> Decimal:
    """A number as the decimal it writes."""
    if isinstance(value, bool):
        raise TypeError(f"{value!r} is no number")
    if isinstance(value, float):  # numpy's too
        return Decimal(repr(float(value)))
    if isinstance(value, (int, Decimal)):
        return Decimal(value)
    return Decimal(str(value).strip())


def seconds(value: object) -> Decimal:
    """A time as exact seconds since 1970."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return number(value)
    ts = value if isinstance(value, datetime) else datetime.fromisoformat(str(value).strip())
    if ts.tzinfo is None:
        ts = ts.replace(tzinfo=timezone.utc)
    delta = ts - UNIX
    return Decimal(delta.days * 86400 + delta.seconds) + Decimal(delta.microseconds).scaleb(-6)


def duration(value: object) -> int:
    """Whole seconds of a step or window: an int, or text such as '7d'."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    m = DURATION.match(value)
    return int(m.group(1)) * UNITS[m.group(2)]


def missing(value: object) -> bool:
    """Whether a row's value is missing: None or blank text."""
    return value is None or (isinstance(value, str) and not value.strip())


@dataclass(frozen=True)
class Table:
    """A dataset as its definition (the JSON a user posts to /v1/datasets) describes it."""

    kinds: dict  # column name -> "number" or "time", dimensions first
    dimensions: tuple[str, ...]
    scales: dict  # number column -> decimals kept
    lows: dict  # column -> its domain's min (exact; times in seconds), where it has one
    highs: dict

    @classmethod
    def of(cls, definition: dict) -> "Table":
        kinds, scales, lows, highs = {}, {}, {}, {}
        for col in [*definition["dimensions"], *definition.get("measures", [])]:
            name, kind = col["name"], col.get("type", "number")
            kinds[name] = kind
            read = seconds if kind == "time" else number
            if kind == "number":
                scales[name] = col.get("scale", 0)
            if col.get("min") is not None:
                lows[name] = read(col["min"])
            if col.get("max") is not None:
                highs[name] = read(col["max"])
        return cls(kinds, tuple(c["name"] for c in definition["dimensions"]), scales, lows, highs)

    @property
    def time(self) -> str | None:
        """The time dimension."""
        return next((d for d in self.dimensions if self.kinds[d] == "time"), None)

    def read(self, column: str, value: object) -> Decimal | None:
        """A value of a column (a bound or a row's), exact; None when missing."""
        if missing(value):
            return None
        return seconds(value) if self.kinds[column] == "time" else number(value)

    def rows(self, rows: list[dict]) -> list[dict]:
        """Rows as this oracle compares them: column -> exact value or None."""
        return [{c: self.read(c, row.get(c)) for c in self.kinds} for row in rows]

    def from_stored(self, stored) -> list[dict]:
        """Rows given as gridagg stores them (an (n, columns) array of integers: value x
        10**scale, a time as seconds since its column's min, NULL for a missing value),
        as this oracle compares them: for tests whose rows come stored."""
        names = list(self.kinds)
        out = []
        for values in stored.tolist():
            row = {}
            for name, v in zip(names, values):
                if v == NULL:
                    row[name] = None
                elif self.kinds[name] == "time":
                    row[name] = self.lows[name] + v
                else:
                    row[name] = Decimal(v).scaleb(-self.scales[name])
            out.append(row)
        return out

    def write(self, column: str, value: Decimal) -> str:
        """A value (as read) as a user writes it: ISO 8601 for a time, decimal text."""
        return str(Instant(Fraction(value))) if self.kinds[column] == "time" else format(value, "f")


def select(table: Table, rows: list[dict], request: dict) -> list[dict]:
    """The rows (as Table.rows gives them) that where and region select."""
    tests = []
    for dim, (lo, hi) in (request.get("where") or {}).items():
        lo, hi = table.read(dim, lo), table.read(dim, hi)
        if lo is not None and hi is not None and lo > hi:
            raise Refused(f"where.{dim}", "lo is above hi")
        tests.append((dim, lo, hi))
    chosen = rows
    for d, lo, hi in tests:
        if lo is not None:
            chosen = [r for r in chosen if lo <= r[d]]
        if hi is not None:
            chosen = [r for r in chosen if r[d] <= hi]
    region = request.get("region")
    if region is None or not chosen:
        return chosen
    if region.get("type") == "Feature":
        region = region["geometry"]
    lon, lat = next(pair for pair in REGION_AXES if all(a in table.dimensions for a in pair))
    points = shapely.points([float(r[lon]) for r in chosen], [float(r[lat]) for r in chosen])
    inside = shapely.covers(shape(region), points)
    return [r for r, yes in zip(chosen, inside) if yes]


def aggregate(table: Table, rows: list[dict], labels: list[str]) -> dict:
    """label -> the aggregate over rows: an int for counts, a Fraction for numbers, an
    Instant for times, None when no value was selected."""
    out = {}
    for label in labels:
        func, _, col = label.partition(":")
        if not col:
            out[label] = len(rows)
            continue
        values = [r[col] for r in rows if r[col] is not None]
        if func == "count":
            out[label] = len(values)
            continue
        time = table.kinds[col] == "time"
        if func == "sum":
            v = total(values)
            if time:  # distances from the column's min, added up, after the min
                v += (1 - len(values)) * Fraction(table.lows[col])
        elif not values:
            v = None
        elif func == "min":
            v = Fraction(min(values))
        elif func == "max":
            v = Fraction(max(values))
        else:
            v = total(values) / len(values)
        out[label] = Instant(v) if time and v is not None else v
    return out


def total(values: list[Decimal]) -> Fraction:
    """The exact sum of values."""
    with localcontext(EXACT):
        return Fraction(sum(values, Decimal(0)))


def query(table: Table, rows: list[dict], request: dict) -> dict:
    """The answer to a query request ({"where", "aggregates", "region"}) over rows (as
    Table.rows gives them): {"results": label -> value, "count": rows selected}."""
    chosen = select(table, rows, request)
    return {"results": aggregate(table, chosen, request["aggregates"]), "count": len(chosen)}


def series(table: Table, rows: list[dict], request: dict) -> dict:
    """The answer to a series request (a query's fields and step, window, start, end):
    {"step", "window" (seconds), "points": [{"time", "window": [first, last], "count",
    "results"}]}, times as Instants."""
    time = table.time
    step = duration(request["step"])
    width = duration(request["window"]) if request.get("window") is not None else step
    if width % step:
        raise Refused("window", "not a whole number of steps")
    lo, hi = (request.get("where") or {}).get(time, (None, None))
    origin = table.lows[time]
    lo = origin if lo is None else max(origin, table.read(time, lo))
    hi = table.highs[time] if hi is None else min(table.highs[time], table.read(time, hi))
    start = table.read(time, request["start"]) if request.get("start") is not None else lo
    end = table.read(time, request["end"]) if request.get("end") is not None else hi
    first = origin + math.ceil(start - origin)
    last = origin + math.floor(end - origin)
    if first > last:
        raise Refused("start", "after the end")
    chosen = sorted(select(table, rows, request), key=lambda r: r[time])
    times = [r[time] for r in chosen]
    points = []
    for i in range(int(last - first) // step + 1):
        t = first + i * step
        w_lo, w_hi = t + step - width, t + step - 1
        window = chosen[bisect_left(times, w_lo):bisect_right(times, w_hi)]
        points.append({"time": Instant(Fraction(t)), "window": [Instant(Fraction(w_lo)), Instant(Fraction(w_hi))],
                       "count": len(window),
                       "results": aggregate(table, window, request["aggregates"])})
    return {"step": step, "window": width, "points": points}


# ------------------------------------------------------------------ answers as written


def same(got: object, want: object) -> bool:
    """Whether a value gridagg wrote (JSON) is the exact answer `want`: None as None, a
    time as ISO text to the microsecond, a count or number as an int equal to it or as the
    double nearest to it."""
    if want is None or got is None:
        return got is want
    if isinstance(want, Instant):
        return isinstance(got, str) and abs(Fraction(seconds(got)) - want.seconds) < Fraction(1, 10**6)
    if isinstance(got, bool) or not isinstance(got, (int, float)):
        return False
    return Fraction(got) == want if isinstance(got, int) else got == float(want)


def check_results(got: dict, want: dict, context: object = None) -> None:
    """Results as gridagg writes them (label -> value) against aggregate()'s; context
    goes into the message of a failure."""
    assert set(got) == set(want), (sorted(got), sorted(want), context)
    wrong = {k: (got[k], str(v) if isinstance(v, Instant) else v) for k, v in want.items() if not same(got[k], v)}
    assert not wrong, (wrong, context)


def check_answer(body: dict, want: dict, context: object = None) -> None:
    """A query's answer as gridagg writes it ({"results", "count", "plan"?}) against
    query()'s. The count may be null only for min/max alone (scan skipping leaves it
    unknown); a plan's selected rows add up to it."""
    check_results(body["results"], want["results"], context)
    if body["count"] is None:
        assert all(a.startswith(("min:", "max:")) for a in want["results"]), (body["count"], context)
    else:
        assert body["count"] == want["count"], (body["count"], want["count"], context)
        plan = body.get("plan")
        if plan is not None:
            assert plan["rows_in_reused_grids"] + plan["rows_matched_by_scans"] == want["count"], context


def check_stored(table: Table, values: dict, want: dict, context: object = None) -> None:
    """The engine's own answers (QueryResult.values: in stored units, as docs/ingest.md
    says: a number x 10**scale, a time as seconds since its column's min, an avg a Fraction
    of those) against aggregate()'s, exactly: no double between them."""
    assert set(values) == set(want), (sorted(values), sorted(want), context)
    for label, v in want.items():
        func, _, col = label.partition(":")
        if isinstance(v, Instant):
            v = v.seconds - Fraction(table.lows[col])
        elif col and func != "count" and v is not None:
            v = v * 10 ** table.scales[col]
        assert values[label] == v, (label, values[label], v, context)


def check_series(body: dict, want: dict, context: object = None) -> None:
    """A series' answer as gridagg writes it against series()'s, point by point."""
    assert (body["step"], body["window"]) == (want["step"], want["window"]), context
    assert len(body["points"]) == len(want["points"]), (len(body["points"]), len(want["points"]), context)
    for i, (got, point) in enumerate(zip(body["points"], want["points"])):
        where = (context, i, str(point["time"]))
        assert same(got["time"], point["time"]), (got["time"], where)
        assert all(map(same, got["window"], point["window"])), (got["window"], where)
        assert got["count"] == point["count"], (got["count"], point["count"], where)
        check_results(got["results"], point["results"], where)
