"""Bulk-ingest benchmark: end-to-end rows/s of the job next to loading the same rows into
each store alone, measured in one run.

    python -m gridagg_ingest.generate --rows 1000000 --out /tmp/gen-1m
    python -m gridagg_loadtest.bench.ingest ingest/examples/weather_generated.toml /tmp/gen-1m --stores embedded hbase

1. the job (run_ingest) loads the inputs into a fresh dataset, once per --stores entry
   (--repeat N: N rounds over the stores, each into a fresh dataset):
   read -> encode -> tree -> rows in the store + aggregates + directory committed in
   PostgreSQL (timed end to end; the start of the Spark session and of its Python
   workers is excluded, and both printed apart);
2. the same good rows, encoded by the same Spark code, are collected once (not timed),
   then loaded (timed) by:
   - gridagg's bulk load of encoded rows (ingest.job.load_encoded: the job without
     reading and encoding), into each --stores entry;
   - PostgreSQL COPY into a plain table (no index): the floor of any PostgreSQL load;
   - PostgreSQL alone as the bench's peer loads it: COPY, VACUUM ANALYZE, then its
     covering B-tree over the dimensions (gridagg_loadtest.peers.postgres), --repeat times;
   - HBase alone as the bench's peer loads it: batched puts through Thrift, row key =
     time + element ID, one cell per row (gridagg_loadtest.peers.hbase); --no-hbase skips it.

The table gives every speed also as a multiple of each store alone's, in its fastest run.
Datasets and tables are dropped at the end unless --keep. The report, README.md with a
plot of the speeds, goes to --docs (by default docs/bench/ingest of the checkout,
replaced on each run); the run's data, results.json, to --out (by default <data
dir>/bench/ingest).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
import uuid
from dataclasses import replace
from pathlib import Path

import numpy as np

from gridagg.config import Settings

from ..reports import (
    REPORT,
    bench_docs,
    bench_out,
    fresh,
    header,
    machine,
    pyplot,
    stamp,
    write,
)

PG_ALONE = "PostgreSQL alone (COPY + VACUUM ANALYZE + B-tree)"
HBASE_ALONE = "HBase alone (batched Thrift puts)"


def copy_plain(settings: Settings, table: str, ids: list[bytes], values: np.ndarray) -> float:
    """Seconds to COPY rows (eid, c0..) into a fresh table without indexes and commit."""
    import psycopg

    cols = ", ".join(f"c{i} bigint" for i in range(values.shape[1]))
    step = 100_000  # rows turned into text at a time: all 10M at once took 12 GB
    chunks = []
    for s in range(0, len(values), step):
        body = np.char.mod("%d", values[s:s + step]).tolist()
        chunks.append("".join("\t".join((i.decode(), *r)) + "\n" for i, r in zip(ids[s:s + step], body)).encode())
    with psycopg.connect(settings.effective_pg_url) as conn:
        conn.execute(f"DROP TABLE IF EXISTS {table}")
        conn.execute(f"CREATE TABLE {table} (eid text, {cols})")
        conn.commit()
        t0 = time.perf_counter()
        with conn.cursor() as cur:
            with cur.copy(f"COPY {table} FROM STDIN") as cp:
                for chunk in chunks:
                    cp.write(chunk)
        conn.commit()
        secs = time.perf_counter() - t0
        conn.execute(f"DROP TABLE IF EXISTS {table}")
        conn.commit()
        return secs


def start_python_workers(spark) -> float:
    """Seconds to start Spark's Python workers with a trivial Arrow job on every core. The
    first Python job of a session pays it (seconds here, against about 10 s for a warm
    1M-row load), so it is timed apart: otherwise whichever store runs first carries it."""
    def passthrough(batches):
        yield from batches

    n = spark.sparkContext.defaultParallelism
    t0 = time.perf_counter()
    spark.range(0, n, numPartitions=n).mapInArrow(passthrough, "id long").count()
    return time.perf_counter() - t0


def drop_dataset(settings: Settings, name: str) -> None:
    """Drop a gridagg dataset the bench loaded (its directory and its store's cells)."""
    from gridagg.engine import GridEngine

    with GridEngine.open(settings) as engine:
        engine.drop_dataset(name)


def peer_load(settings: Settings, kind: str, ds, ids: list[bytes], values: np.ndarray, keep: bool) -> float:
    """Seconds the bench's peer `kind` takes to load the rows and make them ready to
    serve (its load, then what it prepares without sample queries)."""
    from ..peers import open_peer
    from .archive import batches

    peer = open_peer(kind, settings)
    try:
        peer.create(ds)
        t0 = time.perf_counter()
        peer.load(ds, batches(ids, values, 20000))
        peer.prepare(ds, [])
        secs = time.perf_counter() - t0
        if not keep:
            peer.drop(ds.name)
        return secs
    finally:
        peer.close()


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m gridagg_loadtest.bench.ingest", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__.split("\n\n", 1)[1])
    p.add_argument("config", help="dataset config (TOML), e.g. ingest/examples/weather_generated.toml")
    p.add_argument("inputs", nargs="+", help="input files, directories or globs")
    p.add_argument("--master", default="local[*]", help="Spark master (default local[*])")
    p.add_argument("--stores", nargs="+", choices=["embedded", "hbase"], default=["embedded"],
                   help="run the job into each of these stores (default: embedded)")
    p.add_argument("--no-peers", action="store_true", help="time the job only")
    p.add_argument("--no-hbase", action="store_true", help="skip the HBase-alone load")
    p.add_argument("--repeat", type=int, default=1, metavar="N",
                   help="run the job N times per store, each into a fresh dataset: the first run of the "
                        "session carries the JVM's warm-up, later ones show a warm session (default 1)")
    p.add_argument("--keep", action="store_true", help="keep the datasets and the peers' tables")
    p.add_argument("--out", metavar="DIR", help="where the run's data goes: results.json (default <data dir>/bench/ingest)")
    p.add_argument("--docs", metavar="DIR",
                   help="where the report goes, README.md and speeds.png, replacing the previous run's (default "
                        "docs/bench/ingest of the checkout; installed without a checkout: --out)")
    return p


def measure(settings: Settings, args) -> dict:
    """The loads (see the module docstring): {"results": [(what, rows, seconds)],
    "session_start", "workers_start": seconds}."""
    from gridagg_ingest.config import load_config
    from gridagg_ingest.encode import encode
    from gridagg_ingest.job import (
        Progress,
        load_encoded,
        run_ingest,
        spark_session,
        write_encoded,
    )
    from gridagg_ingest.readers import expand_inputs, read_source

    cfg = load_config(args.config)
    tag = uuid.uuid4().hex[:8]
    t0 = time.perf_counter()
    spark = spark_session(args.master, settings=settings.with_(store="hbase") if "hbase" in args.stores else None)
    spark.range(1).count()  # session warm-up, not timed
    session_start = time.perf_counter() - t0
    workers_start = start_python_workers(spark)
    results: list[tuple[str, int, float]] = []

    for run in range(1, args.repeat + 1):
        for store in args.stores:
            run_cfg = replace(cfg, dataset=replace(cfg.dataset, name=f"bench_{store[:2]}_{tag}_{run}"))
            s = settings.with_(store=store)
            summary = run_ingest(spark, s, run_cfg, args.inputs, progress=Progress(spark=spark))
            print("\n".join(summary.lines()), flush=True)
            label = f"gridagg ingest ({store} store + PostgreSQL)" + (f", run {run}" if args.repeat > 1 else "")
            results.append((label, summary.read, summary.seconds))
            if not args.keep:
                drop_dataset(s, run_cfg.dataset.name)

    if not args.no_peers:
        ncols = len(cfg.dataset.columns)
        print("collecting the encoded rows for the peers (not timed)", file=sys.stderr, flush=True)
        enc = encode(read_source(spark, cfg, expand_inputs(args.inputs)), cfg)
        good = enc.filter("_reason IS NULL").select("_eid", *[f"c{i}" for i in range(ncols)]).toPandas()
        ids = [e.encode() for e in good["_eid"].tolist()]
        values = good[[f"c{i}" for i in range(ncols)]].to_numpy(dtype=np.int64)
        del good
        n = len(values)
        ds = replace(cfg.dataset, name=f"bench_{tag}")
        # gridagg's own share of the work: the same encoded rows, as the peers get them.
        encoded = write_encoded(ids, values, Path(tempfile.mkdtemp(prefix="gridagg-bench-")) / "rows.parquet")
        for store in args.stores:
            s = settings.with_(store=store)
            enc_ds = replace(cfg.dataset, name=f"bench_{store[:2]}_enc_{tag}")
            summary = load_encoded(spark, s, enc_ds, spark.read.parquet(str(encoded)), progress=Progress(quiet=True))
            results.append((f"gridagg bulk load of the encoded rows ({store})", summary.read, summary.seconds))
            if not args.keep:
                drop_dataset(s, enc_ds.name)
        shutil.rmtree(encoded.parent, ignore_errors=True)
        print("PostgreSQL COPY ...", file=sys.stderr, flush=True)
        results.append(("PostgreSQL COPY (plain table, no index)", n, copy_plain(settings, f"bench_{tag}_copy", ids, values)))
        for run in range(1, args.repeat + 1):  # seconds each, so as many runs as the job's
            print("PostgreSQL alone ...", file=sys.stderr, flush=True)
            results.append((PG_ALONE + (f", run {run}" if args.repeat > 1 else ""), n,
                            peer_load(settings, "pg", replace(ds, name=f"{ds.name}_{run}"), ids, values, args.keep)))
        if not args.no_hbase:
            print("HBase alone ...", file=sys.stderr, flush=True)
            results.append((HBASE_ALONE, n, peer_load(settings, "hbase", ds, ids, values, args.keep)))
    spark.stop()
    return {"results": results, "session_start": session_start, "workers_start": workers_start}


def report(meta: dict, run: dict) -> list[str]:
    """The report's lines: what was loaded, the table, what the table leaves out."""
    return [*header("Bulk ingest: the job end to end beside loading each store alone", meta["command"],
                    meta["machine"], meta["started"]),
            f"Config {meta['config']}, inputs {', '.join(meta['inputs'])}: each load's rows, seconds and rows/s, "
            "and its speed as a multiple of each store alone's fastest run (see `python -m "
            "gridagg_loadtest.bench.ingest --help` for what each line times).", "",
            *table(run["results"]), "",
            f"Not in the table: starting the Spark session took {run['session_start']:.1f} s and starting its Python "
            f"workers {run['workers_start']:.1f} s, paid once per session (a fresh `gridagg ingest` pays both on top "
            "of its job). A machine's first session also writes the JVM's class archive as it exits "
            "(ingest.class_archive)."]


def plot(folder: Path, results: list[tuple[str, int, float]]) -> list[Path]:
    """Each load's rows/s as a bar, in folder/speeds.png (none without matplotlib)."""
    plt = pyplot()
    if plt is None or not results:
        return []
    fig, ax = plt.subplots(figsize=(8, 0.35 * len(results) + 1.2))
    ax.barh([what for what, _, _ in results], [rows / secs if secs else 0 for _, rows, secs in results])
    ax.invert_yaxis()
    ax.tick_params(axis="y", labelsize=7)
    ax.set_xlabel("rows / s")
    ax.grid(True, axis="x", alpha=0.3)
    path = folder / "speeds.png"
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return [path]


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    command = "python -m gridagg_loadtest.bench.ingest " + " ".join(sys.argv[1:] if argv is None else argv)
    meta = {"command": command, "machine": machine(), "started": stamp(), "config": args.config,
            "inputs": args.inputs}
    settings = Settings.from_env()
    out = bench_out(settings, args.out, "ingest")
    run = measure(settings, args)
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps({**meta, **run}, indent=1) + "\n")
    docs = bench_docs(args.docs, "ingest", out)
    print(write(docs / REPORT, report(meta, run), plot(fresh(docs), run["results"])).read_text())
    return 0


def table(results: list[tuple[str, int, float]]) -> list[str]:
    """The results as a Markdown table, with each one's speed as a multiple of each store
    alone's (its fastest run: the peers at their best)."""
    best = {}
    for what, rows, secs in results:
        for base in (PG_ALONE, HBASE_ALONE):
            if what.startswith(base) and secs:
                best[base] = max(best.get(base, 0.0), rows / secs)
    width = max(len(what) for what, _, _ in results)
    heads = [f"{'what':<{width}}", f"{'rows':>10}", f"{'seconds':>8}", f"{'rows/s':>10}",
             *(f"{'x ' + b.split(' (')[0]:>20}" for b in best)]
    out = ["| " + " | ".join(heads) + " |", "|" + "|".join("-" * (len(h) + 2) for h in heads) + "|"]
    for what, rows, secs in results:
        rate = rows / secs if secs else 0.0
        cells = [f"{what:<{width}}", f"{rows:>10,}", f"{secs:>8.1f}", f"{rate:>10,.0f}",
                 *(f"{rate / b:>20.2f}" for b in best.values())]
        out.append("| " + " | ".join(cells) + " |")
    return out


if __name__ == "__main__":
    sys.exit(main())
