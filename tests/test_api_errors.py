"""The HTTP API's errors: problem details with the right status for everything a client
can send, tokens, limits, and unreachable stores (503 + Retry-After)."""

from __future__ import annotations

import json
import uuid

import psycopg
import pytest
import shapely
from engine_support import open_engine
from gridagg_api import create_app
from gridagg_api.models.datasets import DatasetDefinition, Rows
from gridagg_api.models.leaves import LeavesRequest
from gridagg_api.models.queries import QueryRequest, QueryString, SeriesRequest
from gridagg_api.openapi import document
from gridagg_api.validation import _schema, _Spot
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from shapely.geometry import shape
from thriftpy2.transport import TTransportException

from gridagg.model.errors import StoreUnavailable
from gridagg.model.schema import Dataset
from gridagg.tune.costmodel import CostModel

TOKEN = "w-secret"
AUTH = {"Authorization": f"Bearer {TOKEN}"}

DEFINITION = {
    "dimensions": [
        {"name": "time", "type": "time", "min": "2012-01-01T00:00:00Z", "max": "2012-12-31T23:00:00Z"},
        {"name": "lon", "scale": 2, "min": -10, "max": 10},
        {"name": "lat", "scale": 2, "min": 40, "max": 60},
    ],
    "measures": [{"name": "temperature", "scale": 1, "min": -40, "max": 50}],
    "grid": {"n_size": 10, "n_threshold": 40},
}
SQUARE = {"type": "Polygon", "coordinates": [[[-5, 45], [5, 45], [5, 55], [-5, 55], [-5, 45]]]}
ROWS = 12 * 27  # the module's dataset: days 1-27 of every month


@pytest.fixture(scope="module")
def engine(settings, services, tmp_path_factory):
    return open_engine(settings, "embedded", tmp_path_factory.mktemp("api-err"))


@pytest.fixture(scope="module")
def dataset(engine):
    name = "t_apie_" + uuid.uuid4().hex[:8]
    ds = engine.create_dataset(Dataset.from_json({"name": name, **DEFINITION}))
    rows = [{"time": f"2012-{m:02d}-{d:02d}T00:00:00Z", "lon": (d % 20) - 9.5, "lat": 41 + m, "temperature": d}
            for m in range(1, 13) for d in range(1, 28)]
    assert engine.insert(name, rows).stored == ROWS
    # A dataset without lon/lat and one without time, for region and series errors.
    plain = engine.create_dataset(Dataset.from_json({"name": name + "_x", "dimensions": [
        {"name": "x", "min": 0, "max": 9}]}))
    engine.insert(plain.name, [{"x": 1}, {"x": 2}])
    yield ds
    engine.drop_dataset(name)
    engine.drop_dataset(plain.name)


@pytest.fixture(scope="module")
def client(settings, engine, dataset):
    return create_app(settings.with_(write_token=TOKEN, read_token=None), engine=engine).test_client()


def assert_problem(resp, status: int, field: str | None = "any", detail: str | None = None):
    """The problem details of resp, checked: its status, shape, field (unless "any") and
    detail (when given)."""
    body = resp.get_json()
    assert resp.status_code == status, body
    assert resp.mimetype == "application/problem+json"
    assert set(body) == {"type", "title", "status", "detail", "field"}
    assert body["status"] == status and body["detail"] and body["title"]
    assert body["type"] == "urn:gridagg:problem:" + body["title"].lower().replace(" ", "-"), body
    if field != "any":
        assert body["field"] == field, body
    if detail is not None:
        assert body["detail"] == detail, body
    return body


def count_of(client, ds) -> int:
    """The dataset's rows, as a query counts them."""
    return client.post(f"/v1/datasets/{ds.name}/query", json={"aggregates": ["count"]}).get_json()["results"]["count"]


def q(client, ds, body, path="query"):
    return client.post(f"/v1/datasets/{ds.name}/{path}", json=body)


@pytest.mark.parametrize("body, field", [
    ({"where": {"pressure": [1, 2]}, "aggregates": ["count"]}, "where.pressure"),
    ({"where": {"temperature": [1, 2]}, "aggregates": ["count"]}, "where.temperature"),
    ({"where": {"lon": [5, -5]}, "aggregates": ["count"]}, "where.lon"),
    ({"where": {"lon": [5]}, "aggregates": ["count"]}, "where.lon"),
    ({"where": {"lon": "5,6"}, "aggregates": ["count"]}, "where.lon"),
    ({"where": {"time": ["yesterday", None]}, "aggregates": ["count"]}, "time"),
    ({"where": {"lon": [True, 3]}, "aggregates": ["count"]}, "where.lon[0]"),
    ({"where": [], "aggregates": ["count"]}, "where"),
    ({"aggregates": ["median:temperature"]}, "aggregates[0]"),
    ({"aggregates": ["sum:pressure"]}, "aggregates"),
    ({"aggregates": [3]}, "aggregates[0]"),
    ({"aggregates": []}, "aggregates"),
    ({}, "aggregates"),
    ({"aggregates": ["count"], "limit": 3}, "limit"),
    ({"aggregates": ["count"], "region": {"type": "Point", "coordinates": [0, 50]}}, "region"),
    ({"aggregates": ["count"], "region": {"type": "Polygon", "coordinates": [[[0, 40], [1, 41], [0, 40]]]}},
     "region"),
    ({"aggregates": ["count"], "region": {"type": "Polygon",
                                          "coordinates": [[[0, 40], [2, 42], [2, 40], [0, 42], [0, 40]]]}},
     "region"),  # a bow-tie: self-intersecting
    ({"aggregates": ["count"], "region": {"type": "Polygon", "coordinates": [[[0, "a"], [1, 2], [2, 0], [0, 0]]]}},
     "region.coordinates[0][0][1]"),
    ({"aggregates": ["count"], "region": {"type": "Polygon", "coordinates": []}}, "region.coordinates"),
    ({"aggregates": ["count"], "region": "square"}, "region"),
])
def test_bad_queries_are_400_naming_the_field(client, dataset, body, field):
    assert_problem(q(client, dataset, body), 400, field)


@pytest.mark.parametrize("body, field", [
    ({"aggregates": ["count"]}, "step"),
    ({"aggregates": ["count"], "step": "1 fortnight"}, "step"),
    ({"aggregates": ["count"], "step": 0}, "step"),
    ({"aggregates": ["count"], "step": "2d", "window": "3d"}, "window"),
    ({"aggregates": ["count"], "step": "1d", "start": "2012-05-01T00:00:00Z", "end": "2012-04-01T00:00:00Z"},
     "start"),
    ({"aggregates": ["count"], "step": "1d", "start": "May"}, "time"),
    ({"aggregates": ["count"], "step": "1d", "region": {"type": "Polygon", "coordinates": [[[0, 0]]]}},
     "region.coordinates[0]"),
])
def test_bad_series_are_400(client, dataset, body, field):
    assert_problem(q(client, dataset, body, "series"), 400, field)


def test_region_and_series_need_their_dimensions(client, dataset):
    plain = dataset.name + "_x"
    r = client.post(f"/v1/datasets/{plain}/query", json={"aggregates": ["count"], "region": SQUARE})
    assert "lon" in assert_problem(r, 400, "region")["detail"]
    r = client.post(f"/v1/datasets/{plain}/series", json={"aggregates": ["count"], "step": "1d"})
    assert_problem(r, 400, "step")


def test_malformed_bodies(client, dataset):
    url = f"/v1/datasets/{dataset.name}/query"
    assert_problem(client.post(url, data="{not json", content_type="application/json"), 400, "body")
    assert_problem(client.post(url, data="", content_type="application/json"), 400, "body")
    assert_problem(client.post(url, data="[" * 100000 + "]" * 100000, content_type="application/json"), 400)
    assert_problem(client.post(url, data='{"aggregates": ["count"]}', content_type="text/plain"), 400,
                   "Content-Type")
    assert_problem(client.post(url, data='{"aggregates": ["count"]}'), 400, "Content-Type")
    assert_problem(client.post(url, json=["count"]), 400, "body")
    rows = f"/v1/datasets/{dataset.name}/rows"
    assert_problem(client.post(rows, json={"x": 1}, headers=AUTH), 400, "body")
    assert_problem(client.post(rows, data=b"\xff\xfe", content_type="text/csv", headers=AUTH), 400, "body")
    assert_problem(client.post(rows, data="", content_type="text/csv", headers=AUTH), 400, "body")
    assert_problem(client.post(rows, data="a,a\n1,2\n", content_type="text/csv", headers=AUTH), 400, "body")
    assert_problem(client.post(rows, data="<xml/>", content_type="application/xml", headers=AUTH), 400,
                   "Content-Type")
    assert_problem(client.post("/v1/datasets", json={"name": "Bad Name", "dimensions": []}, headers=AUTH), 400)
    assert_problem(client.post("/v1/datasets", json={"name": "ok_name", "dimensions": [{"name": "x"}]},
                               headers=AUTH), 400, "x")


@pytest.mark.parametrize("query, field", [
    ("", "aggregates"),
    ("aggregates=count&where.lon=1", "where.lon"),
    ("aggregates=count&where.lon=1,2,3", "where.lon"),
    ("aggregates=count&colour=red", "colour"),
    ("aggregates=count&aggregates=sum:lon", "aggregates"),
    ("aggregates=count&region=%7Bnot", "region"),
    ("aggregates=avg", "aggregates[0]"),
])
def test_bad_get_queries(client, dataset, query, field):
    assert_problem(client.get(f"/v1/datasets/{dataset.name}/query?{query}"), 400, field)


BOUND = "a number, an ISO 8601 timestamp, or null for an open end"
AGGREGATE = ("an aggregate: count (rows), or one of count, sum, min, max, avg, a colon and a column, such as "
             "'avg:temperature' (count:<column> counts the column's values)")
STEP = "the buckets' width: whole seconds above 0, or a number and a unit (s, m, h, d) such as '1d' or '6h'"


@pytest.mark.parametrize("send, field, detail", [
    (dict(json={"where": {"lon": [True, 3]}, "aggregates": ["count"]}), "where.lon[0]",
     f"where.lon[0] must be {BOUND}, not true"),
    (dict(json={"where": {"lon": "5,6"}, "aggregates": ["count"]}), "where.lon",
     "where.lon must be [lo, hi] in user units: two bounds, each a number, an ISO 8601 timestamp or null for "
     "an open end; both ends belong to the range, not \"5,6\""),
    (dict(json={"aggregates": ["median:temperature"]}), "aggregates[0]",
     f"aggregates[0] must be {AGGREGATE}, not \"median:temperature\""),
    (dict(json={"aggregates": ["sum:pressure"]}), "aggregates", None),  # the core: no such column
    (dict(json={}), "aggregates",
     "aggregates is required: a non-empty list of aggregates such as [\"count\", \"avg:temperature\"]"),
    # An unknown key is told first: a misspelt key explains the missing one.
    (dict(json={"aggregate": ["count"]}), "aggregate", "unknown key 'aggregate': use where, aggregates, region, explain, deadline_ms"),
    (dict(json={"aggregates": ["count"], "explain": "yes"}), "explain",
     "explain must be true or false: true adds the IDs of the grids reused and scanned to the plan, not \"yes\""),
    (dict(json=["count"]), "body", "the request body must be a JSON object, not [\"count\"]"),
    (dict(data="{not json", content_type="application/json"), "body",
     "the request body is not valid JSON: key must be a string at line 1 column 2"),
    (dict(data="", content_type="application/json"), "body", "the request body is empty"),
    (dict(data='{"aggregates": ["count"]}', content_type="text/plain"), "Content-Type",
     "the body must be JSON (Content-Type: application/json) (Content-Type was text/plain)"),
])
def test_messages_name_the_field_and_say_what_it_must_be(client, dataset, send, field, detail):
    body = assert_problem(client.post(f"/v1/datasets/{dataset.name}/query", **send), 400, field)
    if detail is None:
        assert body["detail"] == f"dataset {dataset.name} has no column 'pressure'"
    else:
        assert body["detail"] == detail


@pytest.mark.parametrize("path, send, field, detail", [
    ("series", dict(json={"aggregates": ["count"], "step": 0}), "step", f"step must be {STEP}, not 0"),
    ("series", dict(json={"aggregates": ["count"]}), "step", f"step is required: {STEP}"),
    ("leaves", dict(json={"axes": ["lon"]}), "axes",
     "axes must be the two dimensions to project onto, such as [\"lon\", \"lat\"], not [\"lon\"]"),
    ("rows", dict(json={"x": 1}, headers=AUTH), "body",
     "the request body must be a JSON list of row objects, or an object {\"rows\": [...]}, not {\"x\": 1}"),
    ("rows", dict(data="<xml/>", content_type="application/xml", headers=AUTH), "Content-Type",
     "the body must be JSON (application/json) or CSV with a header line (text/csv) (Content-Type was "
     "application/xml)"),
])
def test_other_bodies_say_what_they_must_be(client, dataset, path, send, field, detail):
    body = assert_problem(client.post(f"/v1/datasets/{dataset.name}/{path}", **send), 400, field)
    assert body["detail"] == detail


@pytest.mark.parametrize("field", ["step", "window"])
@pytest.mark.parametrize("duration", [2**63, "9999999999d"])  # found by the schema fuzz test: a 500 before
def test_a_step_or_window_over_ten_thousand_years_is_refused(client, dataset, field, duration):
    body = {"aggregates": ["count"], "step": "1d", field: duration}
    assert_problem(client.post(f"/v1/datasets/{dataset.name}/series", json=body), 400, field)


def test_definitions_say_what_they_must_be(client):
    def detail(definition):
        return assert_problem(client.post("/v1/datasets", json=definition, headers=AUTH), 400)["detail"]

    assert detail({"name": "Bad Name", "dimensions": [{"name": "x", "min": 0, "max": 1}]}) == (
        "name must be a dataset name: lowercase letters, digits and '_', starting with a letter, at most 48 "
        "characters, not \"Bad Name\"")
    assert detail({"name": "ok_name", "dimensions": [{"name": "x", "colour": "red"}]}) == (
        "unknown key 'colour' in dimensions[0]: use name, type, scale, min, max, unit, rounding, nullable")


@pytest.mark.parametrize("query, detail", [
    ("aggregates=count&where.lon=1", "where.lon must be lo,hi in user units: two bounds separated by a comma, "
                                     "either one empty for an open end, not \"1\""),
    ("aggregates=count&colour=red", "unknown query parameter 'colour': use aggregates, where.<dimension>, region, "
                                    "explain, deadline_ms"),
    ("aggregates=count&aggregates=sum:lon", "query parameter 'aggregates' is given 2 times; give it once"),
])
def test_get_messages(client, dataset, query, detail):
    assert assert_problem(client.get(f"/v1/datasets/{dataset.name}/query?{query}"), 400)["detail"] == detail


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
                    max_leaves=8)
KEYS = ["where", "aggregates", "region", "explain", "step", "window", "start", "end", "axes", "name", "dimensions",
        "measures", "grid", "rows", "lon"]


@pytest.mark.parametrize("path", ["query", "series", "leaves", "rows", ""])
def test_no_raw_validation_output_reaches_a_client(client, dataset, path):
    url = f"/v1/datasets/{dataset.name}/{path}" if path else "/v1/datasets"

    @hsettings(max_examples=60, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(body=st.dictionaries(st.sampled_from(KEYS), JSON, max_size=4) | JSON)
    def run(body):
        resp = client.post(url, json=body, headers=AUTH)
        assert resp.status_code < 500, resp.get_json()
        if resp.status_code == 400:
            detail = resp.get_json()["detail"]
            assert "\n" not in detail and "Input should" not in detail and "validation error" not in detail, detail

    run()


REQUESTS = [QueryRequest, SeriesRequest, QueryString, LeavesRequest, DatasetDefinition, Rows]


@pytest.mark.parametrize("model", REQUESTS, ids=lambda m: m.__name__)
def test_every_request_field_says_what_it_must_be(model):
    """Every field a 400 can name has a description (it is the 400's 'must be ...')."""
    schema = _schema(model)
    spot = _Spot(schema, ())
    missing = []

    def walk(node: dict, path: str, skip: str | None = None):
        node, description = spot.unwrap(node)
        if description is None and path:
            missing.append(path)
        if "discriminator" in node:  # a tagged union: its members' fields
            for ref in node["discriminator"]["mapping"].values():
                walk({"$ref": ref}, path, skip=node["discriminator"]["propertyName"])
            return
        if "anyOf" in node or "oneOf" in node:  # an untagged union is told as a whole
            return
        for name, prop in node.get("properties", {}).items():
            if name != skip:
                walk(prop, f"{path}.{name}" if path else name)
        if isinstance(node.get("items"), dict):
            walk(node["items"], f"{path}[]")
        if isinstance(node.get("additionalProperties"), dict):
            walk(node["additionalProperties"], f"{path}.<key>")

    walk(schema, "")
    assert not missing


def test_a_route_without_a_contract_is_refused(settings, engine):
    app = create_app(settings, engine=engine)
    app.add_url_rule("/undeclared", "undeclared", lambda: "?")
    with pytest.raises(LookupError, match="/undeclared"):
        document(app)


def test_unknown_things_are_404_and_wrong_methods_405(client, dataset):
    for resp in [
        client.get("/v1/datasets/no_such_set"),
        client.get("/v1/datasets/no_such_set/grids"),
        client.post("/v1/datasets/no_such_set/query", json={"aggregates": ["count"]}),
        client.get("/v1/datasets/no_such_set/query?aggregates=count"),
        client.post("/v1/datasets/no_such_set/series", json={"aggregates": ["count"], "step": "1d"}),
        client.post("/v1/datasets/no_such_set/rows", json=[], headers=AUTH),
    ]:
        assert_problem(resp, 404, "dataset", "no dataset named 'no_such_set'")
    assert_problem(client.get("/v1/datasets/Not-A-Name"), 404, "dataset", "no dataset named 'Not-A-Name'")
    assert_problem(client.get("/v2/anything"), 404, None, "no such resource: /v2/anything")
    resp = client.patch(f"/v1/datasets/{dataset.name}")
    body = assert_problem(resp, 405, None)
    assert body["detail"].startswith(f"PATCH is not allowed on /v1/datasets/{dataset.name}; use ")
    assert "GET" in resp.headers["Allow"] and "GET" in body["detail"] and "POST" not in body["detail"]
    body = assert_problem(client.put("/v1/datasets", json={}), 405, None)
    assert body["detail"].startswith("PUT is not allowed on /v1/datasets; use ") and "POST" in body["detail"]


def test_create_dataset_conflict(client, engine):
    name = "t_apic_" + uuid.uuid4().hex[:8]
    try:
        resp = client.post("/v1/datasets", json={"name": name, **DEFINITION}, headers=AUTH)
        assert resp.status_code == 201 and resp.headers["Location"] == f"/v1/datasets/{name}"
        created = resp.get_json()
        assert (created["name"], created["time_dimension"], created["region_dimensions"], created["grid"]) == (
            name, "time", ["lon", "lat"], {"n_size": 10, "n_threshold": 40, "l_time": None})
        assert created == {k: v for k, v in client.get(f"/v1/datasets/{name}").get_json().items()
                           if k not in ("row_count", "grid_count")}
        assert_problem(client.post("/v1/datasets", json={"name": name, **DEFINITION}, headers=AUTH), 409, "name",
                       f"a dataset named '{name}' already exists")
        assert client.get(f"/v1/datasets/{name}").get_json()["row_count"] == 0
    finally:
        engine.drop_dataset(name)


def test_write_tokens(settings, engine, dataset):
    rows = f"/v1/datasets/{dataset.name}/rows"
    secured = create_app(settings.with_(write_token=TOKEN, read_token=None), engine=engine).test_client()
    resp = secured.post(rows, json=[])
    needed = "writes need an 'Authorization: Bearer <token>' header"
    assert_problem(resp, 401, "Authorization", needed)
    assert resp.headers["WWW-Authenticate"].startswith("Bearer")
    assert_problem(secured.post(rows, json=[], headers={"Authorization": "Bearer wrong"}), 401, "Authorization",
                   "the bearer token is not valid")
    assert_problem(secured.post(rows, json=[], headers={"Authorization": f"Basic {TOKEN}"}), 401, "Authorization")
    assert_problem(secured.post("/v1/datasets", json={}), 401, "Authorization", needed)
    ok = secured.post(rows, json=[], headers=AUTH)
    assert ok.status_code == 200 and ok.get_json() == {"received": 0, "stored": 0, "duplicates": 0, "splits": 0,
                                                       "rounded": {}, "rejected": []}
    # No write token configured: writes are refused and the message says how to enable them.
    closed = create_app(settings.with_(write_token=None, read_token=None), engine=engine).test_client()
    assert_problem(closed.post(rows, json=[], headers=AUTH), 403, "Authorization",
                   "writes are disabled: no write token is configured; set GRIDAGG_WRITE_TOKEN on the server to "
                   "enable them")
    # Reads stay open.
    read = closed.get(f"/v1/datasets/{dataset.name}")
    assert read.status_code == 200 and (read.get_json()["name"], read.get_json()["row_count"]) == (dataset.name, ROWS)


def test_read_token(settings, engine, dataset):
    app = create_app(settings.with_(write_token=TOKEN, read_token="r-secret"), engine=engine).test_client()
    url = f"/v1/datasets/{dataset.name}/query"
    needed = "reads need an 'Authorization: Bearer <token>' header"
    assert_problem(app.post(url, json={"aggregates": ["count"]}), 401, "Authorization", needed)
    assert_problem(app.get("/v1/datasets"), 401, "Authorization", needed)
    for token in ("r-secret", TOKEN):  # the write token reads too
        ok = app.post(url, json={"aggregates": ["count"]}, headers={"Authorization": f"Bearer {token}"})
        assert ok.status_code == 200 and ok.get_json()["results"] == {"count": ROWS}, token
    health = app.get("/healthz")  # probes need no token
    assert health.status_code == 200 and health.get_json() == {
        "status": "ok", "checks": {"postgresql": "ok", "store": "ok", "store_kind": "embedded"}}


def test_oversized_body_is_413(settings, engine, dataset):
    app = create_app(settings.with_(write_token=TOKEN), engine=engine, max_body_bytes=1000).test_client()
    big = [{"time": "2012-01-01T00:00:00Z", "lon": 0, "lat": 50, "temperature": 1}] * 100
    too_large = "the request body is larger than the limit of 1000 bytes"
    assert_problem(app.post(f"/v1/datasets/{dataset.name}/rows", json=big, headers=AUTH), 413, "body", too_large)
    assert_problem(app.post(f"/v1/datasets/{dataset.name}/query", json={"aggregates": ["count"] * 200}), 413, "body",
                   too_large)
    assert count_of(app, dataset) == ROWS  # nothing of the refused rows was written




def test_the_cost_cap_refuses_dear_questions_naming_the_estimate(settings, services, dataset, tmp_path):
    # The cap comes with each request from the app's settings (api.config); the estimate
    # from the store's cost model (here one that prices every leaf read at a second).
    eng = open_engine(settings, "embedded", tmp_path)
    eng.planner.costs = CostModel("embedded", per_query=0.1, per_grid=1000.0, per_row=0.0, per_reused=0.0)
    # Same PostgreSQL directory, but this store is empty: use a dataset of its own.
    name = "t_apil_" + uuid.uuid4().hex[:8]
    eng.create_dataset(Dataset.from_json({"name": name, **DEFINITION}))
    try:
        rows = [{"time": f"2012-{m:02d}-01T00:00:00Z", "lon": d / 4 - 9, "lat": 41 + m, "temperature": d % 40}
                for m in range(1, 13) for d in range(60)]
        assert eng.insert(name, rows).stored == len(rows)
        app = create_app(settings.with_(write_token=TOKEN), engine=eng, max_query_ms=5).test_client()
        url = f"/v1/datasets/{name}"
        partial = {"where": {"lon": [-3.1, 2.9]}, "aggregates": ["sum:temperature"]}
        body = assert_problem(app.post(url + "/query", json=partial), 422)
        assert "more than the limit of 5 ms (GRIDAGG_MAX_QUERY_MS)" in body["detail"]
        assert "would cost about" in body["detail"] and "deadline_ms" in body["detail"]
        # Within a deadline the same question is answered, within bounds.
        bounded = app.post(url + "/query", json={**partial, "deadline_ms": 2000})
        assert bounded.status_code == 200 and bounded.get_json()["exact"] is True
        assert_problem(app.post(url + "/query", json={**partial, "region": SQUARE}), 422)
        assert_problem(app.post(url + "/series", json={**partial, "step": "7d"}), 422)
        # Whole-domain answers come from partial aggregates alone and stay within the cap.
        ok = app.post(url + "/query", json={"aggregates": ["count"]})
        assert ok.status_code == 200 and ok.get_json()["results"]["count"] == len(rows)
    finally:
        eng.drop_dataset(name)


def test_points_and_vertices_beyond_the_limits_are_422_naming_them(settings, engine, dataset):
    app = create_app(settings.with_(read_token=None, max_points=50, max_vertices=5), engine=engine).test_client()
    url = f"/v1/datasets/{dataset.name}"
    # The fixture's rows: a day of each month of 2012 (a leap year), placed by day and month.
    points = [((d % 20) - 9.5, 41 + m) for m in range(1, 13) for d in range(1, 28)]
    daily = assert_problem(app.post(url + "/series", json={"aggregates": ["count"], "step": "1d"}), 422, "step")
    assert daily["type"] == "urn:gridagg:problem:work-limit-exceeded"
    assert "the series would have 366 points, more than the limit of 50" in daily["detail"]
    weekly = app.post(url + "/series", json={"aggregates": ["count"], "step": "8d"}).get_json()
    assert len(weekly["points"]) == 46 and sum(p["count"] for p in weekly["points"]) == len(points)
    wide = {"aggregates": ["count"], "step": "8d", "window": f"{8 * 51}d"}  # the walk keeps a bucket per step
    assert "the window is 51 steps wide, more than the limit of 50" in \
        assert_problem(app.post(url + "/series", json=wide), 422, "window")["detail"]

    def polygon(*rings):
        return {"type": "Polygon", "coordinates": [list(r) + [r[0]] for r in rings]}

    pentagon = polygon([[-5, 45], [5, 45], [6, 50], [0, 55.5], [-6, 50]])
    answer = app.post(url + "/query", json={"aggregates": ["count"], "region": pentagon}).get_json()
    inside = shapely.intersects_xy(shape(pentagon), *zip(*points)).sum()
    assert 0 < inside < len(points) and answer["results"]["count"] == inside
    hexagon = polygon([[-5, 45], [5, 45], [6, 50], [5, 55], [-5, 55], [-6, 50]])
    body = assert_problem(app.post(url + "/query", json={"aggregates": ["count"], "region": hexagon}), 422, "region")
    assert "the region has 6 vertices, more than the limit of 5" in body["detail"]
    squares = {"type": "MultiPolygon", "coordinates": [polygon([[-5, 45], [0, 45], [0, 50], [-5, 50]])["coordinates"],
                                                       polygon([[1, 45], [5, 45], [5, 50], [1, 50]])["coordinates"]]}
    body = assert_problem(app.post(url + "/query", json={"aggregates": ["count"], "region": squares}), 422, "region")
    assert "the region has 8 vertices" in body["detail"]
    assert_problem(app.get(url + "/query", query_string={"aggregates": "count", "region": json.dumps(hexagon)}), 422,
                   "region")
    assert_problem(app.post(url + "/series", json={"aggregates": ["count"], "step": "30d", "region": hexagon}), 422,
                   "region")


class _Down:
    """An engine (and its directory and store) whose every call fails like an
    unreachable server."""

    max_ms = None

    def __init__(self, exc):
        self.exc = exc

    def __getattr__(self, name):
        return self

    def __call__(self, *args, **kwargs):
        raise self.exc


@pytest.mark.parametrize("exc", [
    StoreUnavailable("PostgreSQL is unreachable: connection refused"),
    psycopg.OperationalError("server closed the connection unexpectedly"),
    TTransportException(message="Could not connect to 127.0.0.1:9090"),
    ConnectionResetError("reset by peer"),
])
def test_unreachable_stores_are_503_with_retry_after(settings, exc):
    client = create_app(settings.with_(write_token=TOKEN), engine=_Down(exc)).test_client()
    for resp in [
        client.get("/v1/datasets"),
        client.get("/v1/datasets/anything"),
        client.post("/v1/datasets/anything/query", json={"aggregates": ["count"]}),
        client.post("/v1/datasets/anything/rows", json=[], headers=AUTH),
    ]:
        body = assert_problem(resp, 503, None)
        assert body["title"] == "Store unavailable" and int(resp.headers["Retry-After"]) > 0
        if isinstance(exc, StoreUnavailable):
            assert body["detail"] == "PostgreSQL is unreachable: connection refused"


def test_a_dead_hbase_gives_503_and_health_says_so(settings, services, pg_conn):
    # Real PostgreSQL, and an HBase Thrift address where nothing listens.
    app = create_app(settings.with_(store="hbase", hbase="127.0.0.1:1", write_token=TOKEN))
    client = app.test_client()
    health = client.get("/healthz")
    assert health.status_code == 503 and health.headers["Retry-After"]
    assert health.get_json()["checks"]["store"] == "unreachable"
    name = "t_apih_" + uuid.uuid4().hex[:8]
    resp = client.post("/v1/datasets", json={"name": name, **DEFINITION}, headers=AUTH)
    assert_problem(resp, 503)
    assert_problem(client.get(f"/v1/datasets/{name}"), 503)
    # Nothing was half-created in PostgreSQL.
    assert pg_conn.execute("SELECT count(*) FROM gridagg_datasets WHERE name = %s", (name,)).fetchone()[0] == 0


def test_internal_errors_leak_nothing(settings):
    client = create_app(settings, engine=_Down(ZeroDivisionError("secret internals"))).test_client()
    body = assert_problem(client.get("/v1/datasets"), 500, None,
                          "the server failed unexpectedly; the error was logged")
    assert "secret" not in str(body)


class _Counting(_Down):
    """_Down, counting the engine's calls."""

    calls = 0

    def __call__(self, *args, **kwargs):
        type(self).calls += 1
        raise self.exc


def test_a_question_that_fails_is_asked_once_and_answered_as_a_problem(settings):
    """A question answered without Flask's per-request steps (api.fastpath) that fails
    is written as the app writes every problem, without being asked again: a store that
    is away costs a question its wait once."""
    down = _Counting(StoreUnavailable("HBase is away"))
    client = create_app(settings.with_(read_token=None), engine=down).test_client()
    body = assert_problem(client.post("/v1/datasets/anything/query", json={"aggregates": ["count"]}), 503, None)
    assert body["detail"] == "HBase is away" and _Counting.calls == 1
    bad = assert_problem(client.post("/v1/datasets/anything/query", json={"aggregates": "count"}), 400, "aggregates")
    assert "aggregates" in bad["detail"]
