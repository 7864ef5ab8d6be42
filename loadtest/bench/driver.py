"""The bench's load: loadtest/bench/loadgen.go, closed-loop clients on 127.0.0.1, bounded by
a request count and a time (see the Go file for why it is not locust).

`run_load` writes the run's requests (the paper's workload, drawn from a seed) to a
file, runs the driver on it and returns its result with the CPU every process group
spent per request during the run (`gridagg_loadtest.bench.cpu`). A run counts every answer
that completes inside its measured window (COUNTING says so in the report).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from gridagg.config import Settings
from gridagg.model.errors import GridaggError

from . import workload
from .cpu import CpuMeter

SOURCE = Path(__file__).with_name("loadgen.go")
DISTINCT_BOXES = 50_000  # the most different boxes a run's request file holds
COUNTING = ("every answer that completes inside a run's measured window (from the end of the clients' "
            "ramp to the run's time, or to its last counted answer when its request budget is spent) is "
            "counted, whenever its request was sent, for every system alike; latency percentiles are of "
            "those answers")


def binary(settings: Settings) -> Path:
    """The driver, built with Go into <data dir>/tools once per version of its source."""
    digest = hashlib.sha256(SOURCE.read_bytes()).hexdigest()[:12]
    path = settings.data_dir / "tools" / f"gridagg-loadgen-{digest}"
    if path.exists():
        return path
    go = shutil.which("go")
    if go is None:
        raise GridaggError("gridagg bench builds its load driver (loadtest/bench/loadgen.go) with Go: install it "
                           "(e.g. apt install golang-go) and put `go` on PATH")
    path.parent.mkdir(parents=True, exist_ok=True)
    built = path.with_name(f".{path.name}.{os.getpid()}")  # renamed into place when whole
    # One file that imports the standard library only: no module to set up.
    proc = subprocess.run([go, "build", "-o", str(built), str(SOURCE)], cwd=path.parent, capture_output=True,
                          text=True)
    if proc.returncode != 0:
        raise GridaggError(f"building loadtest/bench/loadgen.go failed: {proc.stderr.strip()[:500]}")
    os.replace(built, path)
    for old in path.parent.glob("gridagg-loadgen-*"):  # builds of earlier sources
        if old != path:
            old.unlink(missing_ok=True)
    return path


def write_requests(path: Path, query_path: str, agg: str, count: int, seed: int) -> None:
    """`count` requests of the paper's workload to `query_path` (a system's query
    endpoint), one a line as the driver reads them."""
    with open(path, "w") as f:
        for where in workload.paper_queries(count, seed):
            f.write(f"{query_path}\t{json.dumps(workload.paper_body(where, agg), separators=(',', ':'))}\n")


def run_load(settings: Settings, url: str, query_path: str, agg: str, clients: int, max_requests: int,
             seconds: float, seed: int, outdir: Path, tag: str, meter: CpuMeter) -> dict:
    """One run: `clients` clients send the paper's `agg` queries to `query_path` at
    `url` until `max_requests` answers are counted or `seconds` pass. Returns the
    driver's result (requests counted, failures, rps, latency p50/p95/p99/mean in ms,
    seconds of the measured window, ramp_answers and late_answers: see loadgen.go), the
    wall time and CPU ms per request sent by process group (cpu_<group>_ms). The
    driver's result and its log are kept under outdir/load/<tag>.*"""
    prefix = outdir / "load" / tag
    prefix.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        requests = Path(tmp) / "requests.txt"
        # Every client gets requests of its own (the ramp's requests wrap around); past
        # DISTINCT_BOXES the driver wraps around too.
        write_requests(requests, query_path, agg, min(max_requests, DISTINCT_BOXES) + clients, seed)
        # Clients start 10 ms apart (at most 1 s in all), so the server's workers share them.
        argv = [str(binary(settings)), "-url", url, "-requests", str(requests), "-clients", str(clients),
                "-max", str(max_requests), "-seconds", f"{seconds:g}", "-ramp", f"{min(1.0, 0.01 * clients):g}",
                "-result", f"{prefix}.json"]
        # One OS thread runs the driver's goroutines: a second only adds handoffs.
        env = {**os.environ, "GOMAXPROCS": "1"}
        with open(f"{prefix}.log", "w") as log, meter.measure() as usage:
            proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env)
            usage.add_child(proc, timeout=seconds + 150)
    if proc.returncode != 0:
        raise RuntimeError(f"the load driver exited with {proc.returncode}; see {prefix}.log")
    with open(f"{prefix}.json") as f:
        res = json.load(f)
    out = {"requests": res["requests"], "failures": res["failures"], "rps": round(res["rps"], 2),
           "p50_ms": round(res["p50_ms"], 1), "p95_ms": round(res["p95_ms"], 1), "p99_ms": round(res["p99_ms"], 1),
           "mean_ms": round(res["mean_ms"], 1), "seconds": round(res["seconds"], 2), "wall_s": round(usage.wall, 2),
           "ramp_answers": res["ramp_answers"], "late_answers": res["late_answers"]}
    for group, ms in usage.per_request(res["sent"]).items():
        out[f"cpu_{group}_ms"] = ms
    return out
