"""`gridagg serve`: the HTTP API under granian (a WSGI server with a Rust HTTP core).

``register(subparsers)`` adds the subcommand to `gridagg` (entry point in pyproject.toml).
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import sys
import tempfile
import time

from gridagg import config

ENDPOINTS = """\
endpoints: /v1/datasets, /v1/datasets/NAME{,/query,/series,/rows,/grids}, /healthz,
/metrics, /openapi.json
"""
WORKERS_KILL_SECONDS = 20  # on SIGTERM, requests in flight get this long to finish


def default_workers() -> int:
    return max(2, min(8, os.cpu_count() or 1))


def default_threads(store: str) -> int:
    """Requests one worker answers at once, by cell store. Embedded-store queries are CPU
    work inside the worker, where more threads only take turns on the GIL (a thread per
    worker answered more queries per second than four), but an answer streamed as it
    improves holds its thread until exact: with one thread, the page's second request of
    a change (it asks /query and /series at once) waited for the first's whole scan
    whenever both came to one worker, as they often did: two. HBase
    queries mostly wait on Thrift round trips, which threads overlap: four."""
    return 2 if store == "embedded" else 4


def server_argv(host: str, port: int, workers: int, threads: int, log_level: str = "info",
                access_log: bool = True, app: str = "gridagg_api.wsgi:app") -> list[str]:
    """The command that serves the WSGI `app` (default gridagg's API; the bench serves
    its own): `workers` processes, each answering up to `threads` requests at once. Each
    worker builds its own engine on its first request, so no connection or LMDB handle
    crosses a process boundary. A worker that dies is started again; on SIGTERM,
    requests in flight get WORKERS_KILL_SECONDS to finish."""
    return [
        sys.executable, "-m", "granian", "--interface", "wsgi",
        "--host", host, "--port", str(port),
        "--workers", str(workers), "--blocking-threads", str(threads),
        "--respawn-failed-workers", "--workers-kill-timeout", str(WORKERS_KILL_SECONDS),
        "--log-level", log_level, "--access-log" if access_log else "--no-access-log",
        app,
    ]


def _warm_up() -> None:
    """Compile the query kernels into numba's on-disk cache (a machine's first start), or
    check they are there, before the workers start: each then only loads them while its
    /healthz says "warming" (api.warming), rather than all compiling at once."""
    from gridagg.warmup import warm

    print("gridagg serve: warming up (a machine's first start compiles the query kernels: 15 s to a "
          "minute)", file=sys.stderr, flush=True)
    try:
        print(f"gridagg serve: {warm()}", file=sys.stderr)
    except Exception as exc:  # a bug; the workers warm up again by themselves, or compile as queries come
        print(f"gridagg serve: warning: warming up failed: {exc!r}", file=sys.stderr)


def _serve(settings, args: argparse.Namespace) -> int:
    import subprocess

    _warm_up()
    metrics_dir = tempfile.mkdtemp(prefix="gridagg-metrics-")
    env = {**settings.environ(), "PROMETHEUS_MULTIPROC_DIR": metrics_dir}
    if not settings.write_token:
        print("gridagg serve: no GRIDAGG_WRITE_TOKEN set: writes (create, ingest) are refused", file=sys.stderr)
    threads = args.threads or default_threads(settings.store)
    argv = server_argv(args.host, args.port, args.workers, threads, args.log_level,
                       access_log=not args.no_access_log)
    print(f"gridagg API on http://{args.host}:{args.port}/ ({args.workers} workers x {threads} thread(s), "
          f"store {settings.store}); Ctrl-C stops it", file=sys.stderr)
    proc = subprocess.Popen(argv, env=env)
    # The SQL endpoint (sql/, docs/sql.md) in processes of its own beside the API's.
    sql = None if args.sql_port is None else subprocess.Popen(
        [sys.executable, "-m", "gridagg_sql", "--host", args.host, "--port", str(args.sql_port),
         "--workers", str(args.workers)], env=env)
    stopping: list[float] = []  # when a stop was asked for
    interrupted = False

    def stop(*_) -> None:
        proc.terminate()
        if sql is not None:
            sql.terminate()
        stopping.append(time.monotonic())

    # A SIGTERM to `gridagg serve` stops the server gracefully too.
    previous = signal.signal(signal.SIGTERM, stop)
    try:
        while True:
            try:
                code = proc.wait(timeout=1)
                return 130 if interrupted else code
            except KeyboardInterrupt:
                interrupted = True
                stop()
            except subprocess.TimeoutExpired:
                # granian kills workers that do not stop within WORKERS_KILL_SECONDS; its
                # own process was seen to hang on after its workers were gone.
                if stopping and time.monotonic() - stopping[0] > WORKERS_KILL_SECONDS + 5:
                    proc.kill()
    finally:
        signal.signal(signal.SIGTERM, previous)
        if sql is not None:
            sql.terminate()
            sql.wait(WORKERS_KILL_SECONDS)
        shutil.rmtree(metrics_dir, ignore_errors=True)


def register(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "serve", help="serve the HTTP API (granian, several workers)",
        description="Serve the gridagg HTTP API for dashboards with granian: several worker "
                    "processes, each with pooled connections to PostgreSQL and the cell store "
                    "(embedded LMDB or HBase). Metrics of all workers are merged at /metrics. "
                    "It first compiles the query kernels (a machine's first start, the slow one) or "
                    "loads them from numba's cache; each worker loads them as it starts, and its "
                    "/healthz answers 503 \"warming\" until then.",
        epilog=config.help_text("http", "store") + "\n" + ENDPOINTS)
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8080, help="port to listen on (default 8080)")
    p.add_argument("--workers", type=int, default=default_workers(),
                   help="worker processes (default 1 per core, 2..8: %(default)s here)")
    p.add_argument("--threads", type=int,
                   help="requests one worker answers at once (default 2 on the embedded store, whose "
                        "queries are CPU work where threads contend for the GIL, but a streamed answer "
                        "holds its thread until exact; 4 on HBase, whose queries wait on round trips). "
                        "Raise it, or --workers, when a few slow queries must not hold up quick ones")
    p.add_argument("--sql-port", type=int,
                   help="also serve the read-only SQL endpoint (PostgreSQL wire protocol, docs/sql.md) on this "
                        "port, e.g. 5433, with as many workers (default: off)")
    p.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"],
                   help="server log level (default info)")
    p.add_argument("--no-access-log", action="store_true",
                   help="no access-log line per request (as the benchmarks run; /metrics still "
                        "counts requests)")
    p.set_defaults(func=_serve)
    return p
