"""CPU a paper sum costs gridagg's side (not HBase's region servers):
    python docs/bench/scale/sum_cpu.py STORE DATASET N            # in this process
    python docs/bench/scale/sum_cpu.py STORE DATASET N --served   # one API worker, one thread
asks N of 200 of the paper's sum boxes (seed 7) one after another, after 50 unrecorded
(20 served), and prints the time and CPU per question: this process's, or the API
server's processes' (/proc)."""
import os
import sys
import tempfile
import time
from pathlib import Path

from gridagg.config import Settings
from gridagg_loadtest import workload

store, name, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
settings = Settings.from_env().with_(store=store)
bodies = [workload.paper_body(w, "sum") for w in workload.paper_queries(200, 7)]


def process_cpu(pid: int) -> float:
    """CPU seconds of process `pid` and its children that are waited for."""
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return sum(int(v) for v in fields[11:15]) / os.sysconf("SC_CLK_TCK")


if "--served" in sys.argv:
    import requests

    from gridagg_loadtest.servers import Server, Shape
    from gridagg_loadtest.systems import System

    server = Server(settings, System(f"gridagg-{store}", name, "gridagg", store), Shape(1, 1), {},
                    Path(tempfile.mkdtemp(prefix="sum-cpu-")))
    try:
        url = f"{server.url}/v1/datasets/{name}/query"
        with requests.Session() as http:
            ask = lambda b: http.post(url, json=b).raise_for_status()  # noqa: E731
            for b in bodies[:20]:
                ask(b)
            pids = [server.proc.pid, *map(int, os.popen(f"pgrep -P {server.proc.pid}").read().split())]
            c0, t0 = sum(map(process_cpu, pids)), time.perf_counter()
            for i in range(n):
                ask(bodies[i % len(bodies)])
            took, cpu = time.perf_counter() - t0, sum(map(process_cpu, pids)) - c0
    finally:
        server.stop()
else:
    from gridagg.engine import GridEngine

    engine = GridEngine.open(settings)
    for b in bodies[:50]:
        engine.query(name, b["where"], b["aggregates"])
    c0, t0 = time.process_time(), time.perf_counter()
    for i in range(n):
        b = bodies[i % len(bodies)]
        engine.query(name, b["where"], b["aggregates"])
    took, cpu = time.perf_counter() - t0, time.process_time() - c0
print(f"{n} questions: {took / n * 1000:.2f} ms each, CPU {cpu / n * 1000:.3f} ms each")
