"""One dashboard question asked over and over in process, for a profile of the region server.

    GRIDAGG_CONFIG=... python docs/bench/scale/s86/question_loop.py STORE NAME SECONDS

asks "temperature 0..30 and humidity 30..100, all years" (loadtest/dashboard.py) of
dataset NAME on STORE once unrecorded, then for SECONDS, and prints how many answers came
and the mean time of one; with --explain, one answer's plan instead.
"""

import json
import sys
import time

from gridagg.config import Settings
from gridagg_loadtest.systems import engine_of

WHERE = {"temperature": [0, 30], "humidity": [30, 100]}
AGGREGATES = ["count", "avg:temperature", "max:wind_speed"]

store, name, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
with engine_of(Settings.from_env(), store) as engine:
    engine.query(name, WHERE, AGGREGATES)
    if "--explain" in sys.argv:
        plan = vars(engine.query(name, WHERE, AGGREGATES, explain=True).plan)
        print(json.dumps({k: v for k, v in plan.items() if k != "grids"}, default=str, indent=1))
        sys.exit()
    n, began = 0, time.perf_counter()
    stop = time.monotonic() + seconds
    while time.monotonic() < stop:
        engine.query(name, WHERE, AGGREGATES)
        n += 1
    print(f"{n} answers, {(time.perf_counter() - began) / n * 1000:.1f} ms each")
