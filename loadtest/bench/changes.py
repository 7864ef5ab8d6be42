"""`python -m gridagg_loadtest.bench.changes`: deletes, retention and a drop, timed, on
both stores, each against its target (issue 95).

For each store (--store, default both) it loads the archive into a fresh dataset with
the bulk load (`gridagg ingest`'s job: --inputs and the ingest config --config, or an
archive of --rows rows generated first with the generator), holds its tree as a serving
process does, and then times, one after another:

1. one station's month deleted (where longitude and latitude are the station's, time
   the month of one of its rows): target 1 s;
2. a box of about --box-rows rows deleted (a time window in the middle of the data,
   everything else whole; at most a tenth of the rows): target 10 s;
3. a retention round dropping the first year of the data (`retain` such that the
   cutoff is a year after the first row): target 60 s;
4. the changes' leftovers purged and the store compacted (HBase: a major compaction
   drops the deleted cells; the embedded store reuses the pages in place): measured;
5. the dataset dropped, and its disk back (HBase: until its table's files and their
   archive are gone, the cleaner's round included; the embedded store: the dataset's
   pages freed for reuse, the file keeping its size): target 60 s.

Every step's rows are counted before it (an exact query) and after it: the dataset
holds exactly the rows it should. The run's data goes to OUT/changes-<rows>.json (--out,
by default <data dir>/bench/changes), the report to README.md in --docs (by default
docs/bench/changes of the checkout), replacing the previous run's.

    python -m gridagg_loadtest.bench.changes --inputs /data/net-100m --config net100.toml
    python -m gridagg_loadtest.bench.changes --rows 1000000          # a generated archive
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import sys
import time
import uuid
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from decimal import Decimal
from pathlib import Path

from gridagg.config import Settings

from ..reports import REPORT, bench_docs, bench_out, fresh, header, machine, stamp, write
from .log import log
from .scale import disk_bytes

# Each step's target, seconds (issue 95, at 100M rows).
TARGETS = {"station month": 1.0, "box": 10.0, "retention, a year": 60.0, "drop, disk back": 60.0}
DISK_BACK_PATIENCE = 600.0  # how long a dropped HBase table's files are waited for, seconds


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m gridagg_loadtest.bench.changes", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    source = ap.add_mutually_exclusive_group(required=True)
    source.add_argument("--inputs", nargs="+", metavar="PATH", help="the archive: files, directories or globs")
    source.add_argument("--rows", type=int, help="generate an archive of this many rows first")
    ap.add_argument("--config", help="the ingest config of the archive (default: the example weather_generated)")
    ap.add_argument("--store", action="append", choices=["embedded", "hbase"],
                    help="a store to measure (repeatable; default both)")
    ap.add_argument("--box-rows", type=int, default=1_000_000, help="rows of the box deleted (default 1,000,000)")
    ap.add_argument("--seed", type=int, default=1, help="seed of a generated archive (default 1)")
    ap.add_argument("--out", metavar="DIR", help="where the run's data goes (default <data dir>/bench/changes)")
    ap.add_argument("--docs", metavar="DIR", help="where the report goes (default docs/bench/changes of the checkout)")
    args = ap.parse_args(argv)
    settings = Settings.from_env()
    stores = args.store or ["embedded", "hbase"]
    out = bench_out(settings, args.out, "changes")
    out.mkdir(parents=True, exist_ok=True)
    command = "python -m gridagg_loadtest.bench.changes " + " ".join(argv if argv is not None else sys.argv[1:])
    started = stamp()
    from gridagg_ingest.job import spark_session, stop_spark

    spark = spark_session(settings=settings.with_(store="hbase") if "hbase" in stores else settings)
    try:
        cfg, inputs, workdir = _archive(spark, settings, args, out)
        results = [measure(spark, settings.with_(store=store), cfg, inputs, args.box_rows) for store in stores]
    finally:
        stop_spark(spark)
    if workdir is not None:
        shutil.rmtree(workdir, ignore_errors=True)
    rows = results[0]["rows"] if results else 0
    run = {"command": command, "machine": machine(), "started": started, "results": results}
    (out / f"changes-{rows}.json").write_text(json.dumps(run, indent=2))
    docs = fresh(bench_docs(args.docs, "changes", out))
    log(f"report: {write(docs / REPORT, report(run))}")
    return 0


def _archive(spark, settings: Settings, args, out: Path):
    """(ingest config, input paths, a directory to remove after or None): the archive
    given, or one of args.rows rows generated under `out`."""
    from gridagg_ingest.cli import example_config
    from gridagg_ingest.config import load_config

    cfg = load_config(args.config or example_config("weather_generated"))
    if args.inputs:
        return cfg, args.inputs, None
    from gridagg_ingest.generate import generate

    from .archive import WEATHER

    workdir = out / f"archive-{args.rows}"
    files = generate([str(WEATHER)], args.rows, str(workdir), cfg.format, args.seed,
                     progress=lambda m: log(f"  generate: {m}"))
    return cfg, files, workdir


def measure(spark, settings: Settings, cfg, inputs: list[str], box_rows: int) -> dict:
    """Load the archive into a fresh dataset of settings.store and time the steps (the
    module docstring): {"store", "rows", "load_seconds", "steps": [...]}."""
    from gridagg_ingest.job import Progress, run_ingest

    from gridagg.engine import GridEngine

    name = f"changes_{settings.store[:2]}_{uuid.uuid4().hex[:6]}"
    cfg = replace(cfg, dataset=replace(cfg.dataset, name=name))
    log(f"{settings.store}: loading {name}")
    summary = run_ingest(spark, settings, cfg, [str(p) for p in inputs], progress=Progress(spark=spark))
    engine = GridEngine.open(settings)
    try:
        ds = engine.dataset(name)
        engine.query(name, {}, ["count"])  # the tree in memory, as a serving process holds it
        loaded = _bytes(engine, ds)
        steps = [_station_month(engine, ds, inputs, cfg), _box(engine, ds, box_rows), _year(engine, ds),
                 _compact(engine, ds, loaded), _drop(engine, ds, settings)]
    except BaseException:
        engine.drop_dataset(name)
        raise
    finally:
        engine.close()
    return {"store": settings.store, "rows": summary.loaded, "load_seconds": round(summary.seconds, 1),
            "leaves": summary.leaves_after, "steps": steps}


def _count(engine, name: str, where: dict | None = None) -> int:
    return engine.query(name, where or {}, ["count"]).values["count"]


def _timed_change(engine, ds, step: str, where: dict | None, change) -> dict:
    """Time change() (a delete or retention round), checking that it took exactly the
    rows `where` selected (None: the count the change gives back)."""
    total = _count(engine, ds.name)
    wanted = None if where is None else _count(engine, ds.name, where)
    leaves = engine.directory.leaf_count(ds.name)
    began = time.perf_counter()
    done = change()
    seconds = time.perf_counter() - began
    gone = done.rows_before - done.rows_after
    left = _count(engine, ds.name)
    if left != total - gone or (wanted is not None and gone != wanted):
        raise RuntimeError(f"{step}: {gone} rows went of {wanted}; {total} -> {left}")
    log(f"  {step}: {gone:,} rows in {seconds:.2f} s")
    return {"step": step, "rows": gone, "seconds": round(seconds, 3),
            "leaves": f"{leaves} -> {engine.directory.leaf_count(ds.name)}", "where": where}


def _station_month(engine, ds, inputs: list[str], cfg) -> dict:
    """Step 1: the month of the archive's first row, at its station's place."""
    import pyarrow.csv as pcsv
    import pyarrow.parquet as pq
    from gridagg_ingest.readers import expand_inputs

    first = expand_inputs(inputs)[0]
    table = (pq.read_table(first) if first.endswith(".parquet") else pcsv.read_csv(first)).slice(0, 1).to_pylist()[0]
    at = datetime.fromtimestamp(int(table["timestamp"]), timezone.utc)
    month = at.replace(day=1, hour=0, minute=0, second=0)
    end = (month + timedelta(days=32)).replace(day=1) - timedelta(seconds=1)
    lon, lat = (str(Decimal(str(table[c])).quantize(Decimal("0.001"))) for c in ("longitude", "latitude"))
    where = {"longitude": [lon, lon], "latitude": [lat, lat], "time": [month.isoformat(), end.isoformat()]}
    return _timed_change(engine, ds, "station month", where, lambda: engine.delete(ds.name, where, wait=math.inf))


def _box(engine, ds, rows: int) -> dict:
    """Step 2: a time window in the middle of the data holding about `rows` rows (at most
    a tenth of them: a year must be left for step 3)."""
    span = engine.query(ds.name, {}, ["count", "min:time", "max:time"]).to_json(ds)["results"]
    t0, t1 = (datetime.fromisoformat(span[k].replace("Z", "+00:00")) for k in ("min:time", "max:time"))
    width = (t1 - t0) * min(0.1, rows / span["count"])
    middle = t0 + (t1 - t0) / 2
    where = {"time": [(middle - width / 2).isoformat(), (middle + width / 2).isoformat()]}
    return _timed_change(engine, ds, "box", where, lambda: engine.delete(ds.name, where, wait=math.inf))


def _year(engine, ds) -> dict:
    """Step 3: a retention of 10 years at a time 11 years after the first row."""
    first = engine.query(ds.name, {}, ["min:time"]).to_json(ds)["results"]["min:time"]
    t0 = datetime.fromisoformat(first.replace("Z", "+00:00"))
    now = t0.replace(year=t0.year + 11) if not (t0.month == 2 and t0.day == 29) else t0 + timedelta(days=11 * 365)
    engine.keep_for(ds.name, "10y")
    where = {"time": [None, (now.replace(year=now.year - 10) - timedelta(seconds=1)).isoformat()]}
    return _timed_change(engine, ds, "retention, a year", where, lambda: engine.retain(ds.name, now=now, wait=math.inf))


def _compact(engine, ds, loaded: int) -> dict:
    """Step 4: the changes' old rows purged (no query is running: nothing needs them),
    then the store compacted; the dataset's bytes as loaded and after (HBase: once the
    files the compaction replaced have left the table's directory)."""
    began = time.perf_counter()
    engine.max_query_seconds = 0.0
    try:
        # A round purges what is retired and folds (retiring the leaves it folds); the
        # second purges those.
        for _ in range(2):
            engine.retain(ds.name, now=datetime(2000, 1, 1, tzinfo=timezone.utc), wait=math.inf)
    finally:
        engine.max_query_seconds = 60.0
    done = engine.store.compact(ds)
    seconds = time.perf_counter() - began
    after, settled = _settled_bytes(engine, ds)
    log(f"  purge and compact: {loaded / 2**30:.2f} GiB loaded -> {after / 2**30:.2f} GiB in {seconds:.1f} s "
        f"(files settled {settled:.0f} s later)")
    return {"step": "purge and compact", "seconds": round(seconds, 1), "bytes_before": loaded, "bytes_after": after,
            "settled_seconds": round(settled), "done": done or "nothing to compact (LMDB reuses freed pages in place)"}


def _settled_bytes(engine, ds, every: float = 10.0, patience: float = 400.0) -> tuple[int, float]:
    """(the dataset's bytes once the files a compaction replaced have left its table's
    directory, seconds waited): HBase moves them out at its discharger's next round,
    every two minutes; here, once the bytes fell and then stayed for two looks `every`
    seconds apart (at most `patience` seconds). The embedded store's are final at once."""
    began, seen = time.perf_counter(), [_bytes(engine, ds)]
    while engine.store.kind == "hbase" and time.perf_counter() - began < patience:
        if min(seen) < seen[0] and seen[-1] == seen[-2] == seen[-3]:
            break
        time.sleep(every)
        seen.append(_bytes(engine, ds))
    return seen[-1], time.perf_counter() - began


def _drop(engine, ds, settings: Settings) -> dict:
    """Step 5: the drop, and its disk back."""
    held = _bytes(engine, ds)
    began = time.perf_counter()
    engine.drop_dataset(ds.name)
    dropped = time.perf_counter() - began
    back = _disk_back(engine, ds, settings, began)
    log(f"  drop: {dropped:.2f} s, {held / 2**30:.2f} GiB back after {back:.1f} s")
    return {"step": "drop, disk back", "seconds": round(back, 1), "drop_seconds": round(dropped, 2), "bytes": held}


def _bytes(engine, ds) -> int:
    """The dataset's bytes in the store: the embedded store's pages of its databases,
    HBase's files of its table (store files only: not the archive)."""
    if engine.store.kind == "hbase":
        from gridagg_hbase import jvm

        from gridagg.store.hbase.store import table_name

        return jvm.table_bytes(engine.store.settings, table_name(ds.name))
    dbs = [engine.store._db(ds.name, family) for family in ("s", "a")]  # opened before the transaction begins
    with engine.store.env.begin() as txn:
        return sum((s["branch_pages"] + s["leaf_pages"] + s["overflow_pages"]) * s["psize"]
                   for s in map(txn.stat, dbs))


def _disk_back(engine, ds, settings: Settings, began: float) -> float:
    """Seconds from `began` until the dropped dataset's disk is back: HBase, its table's
    directory and its archive gone (the master's cleaner deletes the archive); the
    embedded store, at once (LMDB put the pages on its free list in the drop's commit)."""
    if engine.store.kind != "hbase":
        return time.perf_counter() - began
    from gridagg_hbase import jvm

    from gridagg.store.hbase.store import table_name

    data = jvm.paths(settings).data
    places = [data / "data" / "default" / table_name(ds.name), data / "archive" / "data" / "default" / table_name(ds.name)]
    while any(p.exists() and disk_bytes(p) for p in places):
        if time.perf_counter() - began > DISK_BACK_PATIENCE:
            return math.inf
        time.sleep(1.0)
    return time.perf_counter() - began


def report(run: dict) -> list[str]:
    """The report's lines: each store's steps against their targets."""
    lines = [*header("Deletes, retention and drops", run["command"], run["machine"], run["started"]),
             "Each step on a fresh dataset loaded from the archive, one after another; its rows counted exactly "
             "before and after (the dataset holds exactly what it should). Targets are issue 95's, for 100M rows.",
             ""]
    for r in run["results"]:
        lines += [f"## {r['store']}: {r['rows']:,} rows ({r['leaves']:,} leaves; loaded in {r['load_seconds']:g} s)", "",
                  "| step | rows | seconds | target | leaves |", "|---|---|---|---|---|"]
        for s in r["steps"]:
            target = TARGETS.get(s["step"])
            verdict = "" if target is None else f"{target:g} s ({'held' if s['seconds'] <= target else 'missed'})"
            if s["step"] == "purge and compact":
                what = f"{s['bytes_before'] / 2**30:.2f} GiB as loaded -> {s['bytes_after'] / 2**30:.2f} GiB"
            elif s["step"] == "drop, disk back":
                what = f"{s['bytes'] / 2**30:.2f} GiB back (the drop itself {s['drop_seconds']:g} s)"
            else:
                what = f"{s['rows']:,}"
            lines.append(f"| {s['step']} | {what} | {s['seconds']:g} | {verdict} | {s.get('leaves', '')} |")
        if r["store"] == "hbase":
            lines += ["", "HBase deletes a dropped table's files from its archive at its cleaner's round after their "
                          "time to live (the local HBase: `hbase.master.hfilecleaner.ttl` and the cleaner's interval, 15 s "
                          "each): the disk comes back within half a minute of the drop, whatever the table's size."]
        lines.append("")
    return lines


if __name__ == "__main__":
    sys.exit(main())
