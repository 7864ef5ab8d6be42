"""The SQL endpoint against the HTTP API on the same questions: what the wire protocol
adds to a question's median time, and the questions answered a second at 32 clients.

    python -m gridagg_sql.bench --dataset net10e [--seconds 15] [--clients 32]

It starts `gridagg serve --sql-port` (2 workers each, the access log off) on free ports,
asks both the same random boxes of the dataset (three aggregates over the rows' extent
of its number and time dimensions): one client in turn for the medians, then `clients`
at once (in 4 processes of threads, each with its own connection) for the throughput,
prints the numbers and rewrites the report (--report, default docs/bench/sql/README.md of the
checkout).
Targets (issue 96): the median no more than 1 ms above the HTTP API's, the throughput
at least 70% of it.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import random
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import psycopg
import requests

_BENCH_DOCS = Path(__file__).resolve().parents[1] / "docs" / "bench"
# Outside a checkout (an installed wheel) the report goes to the working directory.
REPORT = _BENCH_DOCS / "sql" / "README.md" if _BENCH_DOCS.is_dir() else Path("sql-bench.md")
START_SECONDS = 180


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start(workers: int) -> tuple[subprocess.Popen, str, int]:
    http, sql = _free_port(), _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "gridagg.cli.main", "serve", "--port", str(http), "--sql-port",
                             str(sql), "--workers", str(workers), "--no-access-log", "--log-level", "warning"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    url = f"http://127.0.0.1:{http}"
    deadline = time.monotonic() + START_SECONDS
    while time.monotonic() < deadline:
        try:
            if requests.get(f"{url}/healthz", timeout=2).ok:
                psycopg.connect(_dsn(sql)).close()
                return proc, url, sql
        except (requests.RequestException, psycopg.OperationalError):
            time.sleep(0.5)
    os.killpg(proc.pid, signal.SIGTERM)
    raise SystemExit("gridagg sql bench: the servers did not start")


def _dsn(port: int) -> str:
    return f"host=127.0.0.1 port={port} user=bench dbname=gridagg"


def questions(url: str, port: int, dataset: str, n: int, seed: int) -> list[tuple[dict, str]]:
    """n random boxes as (JSON body, SQL), over the extent of the rows of the dataset's
    time dimension and first two number dimensions."""
    ds = requests.get(f"{url}/v1/datasets/{dataset}", timeout=30).json()
    dims = [d for d in ds["dimensions"] if d["type"] == "time"][:1] + \
           [d for d in ds["dimensions"] if d["type"] == "number"][:2]
    measure = (ds["measures"] or ds["dimensions"])[0]["name"]
    with psycopg.connect(_dsn(port), autocommit=True) as c:
        ends = c.execute("SELECT " + ", ".join(f"min({d['name']}), max({d['name']})" for d in dims)
                         + f" FROM {dataset}").fetchone()
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        where, terms = {}, []
        for k, d in enumerate(dims):
            lo, hi = ends[2 * k], ends[2 * k + 1]
            if d["type"] == "time":
                span = (hi - lo).total_seconds()
                a, b = sorted(lo.timestamp() + rng.random() * span for _ in range(2))
                a, b = (time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(x)) for x in (a, b))
            else:
                a, b = sorted(round(float(lo) + rng.random() * float(hi - lo), d.get("scale", 0)) for _ in range(2))
            where[d["name"]] = [a, b]
            terms.append(f"{d['name']} BETWEEN '{a}' AND '{b}'" if d["type"] == "time"
                         else f"{d['name']} BETWEEN {a} AND {b}")
        body = {"where": where, "aggregates": ["count", f"sum:{measure}", f"avg:{measure}"]}
        sql = f"SELECT count(*), sum({measure}), avg({measure}) FROM {dataset} WHERE " + " AND ".join(terms)
        out.append((body, sql))
    return out


class Asker:
    """Asks questions over one kept-open connection: HTTP (a requests session) or SQL."""

    def __init__(self, kind: str, url: str, port: int, dataset: str):
        self.kind, self.url = kind, f"{url}/v1/datasets/{dataset}/query"
        self.http = requests.Session() if kind == "http" else None
        self.sql = psycopg.connect(_dsn(port), autocommit=True) if kind == "sql" else None

    def ask(self, question: tuple[dict, str]) -> None:
        if self.http is not None:
            resp = self.http.post(self.url, json=question[0], timeout=60)
            resp.raise_for_status()
            resp.json()
        else:
            self.sql.execute(question[1]).fetchall()


def medians(url: str, port: int, dataset: str, qs: list, rounds: int) -> dict[str, float]:
    """Each kind's median milliseconds a question, one client, the kinds taking turns."""
    askers = {kind: Asker(kind, url, port, dataset) for kind in ("http", "sql")}
    times: dict[str, list[float]] = {kind: [] for kind in askers}
    for kind, asker in askers.items():  # warm: trees read, kernels loaded, connections open
        for q in qs[:20]:
            asker.ask(q)
    for _ in range(rounds):
        for q in qs:
            for kind, asker in askers.items():
                t = time.perf_counter()
                asker.ask(q)
                times[kind].append((time.perf_counter() - t) * 1000)
    return {kind: statistics.median(v) for kind, v in times.items()}


def _load_process(kind: str, url: str, port: int, dataset: str, qs: list, threads: int, seconds: float,
                  out) -> None:
    counts = [0] * threads
    stop = time.monotonic() + seconds

    def run(i: int) -> None:
        asker = Asker(kind, url, port, dataset)
        rng = random.Random(i)
        while time.monotonic() < stop:
            asker.ask(rng.choice(qs))
            counts[i] += 1

    workers = [threading.Thread(target=run, args=(i,)) for i in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    out.put(sum(counts))


def throughput(kind: str, url: str, port: int, dataset: str, qs: list, clients: int, seconds: float) -> float:
    """Questions answered a second by `clients` clients at once (4 processes of threads)."""
    procs = 4
    out = multiprocessing.Queue()
    ps = [multiprocessing.Process(target=_load_process, args=(kind, url, port, dataset, qs, clients // procs,
                                                              seconds, out)) for _ in range(procs)]
    for p in ps:
        p.start()
    total = sum(out.get() for _ in ps)
    for p in ps:
        p.join()
    return total / seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gridagg_sql.bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", required=True, help="a loaded dataset to ask (e.g. net10e)")
    parser.add_argument("--questions", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3, help="times each question is asked for the medians")
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=15.0, help="each kind's throughput run")
    parser.add_argument("--workers", type=int, default=2, help="server processes of each kind")
    parser.add_argument("--report", type=Path, default=REPORT)
    args = parser.parse_args(argv)
    proc, url, port = _start(args.workers)
    try:
        qs = questions(url, port, args.dataset, args.questions, seed=96)
        p50 = medians(url, port, args.dataset, qs, args.rounds)
        rate = {kind: throughput(kind, url, port, args.dataset, qs, args.clients, args.seconds)
                for kind in ("http", "sql")}
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(60)
    added = p50["sql"] - p50["http"]
    share = rate["sql"] / rate["http"]
    lines = [
        "# SQL endpoint against the HTTP API",
        "",
        f"`python -m gridagg_sql.bench --dataset {args.dataset}` rewrites this report: {args.questions} random boxes "
        f"(count, sum, avg) of {args.dataset}, {args.workers} server workers of each kind, {os.cpu_count()} cores "
        "shared by servers and clients.",
        "",
        "| | HTTP API | SQL endpoint | SQL - HTTP or SQL / HTTP | target |",
        "| --- | --- | --- | --- | --- |",
        f"| median ms a question, 1 client ({args.rounds} rounds) | {p50['http']:.2f} | {p50['sql']:.2f} "
        f"| {added:+.2f} ms | <= +1 ms |",
        f"| questions a second, {args.clients} clients ({args.seconds:g} s) | {rate['http']:.0f} | {rate['sql']:.0f} "
        f"| {share:.0%} | >= 70% |",
        "",
    ]
    args.report.write_text("\n".join(lines))
    print("\n".join(lines))
    print(json.dumps({"p50_ms": p50, "per_second": rate, "added_ms": added, "share": share}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
