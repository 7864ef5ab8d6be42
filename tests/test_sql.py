"""The SQL endpoint (sql/, docs/sql.md) with real clients, psycopg, psql and SQLAlchemy
(postgresql+psycopg, as Superset connects), on the real PostgreSQL: answers equal to the
JSON API's and to the oracle's (tests/oracle.py) for boxes, polygons and series written
in SQL, strict bounds made exact inclusive ones, the catalog clients browse, a deadline's
bounds, the read token as the password. Bad SQL: tests/test_sql_errors.py."""

from __future__ import annotations

import os
import subprocess
import uuid
from datetime import datetime, timezone
from decimal import Decimal

import oracle
import psycopg
import pytest
from engine_support import open_engine
from gridagg_api import create_app
from sql_support import AGGS, DEFINITION, TABLE, Endpoint, check_query, check_series, exact, make_rows, one

ROWS = make_rows(1500, seed=5)
SEEN = TABLE.rows(ROWS)

@pytest.fixture(scope="module")
def engine(settings, services, tmp_path_factory):
    return open_engine(settings, "embedded", tmp_path_factory.mktemp("sql-store"))


@pytest.fixture(scope="module")
def dataset(engine):
    from gridagg.model.schema import Dataset

    name = "t_sql_" + uuid.uuid4().hex[:8]
    engine.create_dataset(Dataset.from_json({"name": name, **DEFINITION}))
    engine.insert(name, ROWS)
    yield name
    engine.drop_dataset(name)


@pytest.fixture(scope="module")
def endpoint(settings, engine, dataset):
    served = Endpoint(settings.with_(read_token=None), engine)
    yield served
    served.close()


@pytest.fixture(scope="module")
def api(settings, engine, dataset):
    return create_app(settings.with_(read_token=None), engine=engine).test_client()


@pytest.fixture
def conn(endpoint):
    with psycopg.connect(endpoint.dsn(), autocommit=True) as c:
        yield c


# --------------------------------------------------------------------------- boxes


def test_whole_dataset_and_types(conn, api, dataset):
    row = check_query(conn, api, dataset, SEEN, "", {})
    assert row[0] == len(ROWS)
    cur = conn.execute(f"SELECT {AGGS} FROM {dataset}")
    types = [d.type_code for d in cur.description]
    assert types == [20, 20, 1700, 1700, 1700, 701, 1184, 20, 1184]  # bigint, numeric, float8, timestamptz
    assert [d.name for d in cur.description] == ["count", "count", "sum", "min", "max", "avg", "min", "max", "avg"]
    assert isinstance(row[2], Decimal) and isinstance(row[5], float) and row[6].tzinfo is not None


@pytest.mark.parametrize("sql_where, request_where", [
    ("lon BETWEEN -5 AND 5 AND lat >= 45 AND lat <= 55", {"lon": [-5, 5], "lat": [45, 55]}),
    ("time >= '2012-03-01T00:00:00Z' AND time <= '2012-06-30 23:00:00+00'",
     {"time": ["2012-03-01T00:00:00Z", "2012-06-30T23:00:00Z"]}),
    ("time BETWEEN TIMESTAMP '2012-02-01' AND '2012-02-10'::timestamptz", {"time": ["2012-02-01", "2012-02-10"]}),
    ("lon = 1.25", {"lon": [1.25, 1.25]}),
    ("5 >= lon AND -5 <= lon", {"lon": [-5, 5]}),
    # Strict bounds: exact inclusive ones at the column's scale (lon: 2 decimals)
    ("lon > 1.25 AND lon < 2.5", {"lon": ["1.26", "2.49"]}),
    ("lon > 1.251 AND lon < 1.249999", {"lon": ["1.26", "1.24"]}),  # nothing between
    ("lon > 1.249 AND lon < 1.301", {"lon": ["1.25", "1.30"]}),
    ("time > '2012-03-01T00:00:00Z' AND time < '2012-03-02T00:00:00Z'",
     {"time": ["2012-03-01T00:00:01Z", "2012-03-01T23:59:59Z"]}),
    ("time > '2012-03-01T00:00:00.5Z' AND time < '2012-03-02T00:00:00.5Z'",
     {"time": ["2012-03-01T00:00:01Z", "2012-03-02T00:00:00Z"]}),
    ("lat >= 40.001 AND lat <= 40.049", {"lat": ["40.01", "40.04"]}),
    ("lon > 100", {"lon": ["100.01", None]}),
    ("time >= to_timestamp(1333238400) AND time < TO_TIMESTAMP('2012-05-01 00:00:00.000000', "
     "'YYYY-MM-DD HH24:MI:SS.US')", {"time": ["2012-04-01T00:00:00Z", "2012-04-30T23:59:59Z"]}),
])
def test_boxes(conn, api, dataset, sql_where, request_where):
    lo_hi = {d: [v if v is None or isinstance(v, str) else str(v) for v in r] for d, r in request_where.items()}
    empty = any(lo is not None and hi is not None and TABLE.read(d, lo) > TABLE.read(d, hi)
                for d, (lo, hi) in lo_hi.items())
    if empty:  # the JSON API refuses lo > hi; SQL answers no rows
        row = one(conn, f"SELECT {AGGS} FROM {dataset} WHERE {sql_where}")
        assert row == (0, 0, Decimal(0), None, None, None, None, None, None)
        return
    check_query(conn, api, dataset, SEEN, sql_where, {"where": lo_hi})


def test_parameters_are_bound(conn, api, dataset):
    """psycopg sends $1, $2 with the values apart (the extended protocol)."""
    row = one(conn, f"SELECT count(*), sum(temperature) FROM {dataset} WHERE lon > %s AND time < %s",
              (Decimal("-2.5"), datetime(2012, 7, 1, tzinfo=timezone.utc)))
    want = oracle.query(TABLE, SEEN, {"where": {"lon": ["-2.49", None], "time": [None, "2012-06-30T23:59:59Z"]},
                                      "aggregates": ["count", "sum:temperature"]})["results"]
    assert exact(row[0], want["count"]) and exact(row[1], want["sum:temperature"])


# --------------------------------------------------------------------------- polygons

SQUARE = "POLYGON((-5 45, 5 45, 5 55, -5 55, -5 45))"
TRIANGLE_JSON = '{"type": "Polygon", "coordinates": [[[-10, 40], [10, 40], [0, 60], [-10, 40]]]}'


@pytest.mark.parametrize("test", [
    f"ST_Contains(ST_GeomFromText('{SQUARE}'), ST_Point(lon, lat))",
    f"ST_Covers(ST_GeomFromText('{SQUARE}', 4326), ST_SetSRID(ST_MakePoint(lon, lat), 4326))",
    f"ST_Within(ST_Point(lon, lat), '{SQUARE}'::geometry)",
    f"ST_Intersects(ST_Point(lon, lat), ST_GeomFromText('{SQUARE}'))",
])
def test_polygon_forms(conn, api, dataset, test):
    square = {"type": "Polygon", "coordinates": [[[-5, 45], [5, 45], [5, 55], [-5, 55], [-5, 45]]]}
    check_query(conn, api, dataset, SEEN, test, {"region": square})


def test_polygon_from_geojson_with_a_box(conn, api, dataset):
    import json

    check_query(conn, api, dataset, SEEN,
                f"ST_Contains(ST_GeomFromGeoJSON('{TRIANGLE_JSON}'), ST_Point(lon, lat)) AND time < '2012-07-01'",
                {"region": json.loads(TRIANGLE_JSON), "where": {"time": [None, "2012-06-30T23:59:59Z"]}})


# --------------------------------------------------------------------------- series


def test_time_bucket_days(conn, api, dataset):
    rows = check_series(
        conn, api, dataset, SEEN,
        f"SELECT time_bucket('1 day', time) AS t, count(*), avg(temperature) FROM {dataset} "
        "WHERE time >= '2012-03-01T06:00:00Z' AND time < '2012-03-20' GROUP BY t ORDER BY t",
        {"step": "1d", "start": "2012-03-01T00:00:00Z", "end": "2012-03-19T23:59:59Z",
         "where": {"time": ["2012-03-01T06:00:00Z", "2012-03-19T23:59:59Z"]},
         "aggregates": ["count", "avg:temperature"]})
    assert rows[0][0] == datetime(2012, 3, 1, tzinfo=timezone.utc)


def test_time_bucket_weeks_start_on_mondays_from_before_the_domain(conn, api, dataset):
    """TimescaleDB's buckets start at 2000-01-03, a Monday: 2011-12-26 is the first."""
    rows = check_series(
        conn, api, dataset, SEEN,
        f"SELECT time_bucket(INTERVAL '7 days', time), sum(temperature), max(wind_speed) FROM {dataset} "
        "GROUP BY 1 ORDER BY 1",
        {"step": "7d", "start": "2011-12-26T00:00:00Z", "aggregates": ["sum:temperature", "max:wind_speed"]})
    assert rows[0][0] == datetime(2011, 12, 26, tzinfo=timezone.utc)


def test_date_trunc_with_a_polygon(conn, api, dataset):
    square = {"type": "Polygon", "coordinates": [[[-5, 45], [5, 45], [5, 55], [-5, 55], [-5, 45]]]}
    check_series(
        conn, api, dataset, SEEN,
        f"SELECT date_trunc('hour', time) AS hour, count(*), min(lon) FROM {dataset} "
        f"WHERE ST_Contains(ST_GeomFromText('{SQUARE}'), ST_Point(lon, lat)) AND time BETWEEN '2012-05-01' AND "
        "'2012-05-09 12:30:00' GROUP BY date_trunc('hour', time) ORDER BY hour",
        {"step": "1h", "start": "2012-05-01T00:00:00Z", "region": square, "aggregates": ["count", "min:lon"],
         "where": {"time": ["2012-05-01T00:00:00Z", "2012-05-09T12:30:00Z"]}})


def test_grafana_time_group(conn, api, dataset):
    """$__timeGroupAlias(time, '6h') expands to floor(extract(epoch from time)/21600)*21600
    AS "time": seconds since 1970, buckets from 1970 on."""
    rows = check_series(
        conn, api, dataset, SEEN,
        f'SELECT floor(extract(epoch from time)/21600)*21600 AS "time", avg(temperature) AS "temp" FROM {dataset} '
        "WHERE time BETWEEN '2012-08-01T00:00:00Z' AND '2012-08-15T00:00:00Z' GROUP BY 1 ORDER BY 1",
        {"step": "6h", "start": "2012-08-01T00:00:00Z", "where": {"time": ["2012-08-01T00:00:00Z",
                                                                          "2012-08-15T00:00:00Z"]},
         "aggregates": ["avg:temperature"]})
    assert isinstance(rows[0][0], int)


def test_moving_window(conn, api, dataset):
    """The JSON API's series window, as PostgreSQL computes a moving window over groups."""
    over = "OVER (ORDER BY d RANGE BETWEEN INTERVAL '6 days' PRECEDING AND CURRENT ROW)"
    rows = check_series(
        conn, api, dataset, SEEN,
        f"SELECT time_bucket('1 day', time) AS d, sum(count(*)) {over}, sum(sum(temperature)) {over}, "
        f"max(max(wind_speed)) {over}, min(min(lat)) {over} FROM {dataset} "
        "WHERE time >= '2012-04-03T12:00:00Z' AND time < '2012-05-20' GROUP BY 1",
        {"step": "1d", "window": "7d", "start": "2012-04-03T00:00:00Z", "end": "2012-05-19T23:59:59Z",
         "where": {"time": ["2012-04-03T12:00:00Z", "2012-05-19T23:59:59Z"]},
         "aggregates": ["count", "sum:temperature", "max:wind_speed", "min:lat"]})
    assert rows[6][1] == sum(r[1] for r in conn.execute(
        f"SELECT time_bucket('1 day', time), count(*) FROM {dataset} WHERE time >= '2012-04-03T12:00:00Z' "
        "AND time < '2012-04-10' GROUP BY 1").fetchall())  # a week of days, when each has rows


def test_order_by_a_measure_and_limit(conn, dataset):
    """Superset orders a series by its metric and limits it: over the whole answer."""
    rows = conn.execute(f"SELECT date_trunc('week', time) AS w, count(*) AS n FROM {dataset} GROUP BY 1").fetchall()
    top = conn.execute(f"SELECT date_trunc('week', time) AS w, count(*) AS n FROM {dataset} GROUP BY 1 "
                       "ORDER BY n DESC, w LIMIT 5 OFFSET 1").fetchall()
    assert top == sorted(rows, key=lambda r: (-r[1], r[0]))[1:6]
    assert [r[0] for r in rows] == sorted(r[0] for r in rows)
    assert all(r[0].weekday() == 0 for r in rows)  # PostgreSQL's weeks start on Mondays


# --------------------------------------------------------------------------- a deadline


def test_session_setup_statements_are_accepted(conn, dataset):
    """What JDBC (Metabase), SQLAlchemy and psql send as they set up a session."""
    for statement in ("SET extra_float_digits = 3", "SET application_name = 'PostgreSQL JDBC Driver'",
                      "SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY", "SET TIME ZONE 'UTC'",
                      "BEGIN READ ONLY", "SAVEPOINT s1", "RELEASE SAVEPOINT s1", "COMMIT", "DISCARD ALL",
                      "SHOW transaction isolation level", "SELECT current_schema()", "SELECT version()"):
        conn.execute(statement)
    assert one(conn, "SHOW application_name") == ("PostgreSQL JDBC Driver",)


def test_deadline_adds_bounds(conn, dataset):
    conn.execute("SET gridagg.deadline_ms = 0")  # the tree's answer alone
    assert one(conn, "SHOW gridagg.deadline_ms") == ("0",)
    cur = conn.execute(f"SELECT count(*) AS n, sum(temperature) FROM {dataset} WHERE lon BETWEEN -3.33 AND 4.44")
    assert [d.name for d in cur.description] == ["n", "sum", "exact", "n_lo", "n_hi", "sum_lo", "sum_hi"]
    n, total, is_exact, n_lo, n_hi, sum_lo, sum_hi = cur.fetchone()
    want = oracle.query(TABLE, SEEN, {"where": {"lon": ["-3.33", "4.44"]}, "aggregates": ["count"]})["results"]
    if is_exact:
        assert n == want["count"] and n_lo is None
    else:
        assert n_lo <= want["count"] <= n_hi
    conn.execute("RESET gridagg.deadline_ms")
    cur = conn.execute(f"SELECT count(*) AS n FROM {dataset} WHERE lon BETWEEN -3.33 AND 4.44")
    assert [d.name for d in cur.description] == ["n"] and cur.fetchone() == (want["count"],)


# --------------------------------------------------------------------------- clients and catalog


def test_psql_answers_and_describes(endpoint, dataset):
    env = {**os.environ, "PGPASSWORD": ""}
    run = lambda *args: subprocess.run(["psql", "-h", "127.0.0.1", "-p", str(endpoint.port), "-U", "gridagg",
                                        "-X", "-v", "ON_ERROR_STOP=1", *args], capture_output=True, text=True,
                                       env=env, timeout=60)
    out = run("-At", "-c", f"SELECT count(*) FROM {dataset} WHERE lat > 50")
    assert out.returncode == 0, out.stderr
    assert int(out.stdout) == sum(1 for r in SEEN if r["lat"] > 50)
    out = run("-c", r"\dt")
    assert out.returncode == 0 and dataset in out.stdout, out
    out = run("-c", rf"\d {dataset}")
    assert out.returncode == 0, out.stderr
    for col, kind in [("time", "timestamp"), ("lon", "numeric"), ("station", "bigint")]:
        assert any(col in line and kind in line for line in out.stdout.splitlines()), out.stdout
    out = run("-c", f"SELECT * FROM {dataset}")
    assert out.returncode != 0 and "not supported" in out.stderr


def test_sqlalchemy_connects_inspects_and_queries(endpoint, dataset):
    import sqlalchemy as sa

    engine = sa.create_engine(f"postgresql+psycopg://gridagg@127.0.0.1:{endpoint.port}/gridagg")
    try:
        inspector = sa.inspect(engine)
        assert dataset in inspector.get_table_names(schema="public")
        columns = {c["name"]: c["type"] for c in inspector.get_columns(dataset, schema="public")}
        assert list(columns) == [c["name"] for c in DEFINITION["dimensions"] + DEFINITION["measures"]]
        assert isinstance(columns["time"], sa.TIMESTAMP) and isinstance(columns["lon"], sa.NUMERIC)
        with engine.connect() as c:
            got = c.execute(sa.text(f"SELECT count(*) FROM {dataset} WHERE lon <= :x"), {"x": 0}).scalar()
        assert got == sum(1 for r in SEEN if r["lon"] <= 0)
    finally:
        engine.dispose()


def test_the_read_token_is_the_password(settings, engine, dataset):
    served = Endpoint(settings.with_(read_token="r-secret", write_token="w-secret"), engine)
    try:
        for password in ("r-secret", "w-secret"):
            with psycopg.connect(served.dsn(password)) as c:
                assert c.execute(f"SELECT count(*) FROM {dataset}").fetchone() == (len(ROWS),)
        with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
            psycopg.connect(served.dsn("wrong"))
    finally:
        served.close()
