"""Deletes, corrections, retention and drops over HTTP, on both stores: any sequence of
DELETE /rows (boxes, polygons, element IDs) and corrections (POST /rows with on_conflict
"replace") leaves every answer equal to the tests' oracle over the rows kept; bad input
(a malformed box, an unknown column, no token) is a 4xx naming the problem and deletes
nothing; a dataset is created with a retention, shows it, and is dropped with DELETE.
With a read token set, every reading route refuses a request without it."""

from __future__ import annotations

import uuid

import oracle
import pytest
import shapely
from gridagg_api import create_app
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from test_api_errors import assert_problem

from gridagg.model.schema import Dataset

TOKEN = "w-secret"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
DEFINITION = {
    "dimensions": [
        {"name": "time", "type": "time", "min": "2012-01-01T00:00:00Z", "max": "2012-12-31T23:00:00Z"},
        {"name": "lon", "scale": 2, "min": -10, "max": 10},
        {"name": "lat", "scale": 2, "min": 40, "max": 60},
    ],
    "measures": [{"name": "temperature", "scale": 1, "min": -40, "max": 50}],
    "grid": {"n_size": 8, "n_threshold": 30},
}
TABLE = oracle.Table.of(DEFINITION)
AGGREGATES = ["count", "sum:temperature", "min:temperature", "max:temperature", "avg:temperature"]
QUESTIONS = [
    {"aggregates": AGGREGATES},
    {"aggregates": AGGREGATES, "where": {"lon": [-3, 4.5], "time": ["2012-03-01T00:00:00Z", None]}},
    {"aggregates": AGGREGATES, "where": {"lat": [44, 52]},
     "region": {"type": "Polygon", "coordinates": [[[-8, 41], [6, 44], [0, 58], [-8, 41]]]}},
]


def rows_of(n: int, seed: int) -> list[dict]:
    """n rows of 12 stations, with element IDs "r<i>"."""
    import random

    rng = random.Random(seed)
    places = [(round(rng.uniform(-9, 9), 2), round(rng.uniform(41, 59), 2)) for _ in range(12)]
    out = []
    for i in range(n):
        lon, lat = places[rng.randrange(len(places))]
        out.append({"id": f"r{i}", "time": f"2012-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}T{rng.randint(0, 23):02d}:00:00Z",
                    "lon": lon, "lat": lat, "temperature": rng.randint(-400, 500) / 10})
    return out


def seen(rows: list[dict]) -> list[dict]:
    return TABLE.rows([{k: v for k, v in r.items() if k != "id"} for r in rows])


def selected(rows: list[dict], request: dict) -> list[dict]:
    """The rows a request's where and region select, as the oracle reads them."""
    return [r for r, s in zip(rows, seen(rows)) if oracle.select(TABLE, [s], request)]


def holds(client, name: str, rows: list[dict]) -> None:
    """Every question of QUESTIONS answers as the oracle over `rows`."""
    for request in QUESTIONS:
        resp = client.post(f"/v1/datasets/{name}/query", json=request)
        assert resp.status_code == 200, resp.get_json()
        oracle.check_answer(resp.get_json(), oracle.query(TABLE, seen(rows), request), request)


@pytest.fixture(scope="module")
def client(settings, engine):
    return create_app(settings.with_(write_token=TOKEN, read_token=None, retain_every=0.0), engine=engine).test_client()


def made(client, n: int = 300, seed: int = 1) -> tuple[str, list[dict]]:
    """A new dataset over HTTP with n rows: (its name, the rows)."""
    name = "t_da_" + uuid.uuid4().hex[:8]
    assert client.post("/v1/datasets", json={"name": name, **DEFINITION}, headers=AUTH).status_code == 201
    rows = rows_of(n, seed)
    assert client.post(f"/v1/datasets/{name}/rows", json=rows, headers=AUTH).get_json()["stored"] == n
    return name, rows


lons = st.integers(-900, 900).map(lambda v: v / 100)
lats = st.integers(4100, 5900).map(lambda v: v / 100)
months = st.integers(1, 12)
deletes = st.one_of(
    st.tuples(st.just("where"), st.tuples(lons, lons).map(sorted), st.tuples(months, months).map(sorted)),
    st.tuples(st.just("region"), st.lists(st.tuples(lons, lats), min_size=3, max_size=5)),
    st.tuples(st.just("ids"), st.lists(st.integers(0, 10**6), min_size=1, max_size=10)),
    st.tuples(st.just("replace"), st.lists(st.integers(0, 10**6), min_size=1, max_size=10), st.integers(-400, 500)),
)


@hsettings(max_examples=6, deadline=None, suppress_health_check=list(HealthCheck))
@given(steps=st.lists(deletes, min_size=1, max_size=4), seed=st.integers(0, 100))
def test_deletes_and_corrections_over_http_keep_every_answer_exact(client, engine, steps, seed):
    name, rows = made(client, 240, seed)
    try:
        for step in steps:
            url = f"/v1/datasets/{name}/rows"
            kind = step[0]
            if kind == "where":
                (lo, hi), (m0, m1) = step[1], step[2]
                where = {"lon": [lo, hi], "time": [f"2012-{m0:02d}-01T00:00:00Z", f"2012-{m1:02d}-28T23:59:59Z"]}
                picked = selected(rows, {"where": where})
                resp = client.delete(url, json={"where": where}, headers=AUTH)
            elif kind == "region":
                hull = shapely.convex_hull(shapely.MultiPoint(step[1]))
                if hull.geom_type != "Polygon" or hull.area == 0:
                    continue
                region = shapely.geometry.mapping(hull)
                region = {"type": "Polygon", "coordinates": [[list(p) for p in ring] for ring in region["coordinates"]]}
                picked = selected(rows, {"region": region})
                resp = client.delete(url, json={"region": region}, headers=AUTH)
            elif kind == "ids":
                if not rows:
                    continue
                picked = [rows[i % len(rows)] for i in sorted({i % len(rows) for i in step[1]})]
                resp = client.delete(url, json={"ids": [r["id"] for r in picked]}, headers=AUTH)
            else:
                if not rows:
                    continue
                at = sorted({i % len(rows) for i in step[1]})
                fixed = [{**rows[i], "temperature": step[2] / 10} for i in at]
                resp = client.post(url, json={"rows": fixed, "on_conflict": "replace"}, headers=AUTH)
                body = resp.get_json()
                assert resp.status_code == 200 and body["stored"] == 0, body
                assert body["replaced"] == sum(rows[i]["temperature"] != step[2] / 10 for i in at)
                assert body["replaced"] + body["duplicates"] == len(at)
                for i, row in zip(at, fixed):
                    rows[i] = row
                holds(client, name, rows)
                continue
            assert resp.status_code == 200 and resp.get_json() == {"dataset": name, "deleted": len(picked)}, \
                resp.get_json()
            ids = {r["id"] for r in picked}
            rows = [r for r in rows if r["id"] not in ids]
            holds(client, name, rows)
        assert engine.check(name) == []
    finally:
        engine.drop_dataset(name)


@pytest.fixture(scope="module")
def target(client, engine):
    name, rows = made(client, 200, 7)
    yield name, rows
    engine.drop_dataset(name)


@pytest.mark.parametrize("body, field, says", [
    ({"where": {"lon": [1]}}, "where.lon", "[lo, hi]"),
    ({"where": {"lon": [5, -5]}}, "where.lon", "greater than hi"),
    ({"where": {"lon": ["east", 5]}}, "lon", "'east' is not a number"),
    ({"where": {"pressure": [1, 2]}}, "where.pressure", "not a dimension"),
    ({"where": {"temperature": [1, 2]}}, "where.temperature", "a measure, not a dimension"),
    ({"region": {"type": "Polygon", "coordinates": [[[0, 45], [1, 46], [0, 45]]]}}, "region", None),
    ({"ids": []}, "ids", "non-empty list"),
    ({"ids": [""]}, "ids[0]", "non-empty string or an integer"),
    ({"ids": ["a", 1.5]}, "ids[1]", "non-empty string or an integer"),
    ({"ids": [True]}, "ids[0]", "non-empty string or an integer"),
    ({}, "where", "a delete needs the rows' ids, or a where box or region"),
    ({"where": {}, "colour": "red"}, "colour", None),
])
def test_a_bad_delete_is_a_400_naming_the_problem_and_deletes_nothing(client, target, body, field, says):
    name, rows = target
    resp = client.delete(f"/v1/datasets/{name}/rows", json=body, headers=AUTH)
    problem = assert_problem(resp, 400, field)
    if says:
        assert says in problem["detail"], problem
    holds(client, name, rows)


def test_a_delete_without_the_write_token_is_refused_and_deletes_nothing(settings, engine, client, target):
    name, rows = target
    url = f"/v1/datasets/{name}/rows"
    everything = {"where": {}}
    assert_problem(client.delete(url, json=everything), 401, "Authorization",
                   "writes need an 'Authorization: Bearer <token>' header")
    assert_problem(client.delete(url, json=everything, headers={"Authorization": "Bearer wrong"}), 401,
                   "Authorization", "the bearer token is not valid")
    assert_problem(client.delete(f"/v1/datasets/{name}"), 401, "Authorization")
    closed = create_app(settings.with_(write_token=None, read_token=None), engine=engine).test_client()
    assert_problem(closed.delete(url, json=everything, headers=AUTH), 403, "Authorization")
    assert_problem(closed.delete(f"/v1/datasets/{name}", headers=AUTH), 403, "Authorization")
    assert_problem(client.delete("/v1/datasets/no_such/rows", json=everything, headers=AUTH), 404, "dataset")
    assert_problem(client.delete(url, data="where", headers={**AUTH, "Content-Type": "application/json"}), 400,
                   "body")
    holds(client, name, rows)


def test_on_conflict_must_be_skip_or_replace(client, target):
    name, rows = target
    resp = client.post(f"/v1/datasets/{name}/rows", json={"rows": rows[:2], "on_conflict": "overwrite"},
                       headers=AUTH)
    assert_problem(resp, 400, "on_conflict", None)
    skipped = client.post(f"/v1/datasets/{name}/rows", json={"rows": [{**rows[0], "temperature": 1}]}, headers=AUTH)
    assert skipped.get_json()["duplicates"] == 1 and "replaced" not in skipped.get_json()
    holds(client, name, rows)


def test_a_dataset_keeps_rows_for_its_retention_and_is_dropped(client, engine):
    name = "t_da_" + uuid.uuid4().hex[:8]
    bad = client.post("/v1/datasets", json={"name": name, **DEFINITION, "retain": "ten years"}, headers=AUTH)
    assert_problem(bad, 400, "retain")
    untimed = {"name": name, "dimensions": [{"name": "x", "min": 0, "max": 9}], "retain": "10y"}
    assert_problem(client.post("/v1/datasets", json=untimed, headers=AUTH), 400, "retain")
    assert client.get(f"/v1/datasets/{name}").status_code == 404  # neither was made
    made_ = client.post("/v1/datasets", json={"name": name, **DEFINITION, "retain": "10y"}, headers=AUTH)
    assert made_.status_code == 201 and made_.get_json()["retain"] == "10y"
    try:
        assert client.get(f"/v1/datasets/{name}").get_json()["retain"] == "10y"
        assert engine.directory.retain(name) == "10y"
        dropped = client.delete(f"/v1/datasets/{name}", headers=AUTH)
        assert dropped.status_code == 200 and dropped.get_json() == {"dropped": name}
        assert_problem(client.get(f"/v1/datasets/{name}"), 404, "dataset")
        assert_problem(client.delete(f"/v1/datasets/{name}", headers=AUTH), 404, "dataset")
    finally:
        engine.drop_dataset(name)


READS = [  # every reading route: (method, path after /v1/datasets, body)
    ("get", "", None),
    ("get", "/{name}", None),
    ("get", "/{name}/grids", None),
    ("post", "/{name}/query", {"aggregates": ["count"]}),
    ("get", "/{name}/query?aggregates=count", None),
    ("post", "/{name}/series", {"aggregates": ["count"], "step": "30d"}),
    ("post", "/{name}/leaves", {"axes": ["lon", "lat"]}),
]


@pytest.mark.parametrize("method, path, body", READS)
@pytest.mark.parametrize("stream", [False, True])
def test_with_a_read_token_every_reading_route_refuses_a_request_without_it(settings, engine, target, method, path,
                                                                            body, stream):
    name, _ = target
    app = create_app(settings.with_(write_token=TOKEN, read_token="r-secret"), engine=engine).test_client()
    url = "/v1/datasets" + path.format(name=name)
    headers = {"Accept": "application/x-ndjson"} if stream else {}
    needed = "reads need an 'Authorization: Bearer <token>' header"
    call = getattr(app, method)
    assert_problem(call(url, json=body, headers=headers) if body else call(url, headers=headers), 401,
                   "Authorization", needed)
    wrong = {**headers, "Authorization": "Bearer w-wrong"}
    assert_problem(call(url, json=body, headers=wrong) if body else call(url, headers=wrong), 401, "Authorization",
                   "the bearer token is not valid")
    for token in ("r-secret", TOKEN):  # the write token reads too
        ok = {**headers, "Authorization": f"Bearer {token}"}
        resp = call(url, json=body, headers=ok) if body else call(url, headers=ok)
        assert resp.status_code == 200 and resp.get_data(), token  # a stream read to its end
        resp.close()


def test_the_page_itself_needs_no_token(settings, engine):
    """The page's shell is open (it asks for the token and sends it with its reads);
    its data comes from the reading routes above."""
    app = create_app(settings.with_(read_token="r-secret"), engine=engine).test_client()
    assert app.get("/").status_code in (200, 503)  # 503: the bundle is not built here
    assert app.get("/healthz").status_code in (200, 503)


def test_dataset_definitions_still_read_as_they_did(client, target):
    """A definition with a retention is the dataset's definition; the retention is a
    setting of the catalog (the engine's Dataset never sees it)."""
    name, _ = target
    detail = client.get(f"/v1/datasets/{name}").get_json()
    assert detail["retain"] is None
    assert Dataset.from_json({"name": name, **DEFINITION}).describe().items() <= detail.items()
