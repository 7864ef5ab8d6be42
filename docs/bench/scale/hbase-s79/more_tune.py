"""The bench's tuning continued on a kept dataset, for the questions that read rows.

    python docs/bench/scale/hbase-s79/more_tune.py MINUTES

Times the dashboard's two row-reading questions on HBase dataset net100hs (gridagg alone,
in process, as the bench does: gridagg_loadtest.dashboard.measure, p50 of 5 warm runs),
tunes it MINUTES more with the bench's own training questions
(gridagg_loadtest.scale.tune_to_workload), and times them again.
"""
import sys

from gridagg.config import Settings
from gridagg_loadtest import dashboard, scale
from gridagg_loadtest.systems import engine_of

NAME = "net100hs"
QUESTIONS = [q for q in dashboard.QUESTIONS if "humidity" in q.label or "monthly" in q.label]


def timed(settings: Settings) -> None:
    with engine_of(settings, "hbase") as engine:
        for row in dashboard.measure(engine, NAME, {}, 5, QUESTIONS):
            print(f"  {row['question']}: {row['plan'].rows_in_scanned_grids:,} rows read", flush=True)


settings = Settings.from_env()
print("before", flush=True)
timed(settings)
scale.tune_to_workload(settings, "hbase", NAME, 248, 1 + scale.TRAINING_SEED, float(sys.argv[1]))
print("after", flush=True)
timed(settings)
