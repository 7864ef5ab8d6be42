"""Headless locust load for gridagg and its baselines, 127.0.0.1 only.

    LOADTEST_DATASET=bench_n250 LOADTEST_AGG=min LOADTEST_MAX_REQUESTS=2000 \
    locust -f loadtest/locustfile.py --headless -u 32 -r 32 --run-time 30s \
        --host http://127.0.0.1:8080 --csv /tmp/run --only-summary

Environment:
  LOADTEST_DATASET       dataset to query (a gridagg dataset, or a baseline view X__pg / X__hbase)
  LOADTEST_MIX           "paper" (default: the paper's 360-day 4-D box) or "dashboard"
  LOADTEST_AGG           paper mix: "min" or "sum" (of wind speed; separate runs)
  LOADTEST_MAX_REQUESTS  stop after this many requests in all (default 1000)
  LOADTEST_SEED          workload seed (default 1); user i draws from seed + i
  LOADTEST_READ_TOKEN    bearer token for reads, if the API needs one
  LOADTEST_RESULT        write exact results here as JSON at exit: failures (of all
                         requests); requests, seconds, queries/s and latency p50/p95/
                         p99/mean in ms over the requests sent once every user was
                         running (steady state: the ramp-up is not measured)
Every run is bounded by both --run-time and LOADTEST_MAX_REQUESTS; a host other than
127.0.0.1 / localhost is refused.
"""

from __future__ import annotations

import itertools
import os
import random
from urllib.parse import urlparse

import json
import time

import gevent
import numpy as np
from locust import FastHttpUser, events, task

from gridagg_loadtest import workload

DATASET = os.environ.get("LOADTEST_DATASET", "bench_n250")
MIX = os.environ.get("LOADTEST_MIX", "paper")
AGG = os.environ.get("LOADTEST_AGG", "min")
MAX_REQUESTS = int(os.environ.get("LOADTEST_MAX_REQUESTS", "1000"))
SEED = int(os.environ.get("LOADTEST_SEED", "1"))
TOKEN = os.environ.get("LOADTEST_READ_TOKEN")
LOCAL = {"127.0.0.1", "localhost"}

_user_ids = itertools.count()
_sent = 0


@events.init.add_listener
def _check_host(environment, **_):
    host = urlparse(environment.host or "").hostname
    if host not in LOCAL:
        raise SystemExit(f"loadtest: refusing host {environment.host!r}: 127.0.0.1 only")
    if MIX not in ("paper", "dashboard") or AGG not in workload.AGGREGATES:
        raise SystemExit("loadtest: LOADTEST_MIX must be paper|dashboard and LOADTEST_AGG min|sum")


RESULT = os.environ.get("LOADTEST_RESULT")
_latencies: list[float] = []
_failures = 0
_all_running: float | None = None
_last_done: float | None = None


@events.spawning_complete.add_listener
def _steady(**_):
    global _all_running
    _all_running = time.perf_counter()


@events.request.add_listener
def _bound(response_time=0.0, exception=None, **_):
    global _sent, _failures, _last_done
    now = time.perf_counter()
    _sent += 1
    if _all_running is not None and now - response_time / 1000 >= _all_running:
        _latencies.append(response_time)
        _last_done = now
    if exception is not None:
        _failures += 1
    if _sent == MAX_REQUESTS:
        runner = _env.runner if _env else None
        if runner is not None:
            gevent.spawn_later(0, runner.quit)


_env = None


@events.quitting.add_listener
def _write_result(**_):
    if not RESULT:
        return
    lat = np.array(_latencies) if _latencies else np.array([np.nan])
    secs = (_last_done - _all_running) if _latencies else 0.0
    out = {"requests": len(_latencies), "failures": _failures, "seconds": secs,
           "rps": len(_latencies) / secs if secs else 0.0,
           "p50_ms": float(np.percentile(lat, 50)), "p95_ms": float(np.percentile(lat, 95)),
           "p99_ms": float(np.percentile(lat, 99)), "mean_ms": float(lat.mean())}
    with open(RESULT, "w") as f:
        json.dump(out, f)


@events.init.add_listener
def _keep_env(environment, **_):
    global _env
    _env = environment


class Client(FastHttpUser):
    """One dashboard or analyst: a closed loop, no think time (as in the paper)."""

    def on_start(self):
        uid = next(_user_ids)
        self.rng = random.Random(SEED * 1000 + uid)
        self.headers = {"Authorization": f"Bearer {TOKEN}"} if TOKEN else {}
        # Drawn lazily: building every box up front would put seconds of client CPU
        # inside the measured window when many users start at once.
        self.boxes = workload.paper_boxes(SEED * 1000 + uid) if MIX == "paper" else None

    @task
    def one(self):
        if _sent >= MAX_REQUESTS:
            gevent.sleep(0.05)
            return
        if self.boxes is not None:
            endpoint, body = workload.paper_request(next(self.boxes), AGG)
            name = f"{MIX}:{AGG}"
        else:
            endpoint, body = workload.dashboard_request(self.rng)
            name = f"dashboard:{endpoint}"
        with self.client.post(f"/v1/datasets/{DATASET}/{endpoint}", json=body, headers=self.headers,
                              name=name, catch_response=True) as resp:
            if resp.status_code != 200:
                resp.failure(f"HTTP {resp.status_code}: {resp.text[:200]}")
