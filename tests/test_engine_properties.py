"""Property tests: on random datasets of 1 to 6 dimensions (a time, lon/lat taking
polygons, nullable measures), random rows and random requests written as users write
them (bounds in user units with more decimals than stored, open ends, ISO times with
zones and fractions of a second, polygons through stored points, series with steps,
windows, starts and ends), every answer of the engine equals the independent oracle's
(tests/oracle.py), on the embedded store and on the real HBase, with PostgreSQL holding
the grid directory; afterwards every stored aggregate equals brute force.

GRIDAGG_PROPERTY_SCALE multiplies the number of examples (CI runs scale 1).
"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta, timezone
from decimal import Decimal

import numpy as np
import oracle
import pytest
import shapely
from engine_support import check_query, check_series, check_tree, open_engine
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from gridagg.config import Settings
from gridagg.model.aggregate import NULL
from gridagg.model.errors import InvalidInput

SCALE = Settings.from_env().property_scale
EPOCH = datetime(2020, 1, 1, tzinfo=timezone.utc)
ZONES = [timezone.utc, timezone(timedelta(hours=2)), timezone(timedelta(hours=-5, minutes=-30))]


@st.composite
def dataset_specs(draw):
    """A definition as a user posts it, and each column's (kind, scale, lo, hi) in
    stored units for generating rows (lo/hi None: unbounded)."""
    ndim = draw(st.integers(1, 6))
    region = ndim >= 3 and draw(st.booleans())  # dimensions 1 and 2 are lon and lat
    dims, cols = [], []
    for i in range(ndim):
        if i == 0 and draw(st.booleans()):
            width = draw(st.integers(0, 20 * 86400))
            dims.append({"name": "t", "type": "time", "min": EPOCH.isoformat(),
                         "max": (EPOCH + timedelta(seconds=width)).isoformat()})
            cols.append(("time", 0, 0, width))
            continue
        scale = draw(st.integers(0, 2))
        lo = draw(st.integers(-60, 60))
        hi = lo + draw(st.sampled_from([0, 1, 2, 5, 30, 200]))
        name = {1: "lon", 2: "lat"}.get(i, f"d{i}") if region else f"d{i}"
        dims.append({"name": name, "scale": scale,
                     "min": str(Decimal(lo).scaleb(-scale)), "max": str(Decimal(hi).scaleb(-scale))})
        cols.append(("number", scale, lo, hi))
    measures = []
    for j in range(draw(st.integers(0, 2))):
        scale = draw(st.integers(0, 3))
        measures.append({"name": f"m{j}", "scale": scale, "nullable": draw(st.booleans())})
        cols.append(("number", scale, None, None))
    n_size = draw(st.integers(1, 6))
    grid = {"n_size": n_size, "n_threshold": n_size * draw(st.integers(1, 4))}
    if dims[0].get("type") == "time" and draw(st.booleans()):
        grid["l_time"] = draw(st.integers(3600, 5 * 86400))
    return {"name": "p_" + uuid.uuid4().hex[:10], "dimensions": dims, "measures": measures, "grid": grid}, cols


def user_value(kind: str, scale: int, v: int):
    """A stored value as a user writes it: a decimal (as text), a time in ISO 8601."""
    if v == NULL:
        return None
    if kind == "time":
        return (EPOCH + timedelta(seconds=v)).isoformat()
    return str(Decimal(v).scaleb(-scale))


@st.composite
def bound(draw, kind: str, scale: int, v: int, nudge: int):
    """A bound at stored value v as a user may write it, nudged (if hypothesis says so)
    by half a step up (nudge 1) or down (-1) so that it falls between stored values:
    a time in one of several zones or without one, or as seconds since 1970; a number as
    text, as a JSON float, as an int when whole."""
    half = nudge * draw(st.booleans())
    if kind == "time":
        ts = EPOCH + timedelta(seconds=v + half * 0.5)
        form = draw(st.sampled_from(["zone", "zone", "naive", "epoch"]))
        if form == "epoch":
            return int(ts.timestamp()) if not half else ts.timestamp()
        if form == "naive":
            return ts.replace(tzinfo=None).isoformat()
        return ts.astimezone(draw(st.sampled_from(ZONES))).isoformat().replace("+00:00", "Z")
    d = Decimal(v).scaleb(-scale) + half * Decimal(5).scaleb(-scale - 1)
    form = draw(st.sampled_from(["text", "text", "float", "int"]))
    if form == "float":
        return float(d)
    if form == "int" and d == d.to_integral_value():
        return int(d)
    return str(d)


@st.composite
def wheres(draw, spec, cols):
    where = {}
    for c, (kind, scale, lo, hi) in zip(spec["dimensions"], cols):
        form = draw(st.sampled_from(["none", "range", "range", "point", "whole", "open"]))
        if form == "none":
            continue
        if form == "whole":
            where[c["name"]] = [None, None]
            continue
        a = draw(st.integers(lo - 2, hi + 2))
        if form == "point":
            where[c["name"]] = [draw(bound(kind, scale, a, 0))] * 2
            continue
        b = draw(st.integers(a, hi + 2))
        ends = [draw(bound(kind, scale, a, 1 if a < b else 0)), draw(bound(kind, scale, b, -1 if a < b else 0))]
        if form == "open":
            ends[draw(st.integers(0, 1))] = None
        where[c["name"]] = ends
    return where


@st.composite
def polygons(draw, cols):
    """A valid polygon over lon/lat (dimensions 1 and 2) with corners on stored points
    or between them, so its edges pass through stored points: a rectangle or the convex
    hull of 3 to 6 corners."""
    (_, sx, xlo, xhi), (_, sy, ylo, yhi) = cols[1], cols[2]
    xs = st.integers(xlo - 1, xhi + 1).map(lambda v: v / 10**sx)
    ys = st.integers(ylo - 1, yhi + 1).map(lambda v: v / 10**sy)
    if draw(st.booleans()):
        (x1, x2), (y1, y2) = sorted(draw(st.lists(xs, min_size=2, max_size=2, unique=True))), \
            sorted(draw(st.lists(ys, min_size=2, max_size=2, unique=True)))
        return {"type": "Polygon", "coordinates": [[[x1, y1], [x2, y1], [x2, y2], [x1, y2], [x1, y1]]]}
    corners = draw(st.lists(st.tuples(xs, ys), min_size=3, max_size=6, unique=True))
    hull = shapely.MultiPoint(corners).convex_hull
    if hull.geom_type != "Polygon":
        return None  # collinear corners: no polygon
    return {"type": "Polygon", "coordinates": [[list(p) for p in hull.exterior.coords]]}


AGG_FUNCS = ["count", "sum", "min", "max", "avg"]


@st.composite
def requests(draw, spec, cols):
    names = [c["name"] for c in spec["dimensions"] + spec["measures"]]
    request = {"where": draw(wheres(spec, cols)), "aggregates": draw(st.lists(
        st.one_of(st.just("count"), st.builds(lambda f, c: f"{f}:{c}", st.sampled_from(AGG_FUNCS),
                                              st.sampled_from(names))),
        min_size=1, max_size=5, unique=True))}
    if len(spec["dimensions"]) > 2 and spec["dimensions"][1]["name"] == "lon" and draw(st.booleans()):
        region = draw(polygons(cols))
        if region is not None:
            request["region"] = region
    if cols[0][0] == "time" and draw(st.integers(0, 2)) == 0:
        request.update(draw(series_fields(cols[0][3])))
    return request


@st.composite
def series_fields(draw, width: int):
    """step, window, start and end as a user writes them, for a time domain of `width`
    seconds; at most about 60 points."""
    start = draw(st.none() | st.integers(-86400, width))
    end = draw(st.none() | st.integers(start if start is not None else -86400, width + 86400))
    span = (end if end is not None else width) - (start if start is not None else 0)
    steps = [s for s in [60, 1800, 3600, 4 * 3600, 86400, 3 * 86400, 7 * 86400, 30 * 86400] if span // s <= 60]
    step = draw(st.sampled_from(steps))
    window = step * draw(st.integers(1, 4))
    out = {"step": draw(st.sampled_from([step, written(step)])), "window": draw(st.sampled_from(
        [None, window, written(window)] if window == step else [window, written(window)]))}
    for key, v in (("start", start), ("end", end)):
        if v is not None:
            out[key] = draw(bound("time", 0, v, draw(st.sampled_from([-1, 1]))))
    return out


def written(seconds: int) -> str:
    """A duration as text in its largest whole unit: 86400 -> '1d'."""
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


@st.composite
def workloads(draw):
    spec, cols = draw(dataset_specs())
    ops = []
    seen: list[list[int]] = []
    for _ in range(draw(st.integers(1, 6))):
        if draw(st.integers(0, 2)) < 2:
            batch = []
            for _ in range(draw(st.integers(1, 40))):
                if seen and draw(st.integers(0, 4)) == 0:
                    batch.append(list(draw(st.sampled_from(seen))))  # an exact duplicate row
                else:
                    batch.append([stored_value(draw, c, i >= len(spec["dimensions"]) and
                                               spec["measures"][i - len(spec["dimensions"])]["nullable"])
                                  for i, c in enumerate(cols)])
            seen.extend(batch)
            ops.append(("insert", batch))
        ops.append(("ask", draw(requests(spec, cols))))
    return spec, cols, ops


def stored_value(draw, col, nullable: bool) -> int:
    kind, scale, lo, hi = col
    if nullable and draw(st.integers(0, 3)) == 0:
        return NULL
    return draw(st.integers(lo, hi) if lo is not None else st.integers(-10**6, 10**6))


def run_workload(engine, spec, cols, ops):
    from gridagg.model.schema import Dataset

    ds = engine.create_dataset(Dataset.from_json(spec))
    table = oracle.Table.of(spec)
    names = [c["name"] for c in spec["dimensions"] + spec["measures"]]
    stored = np.empty((0, len(cols)), dtype=np.int64)
    rows: list[dict] = []
    try:
        for op, arg in ops:
            if op == "insert":
                batch = [{n: user_value(kind, scale, v) for n, (kind, scale, _, _), v in zip(names, cols, row)}
                         for row in arg]
                result = engine.insert(ds.name, batch)
                assert result.rejected == [] and result.stored == len(batch)
                stored = np.vstack([stored, np.array(arg, dtype=np.int64)])
                rows += table.rows(batch)
            elif "step" not in arg:
                check_query(engine, ds.name, table, rows, arg)
            else:
                try:
                    oracle.series(table, [], arg)
                except oracle.Refused as refused:
                    with pytest.raises(InvalidInput) as err:
                        check_series(engine, ds.name, table, rows, arg)
                    assert err.value.field == refused.field
                    continue
                check_series(engine, ds.name, table, rows, arg)
        check_tree(engine, ds.name, stored)
    finally:
        engine.drop_dataset(ds.name)


COMMON = dict(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                    HealthCheck.too_slow, HealthCheck.data_too_large])


@pytest.fixture(scope="module")
def embedded_engine(settings, services, tmp_path_factory):
    return open_engine(settings, "embedded", tmp_path_factory.mktemp("lmdb"))


@pytest.fixture(scope="module")
def hbase_engine(settings, services, tmp_path_factory):
    return open_engine(settings, "hbase", tmp_path_factory.mktemp("unused"))


@hsettings(max_examples=80 * SCALE, **COMMON)
@given(workloads())
def test_embedded_matches_the_oracle(embedded_engine, workload):
    run_workload(embedded_engine, *workload)


@hsettings(max_examples=12 * SCALE, **COMMON)
@given(workloads())
def test_hbase_matches_the_oracle(hbase_engine, workload):
    run_workload(hbase_engine, *workload)
