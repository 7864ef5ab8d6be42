"""Served queries of gridagg alone, as the bench serves them, for A/B runs of one change.

    python docs/bench/scale/served.py STORE NAME SHAPE RUNS SECONDS [AGG]

Serves dataset NAME of STORE at SHAPE (workers x threads, e.g. 2x4) the way
gridagg_loadtest.scale does (its limits, prewarm and warm-up runs), then RUNS recorded
runs of the paper's AGG queries (sum by default) at 32 clients, up to SECONDS each;
prints each run's rate, p50 and CPU milliseconds a request by process group.
"""

import argparse
import sys
import tempfile
from pathlib import Path

from gridagg.config import Settings
from gridagg_loadtest.prewarm import prewarm
from gridagg_loadtest.runs import Bench
from gridagg_loadtest.scale import SERVED_MAX_GRIDS, SERVED_MAX_SCAN_ROWS
from gridagg_loadtest.servers import Shape
from gridagg_loadtest.systems import System
from gridagg_loadtest.tuning import Setting

store, name, shape, runs, seconds = sys.argv[1], sys.argv[2], Shape.parse(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
agg = sys.argv[6] if len(sys.argv) > 6 else "sum"
settings = Settings.from_env().with_(max_grids=SERVED_MAX_GRIDS, max_scan_rows=SERVED_MAX_SCAN_ROWS)
knobs = argparse.Namespace(clients=[32], aggs=[agg], requests=100_000, seconds=seconds, seed=1, warmup_runs=40,
                           warmup_seconds=5, tune_seconds=5)
bench = Bench(settings, knobs, Path(tempfile.mkdtemp(prefix="gridagg-served-")))  # the load logs
system = System(f"gridagg-{store}", name, "gridagg", store)
server = bench.serve(system, Setting(shape))
try:
    prewarm(settings, system)
    print("warm-up", [round(x) for x in bench.warm_up(server, system, agg)], "q/s", flush=True)
    for i in range(runs):
        r = bench.load(server, system, agg, 32, seconds, 1, f"{agg}_r{i}")
        cpu = ", ".join(f"{k[4:-3]} {v:.2f}" for k, v in r.items() if k.startswith("cpu_"))
        print(f"run {i + 1}: {r['rps']:.1f} q/s, p50 {r['p50_ms']:.0f} ms; CPU ms a request: {cpu}", flush=True)
finally:
    server.stop()
