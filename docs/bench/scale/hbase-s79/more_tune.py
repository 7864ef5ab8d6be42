"""Session 79: the kept net100hs tuned 12 more minutes; the dashboard's row-reading
questions timed before and after (gridagg alone, in process, median of 5 warm)."""
import statistics, sys, time
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
                t = time.perf_counter(); r = dashboard.ask(engine, NAME, q); ms.append(1000 * (time.perf_counter() - t))
            print(f"  {q.label}: {statistics.median(ms):.2f} ms, answer {dashboard.values_of(r)[:1]}", flush=True)

print("before", flush=True); timed()
print(scale.tune_to_workload(settings, "hbase", NAME, 248, 1 + scale.TRAINING_SEED, float(sys.argv[1])), flush=True)
print("after", flush=True); timed()
