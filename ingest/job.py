"""The bulk ingest job: source files -> grid tree, raw rows, aggregates, directory.

Steps (the driver holds the dataset's writer lock throughout and only ever handles
per-leaf summaries, never raw rows):

1. read and encode the inputs in Spark, and locate each good row's current leaf (leaf
   boxes broadcast, numpy descent) in the same Python pass;
2. keep one row per element ID (Spark aggregation; a deterministic choice among repeats)
   and count the input rows behind each; bad rows fall into one group of their own;
3. group the rows by leaf (groupBy(leaf).applyInArrow): one task per touched leaf reads
   the leaf's stored rows from the store, drops new rows whose element ID is stored
   already (a touched leaf's content after the load is exactly stored rows + new rows),
   and builds the leaf's whole subtree on numpy arrays with Algorithm 2's semantics
   (gridagg.grid.choose_cut / children): a leaf splits while it holds more than N_size
   rows if it was empty before the load, or if it holds more than N_threshold (then
   down to N_size);
4. the same task writes new rows and moved rows under their final keys (in batches,
   its own store connection) and returns only a summary: counts, and every resulting
   leaf's box and aggregate (recomputed from its full content). Into the local HBase
   (ingest.hfiles) the task returns the rows as cells instead, and the executors write
   them as HFiles;
5. (driver) nothing but those summaries comes back;
6. write aggregates: every touched leaf's as recomputed in step 3, every ancestor's as
   the merge of its leaves (no deltas anywhere). With HFiles, the driver writes them as
   one more file and has the region server load all the files, rows and aggregates;
7. switch the directory in one PostgreSQL transaction (old leaves out, new leaves in,
   old leaves marked retired). Moved rows' old keys stay for queries that still see the
   old leaves; the engine purges retired leaves' rows once no query can need them
   (GridEngine.purge_retired, run by every later write, this job's start included);
8. only if step 2 counted bad rows: read and encode the inputs again, keeping the bad
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

from . import hfiles
from .config import IngestConfig
from .encode import encode, with_leaf
from .readers import expand_inputs, read_source
from .tree import SplitTree

WRITE_BATCH = 20000


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
    builder = (builder.config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.sql.execution.arrow.pyspark.enabled", "true")
               # The driver has expanded local inputs to files already; above this many
               # paths Spark lists them again in a job of one task per file (7-10 s for
               # 1142 files, against 0.7-2 s listed on the driver).
               .config("spark.sql.sources.parallelPartitionDiscovery.threshold", "1000000")
               .config("spark.driver.memory", os.environ.get("GRIDAGG_SPARK_DRIVER_MEMORY", "2g")))
    if shuffle_partitions:
        builder = builder.config("spark.sql.shuffle.partitions", str(shuffle_partitions))
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    spark.conf.set("spark.sql.session.timeZone", "UTC")
    if not shuffle_partitions and spark.conf.get("spark.sql.shuffle.partitions") == "200":
        # Leaf groups differ in size: 8 tasks per core keep every core busy to the end
        # (10M rows: 50-57 s against 54-60 s with 2 per core); Spark merges small ones.
        spark.conf.set("spark.sql.shuffle.partitions", str(spark.sparkContext.defaultParallelism * 8))
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
    """One touched leaf, all of it in this task: its stored rows (scanned), the new rows
    located in it (deduplicated against the stored ones by element ID), the subtree they
    make (Algorithm 2 semantics), and the rows to write under their final keys. Returns a
    small summary (counts and every resulting leaf's box and aggregate) and those rows:
    keys in order and their values."""
    ncols, ndim = len(ds.columns), ds.ndim
    n_size, n_threshold = ds.grid.n_size, ds.grid.n_threshold

    old_keys: list[bytes] = []
    parts: list[np.ndarray] = []
    for keys, values in store.scan_rows(ds, *prefix_range(grid_prefix(grid.grid_id))):
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

    # Rows to write: every new row, and stored rows whose leaf changed.
    keys_out: list[bytes] = []
    idx_out: list[np.ndarray] = []
    moved = 0
    for leaf, ix, _ in final:
        if split:
            sel = ix
            moved += int((ix < n_old).sum())
        else:
            sel = ix[ix >= n_old]
        prefix = grid_prefix(leaf.grid_id)
        keys_out.extend(prefix + all_eids[i] for i in sel.tolist())
        idx_out.append(sel)
    sel = np.concatenate(idx_out) if idx_out else np.zeros(0, dtype=np.int64)
    order = sorted(range(len(keys_out)), key=keys_out.__getitem__)
    keys_sorted = [keys_out[i] for i in order]
    vals_sorted = values[sel[np.asarray(order, dtype=np.int64)]] if order else np.zeros((0, ncols), dtype=np.int64)
    info = {
        "n_old": n_old, "n_new": n_new, "written": len(keys_out), "moved": moved, "split": split,
        "leaves": [[leaf.grid_id, [list(b) for b in leaf.box], leaf.next_axis, a.count, a.sums, a.mins, a.maxs]
                   for leaf, _, a in final],
    }
    return info, keys_sorted, vals_sorted


def _build_fn(settings, ds, btree, bgrids, write_batch: int, cells: bool):
    """The per-leaf task of step 3-4 for applyInArrow: output rows (leaf, info) with the
    leaf's summary; with `cells`, also one row (key, value) per row to write, instead of
    writing it to the store."""
    ncols = len(ds.columns)
    cols = [f"c{i}" for i in range(ncols)]

    def out(leaf: str, info: dict, keys=(), values=None):
        import pyarrow as pa

        n = len(keys)
        table = {"leaf": pa.array([leaf] + [None] * n, pa.string()),
                 "info": pa.array([json.dumps(info)] + [None] * n, pa.string())}
        if cells:
            blob = np.ascontiguousarray(values, dtype="<i8").tobytes() if n else b""
            offsets = np.arange(n + 1, dtype=np.int32) * (8 * ncols)
            value = pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(offsets), pa.py_buffer(blob)])
            table = {"key": pa.array([None, *keys], pa.binary()),
                     "value": pa.concat_arrays([pa.nulls(1, pa.binary()), value]), **table}
        return pa.table(table)

    def fn(key, table):
        import pyarrow.compute as pc

        rows = pc.sum(table.column("_n")).as_py()
        if key[0].as_py() < 0:  # the bad rows' group: only counted here
            return out("", {"bad": rows})
        g = btree.value.ids[key[0].as_py()]
        box, next_axis = bgrids.value[g]
        grid = Grid(g, tuple(tuple(b) for b in box), next_axis)
        values = np.stack([table.column(c).to_numpy() for c in cols], axis=1)
        store = open_store(settings)
        try:
            info, keys, vals = _build_leaf(store, ds, grid, table.column("_eid").to_numpy(zero_copy_only=False),
                                           values)
            if not cells:
                for s in range(0, len(keys), write_batch):
                    store.put_rows(ds, keys[s:s + write_batch], vals[s:s + write_batch])
        finally:
            store.close()
        info["rows"] = rows
        return out(g, info, keys, vals) if cells else out(g, info)

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
        created = _ensure_dataset(spark, settings, engine, cfg.dataset)
        progress(f"dataset {ds.name} {'created' if created else 'exists'}; {len(paths)} input files")
        with directory.writer_lock(ds.name):
            # 1. read + encode + locate, one pass.
            leaves, btree = _current_tree(spark, engine, ds)
            located = encode(read_source(spark, cfg, paths), cfg, btree).select("_eid", *cols, "_leaf")
            _load(spark, settings, ds, located, leaves, btree, engine, summary, progress)
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
        _ensure_dataset(spark, settings, engine, ds)
        with directory.writer_lock(ds.name):
            leaves, btree = _current_tree(spark, engine, ds)

            def locate(batches):
                for batch in batches:
                    yield with_leaf(batch, btree.value, ds.ndim)

            located = rows.select("_eid", *cols).mapInArrow(
                locate, ", ".join(["_eid string", *(f"{c} long" for c in cols), "_leaf long"]))
            _load(spark, settings, ds, located, leaves, btree, engine, summary, progress)
    finally:
        store.close()
        directory.close()
        if isinstance(progress, Progress):
            progress.close()
    summary.seconds = time.perf_counter() - t0
    return summary


def _ensure_dataset(spark, settings, engine: GridEngine, ds: Dataset) -> bool:
    """ensure_dataset, with the HBase table made in Spark's JVM when it can bulk-load."""
    if hfiles.available(spark, settings):
        hfiles.create_table(spark, settings, ds)
    return ensure_dataset(engine, ds)


def _current_tree(spark, engine: GridEngine, ds: Dataset):
    """(leaves, their SplitTree broadcast) of the dataset now, after purging the rows of
    retired leaves. The caller holds the writer lock, so neither changes until it lets go."""
    engine.purge_retired(ds)
    leaves = engine.directory.leaves(ds)
    return leaves, spark.sparkContext.broadcast(SplitTree(leaves, ds.ndim))


def _load(spark, settings, ds: Dataset, located, leaves: list[Grid], btree, engine: GridEngine,
          summary: Summary, progress) -> None:
    """Steps 2-7 for the located rows (`_eid`, c0.., `_leaf`; see encode) under `leaves`,
    the dataset's leaves that `btree` was built from. The caller holds the writer lock."""
    bulk = hfiles.open_bulk_load(spark, settings, ds)
    if settings.store == "hbase":
        progress("rows and aggregates go to HBase as HFiles (bulk load)" if bulk
                 else "rows and aggregates go to HBase through its Thrift gateway")
    try:
        _load_with(spark, settings, ds, located, leaves, btree, engine, summary, progress, bulk)
    finally:
        if bulk:
            bulk.close()


def _load_with(spark, settings, ds: Dataset, located, leaves: list[Grid], btree, engine: GridEngine,
               summary: Summary, progress, bulk: hfiles.BulkLoad | None) -> None:
    from pyspark.sql import functions as F

    directory, store = engine.directory, engine.store
    ncols = len(ds.columns)
    cols = [f"c{i}" for i in range(ncols)]
    summary.leaves_before = len(leaves)

    # 2. one row per element ID (a deterministic choice among repeats; the leaf follows
    #    from the values), with the number of input rows behind it.
    rows = (located.groupBy("_eid").agg(F.max(F.struct(*cols, "_leaf")).alias("b"), F.count(F.lit(1)).alias("_n"))
            .select("_eid", *[F.col(f"b.{c}").alias(c) for c in ["_leaf", *cols]], "_n"))

    # 3-5. per touched leaf, in one task: stored rows, dedupe, subtree, row writes.
    bgrids = spark.sparkContext.broadcast({g.grid_id: (g.box, g.next_axis) for g in leaves})
    schema = ("key binary, value binary, " if bulk else "") + "leaf string, info string"
    built = rows.groupBy("_leaf").applyInArrow(_build_fn(settings, ds, btree, bgrids, WRITE_BATCH, bool(bulk)), schema)
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
