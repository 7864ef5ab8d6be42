"""gridagg served at several shapes at once, runs alternated (each round in the other
order than the last; session 88 added that and CLIENTS).
   python shapes_ab.py STORE=NAME ROUNDS SECONDS SHAPE [SHAPE...] [--clients N]   (N: 32)"""
import argparse, statistics, sys, tempfile
from pathlib import Path
from gridagg.config import Settings
from gridagg_loadtest.prewarm import prewarm
from gridagg_loadtest.runs import Bench
from gridagg_loadtest.scale import SERVED_MAX_GRIDS, SERVED_MAX_SCAN_ROWS
from gridagg_loadtest.servers import Server, Shape
from gridagg_loadtest.systems import System
args = sys.argv[1:]
clients = int(args.pop(args.index("--clients") + 1)) if "--clients" in args else 32
args = [a for a in args if a != "--clients"]
dataset, rounds, seconds, *shapes = args
store, name = dataset.split("=", 1); rounds, seconds = int(rounds), float(seconds)
settings = Settings.from_env().with_(max_grids=SERVED_MAX_GRIDS, max_scan_rows=SERVED_MAX_SCAN_ROWS)
knobs = argparse.Namespace(clients=[clients], aggs=["sum"], requests=100_000, seconds=seconds, seed=1, warmup_runs=40,
                           warmup_seconds=5, tune_seconds=5)
out = Path(tempfile.mkdtemp(prefix="gridagg-shapes-"))
bench = Bench(settings, knobs, out)
ours = System(f"gridagg-{store}", name, "gridagg", store)
servers = {}
try:
    for s in shapes:
        servers[s] = Server(settings, ours, Shape.parse(s), {}, out / "logs")
    prewarm(settings, ours)
    for s in shapes:
        bench.serving[:] = [servers[s]]
        print(s, "warm-up", [round(x) for x in bench.warm_up(servers[s], ours, "sum")], flush=True)
    rates = {s: [] for s in shapes}
    for i in range(rounds):
        for s in shapes if i % 2 == 0 else shapes[::-1]:
            bench.serving[:] = [servers[s]]
            r = bench.load(servers[s], ours, "sum", clients, seconds, 1, f"r{i}_{s}")
            rates[s].append(r["rps"])
            print(f"round {i+1} {s}: {r['rps']:.0f} q/s p50 {r['p50_ms']:.0f} ms; CPU ms: " +
                  ", ".join(f"{g} {r[f'cpu_{g}_ms']:.2f}" for g in ("api", "hbase", "load", "machine") if f"cpu_{g}_ms" in r), flush=True)
    for s in shapes:
        print(s, "median", statistics.median(rates[s]), [round(x) for x in rates[s]])
finally:
    for srv in servers.values():
        srv.stop()
