"""`gridagg bench`: the paper's experiment, gridagg against its peers (PostgreSQL alone,
HBase alone, DuckDB, ClickHouse through chDB), each set up as its own experts would,
side by side in one run.

Steps (each prints its progress to stderr), a module each:
1. archive.py: generate the archive with the ingest generator (ingest/generate.py: a
   network of stations spread over the map, made from the real station-years of
   ../shared/data/weather, 2011-2031) as Parquet, and encode it once with the ingest
   job's reader and encoder (loadtest/bench/paper.toml: the paper's four query dimensions and
   wind speed); a row it cannot encode stops the bench;
2. systems.py: load the encoded rows into gridagg (one dataset per N_size and store,
   the Spark bulk load) and into each peer (loadtest/peers), in time order, timing each
   (Table 2); PostgreSQL alone keeps the index its EXPLAIN ANALYZE shows fastest on the
   workload, and runs with shared_buffers a quarter of the memory (peers/pg_server.py:
   set for the run, set back after it);
3. inprocess.py: the paper's Table 3 statistics and the measured selectivity of every
   gridagg dataset; the workload timed in process, warm, for gridagg's planner and the
   peers that run in process (DuckDB, ClickHouse) at each of their thread settings;
4. runs.py: each system served on 127.0.0.1 (servers.py), offered the same shapes of
   workers x threads, at the shape and the values of its own knobs its trials find
   fastest (tuning.py); its data read into its caches (prewarm.py); warmed
   up; its answers to the check queries compared with every other's; and loaded with
   the bench's driver (loadtest/bench/loadgen.go: closed-loop clients, every answer that
   completes inside a run's window counted) at each client count, min and sum as
   separate runs, measuring the CPU each process group spends per request;
5. report.py, plots.py: the report, README.md with its PNG plots, in --docs (by default
   docs/bench/paper of the checkout, replaced on each run); runs.csv, load.csv,
   table3.csv, the driver's results and the servers' logs in --out.

--dashboard asks dashboard.py's questions instead (its report: docs/bench/dashboard).
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

from gridagg.config import Settings
from gridagg.query.spec import QuerySpec

from ..peers import KINDS, open_peer
from ..peers.pg_server import server_settings
from ..peers.pg_server import wanted as pg_wanted
from ..peers.registry import PeerRegistry
from ..reports import bench_docs, bench_out, machine, stamp
from . import dashboard, workload
from .archive import build_archive, encoded_count
from .inprocess import inprocess_p50, table3_stats
from .log import log
from .report import PAPER_MAX_NSIZE, write_report
from .runs import Bench, disagreements
from .servers import Shape
from .systems import (
    System,
    bench_settings,
    dataset_name,
    drop_all,
    load_gridagg,
    load_peer,
)

DEFAULT_ROWS = 1_000_000
# `gridagg serve`'s default on the embedded store (2 x 1); 8 requests at once, as on HBase (2 x 4), split otherwise.
SHAPES = [Shape(2, 1), Shape(2, 4), Shape(4, 2), Shape(8, 1)]
SAMPLE_BOXES = 5  # workload boxes a peer prepares for (PostgreSQL's index trials)


def load_all(settings: Settings, args) -> tuple[list[System], int]:
    """Steps 1 and 2: the archive, and every system loaded with it. Returns the systems
    and the archive's row count."""
    from gridagg_ingest.job import spark_session, stop_spark

    systems: list[System] = []
    spark = spark_session(settings=bench_settings(settings, args.stores))
    workdir = Path(tempfile.mkdtemp(prefix="gridagg-bench-archive-"))
    try:
        try:
            log(f"generating and encoding the archive: {args.rows:,} rows")
            encoded = build_archive(spark, args.rows, args.seed, workdir, stations=args.stations)
            for store in args.stores:
                for n in args.nsize or PAPER_SWEEP:
                    log(f"loading gridagg ({store} store) N_size={n}, N_threshold={10 * n}, L_time=360d")
                    s = load_gridagg(settings, spark, store,
                                     workload.definition(dataset_name(args.prefix, store, n), n), encoded)
                    log(f"  {s.rows:,} rows in {s.load_seconds:.1f} s = {s.load_rate:,.0f} rows/s, "
                        f"{s.stats['grids']:,} leaves")
                    systems.append(s)
        finally:
            stop_spark(spark)
        total = encoded_count(encoded)
        log(f"archive: {total:,} rows")
        samples = workload.paper_queries(SAMPLE_BOXES, args.seed + 77)
        for kind in args.peers:
            s = load_peer(settings, kind, workload.definition(args.prefix, 1000), encoded, total, args.batch, samples)
            log(f"  {s.rows:,} rows in {s.load_seconds:.1f} s = {s.load_rate:,.0f} rows/s"
                + (f", index {s.stats['prepared']['index']}" if s.stats["prepared"].get("index") else ""))
            systems.append(s)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return systems, total


def explain_pg(settings: Settings, system: System, seed: int) -> str:
    """EXPLAIN (ANALYZE, BUFFERS) of one sum query of the workload by PostgreSQL alone at
    its chosen knobs."""
    reg = PeerRegistry(settings.effective_pg_url)
    peer = open_peer("pg", settings, **dict(system.stats["setting"].knobs))
    try:
        ds = reg.lookup("pg", system.dataset)
        return peer.explain(ds, QuerySpec.parse(ds, workload.paper_queries(1, seed)[0], workload.AGGREGATES["sum"]))
    finally:
        peer.close()
        reg.close()


def run(settings: Settings, args) -> dict:
    """The whole bench; returns {"systems", "runs", "disagreements", "report"}."""
    if args.dashboard:
        return dashboard.run(settings, args)
    started = time.time()
    out = bench_out(settings, args.out, "paper").resolve()
    out.mkdir(parents=True, exist_ok=True)
    docs = bench_docs(args.docs, "paper", out)
    wanted = pg_wanted(args.peers, args.pg_shared_buffers)
    with server_settings(settings, wanted) as pg_server:
        if wanted:
            log(f"PostgreSQL server settings for this run: {pg_server}")
        systems, total = load_all(settings, args)
        stat_queries = workload.paper_queries(args.stat_queries, args.seed + 999)
        for s in systems:
            if s.kind == "gridagg":
                log(f"Table 3 statistics: {s.label}")
                t3 = s.stats["table3"] = table3_stats(settings, s, stat_queries, total)
                log(f"  selectivity {t3['selectivity_pct']:.2f}%, reuse {t3['reuse_rate_pct']:.1f}%, "
                    f"skip {t3['skip_rate_min_pct']:.1f}%, {t3['total_grids']:,.0f} grids")
        log("in-process p50: gridagg's planner and the in-process peers, warm")
        inprocess = inprocess_p50(settings, systems, stat_queries, workload.paper_queries(args.warmup, args.seed + 555))
        bench = Bench(settings, args, out)
        check = workload.paper_queries(args.check_queries, args.seed + 7)
        runs = bench.measure(systems, args.shapes, check)
        explain = "".join(explain_pg(settings, s, args.seed + 11) for s in systems if s.kind == "pg")
        disagree = disagreements(systems)
        log("all systems agree on the check queries" if not disagree else
            f"{len(disagree)} disagreements, e.g. {disagree[0]}")
        meta = {"command": args.command_line, "machine": machine(), "shapes": args.shapes, "pg_server": pg_server,
                "pg_server_set": bool(wanted and not settings.pg_url),
                "started": stamp(started), "minutes": (time.time() - started) / 60, "rows": total,
                "inprocess": inprocess, "explain": explain}
        report = write_report(out, docs, args, meta, systems, runs, disagree)
        log(f"report: {report}")
        if not args.keep:
            drop_all(settings, systems)
    return {"systems": systems, "runs": runs, "disagreements": disagree, "report": report}


def shape(text: str) -> Shape:
    """--shapes' values: 'WxT' -> Shape, or the reason it is not one."""
    try:
        return Shape.parse(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


# The N_size sweep by default: the paper's sizes and two larger ones.
PAPER_SWEEP = [50, 125, 250, 500, 1000, 2000, 4000, 8000, 16000, 32000]


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--rows", type=int, default=DEFAULT_ROWS, help=f"rows of the generated archive (default {DEFAULT_ROWS:,})")
    p.add_argument("--stations", type=int,
                   help="stations of the generated archive (default the generator's: about three years of hours each)")
    p.add_argument("--nsize", type=int, nargs="+",
                   help="N_size sweep (N_threshold = 10 x N_size, L_time = 360 days; default: the paper's "
                        f"50..{PAPER_MAX_NSIZE} and two larger sizes, which answer faster on few cores; with "
                        "--dashboard, the first alone, by default the one gridagg chooses for the archive as "
                        "`gridagg ingest` does)")
    p.add_argument("--clients", type=int, nargs="+", default=[1, 8, 32, 96], help="concurrent clients per run")
    p.add_argument("--aggs", nargs="+", default=["min", "sum"], choices=["min", "sum"])
    p.add_argument("--stores", nargs="+", default=["embedded"], choices=["embedded", "hbase"],
                   help="gridagg cell stores to measure (default embedded)")
    p.add_argument("--peers", nargs="*", default=list(KINDS), choices=KINDS,
                   help="systems without the grid to measure against (default all: PostgreSQL alone, HBase "
                        "alone, DuckDB, ClickHouse through chDB)")
    p.add_argument("--shapes", nargs="+", type=shape, default=SHAPES, metavar="WxT",
                   help="the server shapes (workers x threads) every system is offered and tried at; each serves "
                        f"at its fastest (default {' '.join(map(str, SHAPES))})")
    p.add_argument("--tune-seconds", type=float, default=5,
                   help="seconds of each setting's trial run (sum at the most clients; default 5)")
    p.add_argument("--pg-shared-buffers", metavar="SIZE",
                   help="PostgreSQL's shared_buffers for the run (restarts the local server, and again after; "
                        "default a quarter of the memory, as its docs advise); 'keep' leaves the server as it is")
    p.add_argument("--requests", type=int, default=2000, help="most answers counted per run (default 2000)")
    p.add_argument("--seconds", type=float, default=30, help="most seconds per run (default 30)")
    p.add_argument("--rounds", type=int, default=3,
                   help="recorded runs of each aggregate and client count per system, the systems taking turns; "
                        "each system's figure is its median round (default 3)")
    p.add_argument("--warmup-runs", type=int, default=40,
                   help="most unrecorded warm-up runs per system and aggregate, at the most clients, before "
                        "its recorded runs; they stop once the rate stops rising (the last 3 runs not 3%% "
                        "faster on average than the 3 before them). Default 40; 0: none")
    p.add_argument("--warmup-seconds", type=float, default=5,
                   help="most seconds of each warm-up run (default 5; its answers are bounded by --requests)")
    p.add_argument("--warmup", type=int, default=500,
                   help="boxes each system answers before its in-process timing (default 500)")
    p.add_argument("--stat-queries", type=int, default=50, help="queries for the Table 3 statistics")
    p.add_argument("--check-queries", type=int, default=5, help="queries every system must agree on")
    p.add_argument("--batch", type=int, default=8760,
                   help="rows per peer load batch (default 8760, a station-year)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--prefix", default="bench", help="dataset name prefix (default bench)")
    p.add_argument("--out", metavar="DIR",
                   help="where the run's data goes: runs.csv, load.csv, table3.csv, the load driver's results and "
                        "logs, the servers' logs (default <data dir>/bench/paper, or .../dashboard with --dashboard)")
    p.add_argument("--docs", metavar="DIR",
                   help="where the report goes, README.md and its plots, replacing the previous run's (default "
                        "docs/bench/paper of the checkout, or docs/bench/dashboard with --dashboard; installed "
                        "without a checkout: --out)")
    p.add_argument("--keep", action="store_true", help="keep the loaded datasets afterwards")
    p.add_argument("--dashboard", action="store_true",
                   help="instead of the paper's workload: ask the dashboard questions of loadtest/bench/dashboard.py "
                        "of gridagg (freshly loaded, N_size as --nsize says) and the in-process peers, side by side")
    p.add_argument("--repeat", type=int, default=11,
                   help="runs per question in-process with --dashboard (p50 is reported; default 11)")
