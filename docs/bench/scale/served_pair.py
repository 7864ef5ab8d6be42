"""gridagg and one peer served in alternation, for a ratio that the machine's drift does
not bend:

    python docs/bench/scale/served_pair.py CONFIG STORE=NAME PEER SHAPE PEER_SHAPE KNOB=VALUE ROUNDS SECONDS

Serves gridagg's dataset NAME of STORE at SHAPE and the peer (duckdb or clickhouse: its
copy of CONFIG's dataset, as `python -m gridagg_loadtest.scale --keep` leaves it) at
PEER_SHAPE with its knob KNOB=VALUE, both at once, prewarmed and warmed up as the bench
does; then ROUNDS rounds of one run of the paper's sum queries at 32 clients, up to
SECONDS each, gridagg's then the peer's. Prints each run's rate and the load driver's
CPU a request (the same work for every system: a gauge of the machine's speed), each
round's ratio, and the median of the rounds' ratios.

The bench (loadtest/scale.py) measures one system after another, minutes apart, one run
each: on this shared host the speed of the machine moves by a fifth and more within
minutes (the load driver's CPU a request moving with it), and one run's ratio with it.
"""

import argparse
import statistics
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

from gridagg.config import Settings
from gridagg_ingest.config import load_config
from gridagg_loadtest.peers.registry import PeerRegistry
from gridagg_loadtest.prewarm import prewarm
from gridagg_loadtest.runs import Bench
from gridagg_loadtest.scale import SERVED_MAX_GRIDS, SERVED_MAX_SCAN_ROWS
from gridagg_loadtest.servers import Server, Shape
from gridagg_loadtest.systems import System

config, dataset, peer_kind, shape, peer_shape, knob, rounds, seconds = sys.argv[1:9]
store, name = dataset.split("=", 1)
knob_name, knob_value = knob.split("=", 1)
rounds, seconds = int(rounds), float(seconds)
ds = replace(load_config(config), format="parquet").dataset
settings = Settings.from_env().with_(max_grids=SERVED_MAX_GRIDS, max_scan_rows=SERVED_MAX_SCAN_ROWS)
knobs = argparse.Namespace(clients=[32], aggs=["sum"], requests=100_000, seconds=seconds, seed=1, warmup_runs=40,
                           warmup_seconds=5, tune_seconds=5)
out = Path(tempfile.mkdtemp(prefix="gridagg-served-pair-"))  # the load logs
bench = Bench(settings, knobs, out)
ours = System(f"gridagg-{store}", name, "gridagg", store)
theirs = System(peer_kind, ds.name, peer_kind)
registry = PeerRegistry(settings.effective_pg_url)
registry.register(peer_kind, ds)
servers = {}
try:
    servers[ours.label] = Server(settings, ours, Shape.parse(shape), {}, out / "logs")
    servers[theirs.label] = Server(settings, theirs, Shape.parse(peer_shape), {knob_name: int(knob_value)},
                                   out / "logs")
    for system in (ours, theirs):
        bench.serving[:] = [servers[system.label]]  # whose API processes a run's CPU counts
        prewarm(settings, system)
        rates = bench.warm_up(servers[system.label], system, "sum")
        print(f"{system.label} warm-up", [round(x) for x in rates], "q/s", flush=True)
    ratios = []
    for i in range(rounds):
        rate = {}
        for system in (ours, theirs):
            bench.serving[:] = [servers[system.label]]
            r = bench.load(servers[system.label], system, "sum", 32, seconds, 1, f"sum_round{i + 1}")
            rate[system.label] = r["rps"]
            print(f"round {i + 1} {system.label}: {r['rps']:.1f} q/s, p50 {r['p50_ms']:.0f} ms; CPU ms a request: "
                  f"load driver {r['cpu_load_ms']:.3f}, machine {r['cpu_machine_ms']:.2f}", flush=True)
        ratios.append(rate[ours.label] / rate[theirs.label])
        print(f"round {i + 1}: {ratios[-1]:.1f}x", flush=True)
    print(f"median of {rounds} rounds: {statistics.median(ratios):.1f}x ({', '.join(f'{x:.1f}' for x in ratios)})")
finally:
    for server in servers.values():
        server.stop()
    registry.unregister(peer_kind, ds.name)
    registry.close()
