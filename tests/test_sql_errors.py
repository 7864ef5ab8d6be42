"""Bad SQL at the SQL endpoint (sql/): each gets a PostgreSQL error with the SQLSTATE
PostgreSQL would send and a message naming the problem, never a wrong or partial
answer; the connection and the server go on answering."""

from __future__ import annotations

import uuid

import psycopg
import pytest
from engine_support import open_engine
from sql_support import DEFINITION, Endpoint, make_rows

NAME = "t_sqlerr_" + uuid.uuid4().hex[:8]


@pytest.fixture(scope="module")
def endpoint(settings, services, tmp_path_factory):
    from gridagg.model.schema import Dataset

    engine = open_engine(settings, "embedded", tmp_path_factory.mktemp("sql-errors"))
    engine.create_dataset(Dataset.from_json({"name": NAME, **DEFINITION}))
    engine.insert(NAME, make_rows(200, seed=3))
    served = Endpoint(settings.with_(read_token=None), engine)
    yield served
    served.close()
    engine.drop_dataset(NAME)


@pytest.fixture(scope="module")
def conn(endpoint):
    with psycopg.connect(endpoint.dsn(), autocommit=True) as c:
        yield c


SQUARE = "ST_GeomFromText('POLYGON((-5 45, 5 45, 5 55, -5 55, -5 45))')"
BAD = [
    # syntax
    ("SELEC count(*) FROM {t}", "42601", "syntax error"),
    ("SELECT count(* FROM {t}", "42601", "syntax error"),
    # unknown names
    ("SELECT count(*) FROM no_such_table", "42P01", "no_such_table"),
    ("SELECT sum(nope) FROM {t}", "42703", 'column "nope"'),
    ("SELECT count(*) FROM {t} WHERE nope > 1", "42703", 'column "nope"'),
    ("SELECT count(*) FROM {t} WHERE x.lon > 1", "42703", '"x"'),
    ("SET gridagg.nope = 1", "42704", "gridagg.nope"),
    # values
    ("SET gridagg.deadline_ms = 'soon'", "22023", "deadline_ms"),
    ("SELECT count(*) FROM {t} WHERE time > 'yesterday-ish'", "22007", "yesterday-ish"),
    ("SELECT count(*) FROM {t} WHERE time > 5", "42804", "timestamp"),
    ("SELECT count(*) FROM {t} WHERE ST_Contains(ST_GeomFromText('POLYGON((1 2, 3'), ST_Point(lon, lat))",
     "22023", "WKT"),
    ("SELECT sum(time) FROM {t}", "42883", "sum(timestamp with time zone)"),
    # not supported: named, never answered partly
    ("SELECT * FROM {t}", "0A000", "SELECT *"),
    ("SELECT lon FROM {t}", "0A000", "row-level column lon"),
    ("SELECT lon, count(*) FROM {t} GROUP BY lon", "0A000", "lon"),
    ("SELECT count(*) FROM {t} GROUP BY lat", "0A000", "GROUP BY lat"),
    ("SELECT count(*) FROM {t} a JOIN {t} b ON true", "0A000", "JOIN"),
    ("SELECT count(*) FROM {t}, pg_class", "0A000", "JOIN"),
    ("SELECT count(*) FROM (SELECT count(*) FROM {t}) s", "0A000", "FROM (SELECT"),
    ("SELECT count(*) FROM {t} WHERE lon > 1 OR lat > 50", "0A000", "OR"),
    ("SELECT count(*) FROM {t} WHERE lon IN (1, 2)", "0A000", "IN"),
    ("SELECT count(*) FROM {t} WHERE NOT lon > 1", "0A000", "NOT"),
    ("SELECT count(*) FROM {t} WHERE lon <> 1", "0A000", "<>"),
    ("SELECT count(*) FROM {t} WHERE temperature > 20", "0A000", "measure temperature"),
    ("SELECT count(*) FROM {t} WHERE lon > lat", "0A000", "two columns"),
    ("SELECT count(DISTINCT lon) FROM {t}", "0A000", "DISTINCT"),
    ("SELECT DISTINCT count(*) FROM {t}", "0A000", "DISTINCT"),
    ("SELECT count(*) FROM {t} HAVING count(*) > 1", "0A000", "HAVING"),
    ("SELECT sum(temperature) / count(*) FROM {t}", "0A000", "expression"),
    ("SELECT count(*) FILTER (WHERE lon > 1) FROM {t}", "0A000", "FILTER"),
    ("SELECT sum(count(*)) OVER () FROM {t}", "0A000", "without GROUP BY"),
    ("SELECT date_trunc('day', time) AS d, avg(avg(lon)) OVER (ORDER BY d RANGE BETWEEN INTERVAL '1 day' PRECEDING "
     "AND CURRENT ROW) FROM {t} GROUP BY 1", "0A000", "moving windows are"),
    ("SELECT date_trunc('day', time) AS d, sum(count(*)) OVER (ORDER BY d ROWS BETWEEN 6 PRECEDING AND CURRENT ROW) "
     "FROM {t} GROUP BY 1", "0A000", "RANGE"),
    ("SELECT date_trunc('day', time) AS d, sum(count(*)) OVER (ORDER BY d) FROM {t} GROUP BY 1", "0A000", "RANGE"),
    ("SELECT date_trunc('day', time) AS d, count(*), sum(count(*)) OVER (ORDER BY d RANGE BETWEEN INTERVAL "
     "'1 day' PRECEDING AND CURRENT ROW) FROM {t} GROUP BY 1", "0A000", "beside plain"),
    ("SELECT date_trunc('day', time) AS d, sum(count(*)) OVER (ORDER BY d RANGE BETWEEN INTERVAL '36 hours' "
     "PRECEDING AND CURRENT ROW) FROM {t} GROUP BY 1", "0A000", "whole number of buckets"),
    ("SELECT date_trunc('day', time) AS d, sum(count(*)) OVER (PARTITION BY lon ORDER BY d RANGE BETWEEN "
     "INTERVAL '1 day' PRECEDING AND CURRENT ROW) FROM {t} GROUP BY 1", "0A000", "PARTITION BY"),
    ("SELECT date_trunc('month', time), count(*) FROM {t} GROUP BY 1", "0A000", "month"),
    ("SELECT time_bucket('1 day', lon), count(*) FROM {t} GROUP BY 1", "0A000", "time dimension"),
    ("SELECT time_bucket('1 day', time), count(*) FROM {t}", "0A000", "GROUP BY"),
    ("SELECT floor(extract(epoch from time)/60)*60 AS time, count(*) FROM {t} GROUP BY time", "0A000",
     "GROUP BY 1"),
    ("SELECT count(*) FROM {t} WHERE ST_Contains(" + SQUARE + ", ST_Point(lat, lon))", "0A000", "ST_Point(lon, lat)"),
    ("SELECT count(*) FROM {t} WHERE ST_Contains(" + SQUARE + ", ST_Point(lon, lat)) AND ST_Contains(" + SQUARE
     + ", ST_Point(lon, lat))", "0A000", "second polygon"),
    ("SELECT count(*) FROM {t} WHERE ST_Contains(ST_GeomFromText('POINT(1 2)'), ST_Point(lon, lat))", "0A000",
     "POINT"),
    ("INSERT INTO {t} VALUES (1)", "0A000", "INSERT"),
    ("UPDATE {t} SET lon = 1", "0A000", "UPDATE"),
    ("DELETE FROM {t}", "0A000", "DELETE"),
    ("DROP TABLE {t}", "0A000", "DROP"),
    ("CREATE TABLE x (a int)", "0A000", "CREATE"),
    ("WITH s AS (SELECT count(*) FROM {t}) SELECT * FROM s", "0A000", "WITH"),
    ("SELECT count(*) FROM {t} UNION SELECT count(*) FROM {t}", "0A000", "UNION"),
    # limits
    ("SELECT count(*) FROM {t} WHERE ST_Contains(ST_GeomFromText('POLYGON(("
     + ", ".join(f"{i / 100} 50" for i in range(40)) + ", 0 50))'), ST_Point(lon, lat))", "54000", "vertices"),
    ("SELECT time_bucket('1 second', time), count(*) FROM {t} GROUP BY 1", "54000", "points"),
]


@pytest.mark.parametrize("statement, sqlstate, words", BAD)
def test_bad_sql_gets_its_sqlstate(conn, statement, sqlstate, words):
    with pytest.raises(psycopg.Error) as caught:
        conn.execute(statement.format(t=NAME)).fetchall()
    assert caught.value.sqlstate == sqlstate, (str(caught.value), statement)
    assert words.lower() in str(caught.value).lower(), (str(caught.value), statement)
    assert conn.execute(f"SELECT count(*) FROM {NAME}").fetchone() == (200,)  # the connection goes on


def test_a_prepared_statement_is_one_statement(conn):
    with pytest.raises(psycopg.Error) as caught:
        conn.execute(f"SELECT count(*) FROM {NAME} WHERE lon > %s; SELECT 1", (1,))
    assert caught.value.sqlstate == "42601" and "multiple commands" in str(caught.value)


def test_a_megabyte_statement_is_refused(conn, endpoint):
    statement = f"SELECT count(*) FROM {NAME} WHERE lon > 1 AND lat < '{'5' * 1_000_000}'"
    with pytest.raises(psycopg.Error) as caught:
        conn.execute(statement)
    assert caught.value.sqlstate == "54000" and "bytes" in str(caught.value)
    with psycopg.connect(endpoint.dsn(), autocommit=True) as other:  # the server goes on
        assert other.execute(f"SELECT count(*) FROM {NAME}").fetchone() == (200,)


def test_an_error_in_a_transaction_aborts_it_as_in_postgresql(endpoint):
    with psycopg.connect(endpoint.dsn()) as c:
        with pytest.raises(psycopg.Error):
            c.execute(f"SELECT nope FROM {NAME}")
        c.rollback()
        assert c.execute(f"SELECT count(*) FROM {NAME}").fetchone() == (200,)
