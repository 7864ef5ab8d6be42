"""The HTTP API (api/) with Flask's test client, on the real PostgreSQL and both stores:
every endpoint, answers equal to the independent oracle's (tests/oracle.py: boxes,
polygons, series) for requests as users write them."""

from __future__ import annotations

import csv
import io
import uuid
from datetime import datetime, timedelta, timezone

import numpy as np
import oracle
import pytest
from engine_support import open_engine
from gridagg_api import create_app
from gridagg_api.models.datasets import (
    DatasetDetail,
    DatasetList,
    GridList,
    IngestResponse,
)
from gridagg_api.models.queries import QueryResponse, SeriesResponse

TOKEN = "w-secret"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
EPOCH = datetime(2012, 1, 1, tzinfo=timezone.utc)

DEFINITION = {
    "dimensions": [
        {"name": "time", "type": "time", "min": "2012-01-01T00:00:00Z", "max": "2012-12-31T23:00:00Z"},
        {"name": "lon", "scale": 2, "min": -10, "max": 10},
        {"name": "lat", "scale": 2, "min": 40, "max": 60},
    ],
    "measures": [
        {"name": "temperature", "scale": 1, "min": -40, "max": 50},
        {"name": "wind_speed", "scale": 1, "min": 0, "max": 70},
    ],
    "grid": {"n_size": 40, "n_threshold": 160, "l_time": "60d"},
}
TABLE = oracle.Table.of(DEFINITION)

SQUARE = {"type": "Polygon", "coordinates": [[[-5, 45], [5, 45], [5, 55], [-5, 55], [-5, 45]]]}
TRIANGLE = {"type": "Polygon", "coordinates": [[[-10, 40], [10, 40], [0, 60], [-10, 40]]]}
CONCAVE = {"type": "Polygon", "coordinates": [[[-9.5, 41], [9.5, 41], [9.5, 59], [0, 50], [-9.5, 59], [-9.5, 41]]]}
MULTI = {"type": "MultiPolygon", "coordinates": [
    [[[-10, 40], [-6, 40], [-6, 44], [-10, 44], [-10, 40]]],
    [[[2, 52.5], [8.5, 52.5], [8.5, 58], [2, 58], [2, 52.5]], [[4, 54], [6, 54], [6, 56], [4, 56], [4, 54]]],
]}
# Almost the whole lon/lat domain: most leaves lie inside and are reused.
BIG = {"type": "Polygon", "coordinates": [[[-10.5, 39.5], [10.5, 39.5], [10.5, 60.5], [-1, 60.5], [-10.5, 50],
                                          [-10.5, 39.5]]]}


def make_rows(n: int, seed: int) -> tuple[list[dict], np.ndarray]:
    """Rows on a 0.5-degree lattice (so polygon edges pass through stored points)."""
    rng = np.random.default_rng(seed)
    hours = rng.integers(0, 366 * 24 - 1, n)
    lon = rng.integers(-20, 21, n) * 50
    lat = 4000 + rng.integers(0, 41, n) * 50
    temp = rng.integers(-100, 350, n)
    wind = rng.integers(0, 200, n)
    rows = []
    for h, x, y, t, w in zip(hours, lon, lat, temp, wind):
        ts = (EPOCH + timedelta(hours=int(h))).strftime("%Y-%m-%dT%H:%M:%SZ")
        rows.append({"time": ts, "lon": int(x) / 100, "lat": int(y) / 100, "temperature": int(t) / 10,
                     "wind_speed": int(w) / 10})
    encoded = np.stack([hours * 3600, lon, lat, temp, wind], axis=1).astype(np.int64)
    return rows, encoded


ROWS, ENCODED = make_rows(1200, seed=11)
SEEN = TABLE.rows(ROWS)  # the rows as the oracle reads them


def conforms(model, answer: dict) -> dict:
    """The answer, after checking that its model (api.models, which /openapi.json
    documents) describes it: no field missing, none extra, each of its type."""
    model.model_validate(answer, strict=True)
    return answer


# --------------------------------------------------------------------------- fixtures


@pytest.fixture(params=["embedded", "hbase"], scope="module")
def loaded(request, settings, services, tmp_path_factory):
    """(client, dataset, encoded rows, store kind): a dataset created and filled through
    the API (half as JSON, half as CSV), dropped at the end."""
    engine = open_engine(settings, request.param, tmp_path_factory.mktemp("api-store"))
    app = create_app(settings.with_(write_token=TOKEN, read_token=None), engine=engine)
    client = app.test_client()
    name = "t_api_" + uuid.uuid4().hex[:8]
    resp = client.post("/v1/datasets", json={"name": name, **DEFINITION}, headers=AUTH)
    created = resp.get_json()
    assert resp.status_code == 201, created
    assert (created["name"], created["grid"], created["region_dimensions"]) == (
        name, {"n_size": 40, "n_threshold": 160, "l_time": 60 * 86400}, ["lon", "lat"])
    assert [c["scale"] for c in created["dimensions"][1:] + created["measures"]] == [2, 2, 1, 1]
    resp = client.post(f"/v1/datasets/{name}/rows", json=ROWS[:600], headers=AUTH)
    body = resp.get_json()
    assert resp.status_code == 200 and body["splits"] >= 0, body
    assert {**body, "splits": 0} == {"received": 600, "stored": 600, "duplicates": 0, "splits": 0, "rounded": {},
                                     "rejected": []}
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(ROWS[0]))
    writer.writeheader()
    writer.writerows(ROWS[600:])
    resp = client.post(f"/v1/datasets/{name}/rows", data=buf.getvalue(), content_type="text/csv", headers=AUTH)
    body = resp.get_json()
    assert resp.status_code == 200 and body["stored"] == 600 and body["rejected"] == [], body
    try:
        yield client, engine.dataset(name), ENCODED, request.param
    finally:
        engine.drop_dataset(name)


AGGS = ["count", "sum:wind_speed", "min:wind_speed", "max:temperature", "avg:temperature", "min:time"]


# --------------------------------------------------------------------------- endpoints


def test_dataset_listing_and_description(loaded):
    client, ds, encoded, _ = loaded
    names = [d["name"] for d in conforms(DatasetList, client.get("/v1/datasets").get_json())["datasets"]]
    assert ds.name in names
    info = conforms(DatasetDetail, client.get(f"/v1/datasets/{ds.name}").get_json())
    assert info["row_count"] == len(encoded)
    assert info["grid_count"] > 1
    assert info["grid"] == {"n_size": 40, "n_threshold": 160, "l_time": 60 * 86400}
    assert [d["name"] for d in info["dimensions"]] == ["time", "lon", "lat"]
    assert info["time_dimension"] == "time" and info["region_dimensions"] == ["lon", "lat"]


def test_grids_tile_the_rows(loaded):
    client, ds, encoded, _ = loaded
    body = conforms(GridList, client.get(f"/v1/datasets/{ds.name}/grids").get_json())
    grids = body["grids"]
    assert body["grid_count"] == len(grids) == client.get(f"/v1/datasets/{ds.name}").get_json()["grid_count"]
    assert sum(g["count"] for g in grids) == len(encoded)
    for g in grids[:20]:
        lo, hi = g["box"]["lon"]
        lat_lo, lat_hi = g["box"]["lat"]
        mask = ((encoded[:, 1] >= round(lo * 100)) & (encoded[:, 1] <= round(hi * 100))
                & (encoded[:, 2] >= round(lat_lo * 100)) & (encoded[:, 2] <= round(lat_hi * 100)))
        t0 = datetime.fromisoformat(g["box"]["time"][0].replace("Z", "+00:00"))
        t1 = datetime.fromisoformat(g["box"]["time"][1].replace("Z", "+00:00"))
        mask &= (encoded[:, 0] >= (t0 - EPOCH).total_seconds()) & (encoded[:, 0] <= (t1 - EPOCH).total_seconds())
        assert int(mask.sum()) == g["count"], g["id"]


@pytest.mark.parametrize("where", [
    {},
    {"lon": [-2.5, 7]},
    {"time": ["2012-03-01T00:00:00Z", "2012-08-31T23:00:00Z"], "lat": [45, 50]},
    {"lon": [0.25, 0.75]},  # no stored lon between: the lattice is 0.5 wide
    {"lon": ["0.495", "0.505"], "lat": [None, 49.999]},  # one lon of the lattice
    {"lon": ["0.505", 1.005], "lat": [44.995, "45.0049"]},  # the same, by bounds just past others
    {"time": [None, "2012-02-01T00:00:00Z"]},
    {"time": ["2012-05-01T02:00:00.5+02:00", "2012-05-03"], "lon": [-10, None]},  # a zone, no zone
    {"time": [1333238400, 1335830400.0], "lat": [None, None]},  # seconds since 1970
    {"lat": [70, 80]},
])
def test_box_queries_equal_the_oracle(loaded, where):
    client, ds, _, _ = loaded
    resp = client.post(f"/v1/datasets/{ds.name}/query", json={"where": where, "aggregates": AGGS})
    body = resp.get_json()
    assert resp.status_code == 200, body
    conforms(QueryResponse, body)
    oracle.check_answer(body, oracle.query(TABLE, SEEN, {"where": where, "aggregates": AGGS}))


def test_get_form_matches_post(loaded):
    client, ds, _, _ = loaded
    resp = client.get(f"/v1/datasets/{ds.name}/query?aggregates=min:wind_speed,count,avg:temperature"
                      "&where.lon=-3,4.5&where.time=2012-05-01T00:00:00Z,")
    body = resp.get_json()
    assert resp.status_code == 200, body
    request = {"where": {"lon": [-3, 4.5], "time": ["2012-05-01T00:00:00Z", None]},
               "aggregates": ["min:wind_speed", "count", "avg:temperature"]}
    expected = oracle.query(TABLE, SEEN, request)
    oracle.check_answer(body, expected)
    posted = client.post(f"/v1/datasets/{ds.name}/query", json=request).get_json()
    oracle.check_answer(posted, expected)
    assert posted["results"] == body["results"]


@pytest.mark.parametrize("region", [SQUARE, TRIANGLE, CONCAVE, MULTI, BIG], ids=["square", "triangle",
                                                                                "concave", "multi", "big"])
@pytest.mark.parametrize("where", [{}, {"time": ["2012-02-10T00:00:00Z", "2012-10-01T00:00:00Z"]}])
def test_polygon_queries_equal_the_oracle(loaded, region, where):
    client, ds, _, _ = loaded
    request = {"where": where, "aggregates": AGGS, "region": region}
    resp = client.post(f"/v1/datasets/{ds.name}/query", json={**request, "explain": True})
    body = resp.get_json()
    assert resp.status_code == 200, body
    conforms(QueryResponse, body)
    oracle.check_answer(body, oracle.query(TABLE, SEEN, request))
    plan = body["plan"]
    if "rollup_positions" in plan:  # over position alone, once the rollup is made: no grid walked or read
        assert not where and plan["rows_in_scanned_grids"] == 0
    else:
        assert plan["grids"]["reused"] or plan["grids"]["scanned"]
        r = plan["region"]
        assert r["leaves_inside"] + r["leaves_on_edge"] + r["leaves_outside"] <= plan["total_grids"]
    if region is BIG and not where:
        assert plan["rows_in_reused_grids"] > 0 and plan["reused_grids_after"] <= plan["reused_grids_before"]


def test_boundary_points_count_as_inside(loaded):
    client, ds, encoded, _ = loaded
    on_edge = (encoded[:, 1] == -500) & (encoded[:, 2] >= 4500) & (encoded[:, 2] <= 5500)
    assert on_edge.any()  # the lattice puts points on the square's west edge
    body = client.post(f"/v1/datasets/{ds.name}/query", json={"aggregates": ["count"], "region": SQUARE}).get_json()
    inside = ((encoded[:, 1] >= -500) & (encoded[:, 1] <= 500) & (encoded[:, 2] >= 4500) & (encoded[:, 2] <= 5500))
    assert body["results"]["count"] == int(inside.sum())


@pytest.mark.parametrize("case", [
    dict(step="1d", window="7d", where={"lon": [-6, 6]}),
    dict(step="30d", region=TRIANGLE, start="2012-02-01T00:00:00Z", end="2012-11-15T00:00:00Z"),
    dict(step="12h", window="3d", where={"lat": [42, 58]}, region=CONCAVE, start="2012-06-01T00:00:00Z",
         end="2012-07-15T00:00:00Z"),
    dict(step=86400, window="2d", where={"time": ["2012-03-01T12:00:00+02:00", "2012-04-01T00:00:00.5"]},
         region=SQUARE),  # start and end from where's time range, in a zone and without one
    dict(step="6h", window=43200, where={"lat": ["45.005", None]}, start="2011-12-30T00:00:00.25Z",
         end="2012-01-04T03:00:00+03:00"),  # the first points before the domain
    dict(step="120d"),
])
def test_series_equal_the_oracle(loaded, case):
    client, ds, _, _ = loaded
    request = {"aggregates": ["avg:temperature", "min:wind_speed", "max:wind_speed", "sum:wind_speed", "count",
                              "max:time"], **case}
    resp = client.post(f"/v1/datasets/{ds.name}/series", json=request)
    out = resp.get_json()
    assert resp.status_code == 200, out
    conforms(SeriesResponse, out)
    oracle.check_series(out, oracle.series(TABLE, SEEN, request))
    if case["step"] == "120d":
        # Buckets wider than the pre-split leaves: whole leaves are reused.
        assert out["plan"]["rows_in_reused_grids"] > 0


def test_ingest_reports_rejections_and_duplicates(loaded, settings):
    client, ds, encoded, _ = loaded
    good = {"id": "probe-1", "time": "2012-12-31T23:00:00Z", "lon": 10, "lat": 60, "temperature": -39.5,
            "wind_speed": 0}
    bad = [
        {"time": "2013-01-01T00:00:00Z", "lon": 0, "lat": 50, "temperature": 1, "wind_speed": 1},
        {"time": "2012-06-01T00:00:00Z", "lon": 0, "lat": 50, "temperature": 1.25, "wind_speed": 1},
        {"time": "2012-06-01T00:00:00Z", "lon": 0, "lat": 50, "wind_speed": 1},
        "not a row",
    ]
    resp = client.post(f"/v1/datasets/{ds.name}/rows", json=[good, *bad, good], headers=AUTH)
    body = conforms(IngestResponse, resp.get_json())
    assert resp.status_code == 200, body
    assert body["stored"] == 1 and body["duplicates"] == 1 and body["received"] == 6
    assert [(r["index"], r["field"]) for r in body["rejected"]] == [(1, "time"), (2, "temperature"),
                                                                   (3, "temperature"), (4, "row")]
    again = client.post(f"/v1/datasets/{ds.name}/rows", json={"rows": [good, None]}, headers=AUTH).get_json()
    assert again["stored"] == 0 and again["duplicates"] == 1
    assert [(r["index"], r["field"]) for r in again["rejected"]] == [(1, "row")]  # null is no row: told, not dropped
    text = "id,time,lon,lat,temperature,wind_speed\nprobe-2,2012-12-31T23:00:00Z,10,60,-39.5,0\n1,2,3\n" \
           "probe-3,2012-12-31T23:00:00Z,10,60,,0\n"
    body = client.post(f"/v1/datasets/{ds.name}/rows", data=text, content_type="text/csv", headers=AUTH).get_json()
    assert body["stored"] == 1
    assert [(r["index"], r["field"]) for r in body["rejected"]] == [(1, "row"), (2, "temperature")]
    # The two probes sit in the domain's far corner: visible to a query there, and gone for
    # the other tests after the module (they only ever ask elsewhere or count exactly).
    q = client.post(f"/v1/datasets/{ds.name}/query",
                    json={"where": {"lon": [10, 10], "lat": [60, 60], "time": ["2012-12-31T23:00:00Z", None]},
                          "aggregates": ["count", "min:temperature"]}).get_json()
    extra = int(((encoded[:, 1] == 1000) & (encoded[:, 2] == 6000) & (encoded[:, 0] == tcol_end(ds))).sum())
    assert q["results"] == {"count": 2 + extra, "min:temperature": -39.5}


def tcol_end(ds) -> int:
    return ds.dimensions[0].enc_hi


def test_healthz_metrics_openapi(loaded):
    client, ds, _, kind = loaded
    health = client.get("/healthz")
    assert health.status_code == 200 and health.get_json() == {
        "status": "ok", "checks": {"postgresql": "ok", "store": "ok", "store_kind": kind}}
    metrics = client.get("/metrics")
    assert metrics.status_code == 200
    text = metrics.get_data(as_text=True)
    assert "gridagg_http_requests_total" in text and "gridagg_rows_stored_total" in text
    doc = client.get("/openapi.json").get_json()
    assert doc["openapi"].startswith("3.")
    # Every route of the app is documented with its methods, and nothing else is.
    app = client.application
    routes = {}
    for rule in app.url_map.iter_rules():
        if rule.endpoint == "static":
            continue
        path = rule.rule.replace("<name>", "{name}")
        routes.setdefault(path, set()).update(m.lower() for m in rule.methods - {"HEAD", "OPTIONS"})
    documented = {p: set(ops) for p, ops in doc["paths"].items()}
    assert routes == documented
