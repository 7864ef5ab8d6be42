"""How long a new process takes to make its rollups (gridagg.rollups), and the answers
after: its day rollup for one year, its position rollup for the polygon over most
stations and a triangle over most of the map:
    python docs/bench/scale/rollup_build.py STORE DATASET
Each is asked four times; after each, the background work it started is waited for.
Prints each ask's time, the wait, the days or positions the answer added up (None: the
tree answered) and its count."""
import os
import sys
import time

os.environ["GRIDAGG_STORE"] = sys.argv[1]
from gridagg.config import Settings  # noqa: E402
from gridagg.engine import GridEngine  # noqa: E402
from gridagg_loadtest.dashboard import QUESTIONS, ask  # noqa: E402

engine = GridEngine.open(Settings.from_env())
name = sys.argv[2]
q = QUESTIONS[3]
engine.query(name, None, ["count"])  # the tree loaded
TRI = {"type": "Polygon", "coordinates": [[[-150, 25], [-70, 30], [-100, 60], [-150, 25]]]}
for label, asked in ((QUESTIONS[1].label, lambda: ask(engine, name, QUESTIONS[1])),
                     (q.label, lambda: ask(engine, name, q)),
                     ("triangle", lambda: engine.query(name, None, ["count", "avg:temperature", "max:wind_speed"], TRI))):
    for _ in range(4):
        t0 = time.perf_counter()
        r = asked()
        t = time.perf_counter() - t0
        engine.settle()
        s = time.perf_counter() - t0 - t
        print(f"{label[:30]:30s} ask {t * 1000:9.1f} ms  then background {s:6.2f} s  "
              f"days {r.plan.rollup_days}  positions {r.plan.rollup_positions}  count {r.values['count']}", flush=True)
