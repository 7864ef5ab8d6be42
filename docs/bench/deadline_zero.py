"""Answers from the tree alone (deadline 0), in process: the p50 of each dashboard
question (loadtest/dashboard.py) and of 20 boxes of each of the paper's queries, and the
relative width of their bounds ((hi - lo) / exact value, over every bounded value of a
not-exact answer; exact values and zero or empty exact values are left out).

    python docs/bench/deadline_zero.py DATASET      # the configured store (GRIDAGG_STORE)

Prints a Markdown table. The dataset needs the dashboard's columns (time, temperature,
humidity, illuminance, longitude/latitude, wind_speed), e.g. one loaded with
ingest/examples/weather_generated.toml.
"""

import statistics
import sys
import time

from gridagg.config import Settings
from gridagg.engine import GridEngine
from gridagg_loadtest import dashboard, workload

name = sys.argv[1]
engine = GridEngine.open(Settings.from_env())
ds = engine.dataset(name)


def run(body, deadline):
    if "step" in body:
        return engine.series(name, body.get("where"), body["aggregates"], body["step"], body.get("window"),
                             body.get("start"), body.get("end"), body.get("region"), deadline=deadline)
    return engine.query(name, body.get("where"), body["aggregates"], body.get("region"), deadline=deadline)


def p50(body, repeat=21):
    ts = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        run(body, 0)
        ts.append((time.perf_counter() - t0) * 1000)
    return statistics.median(ts)


def widths(body):
    approx, exact = run(body, 0).to_json(ds), run(body, None).to_json(ds)
    out = []

    def one(a, e):
        for k, (lo, hi) in (a.get("bounds") or {}).items():
            v = e["results"].get(k)
            if v not in (None, 0) and lo is not None and hi is not None:
                out.append((hi - lo) / abs(v))
    if "points" in approx:
        for a, e in zip(approx["points"], exact["points"]):
            one(a, e)
    else:
        one(approx, exact)
    return out



def line(label, bodies):
    ms = [p50(b, 11 if len(bodies) > 1 else 21) for b in bodies]
    w = [x for b in bodies for x in widths(b)]
    w.sort()
    med = statistics.median(w) if w else 0.0
    p90 = w[int(0.9 * (len(w) - 1))] if w else 0.0
    print(f"| {label} | {statistics.median(ms):.3f} | {max(ms):.3f} | {med:.4f} | {p90:.4f} | {len(w)} |", flush=True)


print(f"dataset {name}; p50 over 21 runs (paper: median of 20 queries' p50s, 11 runs each)")
print("| question | p50 ms | max p50 ms | width median | width p90 | bounded values |")
print("|---|---|---|---|---|---|")
for q in dashboard.QUESTIONS:
    line(q.label, [q.body])
for agg in ("sum", "min"):
    bodies = [{"where": w, "aggregates": workload.AGGREGATES[agg]} for w in workload.paper_queries(20, 7)]
    line(f"paper's {agg} query (20 boxes)", bodies)
