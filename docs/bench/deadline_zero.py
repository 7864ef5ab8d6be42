"""Answers within a deadline, in process, on the configured store (GRIDAGG_STORE).

From the tree alone (deadline 0): the p50 of each dashboard question (loadtest/dashboard.py)
and of 20 boxes of each of the paper's queries, and the relative width of their bounds
((hi - lo) / exact value, over every bounded value of a not-exact answer; exact values
and zero or empty exact values are left out), side by side with bounds over every cut
leaf (the walk without a budget: gridagg.planner.FRONTIER_GRIDS None), as before it had one.

With a short deadline (--deadline-ms, default 5): the paper's sum query, each of its 20
boxes asked --repeat times: the share of answers that came back exact, the median
relative width of the others' bounds, the p50 and max time to the answer, and the share
that came back past the deadline, and by how much.

    python docs/bench/deadline_zero.py DATASET
    GRIDAGG_STORE=hbase python docs/bench/deadline_zero.py DATASET --deadline-ms 5
    GRIDAGG_STORE=hbase python docs/bench/deadline_zero.py DATASET --short-only  # the short deadline alone

Prints Markdown tables. The dataset needs the dashboard's columns (time, temperature,
humidity, illuminance, longitude/latitude, wind_speed), e.g. one loaded with
ingest/examples/weather_generated.toml.
"""

import argparse
import os
import statistics
import time

from gridagg import planner
from gridagg.config import Settings
from gridagg.engine import GridEngine
from gridagg_loadtest import dashboard, workload

parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
parser.add_argument("dataset")
parser.add_argument("--deadline-ms", type=float, default=5.0, help="the short deadline's milliseconds (default 5)")
parser.add_argument("--repeat", type=int, default=5, help="times each box is asked with the short deadline")
parser.add_argument("--short-only", action="store_true", help="only the short deadline's table")
args = parser.parse_args()
name = args.dataset
engine = GridEngine.open(Settings.from_env())
ds = engine.dataset(name)
BUDGET = planner.FRONTIER_GRIDS


def run(body, deadline):
    if "step" in body:
        return engine.series(name, body.get("where"), body["aggregates"], body["step"], body.get("window"),
                             body.get("start"), body.get("end"), body.get("region"), deadline=deadline)
    return engine.query(name, body.get("where"), body["aggregates"], body.get("region"), deadline=deadline)


def p50(body, repeat):
    ts = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        run(body, 0)
        ts.append((time.perf_counter() - t0) * 1000)
    return statistics.median(ts)


def widths(approx, exact):
    """Relative widths of every bounded value of `approx` (a to_json answer) against the
    exact one."""
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


def summary(w):
    """(median, 90th percentile) of widths w (0 for none)."""
    if len(w) < 2:
        return (w[0], w[0]) if w else (0.0, 0.0)
    return statistics.median(w), statistics.quantiles(w, n=10, method="inclusive")[-1]


def line(label, bodies):
    repeat = 11 if len(bodies) > 1 else 21
    exact = [run(b, None).to_json(ds) for b in bodies]
    cells = []
    for budget in (BUDGET, None):
        planner.FRONTIER_GRIDS = budget
        ms = [p50(b, repeat) for b in bodies]
        w = [x for b, e in zip(bodies, exact) for x in widths(run(b, 0).to_json(ds), e)]
        med, p90 = summary(w)
        cells.append(f"{statistics.median(ms):.3f} | {max(ms):.3f} | {med:.4f} | {p90:.4f} | {len(w)}")
    planner.FRONTIER_GRIDS = BUDGET
    print(f"| {label} | " + " | ".join(cells) + " |", flush=True)


def short_deadline(bodies, ms, repeat):
    exact = [run(b, None).to_json(ds) for b in bodies]
    answers, w, took = 0, [], []
    exact_answers = 0
    for _ in range(repeat):
        for b, e in zip(bodies, exact):
            t0 = time.perf_counter()
            got = run(b, ms / 1000).to_json(ds)
            took.append((time.perf_counter() - t0) * 1000)
            answers += 1
            if got["exact"]:
                exact_answers += 1
            else:
                w += widths(got, e)
    med, p90 = summary(w)
    late = sorted(t - ms for t in took if t > ms)
    print(f"| paper's sum query (20 boxes x {repeat}), deadline_ms {ms:g} | {exact_answers}/{answers} "
          f"({exact_answers / answers:.0%}) | {med:.4f} | {p90:.4f} | {statistics.median(took):.2f} | "
          f"{max(took):.2f} | {len(late)}/{answers} | {statistics.median(late) if late else 0:.2f} |", flush=True)


print(f"dataset {name}, store {engine.store.kind}, load average {os.getloadavg()[0]:.2f}; p50 over 21 runs "
      f"(paper: median of 20 queries' p50s, 11 runs each)")
paper = {agg: [{"where": w, "aggregates": workload.AGGREGATES[agg]} for w in workload.paper_queries(20, 7)]
         for agg in ("sum", "min")}
if not args.short_only:
    print()
    print("| question | p50 ms | max p50 ms | width median | width p90 | bounded values "
          "| every cut leaf: p50 ms | max p50 ms | width median | width p90 | bounded values |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for q in dashboard.QUESTIONS:
        line(q.label, [q.body])
    for agg, bodies in paper.items():
        line(f"paper's {agg} query (20 boxes)", bodies)
print()
print("| question | exact | width median (not exact) | width p90 | p50 ms | max ms | past the deadline | "
      "by (median ms) |")
print("|---|---|---|---|---|---|---|---|")
short_deadline(paper["sum"], args.deadline_ms, args.repeat)
print(f"(load average {os.getloadavg()[0]:.2f} at the end; frontier budget {BUDGET} grids)")
