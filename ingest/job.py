"""The bulk ingest job: source files -> grid tree, raw rows, aggregates, directory.

Steps (the driver holds the dataset's writer lock throughout and only ever handles
per-leaf summaries, never raw rows):

1. read and encode the inputs in Spark, and locate each good row's current leaf (leaf
   boxes broadcast, numpy descent) in the same Python pass. Rows leave every Python pass
   packed per bucket (ingest.buckets): Spark shuffles a few thousand Arrow streams, not
   millions of rows. Here the bucket is a hash of the element ID; bad rows only count;
2. per element-ID bucket: keep one row per element ID (a deterministic choice among
   repeats) and count the input rows behind it; pack the rows per bucket of their leaf;
3. per leaf bucket, one leaf at a time: read the leaf's stored rows from the store, drop
   new rows whose element ID is stored already (a touched leaf's content after the load
   is exactly stored rows + new rows), and build the leaf's whole subtree on numpy arrays
   with Algorithm 2's semantics (gridagg.grid.choose_cut / children): a leaf splits while
   it holds more than N_size rows if it was empty before the load, or if it holds more
   than N_threshold (then down to N_size);
4. the same task writes new rows and moved rows under their final keys (in batches, its
   own store connection) and returns only a summary: counts, and every resulting leaf's
   box and aggregate (recomputed from its full content). Into the local HBase
   (ingest.hfiles) the task returns the rows packed per region instead, and the
   executors' JVM writes them as HFiles, one per task and region;
5. (driver) nothing but those summaries comes back;
6. write aggregates: every touched leaf's as recomputed in step 3, every ancestor's as
   the merge of its leaves (no deltas anywhere). With HFiles, the driver writes them as
   one more file per region and has the region server load all the files;
7. switch the directory in one PostgreSQL transaction (old leaves out, new leaves in,
   old leaves marked retired). Moved rows' old keys stay for queries that still see the
   old leaves; the engine purges retired leaves' rows once no query can need them
   (GridEngine.purge_retired, run by every later write, this job's start included);
8. only if step 1 counted bad rows: read and encode the inputs again, keeping the bad
   rows, and write them with their reasons to the quarantine output. A clean input is
   read once: caching every raw row in case some were bad cost about 3 s per 1M rows.

Crash safety: before step 7 nothing a reader uses has changed except rows under live
leaves (which are then also in the aggregates recomputed on the rerun); since step 3
derives everything from input + store, a rerun of the same input recomputes the same
tree, rewrites the same keys, and ends exact. After step 7 a rerun finds every row
stored and has nothing left to do.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from gridagg.aggregate import PartialAggregate
from gridagg.config import Settings
from gridagg.directory import GridDirectory
from gridagg.engine import GridEngine
from gridagg.errors import DatasetExists, InvalidInput, UnknownDataset
from gridagg.schema import Dataset
from gridagg.grid import Grid, ancestors, children, choose_cut, grid_prefix, prefix_range
from gridagg.store import open_store

from . import buckets, hfiles
from .config import IngestConfig
from .encode import encode, with_leaf
from .readers import expand_inputs, read_source
from .tree import SplitTree

WRITE_BATCH = 20000
HOLD_ROWS = 1 << 18  # rows a task of step 1 holds before it packs them


@dataclass
class Summary:
    dataset: str
    files: int = 0
    read: int = 0
    loaded: int = 0
    duplicates: int = 0
    quarantined: int = 0
    reasons: dict[str, int] = field(default_factory=dict)
    quarantine_path: str | None = None
    leaves_before: int = 0
    leaves_after: int = 0
    leaves_split: int = 0
    rows_moved: int = 0
    seconds: float = 0.0

    def lines(self) -> list[str]:
        rate = self.read / self.seconds if self.seconds else 0.0
        out = [
            f"dataset {self.dataset}: {self.files} files, {self.read} rows read",
            f"  loaded       {self.loaded}",
            f"  duplicates   {self.duplicates}  (element ID already stored or repeated in the input)",
            f"  quarantined  {self.quarantined}" + (f"  -> {self.quarantine_path}" if self.quarantine_path else ""),
        ]
        for reason, n in sorted(self.reasons.items(), key=lambda kv: -kv[1])[:10]:
            out.append(f"      {n:>10}  {reason}")
        out.append(f"  leaves       {self.leaves_before} -> {self.leaves_after} "
                   f"({self.leaves_split} split, {self.rows_moved} stored rows moved)")
        out.append(f"  elapsed      {self.seconds:.1f} s ({rate:,.0f} rows/s)")
        return out

    def to_json(self) -> dict:
        return dict(self.__dict__)


def spark_session(master: str | None = None, app: str = "gridagg-ingest", shuffle_partitions: int | None = None,
                  settings: Settings | None = None):
    """A SparkSession for the job (or the one spark-submit made: its master wins). Given
    the settings of the jobs to run, the session can bulk-load HFiles when they apply
    (ingest.hfiles): their classpath is only taken when the JVM starts."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app)
    if master:
        builder = builder.master(master)
    elif not os.environ.get("PYSPARK_GATEWAY_PORT"):  # under spark-submit its --master wins
        master = os.environ.get("GRIDAGG_SPARK_MASTER", "local[*]")
        builder = builder.config("spark.master", master)
    bulk_cp = hfiles.classpath(settings, master) if settings is not None and master else None
    if bulk_cp:
        builder = builder.config("spark.driver.extraClassPath", bulk_cp)
    # The driver JVM runs C1-compiled code only. Its per-row work is small (packed rows,
    # HFile cells), and on two cores the C2 compiler's CPU cost more than its faster code
    # saved: 1M rows, a session's first job 8.2 s against 9.2 s; 10M rows 56.9 s against
    # 60.3 s, with the same 19.3 s of task CPU in the JVM. Its heap starts at full size:
    # growing it from the default kept G1 busy in a session's first job (1M rows, 4.56-4.70 s
    # against 4.67-5.80 s).
    memory = os.environ.get("GRIDAGG_SPARK_DRIVER_MEMORY", "2g")
    builder = builder.config("spark.driver.extraJavaOptions", f"-XX:TieredStopAtLevel=1 -Xms{memory}")
    builder = (builder.config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.sql.execution.arrow.pyspark.enabled", "true")
               # The driver has expanded local inputs to files already; above this many
               # paths Spark lists them again in a job of one task per file (7-10 s for
               # 1142 files, against 0.7-2 s listed on the driver).
               .config("spark.sql.sources.parallelPartitionDiscovery.threshold", "1000000")
               .config("spark.driver.memory", memory))
    if shuffle_partitions:
        builder = builder.config("spark.sql.shuffle.partitions", str(shuffle_partitions))
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    spark.conf.set("spark.sql.session.timeZone", "UTC")
    # The job's JVM operators see a few thousand packed rows (ingest.buckets): compiling
    # whole-stage code for them cost more than it saved (a session's first 1M-row job
    # 12.5 s against 13.9-14.4 s, later ones the same).
    spark.conf.set("spark.sql.codegen.wholeStage", "false")
    if not shuffle_partitions and spark.conf.get("spark.sql.shuffle.partitions") == "200":
        # Leaf groups differ in size: 8 tasks per core keep every core busy to the end
        # (10M rows: 50-57 s against 54-60 s with 2 per core); Spark merges small ones.
        spark.conf.set("spark.sql.shuffle.partitions", str(spark.sparkContext.defaultParallelism * 8))
    if bulk_cp:
        hfiles.warm_up(spark, settings)
    return spark


class Progress:
    """Progress lines on the terminal: the job's own steps, and every few seconds the
    running Spark stage's task counts."""

    def __init__(self, out=sys.stderr, spark=None, every: float = 5.0, quiet: bool = False):
        self.out, self.t0, self.quiet = out, time.perf_counter(), quiet
        self._stop = threading.Event()
        self._thread = None
        if spark is not None and not quiet and every:
            self._thread = threading.Thread(target=self._watch, args=(spark, every), daemon=True)
            self._thread.start()

    def __call__(self, msg: str) -> None:
        if not self.quiet:
            print(f"ingest [{time.perf_counter() - self.t0:7.1f}s] {msg}", file=self.out, flush=True)
        pause = os.environ.get("GRIDAGG_INGEST_PAUSE_AT")
        if pause and msg.startswith(pause):
            # Test hook: stop here so a test can kill the job at a known point.
            time.sleep(float(os.environ.get("GRIDAGG_INGEST_PAUSE_SECONDS", "600")))

    def _watch(self, spark, every):
        tracker = spark.sparkContext.statusTracker()
        while not self._stop.wait(every):
            try:
                for sid in tracker.getActiveStageIds():
                    info = tracker.getStageInfo(sid)
                    if info:
                        print(f"ingest [{time.perf_counter() - self.t0:7.1f}s]   spark stage {sid}: "
                              f"{info.numCompletedTasks}/{info.numTasks} tasks", file=self.out, flush=True)
            except Exception:  # the status tracker is best effort
                pass

    def close(self):
        self._stop.set()


def ensure_dataset(engine: GridEngine, ds: Dataset) -> bool:
    """Create the dataset if it does not exist; check the definition if it does.
    Returns True when it was created."""
    try:
        current = engine.directory.dataset(ds.name)
    except UnknownDataset:
        try:
            engine.create_dataset(ds)
            return True
        except DatasetExists:
            current = engine.directory.dataset(ds.name)
    if current.to_json() != ds.to_json():
        raise InvalidInput(
            f"dataset {ds.name} exists with a different definition than the config file", field="dataset")
    engine.store.create_dataset(ds)
    return False


# -------------------------------------------------------------------- executor side


def _partition(grid: Grid, idx: np.ndarray, values: np.ndarray, agg: PartialAggregate, limit: int,
               n_size: int, ndim: int, ncols: int, final: list) -> None:
    """Algorithm 2 on numpy arrays: split `grid` (holding values[idx], aggregate agg)
    while it holds more than `limit` rows, its children while they hold more than
    n_size; appends (leaf, idx, agg) of every resulting leaf to `final`."""
    stack = [(grid, idx, agg, limit)]
    while stack:
        g, ix, a, lim = stack.pop()
        cut = choose_cut(g.next_axis, a.count, a.sums, a.mins, a.maxs, ndim) if a.count > lim else None
        if cut is None:
            final.append((g, ix, a))
            continue
        axis, at = cut
        low = values[ix, axis] <= at
        kids = children(g, axis, at, ndim)
        # Pushed high child first so that leaves come out in grid-ID order.
        for child, part in ((kids[1], ix[~low]), (kids[0], ix[low])):
            stack.append((child, part, PartialAggregate.of_rows(values[part], ncols), n_size))


def _build_leaf(store, ds, grid: Grid, eids: np.ndarray, new_values: np.ndarray) -> tuple[dict, list, np.ndarray]:
    """One touched leaf, all of it in this task: its stored rows (scanned from `store`,
    none when it is None), the new rows located in it (deduplicated against the stored
    ones by element ID), the subtree they make (Algorithm 2 semantics), and the rows to
    write under their final keys. Returns a small summary (counts and every resulting
    leaf's box and aggregate) and those rows: keys in order and their values."""
    import pyarrow as pa
    import pyarrow.compute as pc

    ncols, ndim = len(ds.columns), ds.ndim
    n_size, n_threshold = ds.grid.n_size, ds.grid.n_threshold

    old_keys: list[bytes] = []
    parts: list[np.ndarray] = []
    for keys, values in store.scan_rows(ds, *prefix_range(grid_prefix(grid.grid_id))) if store else ():
        old_keys.extend(keys)
        parts.append(values)
    n_old = len(old_keys)
    eid_bytes = [e.encode() for e in eids]
    if n_old:
        start = len(grid_prefix(grid.grid_id))
        old_eids = [k[start:] for k in old_keys]
        stored = set(old_eids)
        keep = np.fromiter((e not in stored for e in eid_bytes), dtype=bool, count=len(eid_bytes))
        if not keep.all():
            new_values = new_values[keep]
            eid_bytes = [e for e, k in zip(eid_bytes, keep) if k]
        values = np.concatenate(parts + [new_values]) if len(new_values) else np.concatenate(parts)
        all_eids = old_eids + eid_bytes
    else:
        values = new_values
        all_eids = eid_bytes
    n_new = len(eid_bytes)
    limit = n_size if n_old == 0 else n_threshold

    final: list = []
    _partition(grid, np.arange(len(values)), values, PartialAggregate.of_rows(values, ncols), limit,
               n_size, ndim, ncols, final)
    split = not (len(final) == 1 and final[0][0].grid_id == grid.grid_id)

    # Rows to write: every new row, and stored rows whose leaf changed. In key order: by
    # leaf prefix (none is a prefix of another), then by element ID (Arrow sorts bytes).
    eid_array = pa.array(all_eids, pa.binary())
    keys_sorted: list[bytes] = []
    idx_out: list[np.ndarray] = []
    moved = 0
    for leaf, ix, _ in sorted(final, key=lambda f: grid_prefix(f[0].grid_id)):
        if split:
            sel = ix
            moved += int((ix < n_old).sum())
        else:
            sel = ix[ix >= n_old]
        sel = sel[pc.sort_indices(eid_array.take(sel)).to_numpy()]
        prefix = grid_prefix(leaf.grid_id)
        keys_sorted.extend(prefix + all_eids[i] for i in sel.tolist())
        idx_out.append(sel)
    vals_sorted = values[np.concatenate(idx_out)] if keys_sorted else np.zeros((0, ncols), dtype=np.int64)
    info = {
        "n_old": n_old, "n_new": n_new, "written": len(keys_sorted), "moved": moved, "split": split,
        "leaves": [[leaf.grid_id, [list(b) for b in leaf.box], leaf.next_axis, a.count, a.sums, a.mins, a.maxs]
                   for leaf, _, a in final],
    }
    return info, keys_sorted, vals_sorted


def _to_eid_buckets(n_buckets: int, cols: list[str]):
    """Step 1's tail, on the located batches (`_eid`, c0.., `_leaf`; -1 for a bad row):
    good rows, with `_h` (a hash of the element ID), packed per bucket of that hash; bad
    rows only counted. Up to HOLD_ROWS rows are held so that blobs are few and large."""

    def fn(batches):
        import pyarrow as pa

        held, n_held, bad = [], 0, 0
        for batch in batches:
            good = batch.column("_leaf").to_numpy() >= 0
            bad += len(good) - int(good.sum())
            rows = pa.Table.from_batches([batch]).select(["_eid", *cols, "_leaf"]).filter(pa.array(good))
            held.append(rows.append_column("_h", pa.array(buckets.hash_strings(rows.column("_eid")))))
            n_held += rows.num_rows
            if n_held >= HOLD_ROWS:
                yield from _eid_split(held, bad)
                held, n_held, bad = [], 0, 0
        yield from _eid_split(held, bad)

    def _eid_split(held, bad):
        import pyarrow as pa

        rows = pa.concat_tables(held) if held else None
        if rows is None or not (rows.num_rows or bad):
            return []
        return buckets.split(rows, rows.column("_h").to_numpy() % np.uint64(n_buckets), bad=bad).to_batches()

    return fn


def _dedupe_fn(n_buckets: int, cols: list[str]):
    """Step 2, per element-ID bucket (applyInArrow): one row per element ID, the largest
    (c0, c1, ..) among repeats (a deterministic choice; the leaf follows from the values),
    with `_n`, the input rows behind it; packed per bucket of their leaf."""

    def fn(key, table):
        import pyarrow as pa
        import pyarrow.compute as pc

        if key[0].as_py() < 0:
            return buckets.bucketed([-1], [pc.sum(table.column("bad")).as_py()], [None])
        rows = buckets.unpack(table.column("blob"))
        n = rows.num_rows
        if len(np.unique(rows.column("_h").to_numpy())) == n:  # distinct hashes, so distinct IDs
            counts = np.ones(n, dtype=np.int64)
        else:
            rows = rows.take(pc.sort_indices(rows, sort_keys=[("_eid", "ascending"), *[(c, "descending") for c in cols]]))
            eid = rows.column("_eid").combine_chunks()
            starts = np.flatnonzero(np.r_[True, pc.not_equal(eid[1:], eid[:-1]).to_numpy(zero_copy_only=False)])
            counts = np.diff(np.r_[starts, n])
            rows = rows.take(pa.array(starts))
        rows = rows.drop_columns(["_h"]).append_column("_n", pa.array(counts, pa.int64()))
        return buckets.split(rows, rows.column("_leaf").to_numpy() % n_buckets)

    return fn


def _build_fn(settings, ds, btree, bgrids, write_batch: int, region_starts: list[bytes] | None, scan: bool):
    """Steps 3-4, per leaf bucket (applyInArrow): each leaf of the bucket built by
    _build_leaf (with the leaf's stored rows unless not `scan`: a new table has none;
    only with an HBase bulk load).
    Output rows (leaf, info) carry a leaf's summary. Given the region start keys of an
    HBase bulk load, the rows to write come out as rows (region, cells): one per region,
    its rows packed in key order (hfiles.pack_rows); else the task writes them to the
    store."""
    ncols = len(ds.columns)
    cols = [f"c{i}" for i in range(ncols)]

    def fn(key, table):
        import pyarrow as pa
        import pyarrow.compute as pc

        bucket = key[0].as_py()
        if bucket < 0:  # the bad rows: only counted here
            summaries, cells = [("", {"bad": pc.sum(table.column("bad")).as_py()})], []
        else:
            summaries, cells = _build_bucket(buckets.unpack(table.column("blob")))
        return pa.table({"leaf": pa.array([g for g, _ in summaries] + [None] * len(cells), pa.string()),
                         "info": pa.array([json.dumps(i) for _, i in summaries] + [None] * len(cells), pa.string()),
                         "region": pa.array([None] * len(summaries) + [r for r, _ in cells], pa.int32()),
                         "cells": pa.array([None] * len(summaries) + [c for _, c in cells], pa.binary())})

    def _build_bucket(rows):
        leaf = rows.column("_leaf").to_numpy()
        order = np.argsort(leaf, kind="stable")
        leaf = leaf[order]
        values = np.stack([rows.column(c).to_numpy() for c in cols], axis=1)[order]
        eids = rows.column("_eid").to_numpy(zero_copy_only=False)[order]
        inputs = rows.column("_n").to_numpy()[order]
        cuts = np.flatnonzero(np.diff(leaf)) + 1
        summaries, keys, vals = [], [], []
        store = open_store(settings) if scan else None
        try:
            for a, b in zip(np.r_[0, cuts].tolist(), np.r_[cuts, len(leaf)].tolist()):
                g = btree.value.ids[int(leaf[a])]
                box, next_axis = bgrids.value[g]
                grid = Grid(g, tuple(tuple(x) for x in box), next_axis)
                info, k, v = _build_leaf(store, ds, grid, eids[a:b], values[a:b])
                info["rows"] = int(inputs[a:b].sum())
                summaries.append((g, info))
                if region_starts is None:
                    for s in range(0, len(k), write_batch):
                        store.put_rows(ds, k[s:s + write_batch], v[s:s + write_batch])
                else:
                    keys.extend(k)
                    vals.append(v)
        finally:
            if store is not None:
                store.close()
        if region_starts is None or not keys:
            return summaries, []
        # Each leaf's keys are in order already: Timsort merges those runs.
        order = sorted(range(len(keys)), key=keys.__getitem__)
        keys = [keys[i] for i in order]
        vals = np.concatenate(vals)[np.asarray(order, dtype=np.int64)]
        return summaries, [(r, hfiles.pack_rows(keys[a:b], vals[a:b]))
                           for r, (a, b) in enumerate(hfiles.region_bounds(keys, region_starts)) if a < b]

    return fn


# -------------------------------------------------------------------- driver side


def run_ingest(spark, settings, cfg: IngestConfig, inputs: list[str], quarantine: str | None = None,
               progress=None, directory: GridDirectory | None = None, store=None) -> Summary:
    """Load the inputs into cfg's dataset (created if needed). `directory` and `store`
    default to ones opened from settings (and closed at the end); executors open their
    own store from settings."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    t0 = time.perf_counter()
    progress = progress or Progress(spark=spark)
    own_dir, own_store = directory is None, store is None
    directory = directory or GridDirectory(settings.effective_pg_url)
    store = store or open_store(settings)
    ds = cfg.dataset
    cols = [f"c{i}" for i in range(len(ds.columns))]
    summary = Summary(ds.name)
    try:
        paths = expand_inputs(inputs)
        summary.files = len(paths)
        engine = GridEngine(directory, store)
        created, new_table = _ensure_dataset(spark, settings, engine, cfg.dataset)
        progress(f"dataset {ds.name} {'created' if created else 'exists'}; {len(paths)} input files")
        with directory.writer_lock(ds.name):
            # 1. read + encode + locate, one pass.
            leaves, btree = _current_tree(spark, engine, ds)
            n = _bucket_count(spark)
            located = encode(read_source(spark, cfg, paths), cfg, btree, then=(_to_eid_buckets(n, cols), buckets.SCHEMA))
            _load(spark, settings, ds, located, n, leaves, btree, engine, summary, progress, new_table)
        # 8. quarantine: a second pass, only when the first one counted bad rows.
        if summary.quarantined:
            bad = (encode(read_source(spark, cfg, paths), cfg).filter(F.col("_reason").isNotNull())
                   .persist(StorageLevel.MEMORY_AND_DISK))
            try:
                for r in bad.groupBy("_reason").count().collect():
                    # Reasons by their kind (the value-independent part) for the summary.
                    kind = _reason_kind(r["_reason"])
                    summary.reasons[kind] = summary.reasons.get(kind, 0) + r["count"]
                qpath = quarantine or os.path.join(
                    "quarantine", f"{ds.name}-{datetime.now(timezone.utc).strftime('%Y%m%dT%H%M%SZ')}")
                (bad.select(F.col("_file").alias("file"), F.col("_line").alias("line"), F.col("_reason").alias("reason"),
                            F.struct(*[F.col(f"`{f}`") for f in cfg.source_fields]).alias("fields"))
                 .coalesce(1).write.mode("overwrite").json(qpath))
            finally:
                bad.unpersist()
            summary.quarantine_path = qpath
            progress(f"quarantine written to {qpath}")
    finally:
        if own_store:
            store.close()
        if own_dir:
            directory.close()
        if isinstance(progress, Progress):
            progress.close()
    summary.seconds = time.perf_counter() - t0
    return summary


def write_encoded(ids: list[bytes], values: np.ndarray, path: Path) -> Path:
    """Encoded rows as a Parquet file (`_eid`, c0..): what load_encoded reads."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    cols = {"_eid": pa.array([i.decode() for i in ids], pa.string())}
    cols.update({f"c{j}": pa.array(values[:, j]) for j in range(values.shape[1])})
    pq.write_table(pa.table(cols), path, row_group_size=1 << 20)
    return path


def load_encoded(spark, settings, ds: Dataset, rows, progress=None) -> Summary:
    """Bulk-load a DataFrame of already encoded rows (`_eid` string, `c0`..`c{n-1}`
    longs inside the domain) into dataset ds (created if needed): steps 1-7 of the job
    without the reading and encoding."""
    t0 = time.perf_counter()
    progress = progress or Progress(spark=spark)
    directory = GridDirectory(settings.effective_pg_url)
    store = open_store(settings)
    summary = Summary(ds.name)
    cols = [f"c{i}" for i in range(len(ds.columns))]
    try:
        engine = GridEngine(directory, store)
        _, new_table = _ensure_dataset(spark, settings, engine, ds)
        with directory.writer_lock(ds.name):
            leaves, btree = _current_tree(spark, engine, ds)
            n = _bucket_count(spark)
            to_buckets = _to_eid_buckets(n, cols)

            def locate(batches):
                return to_buckets(with_leaf(batch, btree.value, ds.ndim) for batch in batches)

            located = rows.select("_eid", *cols).mapInArrow(locate, buckets.SCHEMA)
            _load(spark, settings, ds, located, n, leaves, btree, engine, summary, progress, new_table)
    finally:
        store.close()
        directory.close()
        if isinstance(progress, Progress):
            progress.close()
    summary.seconds = time.perf_counter() - t0
    return summary


def _ensure_dataset(spark, settings, engine: GridEngine, ds: Dataset):
    """ensure_dataset, with the HBase table made in Spark's JVM when the job can
    bulk-load. Returns (created, new_table): new_table is None, or, when neither the
    dataset nor its table exist, a Future of the table being made meanwhile (its first
    use of HBase's client in a session took 1.7-2.4 s). Nothing of such a job touches
    HBase before it waits for the table (hfiles.BulkLoad)."""
    if not hfiles.available(spark, settings):
        return ensure_dataset(engine, ds), None
    try:
        engine.directory.dataset(ds.name)
        new = False
    except UnknownDataset:
        new = not engine.store.has_table(ds.name)
    if new:
        new_table = hfiles.create_table_later(spark, settings, ds)
        try:
            engine.create_dataset(ds, store_tables=False)
            return True, new_table
        except DatasetExists:  # another job made the dataset first
            new_table.result()
    else:
        hfiles.create_table(spark, settings, ds)
    return ensure_dataset(engine, ds), None


def _current_tree(spark, engine: GridEngine, ds: Dataset):
    """(leaves, their SplitTree broadcast) of the dataset now, after purging the rows of
    retired leaves. The caller holds the writer lock, so neither changes until it lets go."""
    engine.purge_retired(ds)
    leaves = engine.directory.leaves(ds)
    return leaves, spark.sparkContext.broadcast(SplitTree(leaves, ds.ndim))


def _bucket_count(spark) -> int:
    """How many buckets the job's rows travel in (ingest.buckets): one per shuffle
    partition, so every core has several to work on."""
    return int(spark.conf.get("spark.sql.shuffle.partitions"))


def _load(spark, settings, ds: Dataset, located, n_buckets: int, leaves: list[Grid], btree, engine: GridEngine,
          summary: Summary, progress, new_table=None) -> None:
    """Steps 2-7 for the located rows, in `n_buckets` buckets of their element ID (see
    _to_eid_buckets), under `leaves`, the dataset's leaves that `btree` was built from.
    `new_table`: see _ensure_dataset. The caller holds the writer lock."""
    bulk = hfiles.open_bulk_load(spark, settings, ds, new_table)
    if settings.store == "hbase":
        progress("rows and aggregates go to HBase as HFiles (bulk load)" if bulk
                 else "rows and aggregates go to HBase through its Thrift gateway")
    try:
        _load_with(spark, settings, ds, located, n_buckets, leaves, btree, engine, summary, progress, bulk)
    finally:
        if bulk:
            bulk.close()


def _load_with(spark, settings, ds: Dataset, located, n_buckets: int, leaves: list[Grid], btree,
               engine: GridEngine, summary: Summary, progress, bulk: hfiles.BulkLoad | None) -> None:
    directory, store = engine.directory, engine.store
    ncols = len(ds.columns)
    cols = [f"c{i}" for i in range(ncols)]
    summary.leaves_before = len(leaves)

    # 2. one row per element ID, with the number of input rows behind it.
    rows = located.groupBy("bucket").applyInArrow(_dedupe_fn(n_buckets, cols), buckets.SCHEMA)

    # 3-5. per leaf bucket: stored rows, dedupe against them, subtrees, row writes.
    bgrids = spark.sparkContext.broadcast({g.grid_id: (g.box, g.next_axis) for g in leaves})
    build = _build_fn(settings, ds, btree, bgrids, WRITE_BATCH, bulk.region_starts() if bulk else None,
                      scan=not (bulk and bulk.new_table))
    built = rows.groupBy("bucket").applyInArrow(build, "leaf string, info string, region int, cells binary")
    built = (bulk.write(built) if bulk else built).select("leaf", "info").collect()
    final: dict[str, PartialAggregate] = {}
    split_leaves: list[str] = []
    new_leaves: list[Grid] = []
    written = touched = 0
    for r in built:
        info = json.loads(r["info"])
        if "bad" in info:
            summary.read += info["bad"]
            summary.quarantined += info["bad"]
            continue
        touched += 1
        summary.read += info["rows"]
        summary.loaded += info["n_new"]
        summary.rows_moved += info["moved"]
        written += info["written"]
        if info["split"]:
            split_leaves.append(r["leaf"])
        for gid, box, next_axis, count, sums, mins, maxs in info["leaves"]:
            final[gid] = PartialAggregate(count, sums, mins, maxs)
            if info["split"]:
                new_leaves.append(Grid(gid, tuple(tuple(b) for b in box), next_axis))
    summary.duplicates = summary.read - summary.quarantined - summary.loaded
    split_leaves.sort()
    new_leaves.sort(key=lambda g: g.grid_id)
    summary.leaves_split = len(split_leaves)
    progress(f"read {summary.read} rows, {summary.quarantined} quarantined")
    progress(f"{summary.loaded} new rows in {touched} leaves")
    progress(f"rows written: {written}" + (" (as HFiles)" if bulk else ""))

    # 6. aggregates: touched/new leaves recomputed, ancestors merged from all leaves.
    if bulk:
        bulk.wait_for_table()
    all_leaf_ids = grids_after(leaves, split_leaves, new_leaves)
    untouched = [g for g in all_leaf_ids if g not in final]
    leaf_aggs = store.get_aggregates(ds, untouched) if untouched else {}
    leaf_aggs.update(final)
    anc: dict[str, PartialAggregate] = {}
    for g in all_leaf_ids:
        agg = leaf_aggs.get(g, PartialAggregate.empty(ncols))
        for a in ancestors(g):
            anc.setdefault(a, PartialAggregate.empty(ncols)).merge(agg)
    if bulk:
        bulk.write_aggregates(store, ds, {**final, **anc})
        bulk.load()  # rows and aggregates
    else:
        store.put_aggregates(ds, {**final, **anc})
    progress(f"aggregates written: {len(final)} leaves, {len(anc)} ancestors")

    # 7. directory switch.
    if split_leaves:
        directory.replace_leaves(ds, split_leaves, new_leaves)
    progress(f"directory switched: {len(split_leaves)} leaves replaced by {len(new_leaves)}")
    summary.leaves_after = directory.leaf_count(ds.name)


def grids_after(leaves: list[Grid], split: list[str], new: list[Grid]) -> list[str]:
    gone = set(split)
    return [g.grid_id for g in leaves if g.grid_id not in gone] + [g.grid_id for g in new]


def _reason_kind(reason: str) -> str:
    """'temperature: '12.34' has more decimals...' -> 'temperature: has more decimals...'."""
    import re

    kind = re.sub(r"'[^']*'", "…", reason)
    kind = re.sub(r"\([^)]*\)$", "", kind).strip()
    return kind


def summary_json(summary: Summary) -> str:
    return json.dumps(summary.to_json())
