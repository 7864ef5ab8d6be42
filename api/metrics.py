"""Prometheus metrics. `gridagg serve` sets PROMETHEUS_MULTIPROC_DIR so every worker
process writes its samples to files there and /metrics merges all workers, a restarted
worker's counts included (there are only counters and histograms: no live gauges to
clean up after a dead worker). Without it (tests, a single process) the process's own
registry is exposed."""

from __future__ import annotations

import os
import time

from flask import Flask, Response, g, request
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
)

REQUESTS = Counter("gridagg_http_requests_total", "HTTP requests answered",
                   ["method", "endpoint", "status"])
LATENCY = Histogram("gridagg_http_request_seconds", "Time to answer an HTTP request",
                    ["method", "endpoint"],
                    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30))
ROWS_STORED = Counter("gridagg_rows_stored_total", "Rows stored through the API", ["dataset"])
ROWS_REJECTED = Counter("gridagg_rows_rejected_total", "Rows refused through the API", ["dataset"])
ROWS_SCANNED = Counter("gridagg_rows_scanned_total", "Raw rows scanned to answer queries", ["kind"])


def register(app: Flask) -> None:
    @app.before_request
    def _start():
        g.metrics_started = time.perf_counter()

    @app.after_request
    def _record(response):
        started = g.pop("metrics_started", None)
        endpoint = request.url_rule.rule if request.url_rule is not None else "unmatched"
        record(request.method, endpoint, response.status_code, started)
        return response


_CHILDREN: dict[tuple, tuple] = {}  # (method, endpoint, status) -> its counter and histogram


def record(method: str, endpoint: str, status: int, started: float | None) -> None:
    """A request answered: counted, and its time (since `started`, time.perf_counter())."""
    key = (method, endpoint, status)
    children = _CHILDREN.get(key)
    if children is None:  # a labelled child is found under a lock: kept once found
        children = _CHILDREN[key] = (REQUESTS.labels(method, endpoint, str(status)), LATENCY.labels(method, endpoint))
    children[0].inc()
    if started is not None:
        children[1].observe(time.perf_counter() - started)


def exposition() -> Response:
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        from prometheus_client import multiprocess

        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
        data = generate_latest(registry)
    else:
        data = generate_latest(REGISTRY)
    return Response(data, mimetype=CONTENT_TYPE_LATEST.split(";")[0],
                    headers={"Content-Type": CONTENT_TYPE_LATEST})
