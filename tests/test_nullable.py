"""Nullable measures: definitions, the rows API on both stores (absent values stored as
NULL, every aggregate skipping them as the oracle of tests/oracle.py does, leaves split
across rows with and without values), and the ingest encoder against the reference,
value by value."""

from __future__ import annotations

import csv
import io
import uuid

import numpy as np
import oracle
import pyarrow as pa
import pytest
from engine_support import check_query, check_tree, open_engine
from gridagg_api import create_app
from gridagg_ingest.config import parse_config
from gridagg_ingest.encode import encode_batch, encode_field
from hypothesis import given, settings
from hypothesis import strategies as st

from gridagg.model.aggregate import NULL, PartialAggregate
from gridagg.model.errors import InvalidInput
from gridagg.model.schema import Column, Dataset

# --------------------------------------------------------------------------- definitions


def test_a_dimension_cannot_be_nullable():
    with pytest.raises(InvalidInput, match="dimension x cannot be nullable: every row needs a point"):
        Dataset.from_json({"name": "d", "dimensions": [{"name": "x", "min": 0, "max": 1, "nullable": True}]})
    with pytest.raises(InvalidInput, match="dimension x cannot be nullable"):
        parse_config({"dataset": {"name": "d"}, "input": {"id": ["k"]},
                      "dimensions": [{"name": "x", "min": 0, "max": 1, "nullable": True}]})
    with pytest.raises(InvalidInput, match="nullable must be true or false"):
        Column.from_json({"name": "m", "nullable": "yes"}, "c")


def test_encode_row_stores_absent_values_as_null():
    ds = Dataset.from_json({"name": "d", "dimensions": [{"name": "x", "min": 0, "max": 10}],
                            "measures": [{"name": "m", "scale": 1, "nullable": True},
                                         {"name": "t", "type": "time", "min": "2020-01-01", "max": "2021-01-01",
                                          "nullable": True},
                                         {"name": "n"}]})
    assert ds.to_json()["measures"][0]["nullable"] is True and "nullable" not in ds.to_json()["measures"][2]
    assert Dataset.from_json(ds.to_json()) == ds
    assert ds.encode_row({"x": 1, "n": 2}) == ([1, NULL, NULL, 2], [])
    assert ds.encode_row({"x": 1, "m": None, "t": " ", "n": 2}) == ([1, NULL, NULL, 2], [])
    assert ds.encode_row({"x": 1, "m": "1.5", "t": "2020-01-01T00:00:01Z", "n": 2}) == ([1, 15, 1, 2], [])
    for row, field in [({"m": 1, "n": 2}, "x"), ({"x": None, "n": 2}, "x"), ({"x": 1}, "n"), ({"x": 1, "n": ""}, "n")]:
        with pytest.raises(InvalidInput, match=f"{field}: missing value"):
            ds.encode_row(row)


# --------------------------------------------------------------------------- ingest encoder

CFG = parse_config({
    "dataset": {"name": "null_prop"},
    "input": {"format": "csv", "id": ["k"]},
    "dimensions": [{"name": "t", "type": "time", "min": "2000-01-01T00:00:00Z", "max": "2030-01-01T00:00:00Z",
                    "source": "t", "format": "epoch"}],
    "measures": [
        {"name": "p", "scale": 1, "min": 300, "max": 1200, "source": "p", "nullable": True, "missing": ["NA", "-9999"]},
        {"name": "w", "scale": 2, "source": "w", "nullable": True, "rounding": "half_even"},
        {"name": "seen", "type": "time", "min": "2000-01-01T00:00:00Z", "max": "2030-01-01T00:00:00Z",
         "source": "seen", "format": "epoch", "nullable": True, "missing": ["NA"]},
        {"name": "iso", "type": "time", "min": "2000-01-01T00:00:00Z", "max": "2030-01-01T00:00:00Z",
         "source": "iso", "nullable": True},
        {"name": "n", "scale": 0, "source": "n", "missing": ["NA"]},
    ],
})
maybe_missing = st.sampled_from([None, "", "  ", "NA", " NA", "-9999", "-9999.0", "-9999.01", "nan"])
number = st.one_of(maybe_missing, st.decimals(-2000, 2000, places=2).map(str), st.floats(0, 1500).map(repr))
epoch = st.one_of(maybe_missing, st.integers(946684800, 1893456000).map(str))
iso = st.one_of(maybe_missing, st.sampled_from(["2020-01-01T00:00:00Z", "2020-01-01", "junk"]))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(epoch, number, number, epoch, iso, number), min_size=1, max_size=30))
def test_encode_batch_nulls_as_the_reference(rows):
    n = len(rows)
    names = ["t", "p", "w", "seen", "iso", "n"]
    batch = pa.RecordBatch.from_arrays(
        [pa.array([r[j] for r in rows], pa.string()) for j in range(6)]
        + [pa.array([str(i) for i in range(n)]), pa.array(["f"] * n), pa.nulls(n, pa.int64()), pa.nulls(n, pa.string())],
        names=[*names, "k", "_file", "_line", "_reason"])
    out = encode_batch(batch, CFG, []).to_pylist()
    for values, got in zip(rows, out):
        expected, why = [], None
        for col, src, v in zip(CFG.dataset.columns, CFG.sources, values):
            enc, _, why = encode_field(col, src, v)
            if why is not None:
                break
            expected.append(enc)
        assert got["_reason"] == why, values
        if why is None:
            assert [got[f"c{i}"] for i in range(6)] == expected, values


# --------------------------------------------------------------------------- rows API

TOKEN = "w-secret"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
DEFINITION = {
    "dimensions": [
        {"name": "x", "scale": 1, "min": 0, "max": 100},
        {"name": "y", "scale": 0, "min": 0, "max": 1000},
    ],
    "measures": [
        {"name": "pressure", "scale": 1, "min": 300, "max": 1200, "nullable": True},
        {"name": "wind", "scale": 2, "min": 0, "max": 100, "nullable": True, "rounding": "half_even"},
        {"name": "temp", "scale": 1, "min": -50, "max": 60},
    ],
    "grid": {"n_size": 25, "n_threshold": 100},
}
TABLE = oracle.Table.of(DEFINITION)


def gappy_rows(n: int, seed: int):
    """Rows with gaps: pressure absent in a quarter of them and in every row with x < 20
    (a station without the sensor: whole leaves without a value), wind absent in a
    third (as null, an absent key or an empty string)."""
    rng = np.random.default_rng(seed)
    rows, encoded = [], []
    for i in range(n):
        x, y = int(rng.integers(0, 1001)), int(rng.integers(0, 1001))
        p = None if x < 200 or rng.random() < 0.25 else int(rng.integers(3000, 12001))
        w = None if rng.random() < 0.33 else int(rng.integers(0, 10001))
        t = int(rng.integers(-500, 601))
        row = {"id": f"r{i}", "x": x / 10, "y": y, "temp": t / 10}
        if p is not None:
            row["pressure"] = p / 10
        elif i % 2:
            row["pressure"] = None
        row["wind"] = f"{w / 100:.2f}" if w is not None else ("" if i % 3 else None)
        rows.append(row)
        encoded.append([x, y, NULL if p is None else p, NULL if w is None else w, t])
    return rows, np.array(encoded, dtype=np.int64)


@pytest.fixture(params=["embedded", "hbase"])
def api(request, settings, services, tmp_path):
    engine = open_engine(settings, request.param, tmp_path)
    client = create_app(settings.with_(write_token=TOKEN, read_token=None), engine=engine).test_client()
    name = "t_null_" + uuid.uuid4().hex[:8]
    resp = client.post("/v1/datasets", json={"name": name, **DEFINITION}, headers=AUTH)
    assert resp.status_code == 201, resp.get_json()
    assert [c.get("nullable", False) for c in resp.get_json()["measures"]] == [True, True, False]
    try:
        yield client, engine, name
    finally:
        engine.drop_dataset(name)
        engine.store.close()
        engine.directory.close()


def post_json_then_csv(client, name, rows):
    half = len(rows) // 2
    bodies = [client.post(f"/v1/datasets/{name}/rows", json=rows[:half], headers=AUTH).get_json()]
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=["id", "x", "y", "pressure", "wind", "temp"])
    writer.writeheader()
    writer.writerows({k: ("" if v is None else v) for k, v in r.items()} for r in rows[half:])
    bodies.append(client.post(f"/v1/datasets/{name}/rows", data=buf.getvalue(), content_type="text/csv",
                              headers=AUTH).get_json())
    for body in bodies:
        assert body["rejected"] == [], body
    return bodies


QUERIES = [{}, {"x": [0, 19.9]}, {"x": [10, 30]}, {"x": [20, 100], "y": [100, 400]}, {"y": [500, 500]},
           {"x": [55.5, 60], "y": [None, 700]}, {"x": ["19.95", "20.05"], "y": [499.5, None]}, {"x": [1000, 2000]}]
AGGS = ["count", "sum:pressure", "min:pressure", "max:pressure", "sum:wind", "min:wind", "max:wind", "avg:temp",
        "min:x", "count:pressure", "count:wind", "avg:pressure", "avg:wind", "count:temp"]


def test_rows_api_stores_gaps_and_aggregates_skip_them(api):
    client, engine, name = api
    rows, encoded = gappy_rows(800, seed=3)
    bodies = post_json_then_csv(client, name, rows)
    assert sum(b["stored"] for b in bodies) == 800 and sum(b["splits"] for b in bodies) > 0
    check_tree(engine, name, encoded)  # every leaf's and ancestor's present counts too
    leaves = engine.leaves(name)
    assert any(a.count and not a.present[2] for _, a in leaves), "no leaf without pressure values"
    assert any(0 < a.present[2] < a.count for _, a in leaves), "no leaf with some pressure values"
    seen = TABLE.rows(rows)
    for where in QUERIES:
        check_query(engine, name, TABLE, seen, {"where": where, "aggregates": AGGS})
    empty = engine.query(name, {"x": [0, 19.9]}, ["min:pressure", "max:pressure", "sum:pressure"]).values
    assert empty == {"min:pressure": None, "max:pressure": None, "sum:pressure": 0}


def test_count_col_and_avg_over_present_values(api):
    client, engine, name = api
    rows, encoded = gappy_rows(300, seed=9)
    post_json_then_csv(client, name, rows)
    got = engine.query(name, {"x": [0, 19.9]}, ["count", "count:pressure", "avg:pressure"]).values
    assert got["count"] > 0 and got["count:pressure"] == 0 and got["avg:pressure"] is None
    request = {"aggregates": ["count:wind", "avg:wind", "count"]}
    http = client.post(f"/v1/datasets/{name}/query", json=request).get_json()
    oracle.check_answer(http, oracle.query(TABLE, TABLE.rows(rows), request))
    assert 0 < http["results"]["count:wind"] == int((encoded[:, 3] != NULL).sum()) < http["count"]


def test_partial_aggregates_of_rows_with_gaps_merge_exactly():
    """Aggregates of rows with and without values, split anywhere and merged back, equal
    the aggregate of all rows (what a split and the ancestors rely on)."""
    rng = np.random.default_rng(1)
    rows = rng.integers(-10**15, 10**15, (500, 3))
    rows[rng.random(500) < 0.4, 1] = NULL
    rows[:, 2] = NULL
    whole = PartialAggregate.of_rows(rows, 3)
    assert whole.present == [500, int((rows[:, 1] != NULL).sum()), 0]
    assert whole.mins[2] is None and whole.maxs[2] is None and whole.sums[2] == 0
    for cut in (0, 1, 137, 499, 500):
        merged = PartialAggregate.of_rows(rows[:cut], 3).merge(PartialAggregate.of_rows(rows[cut:], 3))
        assert merged == whole
        assert PartialAggregate.unpack(merged.pack(), 3) == whole


SERIES_DEFINITION = {
    "dimensions": [
        {"name": "time", "type": "time", "min": "2020-01-01T00:00:00Z", "max": "2020-12-31T23:00:00Z"},
        {"name": "lon", "scale": 1, "min": -10, "max": 10},
        {"name": "lat", "scale": 1, "min": 40, "max": 60},
    ],
    "measures": [{"name": "pressure", "scale": 1, "min": 300, "max": 1200, "nullable": True}],
    "grid": {"n_size": 25, "n_threshold": 100, "l_time": "60d"},
}
SERIES_TABLE = oracle.Table.of(SERIES_DEFINITION)


@pytest.fixture
def stations(api):
    """(client, dataset name, rows) of a dataset over time, lon and lat whose pressure
    is absent in two rows of three."""
    client, engine, _ = api
    name = "t_nulls_" + uuid.uuid4().hex[:8]
    created = client.post("/v1/datasets", json={"name": name, **SERIES_DEFINITION}, headers=AUTH)
    assert created.status_code == 201 and created.get_json()["measures"] == [
        {"name": "pressure", "type": "number", "scale": 1, "min": 300, "max": 1200, "nullable": True}]
    rng = np.random.default_rng(4)
    rows = [{"time": f"2020-{1 + i % 12:02d}-{1 + i % 28:02d}T{i % 24:02d}:00:00Z",
             "lon": int(rng.integers(-100, 101)) / 10, "lat": int(rng.integers(400, 601)) / 10,
             "pressure": None if i % 3 else int(rng.integers(3000, 12001)) / 10, "id": str(i)}
            for i in range(600)]
    try:
        assert client.post(f"/v1/datasets/{name}/rows", json=rows, headers=AUTH).get_json()["stored"] == 600
        yield client, name, rows
    finally:
        engine.drop_dataset(name)


def test_polygons_skip_absent_values(stations):
    client, name, rows = stations
    square = {"type": "Polygon", "coordinates": [[[-5, 45], [5, 45], [5, 55], [-5, 55], [-5, 45]]]}
    inside = [round(r["pressure"] * 10) for r in rows
              if r["pressure"] is not None and -5 <= r["lon"] <= 5 and 45 <= r["lat"] <= 55]
    body = client.post(f"/v1/datasets/{name}/query", json={
        "aggregates": ["min:pressure", "max:pressure", "sum:pressure"], "region": square}).get_json()
    assert body["results"] == {"min:pressure": min(inside) / 10, "max:pressure": max(inside) / 10,
                               "sum:pressure": sum(inside) / 10}, body


def test_series_skip_absent_values(stations):
    client, name, rows = stations
    request = {"aggregates": ["count", "min:pressure", "max:pressure", "sum:pressure", "count:pressure",
                              "avg:pressure"], "step": "30d", "where": {"lon": [-7.3, 8.1]}}
    body = client.post(f"/v1/datasets/{name}/series", json=request).get_json()
    oracle.check_series(body, oracle.series(SERIES_TABLE, SERIES_TABLE.rows(rows), request))
    assert any(p["results"]["count:pressure"] < p["count"] for p in body["points"])
