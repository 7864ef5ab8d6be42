"""Answers within a deadline (gridagg.query.bounds, Planner.progress), on both stores against the
real servers: for random boxes, polygons and series, every bound holds the brute-force
answer; `deadline 0` makes no store call; an answer marked exact equals brute force; an
answer's steps only narrow and end exact. A scan past its deadline stops, on HBase on the
region servers."""

from __future__ import annotations

import time
import uuid
from contextlib import contextmanager
from datetime import datetime
from fractions import Fraction

import numpy as np
import oracle
import pytest
import shapely
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from gridagg.model.aggregate import NULL
from gridagg.model.schema import Dataset
from gridagg.query import planner
from gridagg.store import parts
from gridagg.store.scan import ScanAnswer, ScanRequest

# Integers in user units (scale 0) and a time dimension in whole seconds from the epoch:
# the tests read their bounds themselves, without the engine's parser.
DEFINITION = {
    "dimensions": [{"name": "t", "type": "time", "min": "2020-01-01T00:00:00Z", "max": "2020-01-01T01:00:00Z"},
                   {"name": "lon", "min": -100, "max": 100}, {"name": "lat", "min": -100, "max": 100}],
    "measures": [{"name": "v", "min": -10**6, "max": 10**6, "nullable": True}],
    "grid": {"n_size": 40, "n_threshold": 120},
}
TABLE = oracle.Table.of(DEFINITION)
T0 = 1577836800  # 2020-01-01T00:00:00Z
AGGREGATES = ["count", "count:v", "sum:v", "min:v", "max:v", "avg:v", "avg:lon", "min:t", "max:lat"]
COLS = {"t": 0, "lon": 1, "lat": 2, "v": 3}


@pytest.fixture(scope="module")
def loaded(engine):
    rng = np.random.default_rng(7)
    n = 3000
    # Stations at fixed places, as real archives: clusters the tree's data bounds follow.
    stations = rng.integers(-95, 96, (40, 2))
    at = stations[rng.integers(0, len(stations), n)]
    rows = np.stack([rng.integers(0, 3601, n), at[:, 0], at[:, 1],
                     np.where(rng.random(n) < 0.2, NULL, rng.integers(-1000, 1000, n))], axis=1).astype(np.int64)
    ds = engine.create_dataset(Dataset.from_json({"name": "dl_" + uuid.uuid4().hex[:8], **DEFINITION}))
    for s in range(0, n, 500):
        engine.insert_encoded(ds, [f"r{i}".encode() for i in range(s, s + 500)], rows[s:s + 500])
    engine.query(ds.name, {}, ["count"])  # the tree in memory, as a serving process holds it
    yield engine, ds, rows
    engine.drop_dataset(ds.name)


def brute(rows: np.ndarray, label: str):
    """The answer over these rows, as the API writes it (an average rounds to the nearest
    double, and rounding keeps order: bounds rounded the same way still hold it)."""
    func, _, col = label.partition(":")
    if func == "count":
        return len(rows) if not col else int((rows[:, COLS[col]] != NULL).sum())
    vals = [int(v) for v in rows[:, COLS[col]] if v != NULL]
    if func == "sum":
        return sum(vals)
    if not vals:
        return None
    return {"min": min(vals), "max": max(vals), "avg": Fraction(float(Fraction(sum(vals), len(vals))))}[func]


def selected(rows, where, polygon):
    keep = np.ones(len(rows), bool)
    for name, (lo, hi) in where.items():
        keep &= (rows[:, COLS[name]] >= lo) & (rows[:, COLS[name]] <= hi)
    if polygon is not None:
        keep &= np.array([polygon.covers(shapely.Point(x, y)) for x, y in rows[:, 1:3]], bool)
    return rows[keep]


def as_request(where):
    """The where of a request in user units: t as ISO times."""
    out = {}
    for name, (lo, hi) in where.items():
        if name == "t":
            out[name] = [time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(T0 + v)) for v in (lo, hi)]
        else:
            out[name] = [lo, hi]
    return out


def in_bounds(want, got, maybe_null):
    """Whether a brute-force answer lies within [lo, hi] (None ends: open)."""
    lo, hi = got
    if want is None:
        return maybe_null
    return (lo is None or lo <= want) and (hi is None or want <= hi)


interval = lambda a, b: st.tuples(st.integers(a, b), st.integers(a, b)).map(sorted)  # noqa: E731
wheres = st.fixed_dictionaries({}, optional={"t": interval(0, 3600), "lon": interval(-100, 100),
                                             "lat": interval(-100, 100)})
polygons = st.lists(st.tuples(st.integers(-100, 100), st.integers(-100, 100)), min_size=3, max_size=6).map(
    lambda pts: shapely.convex_hull(shapely.MultiPoint(pts))).filter(lambda p: p.area > 0)


def decoded(engine, ds, label, value):
    """An answer as the API gives it, in the tests' units: times (ISO text) as seconds
    from the epoch, exact numbers."""
    if isinstance(value, str):
        return int(datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()) - T0
    if isinstance(value, float):
        return Fraction(value)
    return value


def holds_brute_force(engine, ds, body: dict, chosen: np.ndarray) -> None:
    """An answer (the API's JSON) is brute force over the chosen rows where it says it is
    exact, and its bounds hold brute force where it is not."""
    for label in AGGREGATES:
        want = brute(chosen, label)
        if body["exact"]:
            assert decoded(engine, ds, label, body["results"][label]) == want or want is None
            continue
        lo, hi = (None if v is None else decoded(engine, ds, label, v) for v in body["bounds"][label])
        assert in_bounds(want, (lo, hi), label in body["may_be_null"]), (label, want, lo, hi)


# Grids the walk for the tree's answer alone may open: none (the root bounded whole), a
# few (cut grids above the leaves bounded whole), and the default (every cut leaf here).
budgets = st.sampled_from([0, 3, planner.FRONTIER_GRIDS])


@contextmanager
def frontier(budget: int):
    """The walk for the tree's answer alone opens at most `budget` grids meanwhile."""
    default = planner.FRONTIER_GRIDS
    planner.FRONTIER_GRIDS = budget
    try:
        yield
    finally:
        planner.FRONTIER_GRIDS = default


@hsettings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))
@given(where=wheres, polygon=st.one_of(st.none(), polygons), budget=budgets)
def test_the_trees_bounds_hold_the_answer_without_a_store_call(loaded, where, polygon, budget):
    engine, ds, rows = loaded
    region = None if polygon is None else shapely.geometry.mapping(polygon)
    with frontier(budget):
        result = engine.query(ds.name, as_request(where), AGGREGATES, region, deadline=0)
    assert result.plan.round_trips[engine.store.kind] == 0
    body = result.to_json(ds)
    chosen = selected(rows, where, polygon)
    holds_brute_force(engine, ds, body, chosen)


@hsettings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(where=wheres, polygon=st.one_of(st.none(), polygons), budget=st.sampled_from([0, 1, 3, 8]))
def test_the_bounds_over_every_cut_leaf_lie_within_those_of_a_budget(loaded, where, polygon, budget):
    """What lets a stream begin with the walk within a budget: the bounds over every cut
    leaf (the walk without one) are never wider."""
    engine, ds, rows = loaded
    region = None if polygon is None else shapely.geometry.mapping(polygon)
    answers = []
    for b in (budget, None):
        with frontier(b):
            answers.append(engine.query(ds.name, as_request(where), AGGREGATES, region, deadline=0).to_json(ds))
    coarse, fine = answers
    if coarse["exact"]:
        assert fine["exact"] and fine["results"] == coarse["results"]
        return
    for label in AGGREGATES:
        if fine["exact"]:
            lo = hi = fine["results"][label]
        else:
            lo, hi = fine["bounds"][label]
        a, b = coarse["bounds"][label]
        if lo is None and hi is None:  # no value can be selected (or none is)
            assert label in coarse["may_be_null"], label
            continue
        lo, hi, a, b = (None if v is None else decoded(engine, ds, label, v) for v in (lo, hi, a, b))
        assert (a is None or lo is not None and a <= lo) and (b is None or hi is not None and hi <= b), \
            (label, (a, b), (lo, hi))
        if not fine["exact"] and label not in coarse["may_be_null"]:
            assert label not in fine["may_be_null"], label


@hsettings(max_examples=20, deadline=None, suppress_health_check=list(HealthCheck))
@given(where=wheres, step=st.sampled_from([60, 600]), width=st.sampled_from([1, 3]), budget=budgets)
def test_a_series_bounds_hold_every_points_answer(loaded, where, step, width, budget):
    engine, ds, rows = loaded
    request = {"where": as_request(where), "aggregates": ["count", "sum:v", "min:v", "avg:v"], "step": f"{step}s",
               "window": f"{step * width}s"}
    with frontier(budget):
        result = engine.series(ds.name, request["where"], request["aggregates"], request["step"],
                               request["window"], deadline=0)
    body = result.to_json(ds)
    chosen = selected(rows, where, None)
    points = oracle.series(TABLE, [], request)["points"]  # the points' windows, read from the request
    assert len(body["points"]) == len(points)
    for k, (point, expected) in enumerate(zip(body["points"], points)):
        assert oracle.same(point["time"], expected["time"]) and all(map(oracle.same, point["window"],
                                                                        expected["window"])), (k, point)
        first, last = (int(w.seconds) - T0 for w in expected["window"])
        in_window = chosen[(chosen[:, 0] >= first) & (chosen[:, 0] <= last)]
        for label in ("count", "sum:v", "min:v", "avg:v"):
            want = brute(in_window, label)
            if point.get("exact", True):
                assert decoded(engine, ds, label, point["results"][label]) == want or want is None
                continue
            lo, hi = (None if v is None else decoded(engine, ds, label, v) for v in point["bounds"][label])
            assert in_bounds(want, (lo, hi), label in point["may_be_null"]), (k, label, want, lo, hi)


@contextmanager
def stopping_after(engine, share: float):
    """The engine's store reads as one that stops at a deadline and names what it left
    unread (HBase's region servers) would: each scan reads the first `share` of its
    grids and names the rest."""
    store = engine.store
    scan, names = store.scan, store.names_unread

    def stopped(ds, request):
        n = len(request.grids)
        k = int(share * n)
        answer = scan(ds, request.part(0, k))
        answer.stopped, answer.unread = True, np.arange(k, n)
        return answer

    store.scan, store.names_unread = stopped, True
    try:
        yield
    finally:
        store.scan, store.names_unread = scan, names


@hsettings(max_examples=20, deadline=None, suppress_health_check=list(HealthCheck))
@given(where=wheres, polygon=st.one_of(st.none(), polygons), share=st.sampled_from([0.0, 0.3, 0.7, 1.0]))
def test_a_scan_stopped_naming_what_it_left_narrows_the_bounds(loaded, where, polygon, share):
    engine, ds, rows = loaded
    region = None if polygon is None else shapely.geometry.mapping(polygon)
    with stopping_after(engine, share):
        body = engine.query(ds.name, as_request(where), AGGREGATES, region, deadline=60).to_json(ds)
    chosen = selected(rows, where, polygon)
    assert body["exact"] or body["read_share"] < 1
    holds_brute_force(engine, ds, body, chosen)


@hsettings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck))
@given(where=wheres, budget=budgets)
def test_steps_only_narrow_and_end_exact(loaded, where, budget):
    """The first step comes from the walk within a budget, the others over every cut leaf."""
    engine, ds, rows = loaded
    want = {label: brute(selected(rows, where, None), label) for label in ("count", "sum:v", "max:v", "avg:v")}
    with frontier(budget):
        steps = [r.to_json(ds) for r in engine.query_steps(ds.name, as_request(where), list(want))]
    assert steps[-1]["exact"]
    assert {k: decoded(engine, ds, k, v) for k, v in steps[-1]["results"].items()} == want
    for before, after in zip(steps, steps[1:]):
        assert before["read_share"] <= after["read_share"]
        if before["exact"] or after["exact"]:
            continue
        for label in want:
            (a, b), (c, d) = before["bounds"][label], after["bounds"][label]
            assert (a is None or c is not None and a <= c) and (b is None or d is not None and d <= b), label


def test_an_exact_answer_with_a_deadline_is_the_plain_answer(loaded):
    engine, ds, rows = loaded
    where = {"lon": [-50, 50]}
    plain = engine.query(ds.name, where, AGGREGATES).to_json(ds)
    timed = engine.query(ds.name, where, AGGREGATES, deadline=60).to_json(ds)
    assert timed["exact"] and timed["read_share"] == 1.0 and timed["results"] == plain["results"]
    assert "bounds" not in timed and "exact" not in plain  # without a deadline nothing changes


def test_a_scan_past_its_deadline_stops_where_it_runs(loaded):
    """The embedded store's scan threads see the stop flag; HBase's region servers cannot,
    they see the deadline: they stop there (their counts move) and name what they left."""
    engine, ds, rows = loaded
    tree = engine.trees.tree(ds)
    leaves = [g for g, i in tree.index.items() if tree.left[i] < 0 and tree.aggs.count[i] > 0]
    request = ScanRequest(leaves, [], [3], stop=np.ones(1, np.uint8), deadline=time.time() - 1)
    hbase = engine.store.kind == "hbase"
    before = engine.store.stop_counts(ds) if hbase else None
    answer = engine.store.scan(ds, request)
    assert answer.stopped and answer.rows_visited == 0 and answer.grids_scanned == 0
    if hbase:
        assert sorted(answer.unread.tolist()) == list(range(len(leaves))) and answer.aggs.count.sum() == 0
        scans, grids = engine.store.stop_counts(ds)
        assert scans > before[0] and grids - before[1] >= len(leaves)


def test_on_hbase_a_query_past_its_deadline_stops_on_the_region_server(loaded):
    engine, ds, rows = loaded
    if engine.store.kind != "hbase":
        pytest.skip("region servers are HBase's; the embedded store's stop flag is tested above")
    where = {"lon": (-50, 50), "t": (600, 2400)}
    chosen = selected(rows, where, None)
    before = engine.store.stop_counts(ds)
    plain = engine.query(ds.name, as_request(where), AGGREGATES).to_json(ds)
    oracle.check_answer(plain, oracle.query(TABLE, TABLE.from_stored(rows),
                                            {"where": as_request(where), "aggregates": AGGREGATES}))
    assert engine.store.stop_counts(ds) == before  # without a deadline nothing changes
    # A microsecond: past before the first parts are sent, which the region servers stop.
    timed = engine.query(ds.name, as_request(where), AGGREGATES, deadline=1e-6).to_json(ds)
    assert timed["exact"] is False
    for label in AGGREGATES:
        lo, hi = (None if v is None else decoded(engine, ds, label, v) for v in timed["bounds"][label])
        assert in_bounds(brute(chosen, label), (lo, hi), label in timed["may_be_null"]), label
    waited = time.monotonic() + 30  # the parts' calls end after the answer has gone
    while engine.store.stop_counts(ds)[0] == before[0] and time.monotonic() < waited:
        time.sleep(0.05)
    scans, grids = engine.store.stop_counts(ds)
    assert scans > before[0] and grids > before[1]


def test_read_until_gives_what_finished_by_the_deadline_and_stops_the_rest():
    def scan(request):
        time.sleep(request.grids[0])
        return ScanAnswer(None, stopped=bool(request.stop[0]))

    requests = [ScanRequest([d], [], []) for d in (0.0, 0.01, 0.5, 0.5, 0.5)]
    began = time.monotonic()
    got = [i for i, _ in parts.read_until(scan, requests, began + 0.2, threads=2)]
    assert got == [0, 1] and time.monotonic() - began < 0.45
    assert requests[2].stop[0] == 1  # what still ran was told to stop


# --------------------------------------------------------------------------- over HTTP


@pytest.fixture(scope="module")
def client(loaded, settings):
    from gridagg_api import create_app

    engine, ds, rows = loaded
    return create_app(settings, engine=engine).test_client(), ds, rows


def test_the_api_answers_from_the_tree_with_deadline_0(client):
    from gridagg_api.models.queries import QueryResponse

    http, ds, rows = client
    where = {"lon": [-50, 50], "t": ["2020-01-01T00:10:00Z", "2020-01-01T00:40:00Z"]}
    r = http.post(f"/v1/datasets/{ds.name}/query", json={"where": where, "aggregates": AGGREGATES,
                                                          "deadline_ms": 0})
    assert r.status_code == 200, r.get_json()
    body = QueryResponse.model_validate(r.get_json()).model_dump(exclude_none=True)
    assert body["exact"] is False and body["read_share"] == 0.0
    assert [n for store, n in body["plan"]["round_trips"].items() if store != "postgresql"] == [0]
    chosen = selected(rows, {"lon": (-50, 50), "t": (600, 2400)}, None)
    for label in AGGREGATES:
        lo, hi = (None if v is None else decoded(None, ds, label, v) for v in r.get_json()["bounds"][label])
        assert in_bounds(brute(chosen, label), (lo, hi), label in r.get_json()["may_be_null"]), label
    again = http.get(f"/v1/datasets/{ds.name}/query?aggregates=count&where.lon=-50,50"
                     "&where.t=2020-01-01T00:10:00Z,2020-01-01T00:40:00Z&deadline_ms=0")
    assert again.status_code == 200 and again.get_json()["exact"] is False


def test_the_api_streams_an_answer_as_it_improves(client):
    http, ds, rows = client
    body = {"where": {"lon": [-50, 50], "t": ["2020-01-01T00:10:00Z", None]}, "aggregates": ["count", "sum:v", "avg:v"]}
    r = http.post(f"/v1/datasets/{ds.name}/query", json=body, headers={"Accept": "application/x-ndjson"})
    assert r.status_code == 200 and r.mimetype == "application/x-ndjson"
    import json

    lines = [json.loads(line) for line in r.get_data(as_text=True).splitlines()]
    assert len(lines) >= 2 and lines[0]["exact"] is False and lines[-1]["exact"] is True
    plain = http.post(f"/v1/datasets/{ds.name}/query", json=body).get_json()
    oracle.check_answer(plain, oracle.query(TABLE, TABLE.from_stored(rows), body))
    assert lines[-1]["results"] == plain["results"] and lines[-1]["count"] == plain["count"]
    series = http.post(f"/v1/datasets/{ds.name}/series", json={**body, "step": "10m", "deadline_ms": 0},
                       headers={"Accept": "application/x-ndjson"})
    points = [json.loads(line) for line in series.get_data(as_text=True).splitlines()]
    assert len(points) == 1 and points[0]["exact"] is False
    assert any("bounds" in p for p in points[0]["points"])
    assert all(("bounds" in p) == (p.get("exact") is False) for p in points[0]["points"])
    for streamed in (r, series):  # the server's time to the first line, for a browser's Resource Timing
        name, took, desc = streamed.headers["Server-Timing"].split(";")
        assert name == "first" and float(took.removeprefix("dur=")) >= 0 and desc == 'desc="first line"'


def test_a_deadline_that_is_no_duration_is_refused_by_name(client):
    http, ds, _ = client
    r = http.post(f"/v1/datasets/{ds.name}/query", json={"aggregates": ["count"], "deadline_ms": -1})
    assert r.status_code == 400
    problem = r.get_json()
    assert problem["field"] == "deadline_ms" and "milliseconds" in problem["detail"]


def test_the_cli_shows_bounds_when_the_deadline_leaves_rows_unread(loaded, settings, capsys, monkeypatch):
    from gridagg.cli.main import main

    engine, ds, rows = loaded
    if engine.store.kind != "embedded" or settings.store != "embedded":
        pytest.skip("the CLI asks the configured store; the module's embedded store is its own")
    monkeypatch.setattr("gridagg.cli.query.Local.__init__", lambda self, _: setattr(self, "engine", engine))
    monkeypatch.setattr("gridagg.cli.query.Local.close", lambda self: None)
    # A bound on time too: over position alone the position rollup would answer exactly.
    assert main(["query", ds.name, "--where", "lon=-50:50", "--where", "t=2020-01-01T00:10:00Z..2020-01-01T00:40:00Z",
                 "--agg", "count", "--agg", "max:v", "--deadline", "0"]) == 0
    out = capsys.readouterr().out.splitlines()
    low, high = map(int, out[2].split()[0].split(".."))
    assert low <= len(selected(rows, {"lon": (-50, 50), "t": (600, 2400)}, None)) <= high
    assert out[3].startswith("not exact: the deadline passed with 0% of the cut leaves' rows read")
    with pytest.raises(SystemExit) as refused:
        main(["query", ds.name, "--agg", "count", "--deadline", "-1"])
    assert refused.value.code == 2
    assert "--deadline: must be whole milliseconds (0 or more), not '-1'" in capsys.readouterr().err
