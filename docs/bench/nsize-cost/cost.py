"""What a query pays per cut grid and per row read, in process: the paper's sum query
(20 boxes, loadtest/workload.py) on each dataset given, each box run REPEAT times warm.

    python docs/bench/nsize-cost/cost.py [--repeat 30] DATASET...   # the configured store

Per dataset: the p50 wall time of a query, the cut grids and the rows in them per query,
and the CPU per query of this process and, on HBase, of the region server and of the
Thrift gateway (each JVM's CPU time in /proc before and after a box's runs; the local
HBase's pid files). Then a least-squares fit over every (dataset, box) of
    cost = per_call + per_grid x cut grids + per_row x rows in cut grids
for the wall time and for each process' CPU: what a cut grid costs next to its rows.
"""

import argparse
import os
import statistics
import time
from pathlib import Path

import numpy as np

from gridagg.config import Settings
from gridagg.engine import GridEngine
from gridagg_loadtest import workload

TICK = os.sysconf("SC_CLK_TCK")


def jvm_cpu(pid: int | None) -> float:
    """Seconds of CPU (user + system) process `pid` has used; 0 without one."""
    if pid is None:
        return 0.0
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def pid_of(settings: Settings, name: str) -> int | None:
    path = Path(settings.data_dir) / "hbase" / "run" / f"{name}.pid"
    return int(path.read_text().split()[0]) if path.exists() else None


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("datasets", nargs="+")
    p.add_argument("--repeat", type=int, default=30)
    p.add_argument("--boxes", type=int, default=20)
    args = p.parse_args()
    settings = Settings.from_env()
    engine = GridEngine.open(settings)
    hbase = engine.store.kind == "hbase"
    pids = {"rs": pid_of(settings, "master") if hbase else None, "thrift": pid_of(settings, "thrift") if hbase else None}
    boxes = workload.paper_queries(args.boxes, 7)
    agg = workload.AGGREGATES["sum"]
    samples = []  # (grids, rows, wall ms, python cpu ms, rs cpu ms, thrift cpu ms)
    print(f"store {engine.store.kind}; {args.boxes} boxes x {args.repeat} runs each, warm")
    print("| dataset | leaves | p50 ms | cut grids/query | rows in them/query | python CPU ms | region server CPU ms | gateway CPU ms |")
    print("|---|---|---|---|---|---|---|---|")
    for name in args.datasets:
        for where in boxes[:5]:  # warm-up: JIT, caches
            engine.query(name, where, agg)
        rows_per_ds = []
        for where in boxes:
            walls = []
            cpu0 = (time.process_time(), jvm_cpu(pids["rs"]), jvm_cpu(pids["thrift"]))
            for _ in range(args.repeat):
                t0 = time.perf_counter()
                answer = engine.query(name, where, agg)
                walls.append((time.perf_counter() - t0) * 1000)
            cpu1 = (time.process_time(), jvm_cpu(pids["rs"]), jvm_cpu(pids["thrift"]))
            plan = answer.plan
            cpu = [(b - a) * 1000 / args.repeat for a, b in zip(cpu0, cpu1)]
            row = (plan.scanned_grids_after, plan.rows_in_scanned_grids, statistics.median(walls), *cpu)
            samples.append(row)
            rows_per_ds.append(row)
        m = np.array(rows_per_ds)
        leaves = plan.total_grids
        print(f"| {name} | {leaves} | {np.median(m[:, 2]):.2f} | {m[:, 0].mean():.0f} | {m[:, 1].mean():.0f} | "
              f"{m[:, 3].mean():.2f} | {m[:, 4].mean():.2f} | {m[:, 5].mean():.2f} |", flush=True)
    fit(np.array(samples))


def fit(s: np.ndarray) -> None:
    """Least squares of each cost on [1, grids, rows] (non-negative where it matters)."""
    x = np.column_stack([np.ones(len(s)), s[:, 0], s[:, 1]])
    print()
    print("| cost | per call ms | per cut grid us | per row ns | grid = rows |")
    print("|---|---|---|---|---|")
    for j, label in ((2, "wall"), (3, "python CPU"), (4, "region server CPU"), (5, "gateway CPU")):
        coef, *_ = np.linalg.lstsq(x, s[:, j], rcond=None)
        ratio = coef[1] / coef[2] if coef[2] > 0 else float("inf")
        print(f"| {label} | {coef[0]:.3f} | {coef[1] * 1000:.2f} | {coef[2] * 1e6:.1f} | {ratio:.0f} |")


if __name__ == "__main__":
    main()
