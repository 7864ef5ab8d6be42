"""Every question through SQL equals the JSON API's answer and the oracle's
(tests/oracle.py): random boxes written with any mix of =, <, <=, >, >= and BETWEEN
(strict bounds between stored values included), random polygons, and random series by
time_bucket, date_trunc and Grafana's floor(extract(epoch ...)) form, plain or over a
moving window."""

from __future__ import annotations

import json
import math
import uuid
from datetime import datetime, timedelta, timezone
from decimal import Decimal

import oracle
import psycopg
import pytest
from engine_support import open_engine
from gridagg_api import create_app
from hypothesis import HealthCheck, given, settings as hsettings, strategies as st
from sql_support import AGGS, DEFINITION, LABELS, TABLE, Endpoint, check_query, check_series, exact, make_rows, one

ROWS = make_rows(1200, seed=17)
SEEN = TABLE.rows(ROWS)
UNIX = datetime(1970, 1, 1, tzinfo=timezone.utc)
SCALES = {"lon": 2, "lat": 2}
OPS = (">", ">=", "<", "<=", "=", "between")
EXAMPLES = hsettings(max_examples=40, suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest.fixture(scope="module")
def served(settings, services, tmp_path_factory):
    """(psycopg connection, JSON API client, dataset name)."""
    from gridagg.model.schema import Dataset

    engine = open_engine(settings, "embedded", tmp_path_factory.mktemp("sql-props"))
    name = "t_sqlprop_" + uuid.uuid4().hex[:8]
    engine.create_dataset(Dataset.from_json({"name": name, **DEFINITION}))
    engine.insert(name, ROWS)
    endpoint = Endpoint(settings.with_(read_token=None), engine)
    conn = psycopg.connect(endpoint.dsn(), autocommit=True)
    try:
        yield conn, create_app(settings.with_(read_token=None), engine=engine).test_client(), name
    finally:
        conn.close()
        endpoint.close()
        engine.drop_dataset(name)


# ------------------------------------------------------------------ values near the rows'


@st.composite
def near_value(draw, dim: str) -> Decimal:
    """A row's value of a dimension, moved a little, often between stored values."""
    base = draw(st.sampled_from(SEEN))[dim]
    if dim == "time":
        return base + draw(st.sampled_from([Decimal(0), Decimal(1), Decimal(-1), Decimal("0.5"), Decimal(-3600)]))
    return base + draw(st.integers(-3, 3)) * Decimal("0.005")


def sql_constant(dim: str, value: Decimal) -> str:
    if dim == "time":
        return "'" + (UNIX + timedelta(seconds=float(value))).isoformat() + "'"
    return format(value, "f")


def inclusive(dim: str, op: str, value: Decimal) -> tuple:
    """The JSON API's [lo, hi] for `dim op value`, strict bounds made inclusive ones at the
    dimension's scale (whole seconds for a time), written independently of sql/."""
    step = Decimal(1) if dim == "time" else Decimal(1).scaleb(-SCALES[dim])
    down = (value / step).to_integral_value(rounding="ROUND_FLOOR") * step
    up = (value / step).to_integral_value(rounding="ROUND_CEILING") * step
    return {">": (down + step, None), ">=": (up, None), "<": (None, up - step), "<=": (None, down),
            "=": (up, down)}[op]


@st.composite
def boxes(draw) -> tuple[str, list, dict]:
    """(SQL conditions, the predicates as (dim, op, values), the JSON API's where)."""
    terms, preds, where = [], [], {}
    for dim in draw(st.lists(st.sampled_from(["time", "lon", "lat"]), max_size=4)):
        op = draw(st.sampled_from(OPS))
        a = draw(near_value(dim))
        if op == "between":
            b = draw(near_value(dim))
            terms.append(f"{dim} BETWEEN {sql_constant(dim, a)} AND {sql_constant(dim, b)}")
            preds.append((dim, op, (a, b)))
            bounds = [inclusive(dim, ">=", a), inclusive(dim, "<=", b)]
        else:
            column_left = draw(st.booleans())
            flipped = {">": "<", "<": ">", ">=": "<=", "<=": ">=", "=": "="}[op]
            terms.append(f"{dim} {op} {sql_constant(dim, a)}" if column_left
                         else f"{sql_constant(dim, a)} {flipped} {dim}")
            preds.append((dim, op, (a,)))
            bounds = [inclusive(dim, op, a)]
        lo, hi = where.get(dim, (None, None))
        for b_lo, b_hi in bounds:
            lo = b_lo if lo is None else (lo if b_lo is None else max(lo, b_lo))
            hi = b_hi if hi is None else (hi if b_hi is None else min(hi, b_hi))
        where[dim] = (lo, hi)
    return " AND ".join(terms), preds, where


def chosen(rows: list[dict], preds: list) -> list[dict]:
    """The rows the predicates select, read as SQL reads them."""
    tests = {">": lambda x, a: x > a, ">=": lambda x, a: x >= a, "<": lambda x, a: x < a,
             "<=": lambda x, a: x <= a, "=": lambda x, a: x == a, "between": lambda x, a, b: a <= x <= b}
    return [r for r in rows if all(tests[op](r[dim], *vals) for dim, op, vals in preds)]


@st.composite
def polygons(draw) -> dict:
    """A star-shaped polygon (so a valid one) of 3 to 6 vertices around a point."""
    cx, cy = draw(st.integers(-800, 800)) / 100, draw(st.integers(4200, 5800)) / 100
    n = draw(st.integers(3, 6))
    ring = []
    for k in range(n):
        r = draw(st.integers(50, 600)) / 100
        angle = 2 * math.pi * k / n
        ring.append([round(cx + r * math.cos(angle), 3), round(cy + r * math.sin(angle), 3)])
    return {"type": "Polygon", "coordinates": [ring + [ring[0]]]}


def wkt(polygon: dict) -> str:
    return "POLYGON((" + ", ".join(f"{x} {y}" for x, y in polygon["coordinates"][0]) + "))"


def user(dim: str, value: Decimal | None) -> str | None:
    if value is None:
        return None
    return TABLE.write(dim, value) if dim == "time" else format(value, "f")


# ------------------------------------------------------------------ properties


@EXAMPLES
@given(box=boxes(), polygon=st.none() | polygons(), as_geojson=st.booleans())
def test_boxes_and_polygons_equal_the_json_api_and_the_oracle(served, box, polygon, as_geojson):
    conn, api, name = served
    terms, preds, where = box
    request = {"where": {d: [user(d, lo), user(d, hi)] for d, (lo, hi) in where.items()}}
    if polygon is not None:
        shape = f"ST_GeomFromGeoJSON('{json.dumps(polygon)}')" if as_geojson else f"ST_GeomFromText('{wkt(polygon)}')"
        terms = " AND ".join(filter(None, [terms, f"ST_Contains({shape}, ST_Point(lon, lat))"]))
        request["region"] = polygon
    rows = chosen(SEEN, preds)
    want = oracle.query(TABLE, rows, {"region": polygon, "aggregates": LABELS})["results"]
    if any(lo is not None and hi is not None and lo > hi for lo, hi in where.values()):
        # Nothing between the bounds: the JSON API refuses lo > hi, SQL answers no rows.
        row = one(conn, f"SELECT {AGGS} FROM {name} WHERE {terms}")
        assert all(exact(v, want[label]) for v, label in zip(row, LABELS)), (row, terms)
        return
    check_query(conn, api, name, SEEN, terms, request, want)


BUCKETS = [  # (SQL, step in seconds, origin in seconds since 1970, written as seconds since 1970)
    ("time_bucket('{n} hours', time)", 3600, 946857600, False),
    ("time_bucket(INTERVAL '{n} days', time)", 86400, 946857600, False),
    ("date_trunc('hour', time)", 3600, 0, False),
    ("date_trunc('day', time)", 86400, 0, False),
    ("date_trunc('week', time)", 7 * 86400, 4 * 86400, False),
    ("floor(extract(epoch from time)/{s})*{s}", 3600, 0, True),
]


@EXAMPLES
@given(bucket=st.sampled_from(BUCKETS), n=st.integers(1, 12), span=st.tuples(near_value("time"), near_value("time")),
       polygon=st.none() | polygons(), aggregates=st.lists(st.sampled_from(LABELS[1:]), min_size=1, max_size=3,
                                                           unique=True), buckets=st.sampled_from([1, 1, 2, 5]))
def test_series_equal_the_json_api_and_the_oracle(served, bucket, n, span, polygon, aggregates, buckets):
    """buckets: of the moving window (1: each bucket alone)."""
    conn, api, name = served
    form, unit, origin, epoch = bucket
    width = n * unit if "{n}" in form or "{s}" in form else unit
    expr = form.format(n=n, s=width)
    lo, hi = sorted(span)
    lo, hi = math.ceil(lo), math.floor(hi)  # whole seconds, as the JSON API's where takes them here
    if hi - lo > 2000 * width or lo > hi:
        return  # over the JSON API's points limit, or nothing: not this property's business
    start = origin + (lo - origin) // width * width
    iso = lambda s: (UNIX + timedelta(seconds=int(s))).strftime("%Y-%m-%dT%H:%M:%SZ")
    request = {"step": width, "start": iso(start), "end": iso(hi), "where": {"time": [iso(lo), iso(hi)]},
               "aggregates": ["count", *aggregates]}
    if buckets > 1:
        aggregates = [a for a in aggregates if not a.startswith("avg:")] or ["count:wind_speed"]
        request.update(window=buckets * width, aggregates=["count", *aggregates])
    where = f"time BETWEEN '{iso(lo)}' AND '{iso(hi)}'"
    if polygon is not None:
        where += f" AND ST_Covers(ST_GeomFromText('{wkt(polygon)}'), ST_Point(lon, lat))"
        request["region"] = polygon
    sql_aggs = ", ".join(["count(*)"] + [f"{a.split(':')[0]}({a.split(':')[1]})" for a in aggregates])
    if buckets > 1:  # as PostgreSQL computes a moving window over groups
        over = f"OVER (ORDER BY b RANGE BETWEEN INTERVAL '{(buckets - 1) * width} seconds' PRECEDING AND CURRENT ROW)"
        outer = {"count": "sum", "sum": "sum", "min": "min", "max": "max"}
        sql_aggs = ", ".join(f"{outer[a.split(':')[0]]}({a.split(':')[0]}({a.split(':')[1] if ':' in a else '*'})) "
                             f"{over}" for a in request["aggregates"])
    rows = check_series(conn, api, name, SEEN, f"SELECT {expr} AS b, {sql_aggs} FROM {name} WHERE {where} GROUP BY 1",
                        request)
    assert all(isinstance(r[0], int) == epoch for r in rows)
