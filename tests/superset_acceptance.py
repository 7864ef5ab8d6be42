"""Apache Superset against gridagg's SQL endpoint, scripted: a database added through
Superset's REST API, a dataset (one of gridagg's) added to it, two charts' queries run
through Superset (a big number over a box, a daily series by its time grain), and their
numbers equal to the JSON API's.

Superset cannot share gridagg's virtualenv (it pins older SQLAlchemy and Flask), so it
runs from one of its own, made on first use (pip install of SUPERSET_PACKAGES: about
10 minutes) and kept: --venv, default ~/.gridagg/superset-venv.
A run after that takes about a minute, mostly Superset's `db upgrade` and `init`.

    .venv/bin/python tests/superset_acceptance.py [--venv DIR]

It needs the local PostgreSQL (gridagg services up); it ends with "N passed, M failed"
and exits 0 when all passed.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import datetime
from pathlib import Path

import requests

sys.path.insert(0, str(Path(__file__).resolve().parent))

from sql_support import DEFINITION, Endpoint, make_rows  # noqa: E402

from gridagg.config import Settings  # noqa: E402
from gridagg.directory import GridDirectory  # noqa: E402
from gridagg.engine import GridEngine  # noqa: E402
from gridagg.model.schema import Dataset  # noqa: E402
from gridagg.store.embedded import EmbeddedStore  # noqa: E402
from gridagg_api import create_app  # noqa: E402

START_SECONDS = 300
# Superset 6.1's own requirements let pip pick a Flask-Caching whose cache factory it
# cannot call (`superset db upgrade` fails), and leave out rich and cachetools, which it imports.
SUPERSET_PACKAGES = ["apache-superset>=6.1", "psycopg2-binary", "rich", "cachetools", "Flask-Caching==2.3.1"]


def superset_venv(path: Path) -> Path:
    """The virtualenv's superset command, the virtualenv made first if it is not there."""
    command = path / "bin" / "superset"
    if not command.exists():
        print(f"making Superset's virtualenv in {path} (about 10 minutes)", flush=True)
        subprocess.run([sys.executable, "-m", "venv", str(path)], check=True)
        subprocess.run([str(path / "bin" / "pip"), "install", "-q", *SUPERSET_PACKAGES], check=True)
    return command


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_superset(command: Path, home: Path) -> tuple[subprocess.Popen, str]:
    """Superset with a fresh metadata database in `home`, an admin (admin/admin), on a free port."""
    config = home / "superset_config.py"
    config.write_text(f"SECRET_KEY = {uuid.uuid4().hex!r}\nSQLALCHEMY_DATABASE_URI = 'sqlite:///{home}/superset.db'\n"
                      "WTF_CSRF_ENABLED = False\nTALISMAN_ENABLED = False\n")
    env = {**os.environ, "SUPERSET_CONFIG_PATH": str(config), "SUPERSET_HOME": str(home), "FLASK_APP": "superset"}
    log = open(home / "superset.log", "ab")
    for args in (["db", "upgrade"], ["fab", "create-admin", "--username", "admin", "--password", "admin",
                                     "--firstname", "a", "--lastname", "b", "--email", "admin@example.org"],
                 ["init"]):
        subprocess.run([str(command), *args], env=env, stdout=log, stderr=subprocess.STDOUT, check=True)
    port = free_port()
    proc = subprocess.Popen([str(command), "run", "-h", "127.0.0.1", "-p", str(port), "--with-threads"], env=env,
                            stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + START_SECONDS
    while time.monotonic() < deadline:
        try:
            if requests.get(f"{url}/health", timeout=2).ok:
                return proc, url
        except requests.RequestException:
            time.sleep(1)
    proc.terminate()
    raise SystemExit(f"Superset did not start; see {home / 'superset.log'}")


class Superset:
    """Superset's REST API, logged in as the admin."""

    def __init__(self, url: str):
        self.url = url
        token = requests.post(f"{url}/api/v1/security/login", json={
            "username": "admin", "password": "admin", "provider": "db", "refresh": False}, timeout=60).json()
        self.http = requests.Session()
        self.http.headers["Authorization"] = f"Bearer {token['access_token']}"

    def post(self, path: str, body: dict) -> dict:
        resp = self.http.post(f"{self.url}{path}", json=body, timeout=120)
        assert resp.ok, (path, resp.status_code, resp.text[:2000])
        return resp.json()


def chart_data(superset: Superset, dataset_id: int, query: dict) -> list[dict]:
    """The rows of a chart's query, as Superset's explore view asks them."""
    body = {"datasource": {"id": dataset_id, "type": "table"}, "force": True, "result_format": "json",
            "result_type": "full", "queries": [query]}
    return superset.post("/api/v1/chart/data", body)["result"][0]["data"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--venv", type=Path, default=Path.home() / ".gridagg" / "superset-venv")
    args = parser.parse_args(argv)
    began = time.monotonic()
    command = superset_venv(args.venv)
    settings = Settings.from_env().with_(read_token="superset-secret")
    work = Path(tempfile.mkdtemp(prefix="gridagg-superset-"))
    engine = GridEngine(GridDirectory(settings.effective_pg_url), EmbeddedStore(work / "store"))
    name = "t_superset_" + uuid.uuid4().hex[:8]
    engine.create_dataset(Dataset.from_json({"name": name, **DEFINITION}))
    engine.insert(name, make_rows(2000, seed=9))
    endpoint = Endpoint(settings, engine)
    api = create_app(settings.with_(read_token=None), engine=engine).test_client()
    proc = None
    results: list[tuple[str, bool, str]] = []
    try:
        proc, url = start_superset(command, work)
        superset = Superset(url)
        uri = f"postgresql+psycopg2://superset:superset-secret@127.0.0.1:{endpoint.port}/gridagg"
        superset.post("/api/v1/database/test_connection/", {"database_name": "gridagg", "sqlalchemy_uri": uri})
        database = superset.post("/api/v1/database/", {"database_name": "gridagg", "expose_in_sqllab": True,
                                                       "sqlalchemy_uri": uri})
        dataset = superset.post("/api/v1/dataset/", {"database": database["id"], "schema": "public",
                                                     "table_name": name})
        columns = {c["column_name"] for c in superset.http.get(
            f"{url}/api/v1/dataset/{dataset['id']}", timeout=60).json()["result"]["columns"]}
        results.append(("Superset read the table's columns", columns == {c["name"] for c in
                        DEFINITION["dimensions"] + DEFINITION["measures"]}, str(sorted(columns))))

        # A big number: sum and average over a box, through Superset's query.
        rows = chart_data(superset, dataset["id"], {
            "metrics": [{"expressionType": "SIMPLE", "column": {"column_name": "temperature"}, "aggregate": "SUM",
                         "label": "total"},
                        {"expressionType": "SIMPLE", "column": {"column_name": "wind_speed"}, "aggregate": "AVG",
                         "label": "wind"}, "count"],
            "filters": [{"col": "lon", "op": ">=", "val": -5}, {"col": "lat", "op": "<", "val": 55}],
            "columns": [], "row_limit": 100})
        body = api.post(f"/v1/datasets/{name}/query", json={
            "where": {"lon": [-5, None], "lat": [None, "54.99"]},
            "aggregates": ["sum:temperature", "avg:wind_speed", "count"]}).get_json()["results"]
        got = rows[0]
        results.append(("a big number over a box equals the JSON API's",
                        (float(got["total"]), got["wind"], got["count"]) ==
                        (body["sum:temperature"], body["avg:wind_speed"], body["count"]), f"{got} {body}"))

        # A daily series: Superset's time grain P1D is date_trunc('day', time).
        rows = chart_data(superset, dataset["id"], {
            "columns": [{"timeGrain": "P1D", "columnType": "BASE_AXIS", "sqlExpression": "time", "label": "time",
                         "expressionType": "SQL"}],
            "metrics": [{"expressionType": "SIMPLE", "column": {"column_name": "temperature"}, "aggregate": "AVG",
                         "label": "mean"}],
            "filters": [{"col": "time", "op": "TEMPORAL_RANGE", "val": "2012-03-01T00:00:00 : 2012-04-01T00:00:00"}],
            "orderby": [[{"expressionType": "SQL", "sqlExpression": "time", "label": "time"}, True]],
            "row_limit": 1000})
        series = api.post(f"/v1/datasets/{name}/series", json={
            "step": "1d", "start": "2012-03-01T00:00:00Z", "end": "2012-03-31T23:59:59Z",
            "where": {"time": ["2012-03-01T00:00:00Z", "2012-03-31T23:59:59Z"]},
            "aggregates": ["avg:temperature", "count"]}).get_json()["points"]
        want = {p["time"]: p["results"]["avg:temperature"] for p in series if p["results"]["count"]}
        got = {datetime.utcfromtimestamp(r["time"] / 1000).strftime("%Y-%m-%dT%H:%M:%SZ"): r["mean"] for r in rows}
        results.append(("a daily series by Superset's time grain equals the JSON API's",
                        got == want and len(want) > 20, f"{len(got)} days against {len(want)}"))
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(30)
        endpoint.close()
        engine.drop_dataset(name)
    for what, ok, detail in results:
        print(f"{'ok' if ok else 'FAILED'}: {what}" + ("" if ok else f" ({detail})"))
    failed = sum(1 for _, ok, _ in results if not ok)
    print(f"Superset acceptance took {time.monotonic() - began:.0f} s")
    print(f"{len(results) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
