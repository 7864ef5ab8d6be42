"""`gridagg query`, `gridagg series` and `gridagg datasets` as a user runs them: answers
(--json) equal to the independent oracle's (tests/oracle.py; in-process on both stores,
and through --url), tables, and one-line errors with exit code 2 for bad input."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from datetime import datetime, timedelta, timezone

import numpy as np
import oracle
import pytest

from gridagg.cli.query import aggregate_text, split_range, table
from gridagg.directory import GridDirectory
from gridagg.engine import GridEngine
from gridagg.model.aggregate import NULL
from gridagg.model.errors import InvalidInput
from gridagg.model.schema import Dataset
from gridagg.store import open_store

DEFINITION = {
    "dimensions": [
        {"name": "time", "type": "time", "min": "2020-01-01T00:00:00Z", "max": "2020-12-31T23:00:00Z"},
        {"name": "lon", "scale": 2, "min": -10, "max": 10},
        {"name": "lat", "scale": 2, "min": 40, "max": 60},
        {"name": "temperature", "scale": 1, "min": -40, "max": 50, "unit": "C"},
    ],
    "measures": [
        {"name": "pressure", "scale": 1, "min": 800, "max": 1100, "nullable": True},
        {"name": "wind", "scale": 2, "min": 0, "max": 100, "rounding": "half_even"},
    ],
    "grid": {"n_size": 40, "n_threshold": 160, "l_time": "60d"},
}
TABLE = oracle.Table.of(DEFINITION)
EPOCH = datetime(2020, 1, 1, tzinfo=timezone.utc)


# --------------------------------------------------------------------------- pure


@pytest.mark.parametrize("item, expected", [
    ("temperature=-5:30", ("temperature", ["-5", "30"])),
    ("temperature=:30", ("temperature", [None, "30"])),
    ("temperature=-5.5:", ("temperature", ["-5.5", None])),
    ("temperature=-5..30", ("temperature", ["-5", "30"])),
    ("time=2020-03-01T00:00:00Z:2020-03-02T12:30:00Z", ("time", ["2020-03-01T00:00:00Z", "2020-03-02T12:30:00Z"])),
    ("time=:2020-03-02T12:30:00Z", ("time", [None, "2020-03-02T12:30:00Z"])),
    ("time=2020-03-01T00:00:00+01:00:", ("time", ["2020-03-01T00:00:00+01:00", None])),
    ("time=2020-03-01:2020-04-01", ("time", ["2020-03-01", "2020-04-01"])),
    ("time=2020-03-01T10:00..2020-03-01T12:00", ("time", ["2020-03-01T10:00", "2020-03-01T12:00"])),
])
def test_split_range(item, expected):
    assert split_range(Dataset.from_json({"name": "d", **DEFINITION}), item) == expected


@pytest.mark.parametrize("item, message", [
    ("temperature=abc", "is not LO:HI (numbers; either side may be empty)"),
    ("temperature", "expected DIM=LO:HI"),
    ("pressure=1:2", "'pressure' is a measure, not a dimension of dataset d"),
    ("depth=1:2", "'depth' is not a dimension"),
    ("time=2020-03-01T10:00", "is not LO:HI (ISO 8601 times; either side may be empty)"),
    ("time=yesterday:today", "is not LO:HI (ISO 8601 times"),
])
def test_split_range_refuses(item, message):
    with pytest.raises(InvalidInput, match=message.replace("(", r"\(").replace(")", r"\)")):
        split_range(Dataset.from_json({"name": "d", **DEFINITION}), item)


def test_table_aligns_numbers_right():
    assert table(["a", "bb"], [["x", 1.5], ["yyy", None]]).splitlines() == [
        "a      bb", "---  ----", "x     1.5", "yyy  null"]


@pytest.mark.parametrize("label, value, text", [
    ("avg:temperature", 35.0, "35.0"),  # scale 1
    ("avg:temperature", 0.23712737127371275, "0.2371"),
    ("avg:temperature", 1011.7666666666667, "1011.7667"),
    ("avg:temperature", -0.00004, "0.0"),
    ("avg:wind", 5.0, "5.00"),  # scale 2
    ("avg:wind", 5.123456, "5.12346"),
    ("min:wind", 5.7, "5.70"),
    ("sum:wind", 12345.6, "12345.60"),
    ("sum:temperature", 9703.9, "9703.9"),
    ("max:pressure", None, "null"),
    ("count:pressure", 12, "12"),
    ("min:time", "2020-03-01T00:00:00Z", "2020-03-01T00:00:00Z"),
])
def test_answers_show_to_their_columns_scale(label, value, text):
    assert aggregate_text(Dataset.from_json({"name": "d", **DEFINITION}), label, value) == text


def test_answers_of_a_scale_0_column_show_as_whole_numbers_when_they_are():
    ds = Dataset.from_json({"name": "d", "dimensions": [{"name": "n", "min": 0, "max": 100}]})
    assert [aggregate_text(ds, "avg:n", v) for v in (83.0, 83.5, 83.3333333)] == ["83", "83.5", "83.333"]
    assert aggregate_text(ds, "sum:n", 12) == "12"


# --------------------------------------------------------------------------- commands


def rows_of(n: int, seed: int):
    rng = np.random.default_rng(seed)
    rows, encoded = [], []
    for i in range(n):
        h = int(rng.integers(0, 366 * 24 - 1))
        lon, lat = int(rng.integers(-1000, 1001)), int(rng.integers(4000, 6001))
        temp, wind = int(rng.integers(-400, 501)), int(rng.integers(0, 10001))
        p = None if i % 4 == 0 else int(rng.integers(8000, 11001))
        rows.append({"id": str(i), "time": (EPOCH + timedelta(hours=h)).isoformat(), "lon": lon / 100,
                     "lat": lat / 100, "temperature": temp / 10, "pressure": None if p is None else p / 10,
                     "wind": wind / 100})
        encoded.append([h * 3600, lon, lat, temp, NULL if p is None else p, wind])
    return rows, np.array(encoded, dtype=np.int64)


def filled(store: str, settings, tmp_path_factory):
    """(env for the command, dataset, encoded rows, the rows as the oracle reads them) of
    a dataset filled through the engine on `store`, whose store the test process has
    closed again (the command opens it); the dataset is dropped when the generator ends."""
    env = {"GRIDAGG_PG_URL": settings.effective_pg_url, "GRIDAGG_STORE": store}
    s = settings.with_(store=store)
    if store == "embedded":  # an LMDB of its own; the local HBase is found by the data dir
        tmp = tmp_path_factory.mktemp("cli")
        s = s.with_(data_dir=tmp)
        env["GRIDAGG_DATA_DIR"] = str(tmp)
    name = "t_cli_" + uuid.uuid4().hex[:8]
    engine = GridEngine(GridDirectory(s.effective_pg_url), open_store(s))
    ds = engine.create_dataset(Dataset.from_json({"name": name, **DEFINITION}))
    rows, encoded = rows_of(900, seed=store == "hbase")
    assert engine.insert(name, rows).stored == 900
    engine.store.close()
    try:
        yield env, ds, encoded, TABLE.rows(rows)
    finally:
        engine = GridEngine(GridDirectory(s.effective_pg_url), open_store(s))
        engine.drop_dataset(name)
        engine.store.close()
        engine.directory.close()


@pytest.fixture(scope="module", params=["embedded", "hbase"])
def stations(request, settings, services, tmp_path_factory):
    """A filled dataset on each store: for answers checked against brute force."""
    yield from filled(request.param, settings, tmp_path_factory)


@pytest.fixture(scope="module")
def embedded(settings, services, tmp_path_factory):
    """A filled dataset on the embedded store: for what does not depend on the store."""
    yield from filled("embedded", settings, tmp_path_factory)


def gridagg(*args: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gridagg.cli.main", *args], capture_output=True, text=True,
                          env={**os.environ, **env}, timeout=300)


AGGS = ["count", "count:pressure", "avg:pressure", "min:pressure", "sum:wind", "max:temperature", "avg:temperature",
        "min:time"]


def test_query_answers_equal_the_oracle(stations):
    env, ds, _, seen = stations
    where_args = ["--where", "time=2020-03-01T00:00:00Z:2020-09-30T23:00:00.5+01:00", "--where", "lon=-5.505:",
                  "--where", "temperature=..30", "--where", "lat=40.001:59.99"]
    out = gridagg("query", ds.name, *where_args, *[a for agg in AGGS for a in ("--agg", agg)], "--json", env=env)
    assert out.returncode == 0, out.stderr
    body = json.loads(out.stdout)
    where = {"time": ["2020-03-01T00:00:00Z", "2020-09-30T23:00:00.5+01:00"], "lon": ["-5.505", None],
             "temperature": [None, "30"], "lat": ["40.001", "59.99"]}
    oracle.check_results(body["results"], oracle.query(TABLE, seen, {"where": where, "aggregates": AGGS})["results"])
    assert "plan" not in body
    assert body["results"]["count"] > body["results"]["count:pressure"] > 0

    out = gridagg("query", ds.name, *where_args, "--agg", "count", "--agg", "avg:pressure", "--plan", env=env)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    expected = body["results"]  # the --json answer, checked above
    assert lines[0].split() == ["count", "avg:pressure"] and set(lines[1]) == {"-", " "}
    # pressure has scale 1: its average to 1 + 3 decimals, trailing zeros dropped down to 1.
    avg = f"{expected['avg:pressure']:.4f}".rstrip("0")
    assert lines[2].split() == [str(expected["count"]), avg + "0" * avg.endswith(".")]
    assert lines[3] == "plan:" and any(line.split()[0] == "reused_grids_before" for line in lines[4:])


def test_query_in_a_region_file(embedded, tmp_path):
    env, ds, _, seen = embedded
    square = {"type": "Polygon", "coordinates": [[[-5, 45], [5, 45], [5, 55], [-5, 55], [-5, 45]]]}
    region = tmp_path / "box.geojson"
    region.write_text(json.dumps({"type": "FeatureCollection", "features": [{"type": "Feature", "properties": {},
                                                                            "geometry": square}]}))
    out = gridagg("query", ds.name, "--region", str(region), "--agg", "count", "--agg", "max:pressure", "--json",
                  env=env)
    assert out.returncode == 0, out.stderr
    expected = oracle.query(TABLE, seen, {"aggregates": ["count", "max:pressure"], "region": square})
    oracle.check_results(json.loads(out.stdout)["results"], expected["results"])


def test_series_answers_equal_the_oracle(stations):
    env, ds, _, seen = stations
    aggs = ["count:pressure", "avg:temperature", "min:pressure"]
    out = gridagg("series", ds.name, "--where", "lat=45:55", "--step", "30d", "--window", "60d",
                  *[a for agg in aggs for a in ("--agg", agg)], "--json", env=env)
    assert out.returncode == 0, out.stderr
    body = json.loads(out.stdout)
    expected = oracle.series(TABLE, seen, {"where": {"lat": ["45", "55"]}, "aggregates": aggs, "step": "30d",
                                           "window": "60d"})
    oracle.check_series(body, expected)

    out = gridagg("series", ds.name, "--step", "90d", "--agg", "count", "--agg", "avg:temperature", env=env)
    lines = out.stdout.splitlines()
    assert out.returncode == 0 and lines[0].split() == ["time", "rows", "count", "avg:temperature"]
    assert lines[2].split()[0] == "2020-01-01T00:00:00Z" and len(lines) == 2 + 5
    full = json.loads(gridagg("series", ds.name, "--step", "90d", "--agg", "avg:temperature", "--json", env=env).stdout)
    for line, point in zip(lines[2:], full["points"]):  # temperature has scale 1: 4 decimals at most, 1 at least
        avg = f"{point['results']['avg:temperature']:.4f}".rstrip("0")
        assert line.split()[3] == avg + "0" * avg.endswith("."), line


def test_datasets_list_and_describe(embedded):
    env, ds, encoded, _ = embedded
    out = gridagg("datasets", env=env)
    assert out.returncode == 0, out.stderr
    assert any(line.split()[0] == ds.name for line in out.stdout.splitlines())
    out = gridagg("datasets", ds.name, "--json", env=env)
    body = json.loads(out.stdout)
    assert body["row_count"] == len(encoded) and body["grid_count"] > 5
    assert body["measures"][0]["nullable"] is True and body["measures"][1]["rounding"] == "half_even"
    assert body["region_dimensions"] == ["lon", "lat"] and body["time_dimension"] == "time"
    out = gridagg("datasets", ds.name, env=env)
    lines = out.stdout.splitlines()
    assert lines[0] == f"dataset {ds.name}: {len(encoded)} rows in {body['grid_count']} leaves"
    assert lines[1] == "grid: n_size 40, n_threshold 160, l_time 60d"
    table_rows = {line.split()[0]: line.split() for line in lines if line.split()[0] in ("pressure", "wind", "lon")}
    assert table_rows["pressure"][1:3] == ["measure", "number"] and table_rows["pressure"][-2:] == ["refuse", "yes"]
    assert table_rows["wind"][-2:] == ["half_even", "no"] and table_rows["lon"][1] == "dimension"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_url_gives_the_same_answers(stations, tmp_path):
    env, ds, _, seen = stations
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    server = subprocess.Popen([sys.executable, "-m", "gridagg.cli.main", "serve", "--port", str(port)],
                              env={**os.environ, **env}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              start_new_session=True)
    try:
        deadline = time.time() + 60
        while True:
            try:
                urllib.request.urlopen(url + "/healthz", timeout=2)
                break
            except OSError:
                assert time.time() < deadline and server.poll() is None, "the API did not start"
                time.sleep(0.5)
        for args in [("query", ds.name, "--where", "time=2020-02-01:2020-05-01", "--agg", "count:pressure",
                      "--agg", "avg:wind"),
                     ("series", ds.name, "--step", "60d", "--agg", "max:pressure", "--where", "lon=:0"),
                     ("datasets", ds.name), ("datasets",)]:
            local, remote = gridagg(*args, "--json", env=env), gridagg(*args, "--json", "--url", url, env=env)
            assert local.returncode == remote.returncode == 0, (local.stderr, remote.stderr)
            mine = json.loads(local.stdout)
            theirs = json.loads(remote.stdout)
            if args[0] == "datasets" and len(args) == 1:  # other tests' datasets come and go
                mine, theirs = ([d for d in x["datasets"] if d["name"] == ds.name] for x in (mine, theirs))
            assert mine == theirs, args
            if args[0] == "query":
                oracle.check_results(theirs["results"], oracle.query(TABLE, seen, {
                    "where": {"time": ["2020-02-01", "2020-05-01"]}, "aggregates": ["count:pressure", "avg:wind"]})[
                    "results"])
            elif args[0] == "series":
                oracle.check_series(theirs, oracle.series(TABLE, seen, {
                    "where": {"lon": [None, "0"]}, "aggregates": ["max:pressure"], "step": "60d"}))
        out = gridagg("query", "nope", "--url", url, env=env)
        assert out.returncode == 2 and out.stderr == "gridagg query: error: no dataset named 'nope' (HTTP 404)\n"
        out = gridagg("series", ds.name, "--step", "30m", "--url", url, env=env)  # beyond the server's limit
        assert out.returncode == 2 and out.stderr.startswith("gridagg series: error: the series would have ")
        assert "points, more than the limit of 10000; use a larger step or a shorter span (HTTP 422)" in out.stderr
    finally:
        os.killpg(server.pid, 15)
        server.wait(60)  # workers get 20 s, granian 5 s more (api.cli); a busy machine adds some


@pytest.mark.parametrize("args, code, message", [
    (("query", "nope"), 2, "no dataset named 'nope'"),
    (("query", "{ds}", "--where", "temperature=abc"), 2, "--where 'temperature=abc' is not LO:HI"),
    (("query", "{ds}", "--where", "pressure=1:2"), 2, "'pressure' is a measure, not a dimension"),
    (("query", "{ds}", "--where", "time=2020-02-01:2020-01-01"), 2, "is greater than hi"),
    (("query", "{ds}", "--agg", "median:wind"), 2, "unsupported aggregate 'median:wind'"),
    (("query", "{ds}", "--agg", "avg:depth"), 2, "has no column 'depth'"),
    (("query", "{ds}", "--region", "/nonexistent.geojson"), 2, "--region /nonexistent.geojson: No such file"),
    (("query",), 2, "the following arguments are required: dataset"),
    (("series", "{ds}"), 2, "the following arguments are required: --step"),
    (("series", "{ds}", "--step", "soon"), 2, "step"),
    (("datasets", "nope"), 2, "no dataset named 'nope'"),
    (("query", "{ds}", "--url", "http://127.0.0.1:9"), 1, "cannot reach http://127.0.0.1:9"),
])
def test_bad_input_is_one_line_and_exit_code(embedded, args, code, message):
    env, ds, _, _ = embedded
    out = gridagg(*[a.format(ds=ds.name) for a in args], env=env)
    assert out.returncode == code, out.stderr
    assert out.stdout == "" and out.stderr.count("\n") == 1, out.stderr
    assert out.stderr.startswith(f"gridagg {args[0]}: error: ") and message in out.stderr, out.stderr
