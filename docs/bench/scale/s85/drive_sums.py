"""Paper sums in process from 8 threads for SECONDS.  python drive_sums.py NAME SECONDS"""
import sys, time, threading
from gridagg.config import Settings
from gridagg_loadtest import workload
from gridagg_loadtest.systems import engine_of
name, seconds = sys.argv[1], float(sys.argv[2])
bodies = [workload.paper_body(w, "sum") for w in workload.paper_queries(200, 7)]
done = [0]
with engine_of(Settings.from_env(), "hbase") as engine:
    stop = time.monotonic() + seconds
    def work(k):
        i = k
        while time.monotonic() < stop:
            b = bodies[i % 200]; engine.query(name, b["where"], b["aggregates"]); i += 8; done[0] += 1
    ts = [threading.Thread(target=work, args=(k,)) for k in range(8)]
    [t.start() for t in ts]; [t.join() for t in ts]
print(done[0] / seconds, "q/s")
