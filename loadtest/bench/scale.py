"""`python -m gridagg_loadtest.bench.scale`: answer times as the archive grows, gridagg beside
its peers, on an archive already generated and loaded into gridagg.

For one archive (the generator's Parquet: `python -m gridagg_ingest.generate`) and the
gridagg datasets loaded from it with `gridagg ingest` (one per store, named by
--dataset STORE=NAME), it
1. encodes the archive once for the datasets' data space (archive.encode_archive) and
   loads every peer (DuckDB and ClickHouse through chDB, in process; PostgreSQL alone
   with --peers pg) with the same stored integers, each ordering its table by time,
   timing each load and its bytes on disk; PostgreSQL keeps the index its EXPLAIN
   ANALYZE shows fastest on sample boxes (as `gridagg bench`), under shared_buffers a
   quarter of the memory (--pg-shared-buffers);
2. with --tune N, first lets each gridagg dataset's tuner (gridagg.tune.adapt, as a serving
   process's would) adapt its tree to the workload: the dashboard's eight questions and N
   of the paper's sum boxes drawn from another seed than the measured ones (other time
   windows), asked once (the planner's sample keeps at most 256 of them, as it does for
   the online tuner); rounds over that sample, priced with the store's cost model,
   until one changes nothing (or, with --tune-minutes, none starts after that many
   minutes); then
   asks gridagg and the in-process peers the dashboard's eight questions
   (dashboard.QUESTIONS) and the paper's boxes (sum and min of wind speed over time,
   temperature, humidity and illuminance): in process, every system prewarmed as for
   step 4 (prewarm.py), p50 of --repeat runs after a warm-up, each peer at each of its
   thread settings, and every answer checked against every peer's, exactly;
3. asks gridagg the same over HTTP (p50 of 5 requests to `gridagg serve`'s server);
4. with --clients, serves gridagg (each store) and every peer as `gridagg bench` does
   (runs.Bench: the same shapes offered to all, each at its fastest shape
   and knobs, prewarmed, warmed up, its answers to check queries compared, all serving
   at once) and drives the paper's min and sum queries at each client count, --rounds
   runs each, the systems taking turns; PostgreSQL is served only
   (it has no SQL for the dashboard's series and polygons), with EXPLAIN (ANALYZE,
   BUFFERS) of one sum query in the report;
5. writes the run's data, OUT/scale-<rows>.json (--out, by default <data dir>/bench/scale,
   with the servers' logs), then the report over every scale-*.json in OUT, one section
   per archive size: README.md and p50.png (each question's p50 against rows, per
   system, log-log) in --docs (by default docs/bench/scale of the checkout), replacing
   the previous run's. Runs of other sizes kept in OUT stay in the report.

    python -m gridagg_loadtest.bench.scale --archive /data/net-100m --config net100.toml \\
        --dataset embedded=net100 --dataset hbase=net100_hb
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from gridagg.config import Settings
from gridagg.query.spec import QuerySpec

from ..peers import IN_PROCESS, clickhouse, duck, open_peer
from ..peers.pg_server import server_settings
from ..peers.pg_server import wanted as pg_wanted
from ..peers.postgres import table_name
from ..peers.registry import PeerRegistry
from ..reports import (
    REPORT,
    bench_docs,
    bench_out,
    fresh,
    machine,
    pyplot,
    stamp,
    write,
)
from . import dashboard, workload
from .archive import encode_archive, encoded_batches, encoded_count
from .log import log
from .paper import SAMPLE_BOXES, SHAPES, explain_pg, shape
from .prewarm import prewarm
from .runs import Bench, disagreements
from .servers import Server, Shape
from .systems import System, engine_of

PEERS = (*IN_PROCESS, "pg")  # PostgreSQL alone is served only: see step 4
PAPER_BOXES = 5  # boxes of the paper's workload, each asked for sum and for min
TRAINING_SEED = 101  # --tune's boxes: drawn from seed + this, none of them measured
CHECK_QUERIES = 5  # boxes whose served answers (min and sum) every system must agree on
SERVED_FIELDS = ("system", "setting", "agg", "clients", "requests", "failures", "rps", "p50_ms", "p99_ms",
                 "round_rps")


def questions(seed: int) -> list[dashboard.Question]:
    """The dashboard's questions, then the paper's boxes (sum, then min, of each)."""
    paper = [dashboard.Question(f"paper box {i + 1}, {agg}", workload.paper_body(where, agg))
             for i, where in enumerate(workload.paper_queries(PAPER_BOXES, seed)) for agg in ("sum", "min")]
    return [*dashboard.QUESTIONS, *paper]


def disk_bytes(path: Path) -> int:
    """Bytes of a file, or of every file under a directory. ClickHouse merges parts in
    the background as it loads: a file or directory removed during the walk counts nothing."""
    path = Path(path)
    if path.is_file():
        return path.stat().st_size
    total = 0
    for root, _, files in os.walk(path):  # skips directories that vanish before it lists them
        for name in files:
            try:
                total += os.stat(os.path.join(root, name)).st_size
            except FileNotFoundError:
                pass
    return total


def peer_bytes(settings: Settings, peer, kind: str, name: str) -> int:
    """Bytes on disk of a peer's copy of dataset `name` (PostgreSQL: its table and index)."""
    if kind == "pg":
        with peer.pool.connection() as conn:
            return conn.execute("SELECT pg_total_relation_size(%s)", (table_name(name),)).fetchone()[0]
    path = duck.path_of(settings, name) if kind == "duckdb" else clickhouse.base_dir(settings) / "data" / "peer" / name
    return disk_bytes(path.resolve())


def load_peers(settings: Settings, ds, encoded: Path, kinds: list[str], seed: int) -> list[dict]:
    """Each peer loaded with the encoded archive as dataset ds and prepared for sample
    boxes of the paper's workload (PostgreSQL's index trials): its load, the preparing
    included in its seconds."""
    samples = [QuerySpec.parse(ds, w, workload.AGGREGATES["sum"]) for w in workload.paper_queries(SAMPLE_BOXES, seed + 77)]
    out = []
    for kind in kinds:
        peer = open_peer(kind, settings)
        try:
            log(f"loading {peer.label}")
            peer.create(ds)
            t0 = time.perf_counter()
            rows = peer.load(ds, encoded_batches(encoded, 1_000_000))
            prepared = peer.prepare(ds, samples)
            out.append({"system": peer.label, "kind": kind, "rows": rows, "seconds": time.perf_counter() - t0,
                        "bytes": peer_bytes(settings, peer, kind, ds.name), "prepared": prepared})
            log(f"  {rows:,} rows in {out[-1]['seconds']:.1f} s, {out[-1]['bytes'] / 2**30:.2f} GiB"
                + (f", index {prepared['index']}" if prepared.get("index") else ""))
        finally:
            peer.close()
    return out


def run(settings: Settings, args) -> dict:
    """The whole run, under PostgreSQL's server settings for it when pg is a peer."""
    wanted = pg_wanted(args.peers, args.pg_shared_buffers)
    with server_settings(settings, wanted) as pg_server:
        if wanted:
            log(f"PostgreSQL server settings for this run: {pg_server}")
        return _run(settings, args)


def _run(settings: Settings, args) -> dict:
    from gridagg_ingest.config import load_config
    from gridagg_ingest.job import spark_session, stop_spark
    from gridagg_ingest.readers import expand_inputs

    started = time.time()
    cfg = load_config(args.config)
    cfg = replace(cfg, format="parquet")
    datasets = dict(item.split("=", 1) for item in args.dataset)
    ds = cfg.dataset
    workdir = Path(tempfile.mkdtemp(prefix="gridagg-scale-"))
    result = {"command": args.command_line, "machine": machine(), "archive": str(args.archive),
              "started": stamp(started)}
    try:
        spark = spark_session()
        try:
            log(f"encoding {args.archive} for {args.config}")
            t0 = time.perf_counter()
            # DuckDB and ClickHouse order their tables by time as they load.
            encoded = encode_archive(spark, expand_inputs([str(args.archive)]), workdir, cfg, ordered=False)
            result["encode_seconds"] = time.perf_counter() - t0
        finally:
            stop_spark(spark)
        result["rows"] = rows = encoded_count(encoded)
        result["loads"] = load_peers(settings, ds, encoded, [k for k in PEERS if k in args.peers], args.seed)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    opened = {p["system"]: (open_peer(p["kind"], settings), p["kind"]) for p in result["loads"]}
    peers = {label: (peer, ds) for label, (peer, kind) in opened.items() if kind in IN_PROCESS}
    asked = questions(args.seed)
    result["systems"] = {}
    try:
        if args.tune:
            result["tuning"] = {store: tune_to_workload(settings, store, name, args.tune, args.seed + TRAINING_SEED,
                                                        args.tune_minutes)
                                for store, name in datasets.items()}
        for peer, _ in peers.values():
            peer.prewarm(ds)
        for store, name in datasets.items():
            system = System(f"gridagg-{store}", name, "gridagg", store)
            # Warm as before served runs: tuning's compaction rewrote an HBase table's files.
            prewarm(settings, system)
            with engine_of(settings, store) as engine:
                log(f"in process: gridagg ({store} store, {name}) and the peers")
                measured = dashboard.measure(engine, name, peers, args.repeat, asked)
            server = Server(settings, system, Shape(2, 4 if store == "hbase" else 1), {}, Path(args.out) / "logs")
            try:
                log(f"over HTTP: gridagg ({store} store)")
                http = dashboard.http_p50(server.url, name, questions=asked)
            finally:
                server.stop()
            result["systems"][store] = [
                {"question": m["question"], "agree": m["agree"], "gridagg_ms": m["gridagg_ms"], "http_ms": http[m["question"]],
                 "peers": m["peers"], "rows_scanned": m["plan"].rows_in_scanned_grids} for m in measured]
        if args.clients:
            result.update(served_runs(settings, args, ds, datasets, result["loads"]))
    finally:
        for peer, _ in opened.values():
            if not args.keep:
                peer.drop(ds.name)
            peer.close()
    result["minutes"] = (time.time() - started) / 60
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"scale-{rows}.json").write_text(json.dumps(result, indent=1))
    write_report(out, Path(args.docs))
    return result


def tune_to_workload(settings: Settings, store: str, name: str, boxes: int, seed: int,
                     minutes: float | None = None) -> dict:
    """Dataset `name` on `store` adapted to the bench's workload (step 2 of the module
    docstring: `boxes` of the paper's sum boxes from `seed`), no round started after
    `minutes` (None: until a round changes nothing); returns what it took."""
    from gridagg.tune import costmodel
    from gridagg.tune.adapt import TUNE_CANDIDATES, adapt

    model = costmodel.load(settings.data_dir, store)
    if model is None:
        raise SystemExit(f"--tune needs the {store} store's cost model: gridagg tune --calibrate --stores {store}")
    training = [*dashboard.QUESTIONS, *(dashboard.Question(f"training box {i}", workload.paper_body(where, "sum"))
                                        for i, where in enumerate(workload.paper_queries(boxes, seed)))]
    with engine_of(settings, store) as engine:
        before = engine.trees.tree(engine.dataset(name)).leaf_count
        t0 = time.perf_counter()
        stop = None if minutes is None else t0 + 60 * minutes
        for q in training:
            dashboard.ask(engine, name, q)
        sample = engine.planner.sample.take(name)
        rounds, changes, settled = 0, 0, set()
        while stop is None or time.perf_counter() < stop:
            done = adapt(engine, name, model, sample, candidates=TUNE_CANDIDATES, settled=settled,
                         most_leaves=engine.trees.leaves_loadable(engine.dataset(name), settings.tree_load_seconds))
            if done.still:
                break
            rounds, changes = rounds + 1, changes + len(done.changes)
            log(f"tuning {name} ({store}): round {rounds}, {len(done.changes)} changes, {len(settled):,} leaves "
                f"settled, {engine.trees.tree(engine.dataset(name)).leaf_count:,} leaves")
        after = engine.trees.tree(engine.dataset(name)).leaf_count
        tuned = time.perf_counter()
        # As `gridagg tune` does: HBase's scans otherwise pass through every cell the splits
        # and merges replaced until its weekly major compaction.
        compacted = engine.store.compact(engine.dataset(name)) if changes else None
        if changes:
            engine.trees.keep(engine.dataset(name))
    out = {"questions": len(sample), "rounds": rounds, "changes": changes, "leaves_before": before,
           "leaves_after": after, "seconds": tuned - t0, "compacted": compacted,
           "compact_seconds": time.perf_counter() - tuned}
    log(f"tuned {name} ({store}): {out}")
    return out


def served_runs(settings: Settings, args, ds, datasets: dict[str, str], loads: list[dict]) -> dict:
    """Step 4: gridagg's datasets (store -> name) and the loaded peers (`loads`, each
    registered for the bench's app as dataset ds) served and driven at args.clients
    (runs.Bench.measure). Returns {"served": the runs, "disagreements": the check
    queries the systems disagree on, "explain": PostgreSQL's plan of one sum query at
    its chosen knobs, or ""}."""
    systems = [System(f"gridagg-{store}", name, "gridagg", store) for store, name in datasets.items()]
    reg = PeerRegistry(settings.effective_pg_url)
    try:
        for p in loads:
            reg.register(p["kind"], ds, p["rows"], p["seconds"])
            systems.append(System(p["system"], ds.name, p["kind"], rows=p["rows"], load_seconds=p["seconds"]))
        knobs = argparse.Namespace(clients=args.clients, aggs=["min", "sum"], requests=args.requests,
                                   seconds=args.seconds, rounds=args.rounds, seed=args.seed,
                                   warmup_runs=args.warmup_runs, warmup_seconds=min(5, args.seconds),
                                   tune_seconds=min(5, args.seconds))
        bench = Bench(settings, knobs, Path(args.out).resolve())
        check = workload.paper_queries(CHECK_QUERIES, args.seed + 7)
        runs = bench.measure(systems, args.shapes, check)
        for s in systems:
            log(f"{s.label} served at {s.stats.get('setting')}")
        explain = "".join(explain_pg(settings, s, args.seed + 11) for s in systems if s.kind == "pg")
        return {"served": [{k: r[k] for k in SERVED_FIELDS} for r in runs], "disagreements": disagreements(systems),
                "explain": explain}
    finally:
        for p in loads:
            reg.unregister(p["kind"], ds.name)
        reg.close()


def served_table(r: dict) -> list[str]:
    """The report's lines for a run's served throughput: q/s (p50 ms) of every system at
    each aggregate and client count, and gridagg's ratio to each peer."""
    runs = r.get("served")
    if not runs:
        return []
    systems = list(dict.fromkeys(x["system"] for x in runs))
    peers = [s for s in systems if not s.startswith("gridagg")]
    rate = {(x["system"], x["agg"], x["clients"]): x for x in runs}
    rounds = len(runs[0].get("round_rps", [None]))
    turns = f"; each the median of {rounds} rounds, the systems taking turns" if rounds > 1 else ""
    lines = ["", f"Served (queries/s, p50 ms in parentheses; every answer inside a run's window counted{turns}):", "",
             "| aggregate | clients | " + " | ".join(systems) + " | " +
             " | ".join(f"{g} / {p}" for g in systems if g.startswith("gridagg") for p in peers) + " |",
             "|---" * (2 + len(systems) + (len(systems) - len(peers)) * len(peers)) + "|"]
    for agg, clients in dict.fromkeys((x["agg"], x["clients"]) for x in runs):
        cells = [f"{rate[s, agg, clients]['rps']:.1f} ({rate[s, agg, clients]['p50_ms']:.0f})" for s in systems]
        ratios = [f"{rate[g, agg, clients]['rps'] / rate[p, agg, clients]['rps']:.1f}x"
                  for g in systems if g.startswith("gridagg") for p in peers]
        lines.append(f"| {agg} | {clients} | " + " | ".join(cells + ratios) + " |")
    if r.get("disagreements"):
        lines += ["", f"DISAGREEMENTS: {r['disagreements']}"]
    return lines


def write_report(out: Path, docs: Path) -> Path:
    """The report (README.md and p50.png in folder `docs`, replacing the previous run's)
    from every scale-*.json in `out`; returns its path."""
    runs = sorted((json.loads(p.read_text()) for p in out.glob("scale-*.json")), key=lambda r: r["rows"])
    lines = ["# Answer times as the archive grows: gridagg and the in-process peers", "",
             "`python -m gridagg_loadtest.bench.scale` (see its docstring); in-process p50 in ms (HTTP p50 for gridagg in "
             "parentheses, served with the default limits), each peer at its faster thread setting; `x` = the best "
             "peer's p50 / gridagg's. "
             "Every answer was checked against every peer's.", ""]
    for r in runs:
        lines += [f"## {r['rows']:,} rows", "", f"Command: `{r['command']}`", "", f"Machine: {r['machine']}", "",
                  f"Date: {r['started']}", "",
                  "| system | load s | rows/s | GiB on disk |", "|---|---|---|---|"]
        lines += [f"| {p['system']} | {p['seconds']:.1f} | {p['rows'] / p['seconds']:,.0f} | {p['bytes'] / 2**30:.2f} |"
                  for p in r["loads"]]
        for p in r["loads"]:
            if p.get("prepared", {}).get("tried"):
                lines += ["", f"{p['system']}: the index kept, {p['prepared']['index']}, was the fastest of these "
                          "(load seconds include building it; median EXPLAIN ANALYZE execution of the sample sum boxes):",
                          "", "| index | build s | median ms | scans |", "|---|---|---|---|"]
                lines += [f"| {t['index']} | {t['build_seconds']:.1f} | {t['median_ms']} | {t['plans']} |"
                          for t in p["prepared"]["tried"]]
        for store, t in r.get("tuning", {}).items():
            lines += ["", f"gridagg on the {store} store, tuned first (--tune): {t['questions']} questions sampled, "
                      f"{t['changes']:,} changes in {t['rounds']} rounds, {t['leaves_before']:,} leaves to "
                      f"{t['leaves_after']:,}, {t['seconds']:.0f} s"]
        for store, rows in r["systems"].items():
            lines += ["", f"gridagg on the {store} store:", "",
                      "| question | gridagg ms (HTTP) | best peer | peer ms | x | answers |", "|---|---|---|---|---|---|"]
            for m in rows:
                best = min(m["peers"], key=m["peers"].get) if m["peers"] else None
                ms = m["peers"][best] if best else float("nan")
                lines.append(f"| {m['question']} | {m['gridagg_ms']:.2f} ({m['http_ms']:.1f}) | {best} | {ms:.2f} | "
                             f"{ms / m['gridagg_ms']:.1f} | {'equal' if m['agree'] else 'DIFFER'} |")
        lines += served_table(r)
        if r.get("explain"):
            lines += ["", "PostgreSQL alone, EXPLAIN (ANALYZE, BUFFERS) of one sum query at its served knobs:", "",
                      "```", r["explain"], "```"]
        lines.append("")
    return write(docs / REPORT, lines, plot(fresh(docs), runs))


def plot(folder: Path, runs: list[dict]) -> list[Path]:
    """p50 against rows per system (median over the questions), log-log, in
    folder/p50.png (none without matplotlib)."""
    plt = pyplot()
    if plt is None:
        log("matplotlib missing: no plot")
        return []
    series: dict[str, list[tuple[int, float]]] = {}
    for r in runs:
        for store, rows in r["systems"].items():
            series.setdefault(f"gridagg-{store}", []).append((r["rows"], statistics.median(m["gridagg_ms"] for m in rows)))
        first = next(iter(r["systems"].values()), [])
        for label in (first[0]["peers"] if first else {}):
            series.setdefault(label, []).append((r["rows"], statistics.median(m["peers"][label] for m in first)))
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for label, pts in sorted(series.items()):
        pts.sort()
        ax.plot([p[0] for p in pts], [p[1] for p in pts], "-o" if label.startswith("gridagg") else "--s", label=label)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("rows")
    ax.set_ylabel("p50 in process, ms (median over the questions)")
    ax.legend(fontsize=7)
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(folder / "p50.png", dpi=110)
    plt.close(fig)
    return [folder / "p50.png"]


def main(argv: list[str] | None = None) -> int:
    import sys

    p = argparse.ArgumentParser(prog="python -m gridagg_loadtest.bench.scale", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--archive", required=True, help="the generator's Parquet directory the datasets were loaded from")
    p.add_argument("--config", required=True, help="the ingest config the datasets were loaded with")
    p.add_argument("--dataset", action="append", required=True, metavar="STORE=NAME",
                   help="a gridagg dataset loaded from the archive, and its store (embedded or hbase); repeatable")
    p.add_argument("--peers", nargs="*", default=list(IN_PROCESS), choices=list(PEERS),
                   help="peers to load and ask (default: the in-process ones); pg (PostgreSQL alone) is served only, "
                        "so it needs --clients")
    p.add_argument("--pg-shared-buffers", metavar="SIZE",
                   help="PostgreSQL's shared_buffers for the run, with --peers pg (restarts the local server, and "
                        "again after; default a quarter of the memory, as its docs advise); 'keep' leaves it as it is")
    p.add_argument("--tune", type=int, default=0, metavar="N",
                   help="first adapt each gridagg dataset's tree to the dashboard's questions and N of the paper's "
                        "sum boxes from another seed, in place, as its online tuner would (default 0: measure the "
                        "tree as it is)")
    p.add_argument("--tune-minutes", type=float, metavar="M",
                   help="with --tune, start no tuning round after M minutes (a tree that trades splits for "
                        "merges without end at its leaf budget; default: until a round changes nothing)")
    p.add_argument("--repeat", type=int, default=5, help="runs per p50 in process (default 5)")
    p.add_argument("--seed", type=int, default=1, help="seed of the paper's boxes")
    p.add_argument("--clients", type=int, nargs="*", default=[],
                   help="serve every system and drive the paper's min and sum at these client counts "
                        "(default: none, no served runs)")
    p.add_argument("--shapes", nargs="+", type=shape, default=SHAPES, metavar="WxT",
                   help=f"server shapes (workers x threads) offered to every served system "
                        f"(default {' '.join(map(str, SHAPES))})")
    p.add_argument("--requests", type=int, default=5000, help="most answers counted per served run (default 5000)")
    p.add_argument("--seconds", type=float, default=15, help="most seconds per served run (default 15)")
    p.add_argument("--rounds", type=int, default=3,
                   help="served runs of each aggregate and client count per system, the systems taking turns; "
                        "each system's figure is its median round (default 3)")
    p.add_argument("--warmup-runs", type=int, default=40, help="most warm-up runs per served system and aggregate")
    p.add_argument("--out", metavar="DIR",
                   help="where the run's data goes, scale-<rows>.json, and the servers' logs; the report covers every "
                        "scale-*.json there (default <data dir>/bench/scale)")
    p.add_argument("--docs", metavar="DIR",
                   help="where the report goes, README.md and p50.png, replacing the previous run's (default "
                        "docs/bench/scale of the checkout; installed without a checkout: --out)")
    p.add_argument("--keep", action="store_true", help="keep the peers' copies (default: dropped once measured)")
    args = p.parse_args(argv)
    if "pg" in args.peers and not args.clients:
        p.error("--peers pg is served only: give --clients too")
    if args.tune_minutes is not None and not args.tune:
        p.error("--tune-minutes caps the tuning of --tune N: give --tune too")
    args.command_line = "python -m gridagg_loadtest.bench.scale " + " ".join(sys.argv[1:] if argv is None else argv)
    settings = Settings.from_env()
    args.out = str(bench_out(settings, args.out, "scale"))
    args.docs = str(bench_docs(args.docs, "scale", Path(args.out)))
    run(settings, args)
    print((Path(args.docs) / REPORT).read_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
