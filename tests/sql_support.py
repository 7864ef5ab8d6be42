"""Helpers for the SQL endpoint's tests: a dataset on the real PostgreSQL (embedded
store), the endpoint serving it in this process on a free port, the HTTP API over the
same engine (Flask's test client), and answers compared between SQL, JSON and the oracle."""

from __future__ import annotations

import asyncio
import socket
import threading
from datetime import datetime, timedelta, timezone
from decimal import Decimal
from fractions import Fraction

import numpy as np
import oracle

from gridagg_sql.server import make_server
from gridagg_sql.service import Service

EPOCH = datetime(2012, 1, 1, tzinfo=timezone.utc)
DEFINITION = {
    "dimensions": [
        {"name": "time", "type": "time", "min": "2012-01-01T00:00:00Z", "max": "2012-12-31T23:00:00Z"},
        {"name": "lon", "scale": 2, "min": -10, "max": 10},
        {"name": "lat", "scale": 2, "min": 40, "max": 60},
    ],
    "measures": [
        {"name": "temperature", "scale": 1, "min": -40, "max": 50},
        {"name": "wind_speed", "scale": 1, "min": 0, "max": 70, "nullable": True},
        {"name": "station", "min": 0, "max": 1000},
    ],
    "grid": {"n_size": 40, "n_threshold": 160, "l_time": "60d"},
}
TABLE = oracle.Table.of(DEFINITION)


WEATHER = {  # the demo's weather (ingest/examples/weather.toml): its columns
    "dimensions": [
        {"name": "time", "type": "time", "min": "1970-01-01T00:00:00Z", "max": "2049-12-31T23:00:00Z"},
        {"name": "temperature", "scale": 1, "min": -90, "max": 70},
        {"name": "humidity", "min": 0, "max": 100},
        {"name": "illuminance", "min": 0, "max": 200000},
        {"name": "longitude", "scale": 3, "min": -180, "max": 180},
        {"name": "latitude", "scale": 3, "min": -90, "max": 90},
    ],
    "measures": [{"name": "wind_speed", "scale": 1, "min": 0, "max": 100}, {"name": "pressure", "min": 0,
                                                                             "max": 2000}],
}


def weather_rows(start: datetime, n: int = 600, seed: int = 7) -> list[dict]:
    """n rows of WEATHER over the year from `start`, in the south-west of the USA."""
    rng = np.random.default_rng(seed)
    return [{"time": (start + timedelta(hours=int(h))).isoformat(), "temperature": int(t) / 10, "humidity": 50,
             "illuminance": 0, "longitude": int(x) / 1000, "latitude": int(y) / 1000, "wind_speed": 3.5,
             "pressure": 1000}
            for h, t, x, y in zip(rng.integers(0, 8760, n), rng.integers(-100, 400, n),
                                  rng.integers(-124000, -70000, n), rng.integers(25000, 48000, n))]


def make_rows(n: int, seed: int) -> list[dict]:
    """Rows on a 0.05-degree lattice, hourly times; a tenth without a wind speed."""
    rng = np.random.default_rng(seed)
    rows = []
    for _ in range(n):
        ts = EPOCH + timedelta(hours=int(rng.integers(0, 366 * 24 - 1)))
        wind = None if rng.random() < 0.1 else int(rng.integers(0, 200)) / 10
        rows.append({"time": ts.strftime("%Y-%m-%dT%H:%M:%SZ"), "lon": int(rng.integers(-200, 201)) * 5 / 100,
                     "lat": (4000 + int(rng.integers(0, 401)) * 5) / 100,
                     "temperature": int(rng.integers(-100, 350)) / 10, "wind_speed": wind,
                     "station": int(rng.integers(0, 1000))})
    return rows


class Endpoint:
    """The SQL endpoint serving `engine` on 127.0.0.1:port from a thread of this process."""

    def __init__(self, settings, engine):
        self.service = Service(settings, engine)
        self.loop = asyncio.new_event_loop()
        self.server = make_server(self.service)
        sock = socket.create_server(("127.0.0.1", 0))
        self.port = sock.getsockname()[1]
        self.loop.run_until_complete(self.server.start_server(sock=sock))
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def dsn(self, password: str = "") -> str:
        return f"host=127.0.0.1 port={self.port} user=gridagg dbname=gridagg password={password}"

    def close(self) -> None:
        async def shut() -> None:
            self.server.close()
            await asyncio.sleep(0.2)  # the connections' tasks end

        asyncio.run_coroutine_threadsafe(shut(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


def same_as_json(got, written) -> bool:
    """Whether a SQL value is the value the JSON API wrote: a decimal or int as the double
    nearest it (or the int itself), a timestamp to the microsecond of its ISO text."""
    if got is None or written is None:
        return got is written
    if isinstance(got, datetime):
        return abs(got - datetime.fromisoformat(written.replace("Z", "+00:00"))) < timedelta(microseconds=1)
    if isinstance(written, int) and not isinstance(got, float):
        return got == written
    return float(got) == written


def exact(got, want) -> bool:
    """Whether a SQL value is the oracle's exact answer: decimals and ints exactly, an avg
    as the double nearest it, a timestamp to the microsecond."""
    if got is None or want is None:
        return got is want
    if isinstance(want, oracle.Instant):
        seconds = Fraction(oracle.seconds(got))
        return abs(seconds - want.seconds) < Fraction(1, 10**6)
    if isinstance(got, float):
        return got == float(want)
    return Fraction(Decimal(got)) == Fraction(want)


AGGS = "count(*), count(wind_speed), sum(temperature), min(lon), max(wind_speed), avg(temperature), min(time), " \
       "max(station), avg(time)"
LABELS = ["count", "count:wind_speed", "sum:temperature", "min:lon", "max:wind_speed", "avg:temperature",
          "min:time", "max:station", "avg:time"]


def one(conn, sql: str, params=None) -> tuple:
    rows = conn.execute(sql, params).fetchall()
    assert len(rows) == 1, rows
    return rows[0]


def check_query(conn, api, name: str, seen: list[dict], sql_where: str, request: dict,
                want: dict | None = None) -> tuple:
    """The SQL answer with WHERE sql_where equals the JSON API's to `request` (its where
    and region: the same question) and the oracle's over `seen` (the rows as the oracle
    reads them) to `want` (default: to request)."""
    row = one(conn, f"SELECT {AGGS} FROM {name}" + (f" WHERE {sql_where}" if sql_where else ""))
    body = api.post(f"/v1/datasets/{name}/query", json={**request, "aggregates": LABELS}).get_json()
    want = want or oracle.query(TABLE, seen, {**request, "aggregates": LABELS})["results"]
    for value, label in zip(row, LABELS):
        assert same_as_json(value, body["results"][label]), (label, value, body["results"][label], sql_where)
        assert exact(value, want[label]), (label, value, want[label], sql_where)
    return row


def check_series(conn, api, name: str, seen: list[dict], sql: str, request: dict) -> list[tuple]:
    """A GROUP BY bucket's rows equal the JSON API's series to `request` and the
    oracle's, the buckets without rows of their own left out (SQL has no group for them;
    with a moving window, the JSON API writes their window's aggregates)."""
    rows = conn.execute(sql).fetchall()
    labels = request["aggregates"]
    body = api.post(f"/v1/datasets/{name}/series", json=request).get_json()
    assert "points" in body, body
    plain = {k: v for k, v in request.items() if k != "window"}
    own = [p["count"] for p in oracle.series(TABLE, seen, {**plain, "aggregates": ["count"]})["points"]]
    points = [p for p, n in zip(body["points"], own) if n]
    want = [p for p, n in zip(oracle.series(TABLE, seen, request)["points"], own) if n]
    assert len(rows) == len(points) == len(want), (len(rows), len(points), len(want), sql)
    for row, point, truth in zip(rows, points, want):
        bucket, values = row[0], row[1:]
        if isinstance(bucket, int):
            bucket = datetime.fromtimestamp(bucket, timezone.utc)
        assert same_as_json(bucket, point["time"]) and exact(bucket, truth["time"]), (bucket, point["time"])
        for value, label in zip(values, labels):
            assert same_as_json(value, point["results"][label]), (label, value, point, sql)
            assert exact(value, truth["results"][label]), (label, value, truth, sql)
    return rows
