"""A/B of the Thrift gateway's HBase RPC client: CPU per paper sum of each JVM.
   python gw_ab.py NAME N ROUNDS"""
import sys, time, threading, itertools
from gridagg.config import Settings
from gridagg_hbase import launcher
from gridagg_loadtest import workload
from gridagg_loadtest.systems import engine_of
from gridagg_loadtest.cpu import cpu_seconds, machine_seconds
name, n, rounds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
settings = Settings.from_env()
base = dict(launcher.THRIFT_CLIENT_OPTIONS)
bodies = [workload.paper_body(w, "sum") for w in workload.paper_queries(200, 7)]
def restart(blocking):
    launcher.THRIFT_CLIENT_OPTIONS.clear(); launcher.THRIFT_CLIENT_OPTIONS.update(base)
    if blocking:
        launcher.THRIFT_CLIENT_OPTIONS["hbase.rpc.client.impl"] = "org.apache.hadoop.hbase.ipc.BlockingRpcClient"
    launcher._stop_one(settings, "thrift", grace=30); launcher.start(settings)
def drive(engine, count, threads=8):
    it = itertools.count()
    def work():
        while (i := next(it)) < count:
            b = bodies[i % len(bodies)]
            engine.query(name, b["where"], b["aggregates"])
    ts = [threading.Thread(target=work) for _ in range(threads)]
    [t.start() for t in ts]; [t.join() for t in ts]
import os
for r in range(rounds):
    for blocking in (False, True):
        restart(blocking)
        with engine_of(settings, "hbase") as engine:
            drive(engine, 1500)
            pids = {"master": launcher.running_pid(settings, "master"), "thrift": launcher.running_pid(settings, "thrift"), "client": os.getpid()}
            c0 = {k: cpu_seconds([p]) for k, p in pids.items()}; m0 = machine_seconds(); t0 = time.perf_counter()
            drive(engine, n)
            wall = time.perf_counter() - t0
            c1 = {k: cpu_seconds([p]) for k, p in pids.items()}; m1 = machine_seconds()
        per = {k: (c1[k] - c0[k]) / n * 1000 for k in pids}
        print(f"round {r+1} {'blocking' if blocking else 'netty   '}: {n/wall:.0f} q/s; CPU ms a sum: " + ", ".join(f"{k} {v:.3f}" for k, v in per.items()) + f", machine {(m1-m0)/n*1000:.3f}", flush=True)
restart(False)
