"""A Question's answer from the engine, as a result set: its columns (names and
PostgreSQL types) and rows, made from the same calls the HTTP API makes
(GridEngine.query and .series, with the API's limits) and the same answers.

A moving window (Question.window) is the JSON API's series window: each bucket's row
holds the aggregates of the window ending with it.

Types: count bigint; sum numeric; min and max numeric (bigint at scale 0), timestamp
with time zone for a time column; avg double precision (timestamp for a time column);
a bucket a timestamp with time zone, or bigint seconds for Grafana's floor(...) form.
Sums, mins and maxs are exact decimals of the stored integers; an avg is the double the
JSON API writes. As in the JSON API, a sum over no rows is 0. A bucket without rows has
no row, as in SQL (the JSON API writes such a point with count 0).

With a deadline (SET gridagg.deadline_ms), every answer has the column exact (boolean)
and, for each aggregate, <name>_lo and <name>_hi: bounds that hold the exact answer
where it is not exact (the JSON API's bounds), null where it is.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from decimal import Decimal
from fractions import Fraction

from pg_mimic import BOOL, FLOAT8, INT8, NUMERIC, TIMESTAMPTZ

from gridagg.engine import GridEngine
from gridagg.model.schema import Column, Dataset
from gridagg.query.spec import Limits

from .translate import Order, Output, Question

UNIX = datetime(1970, 1, 1, tzinfo=timezone.utc)


@dataclass(frozen=True)
class Ask:
    """How to ask: the limits of one question and the deadline (seconds; None: exact)."""

    limits: Limits
    deadline: float | None = None


def columns(question: Question, deadline: bool) -> list[tuple[str, int]]:
    """(name, type OID) of each column of the answer; with a deadline, exact and the bounds."""
    out = [(o.name, _type(o, question.bucket)) for o in question.outputs]
    if deadline:
        out.append(("exact", BOOL))
        for o in question.outputs:
            if o.label is not None:
                out += [(f"{o.name}_lo", _type(o, None)), (f"{o.name}_hi", _type(o, None))]
    return out


def rows(engine: GridEngine, question: Question, ask: Ask) -> list[tuple]:
    """The answer's rows, ordered, limited and offset as the question says."""
    if question.bucket is None:
        found = [_query_row(engine, question, ask)]
    else:
        found = [] if question.filter.empty else _series_rows(engine, question, ask)
    for order in reversed(question.order):
        found.sort(key=_sort_key(order), reverse=order.descending)
    end = None if question.limit is None else question.offset + question.limit
    return found[question.offset:end]


def _type(o: Output, bucket) -> int:
    if o.label is None:
        return INT8 if bucket.epoch else TIMESTAMPTZ
    if o.func == "count":
        return INT8
    if o.column.kind == "time":
        return TIMESTAMPTZ
    if o.func == "avg":
        return FLOAT8
    return INT8 if o.column.scale == 0 and o.func != "sum" else NUMERIC


def _query_row(engine: GridEngine, q: Question, ask: Ask) -> tuple:
    ds = q.dataset
    if q.filter.empty:
        stored = {label: 0 if label == "count" or label.startswith(("count:", "sum:")) else None for label in q.labels}
        return _row(q, stored, None, ask.deadline is not None)
    result = engine.query(ds.name, q.filter.where(ds), q.labels, q.filter.region, limits=ask.limits,
                          deadline=ask.deadline)
    bounds = None
    if result.progress is not None and not result.progress.exact_at(0):
        bounds = result.to_json(ds)["bounds"]
    return _row(q, result.values, bounds, ask.deadline is not None)


def _series_rows(engine: GridEngine, q: Question, ask: Ask) -> list[tuple]:
    ds = q.dataset
    start, end = q.series_range()
    t = ds.dimensions[ds.time_axis]
    asked = (ds.name, q.filter.where(ds), q.labels, q.bucket.step, q.window, t.decode(start), t.decode(end),
             q.filter.region)
    result = engine.series(*asked, limits=ask.limits, deadline=ask.deadline)
    points = result.to_json(ds)["points"] if result.progress is not None and not result.progress.is_exact else None
    # A bucket has a row when it has rows; with a moving window, the counts of the buckets alone say so.
    counts = (engine.series(*asked[:2], ["count"], asked[3], None, *asked[5:], limits=ask.limits,
                            deadline=ask.deadline) if q.window else result).windows.count.tolist()
    out = []
    for k, stored in enumerate(result.values()):
        bounds = points[k].get("bounds") if points is not None else None
        if counts[k] == 0 and bounds is None:
            continue  # no row in this bucket: no group
        stored["bucket"] = result.spec.start + k * result.spec.step
        out.append(_row(q, stored, bounds, ask.deadline is not None))
    return out


def _row(q: Question, stored: dict, bounds: dict | None, with_bounds: bool) -> tuple:
    ds = q.dataset
    row = [_bucket_value(ds, q, stored["bucket"]) if o.label is None else _value(ds, o, stored[o.label])
           for o in q.outputs]
    if with_bounds:
        row.append(bounds is None)
        for o in q.outputs:
            if o.label is not None:
                lo, hi = bounds[o.label] if bounds is not None else (None, None)
                row += [_bound(o, lo), _bound(o, hi)]
    return tuple(row)


def _bucket_value(ds: Dataset, q: Question, stored: int):
    t = ds.dimensions[ds.time_axis]
    moment = t.epoch + timedelta(seconds=stored)
    return int((moment - UNIX).total_seconds()) if q.bucket.epoch else moment


def _value(ds: Dataset, o: Output, stored):
    """An aggregate's stored answer in SQL: exact decimals, the JSON API's double for an avg."""
    if stored is None or o.func == "count":
        return stored
    c: Column = o.column
    if c.kind == "time":
        return c.epoch + timedelta(seconds=float(stored))
    if o.func == "avg":
        return float(c.decode(stored))
    if c.scale == 0 and o.func != "sum":
        return int(stored)
    return Decimal(int(stored)).scaleb(-c.scale) if c.scale else Decimal(int(stored))


def _bound(o: Output, value):
    """A bound as the JSON API writes it (user units) in the output's type."""
    if value is None:
        return None
    if o.func != "count" and o.column.kind == "time":
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    if o.func == "avg":
        return float(value)
    if o.func == "count" or o.column.scale == 0 and o.func != "sum":
        return int(value)
    return Decimal(repr(value)) if isinstance(value, float) else Decimal(value)


def _sort_key(order: Order):
    """Sorts a column's values, nulls first or last."""
    def key(row: tuple):
        value = row[order.output]
        missing = value is None
        # reverse=True flips the whole key: nulls go where order.nulls_first says either way.
        first = missing if order.nulls_first else not missing
        return (first if order.descending else not first, _comparable(value))
    return key


def _comparable(value):
    return (0, 0) if value is None else (1, Fraction(value) if isinstance(value, (int, float, Decimal)) else value)
