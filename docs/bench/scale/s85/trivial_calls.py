"""CPU per trivial Thrift call (a get of a missing row) in each JVM.  python trivial_calls.py TABLE N THREADS"""
import sys, os, time, threading, itertools
import happybase
from gridagg.config import Settings
from gridagg_hbase import launcher
from gridagg_loadtest.cpu import cpu_seconds, machine_seconds
table, n, threads = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
settings = Settings.from_env()
pool = happybase.ConnectionPool(threads, host="127.0.0.1", port=settings.hbase_port, autoconnect=True)
def drive(count):
    it = itertools.count()
    def work():
        with pool.connection() as c:
            t = c.table(table)
            while next(it) < count:
                t.row(b"\xff\xfe-missing")
    ts = [threading.Thread(target=work) for _ in range(threads)]
    [t.start() for t in ts]; [t.join() for t in ts]
drive(2000)
pids = {"master": launcher.running_pid(settings, "master"), "thrift": launcher.running_pid(settings, "thrift"), "client": os.getpid()}
c0 = {k: cpu_seconds([p]) for k, p in pids.items()}; m0 = machine_seconds(); t0 = time.perf_counter()
drive(n)
wall = time.perf_counter() - t0
c1 = {k: cpu_seconds([p]) for k, p in pids.items()}; m1 = machine_seconds()
print(f"{n/wall:.0f} calls/s; CPU ms a call: " + ", ".join(f"{k} {(c1[k]-c0[k])/n*1000:.3f}" for k in pids) + f", machine {(m1-m0)/n*1000:.3f}")
