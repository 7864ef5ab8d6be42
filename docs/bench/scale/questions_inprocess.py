"""The dashboard's questions (loadtest/dashboard.py) asked in process, p50 of each:
    python docs/bench/scale/questions_inprocess.py STORE DATASET [REPEAT] [LABEL-PART]
STORE: embedded or hbase; REPEAT: runs after a warm-up (default 7); LABEL-PART: only the
questions whose label holds it. Prints each question's p50 and min in ms and its plan's
grids reused and scanned and rows scanned (or the positions added up from the position
rollup)."""
import os
import statistics
import sys
import time

os.environ["GRIDAGG_STORE"] = sys.argv[1]
from gridagg.config import Settings  # noqa: E402
from gridagg.engine import GridEngine  # noqa: E402
from gridagg_loadtest.dashboard import QUESTIONS, ask, settled  # noqa: E402

name = sys.argv[2]
repeat = int(sys.argv[3]) if len(sys.argv) > 3 else 7
part = sys.argv[4] if len(sys.argv) > 4 else ""
engine = GridEngine.open(Settings.from_env())
for q in QUESTIONS:
    if part not in q.label:
        continue
    plan = settled(engine, name, q).plan  # the position rollup made first
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        ask(engine, name, q)
        times.append((time.perf_counter() - t0) * 1000)
    print(f"{q.label[:50]:50s} p50 {statistics.median(times):8.1f} ms  min {min(times):8.1f}  reused "
          f"{plan.reused_grids_after:,} scanned {plan.scanned_grids_after:,} rows {plan.rows_in_scanned_grids:,}"
          + ("" if plan.rollup_positions is None else f" positions {plan.rollup_positions:,}"),
          flush=True)
