"""The baselines (PostgreSQL alone, HBase alone) answer exactly like the oracle
(tests/oracle.py) and like gridagg, on the real servers, and are served by the HTTP API under "<name>__pg" /
"<name>__hbase" with the same request and response shapes."""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
import oracle  # noqa: E402
from engine_support import check_query, open_engine  # noqa: E402

from gridagg.baselines import BaselineRegistry, open_backend, view_name  # noqa: E402
from gridagg.query import QuerySpec  # noqa: E402
from gridagg_loadtest.workload import PAPER_CONFIG, definition  # noqa: E402

YEAR = 365 * 86400


def make_rows(n: int, seed: int) -> tuple[list[bytes], np.ndarray]:
    """Rows in the weather schema: a few years, clustered values, duplicates of values."""
    rng = np.random.default_rng(seed)
    t = rng.integers(0, 3 * YEAR, n)
    temp = rng.integers(-200, 400, n)
    hum = rng.integers(0, 101, n)
    ill = rng.choice([0, 0, 50, 200, 5000, 20000, 99999, 100000, 120000], n) + rng.integers(0, 3, n)
    wind = rng.integers(0, 300, n)
    rows = np.stack([t, temp, hum, ill, wind], axis=1).astype(np.int64)
    ids = [f"e{i}".encode() for i in range(n)]
    return ids, rows


QUERIES = [
    ({"time": ["2011-03-01T00:00:00Z", "2012-02-24T00:00:00Z"], "temperature": [10, 35], "humidity": [20, 80],
      "illuminance": [100, 100000]}, ["min:wind_speed"]),
    ({"time": ["2011-03-01T00:00:00Z", "2012-02-24T00:00:00Z"], "temperature": [10, 35], "humidity": [20, 80],
      "illuminance": [100, 100000]}, ["sum:wind_speed", "count"]),
    ({"time": ["2011-06-01T00:00:00Z", "2013-06-01T00:00:00Z"], "temperature": [-5.5, 0.3]},
     ["max:wind_speed", "avg:temperature", "min:time", "max:time", "sum:humidity"]),
    ({}, ["count", "sum:wind_speed", "min:illuminance", "max:illuminance"]),
    ({"humidity": [50, 50]}, ["count", "avg:wind_speed"]),
    ({"time": ["2011-01-01T00:00:00Z", "2011-01-01T00:00:00Z"]}, ["count", "min:wind_speed"]),
    ({"temperature": [39, 40], "humidity": [99, 100], "illuminance": [0, 0]}, ["min:wind_speed", "count"]),
    ({"time": ["2030-01-01T00:00:00Z", None]}, ["count", "min:wind_speed", "sum:wind_speed", "avg:wind_speed"]),
    ({"temperature": [10.05, 10.05]}, ["count", "min:wind_speed", "sum:wind_speed"]),
]


TABLE = oracle.Table.of(tomllib.loads(PAPER_CONFIG.read_text()))


@pytest.fixture(scope="module")
def data():
    return make_rows(4000, 7)


@pytest.fixture(scope="module")
def seen(data):
    """The rows as the oracle reads them."""
    return TABLE.from_stored(data[1])


@pytest.fixture(params=["pg", "hbase"])
def loaded(request, settings, services, data, unique_name):
    kind = request.param
    backend = open_backend(kind, settings)
    src = definition(unique_name, 50)
    reg = BaselineRegistry(settings.effective_pg_url)
    ds = reg.register(src, kind, len(data[1]), None)
    backend.create(ds)
    ids, rows = data
    assert backend.load(ds, [(ids[:1500], rows[:1500]), (ids[1500:], rows[1500:])]) == len(rows)
    yield kind, backend, ds, src
    backend.drop(ds.name)
    reg.unregister(ds.name)
    reg.close()
    backend.close()


def test_baselines_match_the_oracle(loaded, seen):
    kind, backend, ds, src = loaded
    assert ds.name == view_name(src.name, kind)
    for where, aggs in QUERIES:
        result = backend.query(ds, where, aggs)
        oracle.check_answer({"results": result.to_user(ds), "count": result.count},
                            oracle.query(TABLE, seen, {"where": where, "aggregates": aggs}), (kind, where, aggs))


@pytest.mark.parametrize("store", ["embedded", "hbase"])
def test_gridagg_and_baselines_agree(settings, services, data, seen, unique_name, tmp_path, store):
    ids, rows = data
    engine = open_engine(settings, store, tmp_path)
    src = definition(unique_name, 50)
    engine.create_dataset(src)
    backends = {k: open_backend(k, settings) for k in ("pg", "hbase")}
    views = {}
    try:
        engine.insert_encoded(src, ids, rows)
        for k, b in backends.items():
            spec = src.to_json()
            spec["name"] = view_name(src.name, k)
            from gridagg.schema import Dataset

            views[k] = Dataset.from_json(spec)
            b.create(views[k])
            b.load(views[k], [(ids, rows)])
        for where, aggs in QUERIES:
            g = check_query(engine, src.name, TABLE, seen, {"where": where, "aggregates": aggs})
            for k, b in backends.items():
                r = b.run(views[k], QuerySpec.parse(views[k], where, aggs))
                assert r.values == g.values, (k, where, aggs)
    finally:
        engine.drop_dataset(src.name)
        for k, b in backends.items():
            if k in views:
                b.drop(views[k].name)
            b.close()


def test_api_serves_baseline_views_with_the_same_shapes(loaded, seen, settings):
    from gridagg_api import create_app

    kind, backend, ds, src = loaded
    client = create_app(settings.with_(store="hbase")).test_client()  # LMDB opens once per process
    where, aggs = QUERIES[1]
    resp = client.post(f"/v1/datasets/{ds.name}/query", json={"where": where, "aggregates": aggs})
    assert resp.status_code == 200, resp.get_json()
    body = resp.get_json()
    assert set(body) == {"results", "count", "plan"}
    oracle.check_answer({"results": body["results"], "count": body["count"]},
                        oracle.query(TABLE, seen, {"where": where, "aggregates": aggs}))
    # A polygon region is refused with a problem, not a 500.
    resp = client.post(f"/v1/datasets/{ds.name}/query",
                       json={"aggregates": ["count"], "region": {"type": "Polygon", "coordinates": []}})
    assert resp.status_code == 400
    # An unregistered baseline-looking name is an unknown dataset.
    assert client.post("/v1/datasets/nosuch__pg/query", json={"aggregates": ["count"]}).status_code == 404
