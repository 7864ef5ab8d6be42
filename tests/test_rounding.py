"""Rounding policies of number columns: Column.encode and the ingest encoder against the
decimal module, and the rows API on both stores (counts of rounded values, answers
equal to the oracle's (tests/oracle.py) over the values rounded by the decimal module,
query bounds exact)."""

from __future__ import annotations

import csv
import io
import uuid

import numpy as np
import oracle
import pyarrow as pa
import pytest
from archives_support import MODES, decimal_rounded
from engine_support import check_query, open_engine
from gridagg_api import create_app
from gridagg_ingest.config import parse_config
from gridagg_ingest.encode import encode_batch, encode_field
from hypothesis import given, settings
from hypothesis import strategies as st

from gridagg.model.errors import InvalidInput
from gridagg.model.schema import Column, Dataset

ROUNDINGS = sorted(MODES)
digits = st.text("0123456789", min_size=0, max_size=22)
decimal_text = st.builds(lambda sign, whole, frac: f"{sign}{whole or '0'}.{frac}" if frac else f"{sign}{whole or '0'}",
                         st.sampled_from(["", "-", "+"]), digits, digits)


# --------------------------------------------------------------------------- Column


@settings(max_examples=400, deadline=None)
@given(decimal_text, st.integers(0, 6), st.sampled_from(ROUNDINGS))
def test_column_rounds_as_the_decimal_module(text, scale, mode):
    col = Column("x", scale=scale, rounding=mode)
    expected, was_rounded = decimal_rounded(text, scale, mode)
    if abs(expected) > col.enc_hi:
        with pytest.raises(InvalidInput, match="too large to store exactly"):
            col.encode_rounded(text)
    else:
        assert col.encode_rounded(text) == (expected, was_rounded)


@settings(max_examples=300, deadline=None)
@given(st.floats(-1e9, 1e9, allow_nan=False), st.integers(0, 8), st.sampled_from(ROUNDINGS))
def test_a_float_rounds_as_its_shortest_text(value, scale, mode):
    """A float (JSON number) means the decimal its repr writes: 10.357019999999999 is
    that many decimals, not the binary fraction behind it."""
    col = Column("x", scale=scale, rounding=mode)
    expected = decimal_rounded(repr(value), scale, mode)
    if abs(expected[0]) > col.enc_hi:
        with pytest.raises(InvalidInput, match="too large to store exactly"):
            col.encode_rounded(value)
    else:
        assert col.encode_rounded(value) == expected


def test_refuse_is_the_default_and_bounds_stay_exact():
    col = Column("x", scale=2, lo=-10, hi=10)
    assert col.rounding == "refuse" and "rounding" not in col.to_json()
    with pytest.raises(InvalidInput, match="more decimals than the column's scale"):
        col.encode("1.234")
    # Decimal's 28-digit context no longer hides a far decimal.
    with pytest.raises(InvalidInput, match="more decimals"):
        col.encode("1.00000000000000000000000000001")
    # Domain bounds are never rounded, whatever the policy.
    with pytest.raises(InvalidInput, match="more decimals"):
        Column("x", scale=1, lo=0, hi=10.05, rounding="half_even")
    rounded = Column("x", scale=1, lo=0, hi=100, rounding="half_even")
    assert Column.from_json(rounded.to_json(), "c") == rounded and rounded.to_json()["rounding"] == "half_even"
    # Query bounds keep their exact meaning: 10.04 is not a bound at 10.0.
    assert rounded.encode("10.04") == 100
    assert rounded.encode_bound("10.04", upper=False) == 101 and rounded.encode_bound("10.04", upper=True) == 100


@pytest.mark.parametrize("spec, message", [
    ({"name": "x", "rounding": "up"}, "rounding must be one of refuse, half_even, half_up, floor, ceil"),
    ({"name": "t", "type": "time", "min": "2020-01-01", "max": "2021-01-01", "rounding": "floor"},
     "rounding applies to number columns only"),
])
def test_bad_rounding_is_refused(spec, message):
    with pytest.raises(InvalidInput, match=message):
        Column.from_json(spec, "c")


@pytest.mark.parametrize("mode, text, stored", [
    ("half_even", "100.04", 1000),   # rounds onto the edge: kept
    ("half_even", "100.05", 1000),   # a tie to the even neighbour, the edge
    ("half_up", "100.05", None),     # ties away from zero: past the edge
    ("floor", "100.09", 1000),
    ("ceil", "100.01", None),
    ("ceil", "-0.04", 0),            # rounds onto the lower edge from below it
    ("floor", "-0.04", None),
    ("half_even", "-0.05", 0),
    ("half_up", "-0.05", None),
])
def test_the_domain_is_checked_on_the_rounded_value(mode, text, stored):
    col = Column("x", scale=1, lo=0, hi=100, rounding=mode)
    if stored is None:
        with pytest.raises(InvalidInput, match="outside the domain"):
            col.encode(text)
    else:
        assert col.encode(text) == stored


@settings(max_examples=300, deadline=None)
@given(st.integers(-(10**40), 10**40), st.integers(1, 10**12), st.integers(0, 6))
def test_a_mean_decodes_to_the_correctly_rounded_double(num, den, scale):
    from fractions import Fraction

    value = Column("x", scale=scale).decode(Fraction(num, den))
    exact = Fraction(num, den) / 10**scale
    if scale == 0 and exact.denominator == 1:
        assert value == exact and type(value) is int
    else:
        assert value == float(exact) and type(value) is float


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 10**9), max_size=20), st.sampled_from(["2011-01-01T00:00:00Z", "1999-12-31T23:59:58Z",
                                                                     "2000-02-29T12:00:00.250000Z"]))
def test_many_times_decode_as_each_alone(seconds, start):
    col = Column("t", kind="time", lo=start, hi="2100-01-01T00:00:00Z")
    assert col.decode_times(np.array(seconds, np.int64)) == [col.decode(v) for v in seconds]


# --------------------------------------------------------------------------- ingest encoder

CFG = parse_config({
    "dataset": {"name": "round_prop"},
    "input": {"format": "csv", "id": ["k"]},
    "dimensions": [
        {"name": "a", "scale": 2, "min": -10, "max": 10, "source": "a", "rounding": "half_even", "missing": ["-99"]},
    ],
    "measures": [
        {"name": "b", "scale": 3, "source": "b", "rounding": "half_up"},
        {"name": "c", "scale": 0, "min": -10000, "max": 1000, "source": "c", "rounding": "floor", "nullable": True,
         "missing": ["-9999", "NA", "-9999.5", " x"]},
        {"name": "d", "scale": 5, "source": "d", "rounding": "ceil"},
        {"name": "e", "scale": 1, "source": "e"},
    ],
})

edge_text = st.sampled_from(["10.005", "10.004", "-10.005", "-10.0049", "9.995", "10.00000000000000000001",
                             "-99", "-99.0", "-99.004", "-9999", "-9999.5", "-9999.0000", "", None, " 1.5", "1e1",
                             "0.035701999999999995", "10.357019999999999", "0.00000000000000000000012345",
                             "1234567890123456789", "123456789.123456789", "-0.0000001", "+.5", "5.", "-",
                             "NA", " NA", "na", "-9999.5", "-9999.50", "-9999.4", "-9999.6", "-10000", "x", " x"])
float_text = st.floats(-20, 20, allow_nan=False).map(repr)
value_text = st.one_of(decimal_text, float_text, edge_text)


def reference(values):
    row, rounded = [], set()
    for i, (col, src, v) in enumerate(zip(CFG.dataset.columns, CFG.sources, values)):
        enc, was_rounded, why = encode_field(col, src, v)
        if why is not None:
            return None, set(), why
        row.append(enc)
        if was_rounded:
            rounded.add(i)
    return row, rounded, None


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(*[value_text] * 5), min_size=1, max_size=30))
def test_encode_batch_rounds_as_the_reference(rows):
    n = len(rows)
    names = ["a", "b", "c", "d", "e"]
    batch = pa.RecordBatch.from_arrays(
        [pa.array([r[j] for r in rows], pa.string()) for j in range(5)]
        + [pa.array([str(i) for i in range(n)]), pa.array(["f"] * n), pa.nulls(n, pa.int64()), pa.nulls(n, pa.string())],
        names=[*names, "k", "_file", "_line", "_reason"])
    out = encode_batch(batch, CFG, []).to_pylist()
    for values, got in zip(rows, out):
        row, rounded, why = reference(values)
        assert got["_reason"] == why, values
        if why is None:
            assert [got[f"c{i}"] for i in range(5)] == row, values
            assert {i for i in range(4) if got[f"_r{i}"]} == rounded, values
        else:
            assert got["c0"] is None and not any(got[f"_r{i}"] for i in range(4))


def test_float_text_in_full_is_rounded_by_the_vectorized_path(monkeypatch):
    """Float text as archives write it (17 significant digits) never takes the per-row
    Python path."""
    import gridagg_ingest.encode as enc

    def no_exact_path(*args):
        raise AssertionError("the exact path was taken")

    monkeypatch.setattr(enc, "_exact_row", no_exact_path)
    rng = np.random.default_rng(3)
    values = [repr(float(x)) for x in rng.uniform(-9.9, 9.9, 2000)] + ["0.035701999999999995", "-0.0012345678901234567"]
    n = len(values)
    batch = pa.RecordBatch.from_arrays(
        [pa.array(values)] + [pa.array(["1"] * n)] * 4
        + [pa.array([str(i) for i in range(n)]), pa.array(["f"] * n), pa.nulls(n, pa.int64()), pa.nulls(n, pa.string())],
        names=["a", "b", "c", "d", "e", "k", "_file", "_line", "_reason"])
    out = enc.encode_batch(batch, CFG, [])
    assert out.column("c0").to_pylist() == [decimal_rounded(v, 2, "half_even")[0] for v in values]


# --------------------------------------------------------------------------- rows API

TOKEN = "w-secret"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
DEFINITION = {
    "dimensions": [
        {"name": "x", "scale": 2, "min": 0, "max": 100, "rounding": "half_even"},
        {"name": "y", "scale": 1, "min": -50, "max": 50, "rounding": "floor"},
    ],
    "measures": [
        {"name": "speed", "scale": 5, "min": 0, "max": 1000, "rounding": "half_up"},
        {"name": "level", "scale": 3},
    ],
    "grid": {"n_size": 30, "n_threshold": 120},
}
TABLE = oracle.Table.of(DEFINITION)
AGGS = ["count", "sum:speed", "min:speed", "max:speed", "avg:speed", "sum:x", "min:y", "max:y", "avg:level"]


def float_rows(n: int, seed: int):
    """Rows as archives hold them (floats written in full) and their stored integers by
    the decimal module."""
    rng = np.random.default_rng(seed)
    rows, encoded = [], []
    for i in range(n):
        x = float(rng.uniform(0, 99.99))
        y = float(rng.uniform(-49.9, 49.9))
        speed = float(rng.integers(0, 10**7)) / 10**4 + float(rng.normal(0, 1e-12))
        level = int(rng.integers(-5000, 5000)) / 1000
        rows.append({"id": str(i), "x": x, "y": repr(y), "speed": abs(speed), "level": level})
        encoded.append([decimal_rounded(repr(x), 2, "half_even")[0], decimal_rounded(repr(y), 1, "floor")[0],
                        decimal_rounded(repr(abs(speed)), 5, "half_up")[0], round(level * 1000)])
    return rows, np.array(encoded, dtype=np.int64)


@pytest.fixture(params=["embedded", "hbase"])
def api(request, settings, services, tmp_path):
    engine = open_engine(settings, request.param, tmp_path)
    client = create_app(settings.with_(write_token=TOKEN, read_token=None), engine=engine).test_client()
    name = "t_round_" + uuid.uuid4().hex[:8]
    resp = client.post("/v1/datasets", json={"name": name, **DEFINITION}, headers=AUTH)
    assert resp.status_code == 201, resp.get_json()
    assert resp.get_json()["dimensions"][0]["rounding"] == "half_even"
    try:
        yield client, engine, name
    finally:
        engine.drop_dataset(name)
        engine.store.close()
        engine.directory.close()


def test_rows_api_rounds_and_reports_counts(api):
    client, engine, name = api
    rows, encoded = float_rows(600, seed=5)
    expected_rounded = {c: 0 for c in ("x", "y", "speed")}
    for r in rows:
        expected_rounded["x"] += decimal_rounded(repr(r["x"]), 2, "half_even")[1]
        expected_rounded["y"] += decimal_rounded(r["y"], 1, "floor")[1]
        expected_rounded["speed"] += decimal_rounded(repr(r["speed"]), 5, "half_up")[1]
    resp = client.post(f"/v1/datasets/{name}/rows", json=rows[:300], headers=AUTH)
    first = resp.get_json()
    assert resp.status_code == 200 and first["stored"] == 300 and first["rejected"] == [], first
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(rows[0]))
    writer.writeheader()
    writer.writerows({**r, "x": repr(r["x"]), "speed": repr(r["speed"])} for r in rows[300:])
    resp = client.post(f"/v1/datasets/{name}/rows", data=buf.getvalue(), content_type="text/csv", headers=AUTH)
    second = resp.get_json()
    assert resp.status_code == 200 and second["stored"] == 300, second
    assert {c: first["rounded"][c] + second["rounded"][c] for c in first["rounded"]} == expected_rounded
    assert expected_rounded["speed"] > 500  # the data really are floats in full
    assert second["splits"] > 0 or first["splits"] > 0

    seen = TABLE.from_stored(encoded)  # the values as the decimal module rounds them
    for where in [{}, {"x": [10, 60]}, {"x": [10.004, 60.006], "y": [-20.05, None]}, {"y": [None, 0]},
                  {"x": [33.333, 33.334]}, {"x": ["50.005", "50.015"]}]:
        check_query(engine, name, TABLE, seen, {"where": where, "aggregates": AGGS})


def test_rows_api_refuses_a_value_rounding_past_the_domain(api):
    client, engine, name = api
    rows = [{"x": 99.995, "y": 0, "speed": 1, "level": 0},      # half_even: 100.00, on the edge
            {"x": 99.996, "y": 0, "speed": 1, "level": 0},      # 100.00
            {"x": 100.005, "y": 0, "speed": 1, "level": 0},     # 100.00 (tie to even)
            {"x": 100.006, "y": 0, "speed": 1, "level": 0},     # 100.01: past the edge
            {"x": 1, "y": 0, "speed": 1, "level": 0.0001}]      # level refuses rounding
    body = client.post(f"/v1/datasets/{name}/rows", json=rows, headers=AUTH).get_json()
    assert body["stored"] == 3 and body["rounded"] == {"x": 3, "y": 0, "speed": 0}
    assert [(r["index"], r["field"]) for r in body["rejected"]] == [(3, "x"), (4, "level")]
    assert "outside the domain" in body["rejected"][0]["reason"]
    assert "more decimals" in body["rejected"][1]["reason"]
    assert engine.query(name, {"x": [100, 100]}, ["count"]).values["count"] == 3


def test_definition_round_trips_through_the_api(api):
    client, engine, name = api
    body = client.get(f"/v1/datasets/{name}").get_json()
    assert [c.get("rounding", "refuse") for c in body["dimensions"] + body["measures"]] == \
        ["half_even", "floor", "half_up", "refuse"]
    assert Dataset.from_json({"name": name, **DEFINITION}) == engine.dataset(name)
    resp = client.post("/v1/datasets", headers=AUTH, json={
        "name": name + "_b", "dimensions": [{"name": "x", "min": 0, "max": 1, "rounding": "nearest"}]})
    problem = resp.get_json()
    # The API's model refuses it before the core would (api/models/datasets.py).
    assert resp.status_code == 400 and problem["field"] == "dimensions[0].rounding", problem
    assert "half_even, half_up, floor, ceil, or refuse" in problem["detail"] and '"nearest"' in problem["detail"]
