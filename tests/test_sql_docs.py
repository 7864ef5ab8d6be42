"""docs/sql.md stays true: each of its SQL examples (```sql blocks, over the demo's
weather) is answered by the endpoint over a dataset shaped like weather, and `gridagg sql
-c` prints an answer as the page says."""

from __future__ import annotations

import re
import subprocess
import sys
import uuid
from datetime import datetime, timezone
from pathlib import Path

import psycopg
import pytest
from engine_support import open_engine
from sql_support import WEATHER, Endpoint, weather_rows

PAGE = Path(__file__).resolve().parents[1] / "docs" / "sql.md"
EXAMPLES = re.findall(r"```sql\n(.*?)```", PAGE.read_text(), flags=re.S)


@pytest.fixture(scope="module")
def weather(settings, services, tmp_path_factory):
    """(the endpoint, a dataset shaped like weather with a year of rows from 2005 on)."""
    from gridagg.model.schema import Dataset

    engine = open_engine(settings, "embedded", tmp_path_factory.mktemp("sql-docs"))
    name = "t_sqldoc_" + uuid.uuid4().hex[:8]
    engine.create_dataset(Dataset.from_json({"name": name, **WEATHER}))
    engine.insert(name, weather_rows(datetime(2005, 1, 1, tzinfo=timezone.utc)))
    endpoint = Endpoint(settings.with_(read_token=None), engine)
    try:
        yield endpoint, name
    finally:
        endpoint.close()
        engine.drop_dataset(name)


def test_the_page_has_examples():
    assert len(EXAMPLES) >= 3


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda e: e.split("\n")[0][:40])
def test_each_example_is_answered(weather, example):
    endpoint, name = weather
    with psycopg.connect(endpoint.dsn(), autocommit=True) as conn:
        rows = conn.execute(re.sub(r"\bweather\b", name, example)).fetchall()
    assert rows and rows[0][0], rows


def test_gridagg_sql_runs_one_statement(weather):
    endpoint, name = weather
    out = subprocess.run([sys.executable, "-m", "gridagg.cli.main", "sql", "--port", str(endpoint.port), "-c",
                          f"SELECT count(*) AS readings FROM {name}"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[0].strip() == "readings" and "600" in out.stdout and "(1 row)" in out.stdout
    out = subprocess.run([sys.executable, "-m", "gridagg.cli.main", "sql", "--port", str(endpoint.port), "-c",
                          f"SELECT * FROM {name}"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 1 and "0A000" in out.stdout


def test_gridagg_serve_serves_sql_beside_the_api(weather):
    """`gridagg serve --sql-port` as the page starts it: both answer the same (over the
    settings' store, which holds none of this test's rows), and both stop with it."""
    import signal
    import socket
    import time

    import requests

    _, name = weather
    ports = []
    for _ in range(2):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            ports.append(s.getsockname()[1])
    http, sql = ports
    proc = subprocess.Popen([sys.executable, "-m", "gridagg.cli.main", "serve", "--port", str(http), "--sql-port",
                             str(sql), "--workers", "1", "--no-access-log"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 180
        while True:
            try:
                with psycopg.connect(f"host=127.0.0.1 port={sql} user=gridagg dbname=gridagg",
                                     autocommit=True) as conn:
                    (count,) = conn.execute(f"SELECT count(*) FROM {name}").fetchone()
                break
            except psycopg.OperationalError:
                assert time.monotonic() < deadline and proc.poll() is None
                time.sleep(0.5)
        while not _healthy(f"http://127.0.0.1:{http}/healthz"):
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.5)
        body = requests.post(f"http://127.0.0.1:{http}/v1/datasets/{name}/query", json={"aggregates": ["count"]},
                             timeout=30).json()
        assert body["results"]["count"] == count
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0
    with pytest.raises(psycopg.OperationalError):
        psycopg.connect(f"host=127.0.0.1 port={sql} user=gridagg dbname=gridagg", connect_timeout=5)


def _healthy(url: str) -> bool:
    import requests

    try:
        return requests.get(url, timeout=2).ok
    except requests.RequestException:
        return False
