"""Reproduce the paper's Table 3 (query statistics per N_size) on real weather data.

Builds an archive from the TMY3 files in ../shared/data/weather the way the paper
extended its data: every station-year is replayed for each year of 2011-2031, and
stations are replicated (each copy a separate station); loads it with the engine's
batch insert (Algorithm 1, splits included) for each N_size, then runs the paper's query
workload: a 4-D box over (time, temperature, humidity, illuminance), a 360-day window at
a uniformly random start, and aggregates sum and min of wind speed as separate runs. The
fixed ranges (temperature 10..35 C, humidity 20..80 %, illuminance 100..100,000 lx) are
chosen so about 1% of rows is selected on this data, as in the paper.

    python loadtest/table3.py --copies 3 --nsize 250 2000 --queries 50

Prints the Table 3 rows averaged per query, insert throughput and query latency.
Runs on the embedded store by default; GRIDAGG_STORE=hbase for HBase.
"""

from __future__ import annotations

import argparse
import csv
import itertools
import random
import statistics
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np

from gridagg.config import Settings
from gridagg.directory import GridDirectory
from gridagg.engine import GridEngine
from gridagg.schema import Dataset
from gridagg.store import open_store

WEATHER = Path(__file__).resolve().parents[2] / "shared" / "data" / "weather"
START = datetime(2011, 1, 1, tzinfo=timezone.utc)
END_YEAR = 2031
COLUMNS = ["Dry-bulb (C)", "RHum (%)", "GH illum (lx)", "Wspd (m/s)"]


def definition(name: str, n_size: int) -> Dataset:
    return Dataset.from_json({
        "name": name,
        "dimensions": [
            {"name": "time", "type": "time", "min": "2011-01-01T00:00:00Z", "max": "2032-01-01T00:00:00Z"},
            {"name": "temperature", "scale": 1, "min": -60, "max": 60},
            {"name": "humidity", "min": 0, "max": 100},
            {"name": "illuminance", "min": 0, "max": 150000},
        ],
        "measures": [{"name": "wind_speed", "scale": 1, "min": 0, "max": 100}],
        "grid": {"n_size": n_size, "n_threshold": 10 * n_size, "l_time": "360d"},
    })


def station_year(path: Path) -> tuple[str, np.ndarray]:
    """(station id, rows of [seconds into the year, temp*10, humidity, illuminance, wind*10])."""
    with open(path, newline="") as f:
        reader = csv.reader(f)
        station = next(reader)[0]
        header = next(reader)
        idx = [header.index(c) for c in COLUMNS]
        rows = []
        for r in reader:
            month, day, _ = (int(x) for x in r[0].split("/"))
            hour = int(r[1].split(":")[0])
            # Hour-ending local time; the year is normalised (TMY years mix source years).
            secs = (datetime(2011, month, day, tzinfo=timezone.utc) - START).total_seconds() + hour * 3600
            vals = [round(float(r[i]) * s) for i, s in zip(idx, (10, 1, 1, 10))]
            rows.append([int(secs) - 3600, *vals])
    return station, np.array(rows, dtype=np.int64)


def archive(copies: int):
    """Yield (element IDs, encoded rows) per station-year of the extended archive."""
    bases = [station_year(p) for p in sorted(WEATHER.glob("*.[cC][sS][vV]"))]
    for year in range(2011, END_YEAR + 1):
        shift = int((datetime(year, 1, 1, tzinfo=timezone.utc) - START).total_seconds())
        for copy in range(copies):
            for station, rows in bases:
                shifted = rows.copy()
                shifted[:, 0] += shift
                ids = [f"{station}.{copy}/{t}".encode() for t in shifted[:, 0].tolist()]
                yield ids, shifted


def load(engine: GridEngine, ds: Dataset, copies: int) -> tuple[int, float]:
    n = 0
    t0 = time.perf_counter()
    for ids, rows in archive(copies):
        engine.insert_encoded(ds, ids, rows)
        n += len(rows)
        if n % 175_200 < len(rows):
            print(f"  loaded {n:,} rows", file=sys.stderr, flush=True)
    return n, time.perf_counter() - t0


def workload(queries: int | None, seed: int):
    """The paper's query boxes: `queries` of them, or without end when None."""
    rng = random.Random(seed)
    span = (datetime(2032, 1, 1, tzinfo=timezone.utc) - START).total_seconds() - 360 * 86400
    for _ in (range(queries) if queries is not None else itertools.count()):
        start = START + timedelta(seconds=rng.uniform(0, span))
        end = start + timedelta(days=360)
        yield {
            "time": [start.isoformat(), end.isoformat()],
            "temperature": [10, 35],
            "humidity": [20, 80],
            "illuminance": [100, 100000],
        }


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--copies", type=int, default=3, help="copies of each station (rows = 367,920 x copies)")
    ap.add_argument("--nsize", type=int, nargs="+", default=[250, 2000], help="N_size values to compare")
    ap.add_argument("--queries", type=int, default=50, help="queries per aggregate")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args(argv)

    settings = Settings.from_env()
    engine = GridEngine(GridDirectory(settings.effective_pg_url), open_store(settings))
    table: dict[str, list] = {}
    for n_size in args.nsize:
        ds = definition(f"table3_n{n_size}", n_size)
        try:
            engine.drop_dataset(ds.name)
        except Exception:
            pass
        engine.create_dataset(ds)
        print(f"N_size={n_size}: loading", file=sys.stderr)
        rows, secs = load(engine, ds, args.copies)
        stats = {"sum": [], "min": []}
        for func in stats:
            for where in workload(args.queries, args.seed):
                stats[func].append(engine.query(ds.name, where, [f"{func}:wind_speed", "count"] if func == "sum"
                                                else [f"{func}:wind_speed"]))
        s, m = stats["sum"], stats["min"]
        mean = lambda xs: statistics.fmean(xs) if xs else 0.0  # noqa: E731
        sel = mean([r.count for r in s])
        table[n_size] = [
            f"{rows:,}", f"{rows / secs:,.0f}",
            f"{sel:,.0f} ({100 * sel / rows:.2f}%)",
            f"{mean([r.plan.reused_grids_before for r in s]):,.0f}",
            f"{mean([r.plan.reused_grids_after for r in s]):,.0f}",
            f"{mean([r.plan.rows_in_reused_grids for r in s]):,.0f}",
            f"{100 * mean([r.plan.rows_in_reused_grids / r.count for r in s if r.count]):.1f}%",
            f"{mean([r.plan.scanned_grids_before for r in s]):,.0f}",
            f"{mean([r.plan.scanned_grids_after for r in m]):,.0f}",
            f"{mean([r.plan.rows_in_scanned_grids for r in s]):,.0f}",
            f"{100 * mean([r.plan.skip_rate or 0 for r in m]):.1f}%",
            f"{mean([r.plan.total_grids for r in s]):,.0f}",
            f"{statistics.median([r.plan.elapsed_ms for r in s]):.1f}",
            f"{statistics.median([r.plan.elapsed_ms for r in m]):.1f}",
        ]
        engine.drop_dataset(ds.name)
    labels = [
        "rows loaded", "insert rows/s (Algorithm 1 batches)", "selected rows (selectivity)",
        "(1) reused grids, before 4.6.1", "(2) reused grids, after 4.6.1", "(3) rows in reused grids",
        "(4) reuse rate", "(5) scanned grids, before (sum)", "(6) scanned grids, after (min, 4.6.2)",
        "(7) rows in scanned grids (sum)", "(8) skip rate (min)", "(9) total grids",
        "median sum query ms", "median min query ms",
    ]
    print(f"\nstore: {settings.store}; {args.queries} queries per aggregate\n")
    print("| N_size | " + " | ".join(str(n) for n in table) + " |")
    print("|---|" + "---|" * len(table))
    for i, label in enumerate(labels):
        print(f"| {label} | " + " | ".join(table[n][i] for n in table) + " |")


if __name__ == "__main__":
    main()
