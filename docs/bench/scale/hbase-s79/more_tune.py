"""The bench's tuning continued on a kept dataset, for the questions that read rows.

    python docs/bench/scale/hbase-s79/more_tune.py MINUTES

Times the dashboard's two row-reading questions on HBase dataset net100hs (gridagg alone,
in process, median of 5 warm runs), tunes it MINUTES more with the bench's own training
questions (gridagg_loadtest.scale.tune_to_workload), and times them again.
"""
import statistics
import sys
import time

from gridagg.config import Settings
from gridagg_loadtest import dashboard, scale
from gridagg_loadtest.systems import engine_of

settings = Settings.from_env()
NAME = "net100hs"
picked = [q for q in dashboard.QUESTIONS if "humidity" in q.label or "monthly" in q.label]

def timed():
    with engine_of(settings, "hbase") as engine:
        for q in picked:
            dashboard.ask(engine, NAME, q)
            ms = []
            for _ in range(5):
                t = time.perf_counter()
                r = dashboard.ask(engine, NAME, q)
                ms.append(1000 * (time.perf_counter() - t))
            print(f"  {q.label}: {statistics.median(ms):.2f} ms, answer {dashboard.values_of(r)[:1]}", flush=True)

print("before", flush=True)
timed()
print(scale.tune_to_workload(settings, "hbase", NAME, 248, 1 + scale.TRAINING_SEED, float(sys.argv[1])), flush=True)
print("after", flush=True)
timed()
