"""`gridagg demo`: the main job, end to end on one machine.

Starts the local PostgreSQL (and HBase with --hbase), bulk-loads the real weather
archives with the Spark job, serves the HTTP API in the background, asks it a few
dashboard questions (a box, a polygon, a 7-day moving average) and prints the answers
with their plan statistics. The API keeps running; `gridagg demo --stop` stops it.

The archives are TMY3 CSV files (--input). From a checkout they default to
../shared/data/weather beside it; an installed gridagg has no such default and asks for
--input.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from datetime import datetime, timedelta
from pathlib import Path

from gridagg import config
from gridagg.model.errors import InvalidInput

# The sample archives beside a checkout (this file is <checkout>/demo/cli.py); an
# installed package has none there.
CHECKOUT_WEATHER = Path(__file__).resolve().parents[2] / "shared" / "data" / "weather"
API_START_SECONDS = 180
SQL_PORT = 5433  # the SQL endpoint the demo serves beside the API (docs/sql.md)


def _pid_file(settings) -> Path:
    return settings.data_dir / "demo-api.pid"


def _say(text: str) -> None:
    print(text, flush=True)


def _stop(settings) -> int:
    pid_file = _pid_file(settings)
    if not pid_file.exists():
        _say("no demo API is running")
        return 0
    pid = int(pid_file.read_text())
    try:
        os.killpg(pid, signal.SIGTERM)
        _say(f"stopped the demo API (process group {pid})")
    except ProcessLookupError:
        _say("the demo API had already stopped")
    pid_file.unlink()
    return 0


def _start_api(settings, port: int) -> str:
    """Serve the API in the background (its own process group); returns its URL once
    /healthz says ready: its workers warmed up, so the first answer comes at full speed."""
    import requests

    url = f"http://127.0.0.1:{port}"
    _stop_quietly(settings)
    log = settings.data_dir / "demo-api.log"
    env = settings.environ()
    proc = subprocess.Popen(
        [sys.executable, "-m", "gridagg.cli.main", "serve", "--port", str(port), "--workers", "2",
         "--sql-port", str(SQL_PORT)],
        stdout=open(log, "ab"), stderr=subprocess.STDOUT, env=env, start_new_session=True,
    )
    _pid_file(settings).write_text(str(proc.pid))
    # A machine's first start compiles the query kernels (gridagg.warmup): 15 s to a minute.
    deadline = time.monotonic() + API_START_SECONDS
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"gridagg demo: the API did not start; see {log}")
        try:
            if requests.get(f"{url}/healthz", timeout=2).ok:
                return url
        except requests.RequestException:
            pass
        time.sleep(0.5)
    raise SystemExit(f"gridagg demo: the API was not ready within {API_START_SECONDS} s; see {log}")


def _stop_quietly(settings) -> None:
    if _pid_file(settings).exists():
        try:
            os.killpg(int(_pid_file(settings).read_text()), signal.SIGTERM)
            time.sleep(1)
        except ProcessLookupError:
            pass
        _pid_file(settings).unlink()


def _show(title: str, request: dict, answer: dict) -> None:
    _say(f"\n== {title}")
    _say("   request: " + json.dumps(request))
    if "results" in answer:
        _say("   answer:  " + json.dumps(answer["results"]) + f"  (rows selected: {answer.get('count')})")
    plan = answer.get("plan", {})
    keep = ["total_grids", "reused_grids_before", "reused_grids_after", "rows_in_reused_grids",
            "scanned_grids_before", "scanned_grids_after", "rows_in_scanned_grids", "reuse_rate",
            "round_trips", "elapsed_ms"]
    _say("   plan:    " + ", ".join(f"{k}={plan[k]}" for k in keep if k in plan))


def _queries(url: str) -> None:
    import requests

    def post(path: str, body: dict) -> dict:
        r = requests.post(f"{url}/v1/datasets/weather/{path}", json=body, timeout=120)
        if not r.ok:
            raise SystemExit(f"gridagg demo: {path} failed: {r.status_code} {r.text}")
        return r.json()

    span = post("query", {"aggregates": ["min:time", "max:time", "count"]})["results"]
    first = datetime.fromisoformat(span["min:time"].replace("Z", "+00:00"))
    week = [first.isoformat(), (first + timedelta(days=7)).isoformat()]

    box = {"where": {"time": [first.isoformat(), (first + timedelta(days=365 * 30)).isoformat()],
                     "temperature": [15, 35], "humidity": [20, 80]},
           "aggregates": ["count", "min:wind_speed", "sum:wind_speed", "avg:temperature"]}
    _show("Box: wind and temperature on warm, not too humid hours, all years", box, post("query", box))

    carolina = {"type": "Polygon", "coordinates": [[[-84.5, 33.8], [-75.5, 33.8], [-75.5, 36.6],
                                                    [-84.5, 36.6], [-84.5, 33.8]]]}
    polygon = {"where": {}, "region": carolina, "aggregates": ["count", "avg:temperature", "max:wind_speed"]}
    _show("Polygon: North Carolina (Greensboro's station inside, Alaska's outside)", polygon,
          post("query", polygon))

    series = {"where": {}, "aggregates": ["avg:temperature"], "start": week[0],
              "end": (first + timedelta(days=28)).isoformat(), "step": "1d", "window": "7d"}
    answer = post("series", series)
    _say("\n== Series: 7-day moving average of temperature, one point per day, first 4 weeks")
    _say("   request: " + json.dumps(series))
    for point in answer["points"]:
        value = point["results"]["avg:temperature"]
        _say(f"   {point['time']}  {'-' if value is None else round(value, 2)}")
    _show("   series plan", {}, {"plan": answer.get("plan", {})})


def _demo(settings, args: argparse.Namespace) -> int:
    if args.stop:
        return _stop(settings)
    from gridagg.cli import services

    if args.input is None:
        raise InvalidInput("the demo needs --input DIR: TMY3 weather archives (CSV), such as a "
                           "checkout's ../shared/data/weather", field="--input")
    if not args.input.exists():
        raise InvalidInput(f"--input {args.input} does not exist", field="--input")
    if args.hbase:
        settings = settings.with_(store="hbase")
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    _say(f"== Servers (data in {settings.data_dir})")
    for report in services.up(settings, hbase=args.hbase):
        _say("   " + report.line())

    _say(f"\n== Bulk load of {args.input} with Spark (store: {settings.store})")
    from gridagg_ingest.cli import example_config
    from gridagg_ingest.config import load_config
    from gridagg_ingest.job import Progress, run_ingest, spark_session

    spark = spark_session(None)
    progress = Progress(spark=spark, quiet=False)
    try:
        summary = run_ingest(spark, settings, load_config(example_config("weather")), [str(args.input)],
                             progress=progress)
    finally:
        progress.close()
        spark.stop()
    for line in summary.lines():
        _say("   " + line)

    _say("\n== HTTP API")
    url = _start_api(settings, args.port)
    _say(f"   serving on {url} (store {settings.store}); OpenAPI document at {url}/openapi.json")
    _queries(url)
    _say(f"\nThe API keeps running at {url}; open {url}/ in a browser for its dashboard page. Try:\n"
         f"   curl -s {url}/v1/datasets/weather\n"
         f"   curl -s '{url}/v1/datasets/weather/query?aggregates=avg:temperature,count&where.temperature=15,35'\n"
         f"and in SQL (docs/sql.md), from psql or any PostgreSQL client:\n"
         f"   psql -h 127.0.0.1 -p {SQL_PORT} -U gridagg -c \"SELECT count(*), avg(temperature) FROM weather "
         f"WHERE time >= '2005-01-01'\"\n"
         f"Stop it with `gridagg demo --stop` and the servers with `gridagg services down`.")
    return 0


def register(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "demo", help="load the real weather archives, serve the API, run dashboard queries",
        description=__doc__.split("\n\n")[1].replace("\n", " "),
        epilog=config.help_text("servers", "store", "spark"))
    p.add_argument("--hbase", action="store_true",
                   help="use the local real HBase instead of the embedded store (started if needed)")
    default = CHECKOUT_WEATHER if CHECKOUT_WEATHER.is_dir() else None
    p.add_argument("--input", type=Path, default=default,
                   help="directory or files of TMY3 archives to load (default: "
                        + (f"{default})" if default else "none, --input is required here)"))
    p.add_argument("--port", type=int, default=8080, help="port of the API (default 8080)")
    p.add_argument("--stop", action="store_true", help="stop the API a previous demo left running")
    p.set_defaults(func=_demo)
    return p
