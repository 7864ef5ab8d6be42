"""`gridagg bench`: the paper's experiment, gridagg vs PostgreSQL alone vs HBase alone,
side by side in one run.

Steps (each prints its progress to stderr):
1. generate the extended real-weather archive with the ingest generator
   (ingest/generate.py: every TMY3 station-year of ../shared/data/weather put into each
   year 2011-2031, stations replicated until --rows) as Parquet, and encode it once with
   the ingest job's reader and encoder (loadtest/paper.toml: the paper's four query
   dimensions and wind speed); a row it cannot encode stops the bench;
2. load the encoded rows into gridagg (one dataset per N_size and store, with the Spark
   bulk load of the ingest job) and into both baselines, in time order (PostgreSQL COPY
   + B-tree; HBase batched puts), timing each (Table 2);
3. run the paper's workload in-process on every gridagg dataset for the Table 3
   statistics and the measured selectivity; time it in-process, warm, against DuckDB on
   the same boxes; and check that all systems agree on the answers of a sample of the
   workload;
4. serve everything as `gridagg serve` does (granian) on 127.0.0.1 and load it with the
   bench's load driver (loadtest/loadgen.go: closed-loop clients) at each client count,
   min and sum as separate runs, each bounded by requests and seconds, measuring the CPU
   each process group spends per request;
5. write report.md, runs.csv, load.csv, table3.csv and PNG plots to --out.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from gridagg_api.cli import default_threads, default_workers, server_argv
from gridagg.baselines import BaselineRegistry, open_backend
from gridagg.config import Settings
from gridagg.directory import GridDirectory
from gridagg.engine import GridEngine
from gridagg.errors import UnknownDataset
from gridagg.query import QuerySpec
from gridagg.store import open_store

from . import workload
from .cpu import CpuMeter
from .driver import run_load

ROOT = Path(__file__).resolve().parents[1]
WEATHER = ROOT.parent / "shared" / "data" / "weather"
# Every source station-year once in every year 2011-2031: 2 x 21 x 8,760 rows.
ONE_COPY = 367_920
PAPER_MAX_NSIZE = 8000  # the largest N_size of the paper's sweep
BASELINE_NAMES = {"pg": "PostgreSQL alone", "hbase": "HBase alone", "duckdb": "DuckDB"}


def log(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- archive


def build_archive(spark, rows: int, seed: int, workdir: Path, cfg=None) -> Path:
    """Generate `rows` rows (ingest.generate) under workdir and encode them for the data
    space of ingest config `cfg` (default: the paper's): returns a Parquet directory of
    encoded rows (`_eid`, c0..), what ingest.job.load_encoded reads. Raises when a row is
    quarantined: every system must get every row."""
    from pyspark.sql import functions as F

    from gridagg_ingest.encode import encode
    from gridagg_ingest.generate import generate
    from gridagg_ingest.readers import read_source

    files = generate([str(WEATHER)], rows, str(workdir / "generated"), "parquet", seed,
                     progress=lambda m: log(f"  generate: {m}"))
    cfg = cfg or workload.paper_config("archive", 1000)
    enc = encode(read_source(spark, cfg, files), cfg).persist()  # read and encoded once
    cols = [f"c{i}" for i in range(len(cfg.dataset.columns))]
    path = workdir / "encoded"
    enc.filter(F.col("_reason").isNull()).select("_eid", *cols).write.mode("overwrite").parquet(str(path))
    bad = enc.filter(F.col("_reason").isNotNull()).select("_file", "_reason").limit(3).collect()
    enc.unpersist()
    if bad:
        raise RuntimeError(f"the generated archive has rows the data space refuses, e.g. {bad}")
    shutil.rmtree(workdir / "generated")
    return path


def read_encoded(path: Path) -> tuple[list[bytes], np.ndarray]:
    """(element IDs, encoded rows) of an encoded Parquet directory, in time order (as an
    archive arrives, and the baselines' best case: PostgreSQL's heap follows its index)."""
    import pyarrow.parquet as pq

    table = pq.read_table(path)
    values = np.stack([table.column(c).to_numpy() for c in table.column_names if c != "_eid"], axis=1)
    order = np.argsort(values[:, 0], kind="stable")
    eids = table.column("_eid").to_pylist()
    return [eids[i].encode() for i in order.tolist()], values[order].astype(np.int64)


def batches(ids: list[bytes], values: np.ndarray, size: int):
    for s in range(0, len(values), size):
        yield ids[s : s + size], values[s : s + size]


# --------------------------------------------------------------------------- systems


@dataclass
class System:
    """One thing measured: a gridagg dataset (store, N_size) or a baseline view."""

    label: str
    dataset: str
    kind: str  # "gridagg" or "pg" / "hbase"
    store: str | None = None
    n_size: int | None = None
    rows: int = 0
    load_seconds: float = 0.0
    stats: dict = field(default_factory=dict)

    @property
    def load_rate(self) -> float:
        return self.rows / self.load_seconds if self.load_seconds else 0.0


def bench_settings(settings: Settings, stores: list[str]) -> Settings:
    """The settings the bench's Spark session is made for: with the HBase store among
    `stores`, its loads into HBase bulk-load HFiles (the Java half is on the session's
    classpath only when the session is made for it)."""
    return settings.with_(store="hbase") if "hbase" in stores else settings


def load_gridagg(settings: Settings, spark, store: str, ds, encoded: Path) -> System:
    """Bulk-load the encoded archive into dataset `ds` (made anew) on `store` with the
    Spark job (ingest.job.load_encoded)."""
    from gridagg_ingest.job import Progress, load_encoded

    s = settings.with_(store=store)
    engine = GridEngine(GridDirectory(s.effective_pg_url), open_store(s))
    try:
        engine.drop_dataset(ds.name)
    except UnknownDataset:
        pass
    finally:
        engine.store.close()
        engine.directory.close()
    summary = load_encoded(spark, s, ds, spark.read.parquet(str(encoded)), progress=Progress(quiet=True))
    n_size = ds.grid.n_size
    system = System(f"gridagg-{store} N={n_size}", ds.name, "gridagg", store, n_size, summary.loaded, summary.seconds)
    system.stats["grids"] = summary.leaves_after
    return system


def dataset_name(prefix: str, store: str, n_size: int | None = None) -> str:
    """The name a bench run gives its gridagg dataset of a store (and N_size)."""
    return f"{prefix}_{'hb' if store == 'hbase' else 'em'}" + (f"_n{n_size}" if n_size is not None else "")


def load_baseline(settings: Settings, kind: str, source: str, ids, values, batch: int) -> System:
    reg = BaselineRegistry(settings.effective_pg_url)
    backend = open_backend(kind, settings)
    try:
        ds = reg.register(workload.definition(source, 1000), kind, 0, None)
        backend.create(ds)
        log(f"  {kind} alone: loading {len(values):,} rows")
        t0 = time.perf_counter()
        n = backend.load(ds, batches(ids, values, batch))
        secs = time.perf_counter() - t0
        reg.register(workload.definition(source, 1000), kind, n, secs)
        return System(f"{kind}-alone", ds.name, kind, rows=n, load_seconds=secs)
    finally:
        backend.close()
        reg.close()


# --------------------------------------------------------------------------- statistics


def table3_stats(settings: Settings, system: System, queries: list[dict], total_rows: int) -> dict:
    """The paper's Table 3 quantities averaged over the workload, in-process."""
    engine = GridEngine(GridDirectory(settings.effective_pg_url), open_store(settings.with_(store=system.store)))
    try:
        s = [engine.query(system.dataset, w, workload.AGGREGATES["sum"]) for w in queries]
        m = [engine.query(system.dataset, w, workload.AGGREGATES["min"]) for w in queries]
    finally:
        engine.store.close()
        engine.directory.close()
    mean = lambda xs: statistics.fmean(xs) if xs else 0.0  # noqa: E731
    sel = mean([r.count for r in s])
    return {
        "selected_rows": sel,
        "selectivity_pct": 100 * sel / total_rows if total_rows else 0.0,
        "reused_before": mean([r.plan.reused_grids_before for r in s]),
        "reused_after": mean([r.plan.reused_grids_after for r in s]),
        "rows_reused": mean([r.plan.rows_in_reused_grids for r in s]),
        "reuse_rate_pct": 100 * mean([r.plan.rows_in_reused_grids / r.count for r in s if r.count]),
        "scanned_before": mean([r.plan.scanned_grids_before for r in s]),
        "scanned_after_min": mean([r.plan.scanned_grids_after for r in m]),
        "rows_scanned_sum": mean([r.plan.rows_in_scanned_grids for r in s]),
        "skip_rate_min_pct": 100 * mean([r.plan.skip_rate or 0 for r in m]),
        "total_grids": mean([r.plan.total_grids for r in s]),
    }


def inprocess_p50(settings: Settings, systems: list[System], queries: list[dict], warmup: list[dict]) -> dict[str, dict]:
    """p50 ms of the workload's sum and min queries in this process: each gridagg system
    through its engine (the planner), DuckDB with 2 and with 1 thread (same boxes). Each
    is measured warm, as a serving process runs: after answering the `warmup` boxes
    (others than those measured), so neither side is timed loading its tree or its
    first pages."""
    from gridagg.baselines.duck import DuckDBBaseline

    def p50(run, ds) -> dict[str, float]:
        row = {}
        for agg in ("sum", "min"):
            for w in warmup:
                run(ds, QuerySpec.parse(ds, w, workload.AGGREGATES[agg]))
            specs = [QuerySpec.parse(ds, w, workload.AGGREGATES[agg]) for w in queries]
            row[agg] = statistics.median([run(ds, q).plan.elapsed_ms for q in specs])
        return row

    out: dict[str, dict] = {}
    for s in systems:
        if s.kind == "gridagg":
            engine = GridEngine(GridDirectory(settings.effective_pg_url), open_store(settings.with_(store=s.store)))
            try:
                out[s.label] = p50(engine.run, engine.dataset(s.dataset))
            finally:
                engine.store.close()
                engine.directory.close()
    duck = next((s for s in systems if s.kind == "duckdb"), None)
    if duck is not None:
        reg = BaselineRegistry(settings.effective_pg_url)
        try:
            _, ds = reg.lookup(duck.dataset)
        finally:
            reg.close()
        for threads in (2, 1):
            backend = DuckDBBaseline(settings, threads=threads)
            try:
                out[f"DuckDB, {threads} thread{'s' if threads > 1 else ''}"] = p50(backend.run, ds)
            finally:
                backend.close()
    return out


# --------------------------------------------------------------------------- server


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """gridagg_api.wsgi:app served on 127.0.0.1 as `gridagg serve --no-access-log` serves it."""

    def __init__(self, settings: Settings, store: str, workers: int, threads: int, logdir: Path):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.metrics_dir = tempfile.mkdtemp(prefix="gridagg-bench-metrics-")
        env = {**settings.with_(store=store, read_token=None).environ(), "PROMETHEUS_MULTIPROC_DIR": self.metrics_dir}
        argv = server_argv("127.0.0.1", self.port, workers, threads, "warning", access_log=False)
        self.log = open(logdir / f"server-{store}.log", "w")
        self.proc = subprocess.Popen(argv, env=env, cwd=ROOT, stdout=self.log, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        self._wait()

    def _wait(self, timeout: float = 60) -> None:
        import requests

        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the API server exited with {self.proc.returncode}; see {self.log.name}")
            try:
                if requests.get(self.url + "/healthz", timeout=2).status_code < 500:
                    return
            except requests.RequestException:
                pass
            time.sleep(0.5)
        raise RuntimeError(f"the API server did not answer within {timeout:.0f} s")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        shutil.rmtree(self.metrics_dir, ignore_errors=True)


def prewarm(settings: Settings, system: System) -> None:
    """Read a system's data into the OS page cache before its runs, so every system is
    measured warm (this machine's page cache is reclaimed while data lies idle)."""
    if system.kind == "gridagg" and system.store == "embedded":
        from gridagg.store.embedded import EmbeddedStore

        store = EmbeddedStore(settings.lmdb_dir)
        try:  # the dataset's own pages: its rows and aggregates, not the whole file
            dbs = [store._db(system.dataset, family) for family in ("s", "a")]
            with store.env.begin(buffers=True) as txn:
                for db in dbs:
                    for _, value in txn.cursor(db=db):
                        bytes(value)
        finally:
            store.close()
    elif system.kind == "pg":
        import psycopg

        from gridagg.baselines.postgres import table_name

        table = table_name(system.dataset)
        with psycopg.connect(settings.effective_pg_url, autocommit=True) as conn:
            try:
                conn.execute("CREATE EXTENSION IF NOT EXISTS pg_prewarm")
                for rel in (table, f"{table}_dims"):
                    conn.execute("SELECT pg_prewarm(%s, 'read')", (rel,))
            except psycopg.Error:  # no pg_prewarm: a full scan reads the table at least
                conn.execute(f'SELECT count(*) FROM "{table}"')
    elif system.kind == "duckdb":
        from gridagg.baselines.duck import path_of

        with open(path_of(settings, system.dataset), "rb") as f:  # the file into the page cache
            while f.read(1 << 24):
                pass


def agreement(servers: dict, systems: list[System], queries: list[dict]) -> list[str]:
    """Differences between the systems' HTTP answers on these queries (empty: all agree)."""
    import requests

    problems = []
    for agg in ("min", "sum"):
        for i, w in enumerate(queries):
            answers = {}
            for sys_ in systems:
                url = servers[sys_.store or "baselines"].url
                r = requests.post(f"{url}/v1/datasets/{sys_.dataset}/query",
                                  json={"where": w, "aggregates": workload.AGGREGATES[agg]}, timeout=300)
                if r.status_code != 200:
                    problems.append(f"{sys_.label}: HTTP {r.status_code} {r.text[:200]}")
                    continue
                answers[sys_.label] = json.dumps(r.json()["results"], sort_keys=True)
            if len(set(answers.values())) > 1:
                problems.append(f"{agg} query {i}: answers differ: {answers}")
    return problems


# --------------------------------------------------------------------------- report


def write_report(out: Path, args, meta: dict, systems: list[System], runs: list[dict], disagree: list[str]) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "runs.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(runs[0]) if runs else ["system"])
        w.writeheader()
        w.writerows(runs)
    with open(out / "load.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["system", "dataset", "rows", "load_seconds", "rows_per_second", "grids"])
        for s in systems:
            w.writerow([s.label, s.dataset, s.rows, round(s.load_seconds, 2), round(s.load_rate), s.stats.get("grids", "")])
    grid_systems = [s for s in systems if s.kind == "gridagg"]
    t3_keys = list(grid_systems[0].stats.get("table3", {})) if grid_systems else []
    with open(out / "table3.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["system", *t3_keys])
        for s in grid_systems:
            w.writerow([s.label, *[round(s.stats["table3"][k], 3) for k in t3_keys]])

    def rps(label, agg, c):
        for r in runs:
            if r["system"] == label and r["agg"] == agg and r["clients"] == c:
                return r["rps"]
        return None

    lines = ["# gridagg bench: gridagg vs PostgreSQL alone, HBase alone and DuckDB", "",
             f"Command: `{meta['command']}`", "",
             f"Machine: {meta['machine']}", "",
             f"Started {meta['started']}, took {meta['minutes']:.1f} min. Rows: {meta['rows']:,}, generated by "
             f"ingest/generate.py (seed {args.seed}: the real TMY3 station-years in every year 2011-2031, "
             f"stations replicated) and encoded once by the ingest job for loadtest/paper.toml; every system "
             f"loads the same encoded rows. "
             f"Server: granian (`gridagg serve`; {meta['server']}) on 127.0.0.1; load: the bench's load "
             f"driver (loadtest/loadgen.go: closed-loop clients, no think time) on the same machine, each run "
             f"bounded by {args.requests} requests and {args.seconds:g} s; "
             f"before a system's runs its data is read into the OS page cache (its LMDB pages; pg_prewarm of "
             f"table and index), and unrecorded warm-up runs per aggregate (up to {args.warmup_seconds:g} s "
             f"each, at {max(args.clients)} clients) go on until its rate stops rising (the last {WARM_RUNS} "
             f"runs not {WARM_GAIN - 1:.0%} faster on average than the {WARM_RUNS} before them; at most "
             f"{args.warmup_runs}; their rates under Warm-up below). Throughput and latency count the requests "
             f"sent once all clients of a run were running (they start 10 ms apart).", ""]
    sel = [s.stats["table3"]["selectivity_pct"] for s in grid_systems if "table3" in s.stats]
    if sel:
        lines += [f"Measured selectivity of the paper's workload: {statistics.fmean(sel):.2f}% "
                  f"({statistics.fmean([s.stats['table3']['selected_rows'] for s in grid_systems]):,.0f} rows per "
                  f"query on average; paper: 1.0%).", ""]
    lines += ["Answers: " + ("all systems agreed on every checked query." if not disagree else
                             "DISAGREEMENTS: " + "; ".join(disagree[:5])), ""]
    # Ratios: per gridagg store, its best N_size at each client count against each baseline.
    base = {k: next((s for s in systems if s.kind == k), None) for k in BASELINE_NAMES}
    present = [k for k in BASELINE_NAMES if base[k]]

    def best(agg, c, within):
        return max(((rps(s.label, agg, c) or 0, s) for s in within), key=lambda x: x[0], default=(0, None))

    lines += ["## Throughput ratios (each store's best N_size per client count)", "",
              "| store | aggregate | clients | best gridagg (queries/s) | "
              + " | ".join(BASELINE_NAMES[k] for k in present) + " | "
              + " | ".join(f"gridagg / {BASELINE_NAMES[k]}" for k in present) + " |",
              "|---|---|---|---|" + "---|" * (2 * len(present))]
    for store in sorted({s.store for s in grid_systems}):
        within = [s for s in grid_systems if s.store == store]
        for agg in args.aggs:
            for c in args.clients:
                top = best(agg, c, within)
                rates = {k: rps(base[k].label, agg, c) for k in present}
                lines.append(f"| gridagg-{store} | {agg} | {c} | {top[0]:.1f} ({top[1].label if top[1] else '-'}) | "
                             + " | ".join(_rate(rates[k], args.seconds) for k in present) + " | "
                             + " | ".join(_ratio(top[0], rates[k], args.seconds) for k in present) + " |")
    # The paper swept N_size up to 8000; when the sweep goes further, its best is shown too.
    paper_sweep = [s for s in grid_systems if s.n_size <= PAPER_MAX_NSIZE]
    if base["pg"] and paper_sweep and len(paper_sweep) < len(grid_systems):
        lines += ["", f"Within the paper's sweep (N_size <= {PAPER_MAX_NSIZE}), best against PostgreSQL alone:", "",
                  "| store | aggregate | clients | best (queries/s) | / PostgreSQL alone |", "|---|---|---|---|---|"]
        for store in sorted({s.store for s in paper_sweep}):
            for agg in args.aggs:
                for c in args.clients:
                    top = best(agg, c, [s for s in paper_sweep if s.store == store])
                    p = rps(base["pg"].label, agg, c)
                    lines.append(f"| gridagg-{store} | {agg} | {c} | {top[0]:.1f} ({top[1].label if top[1] else '-'})"
                                 f" | {_ratio(top[0], p, args.seconds)} |")
    inproc = meta.get("inprocess")
    if inproc:
        lines += ["", "## In-process: gridagg's planner vs DuckDB, same boxes, same process (p50 ms)", "",
                  f"Over {args.stat_queries} boxes of the workload, each system warm: after answering "
                  f"{args.warmup} other boxes.", "",
                  "| system | sum query | min query |", "|---|---|---|"]
        for label, row in inproc.items():
            lines.append(f"| {label} | {row['sum']:.2f} | {row['min']:.2f} |")
    lines += ["", "## Throughput (queries/s) per system and client count", "",
              "| system | aggregate | " + " | ".join(f"{c} clients" for c in args.clients) + " |",
              "|---|---|" + "---|" * len(args.clients)]
    for s in systems:
        for agg in args.aggs:
            lines.append(f"| {s.label} | {agg} | " + " | ".join(
                f"{rps(s.label, agg, c):.1f}" if rps(s.label, agg, c) is not None else "-" for c in args.clients) + " |")
    lines += ["", "## Latency (ms, p50 / p95 / p99)", "",
              "| system | aggregate | clients | requests | failures | p50 | p95 | p99 |", "|---|---|---|---|---|---|---|---|"]
    for r in runs:
        lines.append(f"| {r['system']} | {r['agg']} | {r['clients']} | {r['requests']} | {r['failures']} | "
                     f"{r['p50_ms']:.0f} | {r['p95_ms']:.0f} | {r['p99_ms']:.0f} |")
    groups = [g for g in CPU_GROUPS if any(f"cpu_{g}_ms" in r for r in runs)]
    lines += ["", "## Where the CPU goes (ms of CPU per request, over the whole run)", "",
              "Each process group's CPU time in /proc over the run, divided by the requests sent; the "
              f"machine's {os.cpu_count()} cores are shared by all of them. The kernel charges CPU time "
              "by clock tick, so these are samples: close for runs of seconds that keep the cores busy, "
              "high for a process that sleeps and wakes between short requests.", "",
              "| system | aggregate | clients | " + " | ".join(CPU_GROUPS[g] for g in groups) + " |",
              "|---|---|---|" + "---|" * len(groups)]
    for r in runs:
        lines.append(f"| {r['system']} | {r['agg']} | {r['clients']} | "
                     + " | ".join(f"{r[f'cpu_{g}_ms']:.3f}" if f"cpu_{g}_ms" in r else "-" for g in groups) + " |")
    if meta.get("warmups"):
        lines += ["", "## Warm-up", "",
                  "Queries per second of each system's unrecorded warm-up runs, in order, before its "
                  "recorded runs of that aggregate.", "", "| system | aggregate | warm-up runs (queries/s) |",
                  "|---|---|---|"]
        for w in meta["warmups"]:
            lines.append(f"| {w['system']} | {w['agg']} | {', '.join(f'{x:.0f}' for x in w['rates']) or '-'} |")
    lines += ["", "## Load throughput (the paper's Table 2)", "",
              "| system | rows | seconds | rows/s | leaf grids |", "|---|---|---|---|---|"]
    for s in systems:
        lines.append(f"| {s.label} | {s.rows:,} | {s.load_seconds:.1f} | {s.load_rate:,.0f} | {s.stats.get('grids', '')} |")
    lines.append("")
    lines.append("gridagg loads with the Spark bulk load (ingest.job.load_encoded: tree built in Spark, rows "
                 "written from the executors, directory switched once; Spark start excluded); PostgreSQL "
                 "alone with COPY then CREATE INDEX + ANALYZE; HBase alone with batched puts and a major "
                 "compaction request. The baselines get the rows in time order. Reading and encoding the "
                 "archive is not timed here: `python -m gridagg_ingest.bench` measures the job end to end.")
    if grid_systems and t3_keys:
        labels = {
            "selected_rows": "selected rows", "selectivity_pct": "selectivity %",
            "reused_before": "(1) reused grids, before 4.6.1", "reused_after": "(2) reused grids, after 4.6.1",
            "rows_reused": "(3) rows in reused grids", "reuse_rate_pct": "(4) reuse rate %",
            "scanned_before": "(5) scanned grids, before", "scanned_after_min": "(6) scanned grids, after (min)",
            "rows_scanned_sum": "(7) rows in scanned grids (sum)", "skip_rate_min_pct": "(8) skip rate % (min)",
            "total_grids": "(9) total grids"}
        lines += ["", f"## Table 3 statistics (averages over {args.stat_queries} workload queries)", "",
                  "| statistic | " + " | ".join(s.label for s in grid_systems) + " |",
                  "|---|" + "---|" * len(grid_systems)]
        for k in t3_keys:
            lines.append(f"| {labels.get(k, k)} | " + " | ".join(f"{s.stats['table3'][k]:,.1f}" for s in grid_systems) + " |")
    plots = make_plots(out, args, systems, runs)
    if plots:
        lines += ["", "## Plots", ""] + [f"![{p.stem}]({p.name})" for p in plots]
    (out / "report.md").write_text("\n".join(lines) + "\n")
    return out / "report.md"


def _rate(qps: float | None, seconds: float) -> str:
    """A baseline's queries/s; a run that got no answer within its time is a bound."""
    if qps is None:
        return "-"
    return f"< {1 / seconds:.2f} (no answer in {seconds:g} s)" if qps == 0 else f"{qps:.1f}"


def _ratio(a: float, b: float | None, seconds: float) -> str:
    if not a or b is None:
        return "-"
    return f"> {a * seconds:.0f}x" if b == 0 else f"{a / b:.1f}x"


def make_plots(out: Path, args, systems: list[System], runs: list[dict]) -> list[Path]:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        log("matplotlib missing: no plots")
        return []
    paths = []
    for agg in args.aggs:
        fig, ax = plt.subplots(figsize=(7, 4.5))
        for s in systems:
            pts = sorted((r["clients"], r["rps"]) for r in runs if r["system"] == s.label and r["agg"] == agg)
            if pts:
                style = "-o" if s.kind == "gridagg" else "--s"
                ax.plot([p[0] for p in pts], [p[1] for p in pts], style, label=s.label)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("concurrent clients")
        ax.set_ylabel("queries / s")
        ax.set_title(f"{agg} of wind speed: throughput vs clients")
        ax.legend(fontsize=7)
        ax.grid(True, which="both", alpha=0.3)
        p = out / f"throughput_{agg}.png"
        fig.tight_layout()
        fig.savefig(p, dpi=110)
        plt.close(fig)
        paths.append(p)
    grid = sorted({s.n_size for s in systems if s.kind == "gridagg"})
    if len(grid) > 1:
        fig, ax = plt.subplots(figsize=(7, 4.5))
        for agg in args.aggs:
            for c in args.clients:
                for store in sorted({s.store for s in systems if s.kind == "gridagg"}):
                    ys = [next((r["rps"] for r in runs if r["system"] == f"gridagg-{store} N={n}" and r["agg"] == agg
                                and r["clients"] == c), float("nan")) for n in grid]
                    ax.plot(grid, ys, "-o", label=f"{agg} {store} {c} clients")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("N_size")
        ax.set_ylabel("queries / s")
        ax.set_title("gridagg throughput vs N_size")
        ax.legend(fontsize=6)
        ax.grid(True, which="both", alpha=0.3)
        p = out / "throughput_vs_nsize.png"
        fig.tight_layout()
        fig.savefig(p, dpi=110)
        plt.close(fig)
        paths.append(p)
    return paths


# --------------------------------------------------------------------------- main


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    except (ValueError, OSError):
        mem = float("nan")
    return f"{platform.system()} {platform.release()}, {os.cpu_count()} CPUs ({cpu}), {mem:.0f} GiB RAM, Python {platform.python_version()}"


def run_dashboard(settings: Settings, args) -> dict:
    """--dashboard: loadtest/dashboard.py's questions of gridagg and DuckDB."""
    from dataclasses import replace

    from gridagg.baselines.duck import DuckDBBaseline, path_of
    from gridagg.schema import GridParams
    from gridagg_ingest.config import load_config
    from gridagg_ingest.job import spark_session

    from . import dashboard

    started = time.time()
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    n_size = args.nsize[0]
    cfg = load_config(dashboard.CONFIG)
    cfg = replace(cfg, format="parquet",
                  dataset=replace(cfg.dataset, name=f"{args.prefix}_dash",
                                  grid=GridParams(n_size, 10 * n_size, cfg.dataset.grid.l_time)))
    ds = cfg.dataset
    stores = args.stores or ["embedded"]
    spark = spark_session(settings=bench_settings(settings, stores))
    workdir = Path(tempfile.mkdtemp(prefix="gridagg-bench-archive-"))
    systems: list[System] = []
    try:
        log(f"generating and encoding the archive: {args.rows:,} rows")
        encoded = build_archive(spark, args.rows, args.seed, workdir, cfg)
        for store in stores:
            log(f"loading gridagg ({store} store) N_size={n_size}")
            systems.append(load_gridagg(settings, spark, store, replace(ds, name=dataset_name(ds.name, store)),
                                        encoded))
        ids, values = read_encoded(encoded)
    finally:
        spark.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    duck_name = f"{ds.name}__duckdb"
    log(f"loading DuckDB: {len(values):,} rows")
    duck = DuckDBBaseline(settings)
    try:
        duck.create(replace(ds, name=duck_name))
        duck.load(replace(ds, name=duck_name), batches(ids, values, 1_000_000))
    finally:
        duck.close()
    del ids
    rows_by_store, http = {}, {}
    for system in systems:
        s = settings.with_(store=system.store)
        engine = GridEngine(GridDirectory(s.effective_pg_url), open_store(s))
        try:
            log(f"in-process: {system.label} and DuckDB")
            rows_by_store[system.store] = dashboard.measure(engine, replace(ds, name=system.dataset), system.dataset,
                                                            path_of(settings, duck_name), args.repeat, log)
        finally:
            engine.store.close()
            engine.directory.close()
        logdir = out / "logs"
        logdir.mkdir(exist_ok=True)
        server = Server(settings, system.store, args.workers, args.threads or default_threads(system.store), logdir)
        try:
            log(f"over HTTP: {system.label}")
            http[system.store] = dashboard.http_p50(server.url, system.dataset)
        finally:
            server.stop()
    meta = {"command": args.command_line, "machine": machine(), "rows": len(values), "n_size": n_size,
            "leaves": systems[0].stats["grids"], "config": "ingest/examples/weather_generated.toml",
            "duckdb": __import__("duckdb").__version__, "repeat": args.repeat,
            "started": time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(started)),
            "minutes": (time.time() - started) / 60}
    rows = rows_by_store[stores[0]]
    text = dashboard.report(rows, http, meta)
    (out / "dashboard.md").write_text(text)
    print(text)
    if not args.keep:
        for system in systems:
            s = settings.with_(store=system.store)
            engine = GridEngine(GridDirectory(s.effective_pg_url), open_store(s))
            try:
                engine.drop_dataset(system.dataset)
            finally:
                engine.store.close()
                engine.directory.close()
        DuckDBBaseline(settings).drop(duck_name)
    disagree = [f"{r['question']}: answers differ" for rs in rows_by_store.values() for r in rs if not r["agree"]]
    return {"systems": systems, "runs": [], "disagreements": disagree, "report": out / "dashboard.md"}


def run(settings: Settings, args) -> dict:
    if args.dashboard:
        return run_dashboard(settings, args)
    started = time.time()
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    from gridagg_ingest.job import spark_session

    systems: list[System] = []
    spark = spark_session(settings=bench_settings(settings, args.stores or ["embedded"]))
    workdir = Path(tempfile.mkdtemp(prefix="gridagg-bench-archive-"))
    try:
        log(f"generating and encoding the archive: {args.rows:,} rows")
        encoded = build_archive(spark, args.rows, args.seed, workdir)
        ids, values = read_encoded(encoded)
        total = len(values)
        log(f"archive: {total:,} rows")
        for store in args.stores:
            for n in args.nsize:
                log(f"loading gridagg ({store} store) N_size={n}, N_threshold={10 * n}, L_time=360d")
                s = load_gridagg(settings, spark, store, workload.definition(dataset_name(args.prefix, store, n), n),
                                 encoded)
                log(f"  {s.rows:,} rows in {s.load_seconds:.1f} s = {s.load_rate:,.0f} rows/s, "
                    f"{s.stats['grids']:,} leaves")
                systems.append(s)
    finally:
        spark.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    for kind in args.baselines:
        log(f"loading {kind} alone")
        s = load_baseline(settings, kind, args.prefix, ids, values, args.batch)
        log(f"  {s.rows:,} rows in {s.load_seconds:.1f} s = {s.load_rate:,.0f} rows/s")
        systems.append(s)
    del ids, values

    stat_queries = workload.paper_queries(args.stat_queries, args.seed + 999)
    for s in systems:
        if s.kind == "gridagg":
            log(f"Table 3 statistics: {s.label}")
            s.stats["table3"] = table3_stats(settings, s, stat_queries, total)
            t3 = s.stats["table3"]
            log(f"  selectivity {t3['selectivity_pct']:.2f}%, reuse {t3['reuse_rate_pct']:.1f}%, "
                f"skip {t3['skip_rate_min_pct']:.1f}%, {t3['total_grids']:,.0f} grids")

    log("in-process p50: gridagg's planner and DuckDB, warm")
    inprocess = inprocess_p50(settings, systems, stat_queries,
                              workload.paper_queries(args.warmup, args.seed + 555))

    servers: dict[str, Server] = {}
    stores = args.stores or ["embedded"]
    threads = {st: args.threads or default_threads(st) for st in stores}
    runs: list[dict] = []
    warmups: list[dict] = []
    disagree: list[str] = []
    try:
        logdir = out / "logs"
        logdir.mkdir(exist_ok=True)
        for store in stores:
            log(f"starting the API server (store {store})")
            servers[store] = Server(settings, store, args.workers, threads[store], logdir)
        servers["baselines"] = servers[stores[0]]
        check = workload.paper_queries(args.check_queries, args.seed + 7)
        log(f"checking that all systems agree on {len(check)} queries x (min, sum)")
        disagree = agreement(servers, systems, check)
        log("  all agree" if not disagree else f"  {len(disagree)} disagreements, e.g. {disagree[0]}")
        nruns = len(systems) * len(args.aggs) * len(args.clients)
        meter = cpu_meter(settings, [srv for key, srv in servers.items() if key != "baselines"])
        i = 0
        for s in systems:
            url = servers[s.store or "baselines"].url
            prewarm(settings, s)
            for agg in args.aggs:  # every worker, connection, page and code path in use, compiled
                rates = warm_up(settings, url, s.dataset, agg, max(args.clients), args, out, meter)
                warmups.append({"system": s.label, "agg": agg, "rates": rates})
                if rates:
                    log(f"warm-up {s.label} {agg}: " + ", ".join(f"{x:.0f}" for x in rates) + " q/s")
            for agg in args.aggs:
                for c in args.clients:
                    i += 1
                    tag = f"{s.dataset}_{agg}_c{c}"
                    r = run_load(settings, url, s.dataset, agg, c, args.requests, args.seconds, args.seed, out, tag,
                                 meter)
                    row = {"system": s.label, "kind": s.kind, "store": s.store or s.kind, "n_size": s.n_size or "",
                           "agg": agg, "clients": c, **r}
                    runs.append(row)
                    log(f"run {i}/{nruns} {s.label} {agg} {c} clients: {r['rps']:.1f} q/s, p50 {r['p50_ms']:.0f} ms, "
                        f"p99 {r['p99_ms']:.0f} ms, {r['requests']} requests, {r['failures']} failures; CPU ms a "
                        f"request: " + ", ".join(f"{g} {r[f'cpu_{g}_ms']:.2f}" for g in CPU_GROUPS if f"cpu_{g}_ms" in r))
    finally:
        for key, srv in servers.items():
            if key != "baselines":
                srv.stop()
    meta = {"command": args.command_line, "machine": machine(),
            "server": "; ".join(f"store {st}: {args.workers} workers x {threads[st]} thread(s)" for st in stores),
            "started": time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(started)),
            "minutes": (time.time() - started) / 60, "rows": total, "inprocess": inprocess, "warmups": warmups}
    report = write_report(out, args, meta, systems, runs, disagree)
    log(f"report: {report}")
    if not args.keep:
        drop_all(settings, systems)
    return {"systems": systems, "runs": runs, "disagreements": disagree, "report": report}


# A warm-up ends once its last WARM_RUNS runs were not WARM_GAIN times as fast as the WARM_RUNS
# before them (on average: one run's rate moves by 10% on this shared machine).
WARM_RUNS, WARM_GAIN = 3, 1.03


def warm_up(settings: Settings, url: str, dataset: str, agg: str, clients: int, args, out: Path,
            meter: CpuMeter) -> list[float]:
    """Unrecorded runs of `agg` queries (each up to args.warmup_seconds and args.requests
    requests) until the rate stops rising, or args.warmup_runs runs; returns their rates.
    A JVM compiles hot code as it runs it: the region server's row loops reach their speed
    after a minute or two of load, while the embedded store and the baselines level off
    in their first runs. The recorded runs then measure a server as it serves all day."""
    rates: list[float] = []
    for i in range(args.warmup_runs):
        r = run_load(settings, url, dataset, agg, clients, args.requests, args.warmup_seconds, args.seed + 3 + i,
                     out, f"{dataset}_{agg}_warmup{i + 1}", meter)
        rates.append(r["rps"])
        last, before = rates[-WARM_RUNS:], rates[-2 * WARM_RUNS : -WARM_RUNS]
        if len(before) == WARM_RUNS and sum(last) <= WARM_GAIN * sum(before):
            break
    return rates


# The process groups whose CPU a run counts, as the report names them.
CPU_GROUPS = {"api": "API server", "hbase": "HBase JVMs", "postgresql": "PostgreSQL", "load": "load driver",
              "machine": "whole machine"}


def cpu_meter(settings: Settings, servers: list[Server]) -> CpuMeter:
    """What a run's CPU is counted for: the API servers, and the local PostgreSQL and
    HBase (an external one's CPU is not this machine's)."""
    from gridagg.services import pg_paths
    from gridagg_hbase import launcher

    def postgresql() -> list[int]:
        try:
            return [int((pg_paths(settings).data / "postmaster.pid").read_text().split()[0])]
        except (OSError, IndexError, ValueError):
            return []

    def hbase() -> list[int]:
        return [pid for role in ("master", "thrift") if (pid := launcher.running_pid(settings, role))]

    return CpuMeter({"api": lambda: [srv.proc.pid for srv in servers], "postgresql": postgresql, "hbase": hbase})


def drop_all(settings: Settings, systems: list[System]) -> None:
    reg = BaselineRegistry(settings.effective_pg_url)
    try:
        for s in systems:
            if s.kind == "gridagg":
                engine = GridEngine(GridDirectory(settings.effective_pg_url), open_store(settings.with_(store=s.store)))
                try:
                    engine.drop_dataset(s.dataset)
                finally:
                    engine.store.close()
                    engine.directory.close()
            else:
                b = open_backend(s.kind, settings)
                try:
                    b.drop(s.dataset)
                finally:
                    b.close()
                reg.unregister(s.dataset)
    finally:
        reg.close()


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--rows", type=int, default=ONE_COPY,
                   help=f"rows of the generated archive (default {ONE_COPY:,}: every station-year in every year once)")
    p.add_argument("--nsize", type=int, nargs="+", default=[50, 125, 250, 500, 1000, 2000, 4000, 8000, 16000, 32000],
                   help="N_size sweep (N_threshold = 10 x N_size, L_time = 360 days; default: the paper's "
                        f"50..{PAPER_MAX_NSIZE} and two larger sizes, which answer faster on few cores)")
    p.add_argument("--clients", type=int, nargs="+", default=[1, 8, 32, 96], help="concurrent clients per run")
    p.add_argument("--aggs", nargs="+", default=["min", "sum"], choices=["min", "sum"])
    p.add_argument("--stores", nargs="*", default=["embedded"], choices=["embedded", "hbase"],
                   help="gridagg cell stores to measure (default embedded)")
    p.add_argument("--baselines", nargs="*", default=["pg", "hbase", "duckdb"], choices=["pg", "hbase", "duckdb"],
                   help="systems without the grid to measure against (default all: PostgreSQL alone, HBase "
                        "alone, DuckDB)")
    p.add_argument("--requests", type=int, default=2000, help="most requests per run (default 2000)")
    p.add_argument("--seconds", type=float, default=30, help="most seconds per run (default 30)")
    p.add_argument("--warmup-runs", type=int, default=40,
                   help="most unrecorded warm-up runs per system and aggregate, at the most clients, before "
                        "its recorded runs; they stop once the rate stops rising (the last 3 runs not 3%% "
                        "faster on average than the 3 before them). Default 40; 0: none")
    p.add_argument("--warmup-seconds", type=float, default=5,
                   help="most seconds of each warm-up run (default 5; its requests are bounded by --requests)")
    p.add_argument("--warmup", type=int, default=500,
                   help="boxes each system answers before its in-process timing (default 500)")
    p.add_argument("--stat-queries", type=int, default=50, help="queries for the Table 3 statistics")
    p.add_argument("--check-queries", type=int, default=5, help="queries every system must agree on")
    p.add_argument("--workers", type=int, default=default_workers(),
                   help="API server workers (default as `gridagg serve`: %(default)s here)")
    p.add_argument("--threads", type=int,
                   help="requests one API worker answers at once (default as `gridagg serve`: 1 on the "
                        "embedded store, 4 on HBase)")
    p.add_argument("--batch", type=int, default=8760,
                   help="rows per baseline load batch (default 8760, a station-year)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--prefix", default="bench", help="dataset name prefix (default bench)")
    p.add_argument("--out", default="bench-report", help="report directory (default ./bench-report)")
    p.add_argument("--keep", action="store_true", help="keep the loaded datasets afterwards")
    p.add_argument("--dashboard", action="store_true",
                   help="instead of the paper's workload: ask the dashboard questions of loadtest/dashboard.py "
                        "of gridagg (the first --nsize) and DuckDB, side by side; writes dashboard.md to --out")
    p.add_argument("--repeat", type=int, default=11,
                   help="runs per question in-process with --dashboard (p50 is reported; default 11)")

