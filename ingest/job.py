"""The bulk ingest job: source files -> grid tree, raw rows, aggregates, directory.

Steps (the driver holds the dataset's writer lock throughout and only ever handles
per-leaf summaries, never raw rows; the executors' side of steps 1-4 is ingest.tasks):

1. read and encode the inputs in Spark, and locate each good row's current leaf (leaf
   boxes broadcast, numpy descent) in the same Python pass. Rows leave every Python pass
   packed per bucket (ingest.buckets): Spark shuffles a few thousand Arrow streams, not
   millions of rows. Here the bucket is a hash of the element ID; bad rows only count;
2. per element-ID bucket: keep one row per element ID (a deterministic choice among
   repeats) and count the input rows behind it; pack the rows per bucket of their leaf;
3. per leaf bucket, one leaf at a time: read the leaf's stored rows from the store, drop
   new rows whose element ID is stored already (a touched leaf's content after the load
   is exactly stored rows + new rows), and build the leaf's whole subtree on numpy arrays
   with Algorithm 2's semantics (gridagg.model.grid.choose_cut / children): a leaf splits while
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
   old leaves; every write purges retired leaves' rows at its start once no query can
   need them (gridagg.write.protocol.purge_retired), this job's included;
8. only if step 1 counted bad rows: read and encode the inputs again, keeping the bad
   rows, and write them with their reasons to the quarantine output. A clean input is
   read once: caching every raw row in case some were bad cost time in every load.

Crash safety: the driver runs steps 2-7 as one Write of gridagg.write.protocol, the protocol
inserts follow too: its intent names every leaf the dataset has before any row is
written, and ends once the directory is switched (step 7), logging the change. A job that
dies in between leaves its intent: the next writer of the dataset (an insert, another
job, `gridagg repair`) first recomputes every leaf still current from its rows (clearing
rows written under grids that never made it into the directory), so no reader keeps
seeing half a load once anyone writes again. Rerunning the same input also ends exact:
step 3 derives everything from input + store, so a rerun recomputes the same tree and
rewrites the same rows; after step 7 a rerun finds every row stored and has nothing
left to do.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from gridagg.config import Settings
from gridagg.directory import GridDirectory
from gridagg.engine import GridEngine
from gridagg.model.aggregate import PartialAggregate, ancestor_aggregates
from gridagg.model.errors import (
    DatasetExists,
    GridaggError,
    InvalidInput,
    UnknownDataset,
)
from gridagg.model.grid import Grid
from gridagg.model.schema import Dataset
from gridagg.store import open_store
from gridagg.write.protocol import Write

from . import buckets, class_archive, hfiles, tasks
from .choose import with_chosen_n_size
from .config import IngestConfig
from .encode import encode, rounding_columns, with_leaf
from .readers import estimated_rows, expand_inputs, read_source
from .tree import SplitTree

WRITE_BATCH = 20000


@dataclass
class Summary:
    dataset: str
    files: int = 0
    read: int = 0
    loaded: int = 0
    replaced: int = 0  # with replace: stored rows a row of the input replaced
    duplicates: int = 0
    quarantined: int = 0
    reasons: dict[str, int] = field(default_factory=dict)
    quarantine_path: str | None = None
    leaves_before: int = 0
    leaves_after: int = 0
    leaves_split: int = 0
    rows_moved: int = 0
    rounded: dict[str, int] = field(default_factory=dict)  # per column with a rounding policy
    seconds: float = 0.0

    def lines(self) -> list[str]:
        rate = self.read / self.seconds if self.seconds else 0.0
        out = [
            f"dataset {self.dataset}: {self.files} files, {self.read} rows read",
            f"  loaded       {self.loaded}",
            *([f"  replaced     {self.replaced}  (stored rows of the same element ID, --replace)"] if self.replaced
              else []),
            f"  duplicates   {self.duplicates}  (element ID already stored or repeated in the input)",
            f"  quarantined  {self.quarantined}" + (f"  -> {self.quarantine_path}" if self.quarantine_path else ""),
        ]
        for reason, n in sorted(self.reasons.items(), key=lambda kv: -kv[1])[:10]:
            out.append(f"      {n:>10}  {reason}")
        if self.rounded:
            out.append("  rounded      " + ", ".join(f"{col} {n}" for col, n in self.rounded.items())
                       + "  (values rounded to the column's scale, in rows not quarantined)")
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
    spark_settings = settings or Settings.from_env()  # master and memory; HFiles need `settings`
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app)
    if master:
        builder = builder.master(master)
    elif not os.environ.get("PYSPARK_GATEWAY_PORT"):  # under spark-submit its --master wins
        master = spark_settings.spark_master
        builder = builder.config("spark.master", master)
    bulk_cp = hfiles.classpath(settings, master) if settings is not None and master else None
    if bulk_cp:
        builder = builder.config("spark.driver.extraClassPath", bulk_cp).config("spark.executor.extraClassPath", bulk_cp)
    # The driver JVM runs C1-compiled code only. Its per-row work is small (packed rows,
    # HFile cells), and on two cores the C2 compiler's CPU cost more than its faster code
    # saved, in small jobs and large ones alike. Its heap starts at full size: growing it
    # from the default kept G1 busy in a session's first job. Its classes come from an
    # archive (ingest.class_archive).
    memory = spark_settings.spark_driver_memory
    java_options = f"-XX:TieredStopAtLevel=1 -Xms{memory}"
    if SparkContext._gateway is None and not os.environ.get("PYSPARK_GATEWAY_PORT"):  # the JVM starts now
        java_options += " " + class_archive.java_options(spark_settings, bulk_cp)
    builder = builder.config("spark.driver.extraJavaOptions", java_options.strip())
    builder = (builder.config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.sql.execution.arrow.pyspark.enabled", "true")
               # Python workers over a Unix socket, not loopback TCP: a task's input sent
               # ahead while its worker wrote a large output filled the worker's receive
               # buffer, the kernel dropped segments both ways, and a large load stalled
               # in TCP's retransmit backoff, its timeout growing with every retry.
               .config("spark.python.unix.domain.socket.enabled", "true")
               # The driver has expanded local inputs to files already; above this many
               # paths Spark lists them again in a job of one task per file, far slower
               # than the driver's own listing.
               .config("spark.sql.sources.parallelPartitionDiscovery.threshold", "1000000")
               .config("spark.driver.memory", memory))
    if shuffle_partitions:
        builder = builder.config("spark.sql.shuffle.partitions", str(shuffle_partitions))
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    spark.conf.set("spark.sql.session.timeZone", "UTC")
    # The job's JVM operators see a few thousand packed rows (ingest.buckets): compiling
    # whole-stage code for them cost more than it saved, in a session's first job and
    # later ones alike.
    spark.conf.set("spark.sql.codegen.wholeStage", "false")
    if not shuffle_partitions and spark.conf.get("spark.sql.shuffle.partitions") == "200":
        # Leaf groups differ in size: 8 tasks per core keep every core busy to the end
        # (with 2 per core some cores sat idle while the largest finished); Spark merges
        # small ones.
        spark.conf.set("spark.sql.shuffle.partitions", str(spark.sparkContext.defaultParallelism * 8))
    if bulk_cp:
        hfiles.warm_up(spark, settings)
    return spark


def stop_spark(spark) -> None:
    """Stop the session, and end the JVM this process launched for it (not one that
    spark-submit made). A process that goes on to serve or measure gets the JVM's heap
    back: it starts at full size (a quarter of the memory), and an idle JVM holding it
    left the page cache that much smaller, and answers of a large dataset markedly
    slower."""
    from pyspark import SparkContext

    spark.stop()
    gateway = SparkContext._gateway
    proc = getattr(gateway, "proc", None)
    if proc is None:
        return
    gateway.shutdown()
    proc.stdin.close()  # the JVM exits at the end of its stdin (writing its class archive, if due)
    proc.wait(timeout=120)
    SparkContext._gateway = SparkContext._jvm = None


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


def run_ingest(spark, settings, cfg: IngestConfig, inputs: list[str], quarantine: str | None = None,
               progress=None, directory: GridDirectory | None = None, store=None, replace: bool = False) -> Summary:
    """Load the inputs into cfg's dataset (created if needed). `directory` and `store`
    default to ones opened from settings (and closed at the end); executors open their
    own store from settings. With `replace`, a row whose element ID is stored in the leaf
    its dimensions place it in replaces that row (a reload of a stretch: a reprocessed
    month); without, it is a duplicate and not loaded."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    t0 = time.perf_counter()
    progress = progress or Progress(spark=spark)
    own_dir, own_store = directory is None, store is None
    directory = directory or GridDirectory(settings.effective_pg_url)
    store = store or open_store(settings)
    ds = cfg.dataset
    cols = [f"c{i}" for i in range(len(ds.columns))]
    rounding = rounding_columns(ds)
    summary = Summary(ds.name, rounded={ds.columns[i].name: 0 for i in rounding})
    try:
        paths = expand_inputs(inputs)
        summary.files = len(paths)
        engine = GridEngine(directory, store, max_query_seconds=settings.max_query_seconds)
        if cfg.choose_n_size:
            cfg = with_chosen_n_size(spark, settings, engine, cfg, paths, progress)
            ds = cfg.dataset
        created, new_table = _ensure_dataset(spark, settings, engine, cfg.dataset)
        progress(f"dataset {ds.name} {'created' if created else 'exists'}; {len(paths)} input files")
        with (buckets_for(spark, estimated_rows(paths, cfg.format)) as n,
              engine.writing(ds, "ingest") as write, failed_load(write, spark, settings)):
            # 1. read + encode + locate, one pass.
            leaves, btree = _current_tree(spark, engine, ds)
            located = encode(read_source(spark, cfg, paths), cfg, btree,
                             then=(tasks.to_eid_buckets(n, cols, rounding), buckets.SCHEMA))
            _load(spark, settings, write, located, n, leaves, btree, summary, progress, new_table, replace)
        _keep_tree(engine, ds, progress)
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
    engine = GridEngine.open(settings)
    summary = Summary(ds.name)
    cols = [f"c{i}" for i in range(len(ds.columns))]
    try:
        _, new_table = _ensure_dataset(spark, settings, engine, ds)
        with (buckets_for(spark, rows.count()) as n,
              engine.writing(ds, "ingest") as write, failed_load(write, spark, settings)):
            leaves, btree = _current_tree(spark, engine, ds)
            to_buckets = tasks.to_eid_buckets(n, cols)

            def locate(batches):
                return to_buckets(with_leaf(batch, btree.value, ds.ndim) for batch in batches)

            located = rows.select("_eid", *cols).mapInArrow(locate, buckets.SCHEMA)
            _load(spark, settings, write, located, n, leaves, btree, summary, progress, new_table)
        _keep_tree(engine, ds, progress)
    finally:
        engine.close()
        if isinstance(progress, Progress):
            progress.close()
    summary.seconds = time.perf_counter() - t0
    return summary


def _keep_tree(engine: GridEngine, ds: Dataset, progress) -> None:
    """After a load: the dataset's tree as it now is, in this host's tree file, so that
    the serving processes start from it (gridagg.tree) instead of each loading it whole
    (slow for a large tree)."""
    t0 = time.perf_counter()
    engine.trees.tree(engine.dataset(ds.name))
    progress(f"tree of {ds.name} kept for serving processes in {time.perf_counter() - t0:.1f} s")


@contextmanager
def failed_load(write: Write, spark, settings):
    """A load that fails gives its write up (Write.abandon: what it stored is counted or
    cleared at once, so no answer sees half of it) and, when Spark ran out of memory,
    says so in one line with what to set."""
    try:
        yield
    except Exception as exc:
        write.abandon()
        if "java.lang.OutOfMemoryError" in str(exc):
            raise LoadFailed(
                f"the Spark job ran out of memory (driver and local executors: "
                f"{spark.conf.get('spark.driver.memory', settings.spark_driver_memory)}): set "
                f"GRIDAGG_SPARK_DRIVER_MEMORY higher, or --shuffle-partitions higher than "
                f"{_bucket_count(spark)} so that each task holds fewer rows, and run it again (rows it stored "
                f"already are kept, counted, and not loaded twice)") from None
        raise


class LoadFailed(GridaggError):
    """A bulk load that could not finish; what it wrote was given up."""


def _ensure_dataset(spark, settings, engine: GridEngine, ds: Dataset):
    """ensure_dataset, with the HBase table made in Spark's JVM when the job can
    bulk-load. Returns (created, new_table): new_table is None, or, when neither the
    dataset nor its table exist, a Future of the table being made meanwhile (its first
    use of HBase's client in a session is slow). Nothing of such a job touches
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
    """(leaves, their SplitTree broadcast) of the dataset now. The caller holds the writer
    lock (a Write, which recovered what dead writers left), so neither changes until it
    lets go."""
    leaves = engine.directory.leaves(ds)
    _refuse_after_merge(engine, ds, leaves)
    return leaves, spark.sparkContext.broadcast(SplitTree(leaves, ds.ndim))


def _refuse_after_merge(engine: GridEngine, ds: Dataset, leaves: list[Grid]) -> None:
    """A load may split any leaf into grids whose IDs a leaf merged in place not long ago
    (gridagg.tune.merge, `gridagg tune`) had below it, and whose old rows stay until they are
    purged: refused, with when to load again, before anything is written."""
    ids = {g.grid_id for g in leaves}
    if any(r[:k] in ids for r in engine.directory.retired_before(ds.name, 0) for k in range(1, len(r))):
        raise GridaggError(f"dataset {ds.name}: leaves were merged in place (gridagg tune) less than "
                           f"{engine.purge_after_seconds:.0f} s ago, and the rows they held are kept that long for "
                           "queries still running; load again after that")


def _bucket_count(spark) -> int:
    """How many buckets the job's rows travel in (ingest.buckets): one per shuffle
    partition, so every core has several to work on."""
    return int(spark.conf.get("spark.sql.shuffle.partitions"))


# Rows of a bucket: a Python worker holds one bucket at a time, Spark's JVM sorts a few.
# A large load in the default buckets (8 per core) ran the JVM out of heap; in buckets of
# this size it loaded.
ROWS_PER_BUCKET = 500_000
# Input bytes a row takes, about: the generated archives' Parquet 8.3, CSV 60, TMY3 files 140.
@contextmanager
def buckets_for(spark, rows: int):
    """Raise the job's buckets (spark.sql.shuffle.partitions) to one per ROWS_PER_BUCKET
    of `rows` for the `with` block, and yield their number; a session's own setting
    stays when it gives more."""
    key = "spark.sql.shuffle.partitions"
    before = spark.conf.get(key)
    spark.conf.set(key, str(max(int(before), -(-rows // ROWS_PER_BUCKET))))
    try:
        yield _bucket_count(spark)
    finally:
        spark.conf.set(key, before)


def _load(spark, settings, write: Write, located, n_buckets: int, leaves: list[Grid], btree, summary: Summary,
          progress, new_table=None, replace: bool = False) -> None:
    """Steps 2-7 for the located rows, in `n_buckets` buckets of their element ID (see
    ingest.tasks.to_eid_buckets), under `leaves`, the dataset's leaves that `btree` was
    built from, as the steps of `write` (gridagg.write.protocol). `new_table`: see
    _ensure_dataset; `replace`: see run_ingest. Every row the executors write gets one
    stamp of the write (each task writes grids of its own, so they never mask each other)."""
    ds = write.ds
    stamp = write.stamps.next()
    bulk = hfiles.open_bulk_load(spark, settings, ds, stamp, new_table)
    if settings.store == "hbase":
        progress("rows and aggregates go to HBase as HFiles (bulk load)" if bulk
                 else "rows and aggregates go to HBase through its Thrift gateway")
    try:
        _load_with(spark, settings, write, located, n_buckets, leaves, btree, summary, progress, bulk, stamp, replace)
    finally:
        if bulk:
            bulk.close()


def _load_with(spark, settings, write: Write, located, n_buckets: int, leaves: list[Grid], btree,
               summary: Summary, progress, bulk: hfiles.BulkLoad | None, stamp: int, replace: bool) -> None:
    ds, store = write.ds, write.store
    ncols = len(ds.columns)
    cols = [f"c{i}" for i in range(ncols)]
    summary.leaves_before = len(leaves)

    # 2. one row per element ID, with the number of input rows behind it.
    rows = located.groupBy("bucket").applyInArrow(tasks.dedupe_fn(n_buckets, cols), buckets.SCHEMA)

    # 3-5. per leaf bucket: stored rows, dedupe against them, subtrees, row writes, under
    # an intent naming every leaf (the executors may write under any of them).
    write.intend([g.grid_id for g in leaves])
    bgrids = spark.sparkContext.broadcast({g.grid_id: (g.box, g.next_axis) for g in leaves})
    build = tasks.build_fn(settings, ds, btree, bgrids, WRITE_BATCH, bulk.region_starts() if bulk else None,
                           scan=not (bulk and bulk.new_table), stamp=stamp, replace=replace)
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
        if "rounded" in info:
            col, n = info["rounded"]
            summary.rounded[ds.columns[col].name] += n
            continue
        touched += 1
        summary.read += info["rows"]
        summary.loaded += info["n_new"]
        summary.replaced += info["replaced"]
        summary.rows_moved += info["moved"]
        written += info["written"]
        if info["split"]:
            split_leaves.append(r["leaf"])
        for gid, box, next_axis, count, sums, mins, maxs, present in info["leaves"]:
            final[gid] = PartialAggregate(count, sums, mins, maxs, present)
            if info["split"]:
                new_leaves.append(Grid(gid, tuple(tuple(b) for b in box), next_axis))
    summary.duplicates = summary.read - summary.quarantined - summary.loaded - summary.replaced
    split_leaves.sort()
    new_leaves.sort(key=lambda g: g.grid_id)
    summary.leaves_split = len(split_leaves)
    progress(f"read {summary.read} rows, {summary.quarantined} quarantined")
    progress(f"{summary.loaded} new rows in {touched} leaves")
    progress(f"rows written: {written}" + (" (as HFiles)" if bulk else ""))
    write.rows_written()

    # 6. aggregates: touched/new leaves recomputed, ancestors merged from all leaves.
    if bulk:
        bulk.wait_for_table()
    all_leaf_ids = grids_after(leaves, split_leaves, new_leaves)
    untouched = [g for g in all_leaf_ids if g not in final]
    leaf_aggs = store.get_aggregates(ds, untouched) if untouched else {}
    leaf_aggs.update(final)
    anc = ancestor_aggregates({g: leaf_aggs.get(g, PartialAggregate.empty(ncols)) for g in all_leaf_ids}, ncols)
    write.put_aggregates({**final, **anc}, put=bulk.load if bulk else None)
    progress(f"aggregates written: {len(final)} leaves, {len(anc)} ancestors")

    # 7. directory switch, and the end of the write: any leaf's rows may have changed.
    write.switch(split_leaves, new_leaves)
    progress(f"directory switched: {len(split_leaves)} leaves replaced by {len(new_leaves)}")
    write.end(None)
    summary.leaves_after = write.directory.leaf_count(ds.name)


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
