"""The bulk ingest job: source files -> grid tree, raw rows, aggregates, directory.

Steps (the driver holds the dataset's writer lock throughout and only ever handles
per-leaf summaries, never raw rows):

1. read and encode the inputs in Spark; bad rows go to the quarantine output;
2. locate every good row's current leaf (leaf boxes broadcast, numpy descent);
3. read the rows already stored in the touched leaves (executors scan the store) and
   deduplicate by element ID: a row whose ID is stored already is a duplicate, and a
   touched leaf's content after the load is exactly (stored rows + new rows);
4. split level by level: per-leaf count/sum/min/max by a Spark aggregation, cuts chosen
   on the driver with gridagg.grid.choose_cut, rows reassigned by a broadcast join;
   a leaf splits while it holds more than N_size rows if it was empty before the load,
   or if it holds more than N_threshold (then down to N_size, like Algorithm 2);
5. write new rows and moved rows under their final keys (executors, in batches);
6. write aggregates: every touched leaf's recomputed from its full content, every
   ancestor's as the merge of its leaves (no deltas anywhere);
7. switch the directory in one PostgreSQL transaction (old leaves out, new leaves in,
   old leaves marked retired). Moved rows' old keys stay for queries that still see the
   old leaves; the engine purges retired leaves' rows once no query can need them
   (GridEngine.purge_retired, run by every later write, this job's start included).

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

import numpy as np

from gridagg.aggregate import PartialAggregate
from gridagg.directory import GridDirectory
from gridagg.engine import GridEngine
from gridagg.errors import DatasetExists, InvalidInput, UnknownDataset
from gridagg.grid import Grid, ancestors, children, choose_cut, grid_prefix, prefix_range, row_key
from gridagg.store import open_store

from .config import IngestConfig
from .encode import encode
from .readers import expand_inputs, read_source
from .tree import LeafIndex

WRITE_BATCH = 5000


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


def spark_session(master: str | None = None, app: str = "gridagg-ingest", shuffle_partitions: int | None = None):
    """A SparkSession for the job (or the one spark-submit made: its master wins)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app)
    if master:
        builder = builder.master(master)
    elif not os.environ.get("PYSPARK_GATEWAY_PORT"):  # under spark-submit its --master wins
        builder = builder.config("spark.master", os.environ.get("GRIDAGG_SPARK_MASTER", "local[*]"))
    builder = (builder.config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.sql.execution.arrow.pyspark.enabled", "true")
               .config("spark.driver.memory", os.environ.get("GRIDAGG_SPARK_DRIVER_MEMORY", "2g")))
    if shuffle_partitions:
        builder = builder.config("spark.sql.shuffle.partitions", str(shuffle_partitions))
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    spark.conf.set("spark.sql.session.timeZone", "UTC")
    if not shuffle_partitions and spark.conf.get("spark.sql.shuffle.partitions") == "200":
        spark.conf.set("spark.sql.shuffle.partitions", str(max(2, spark.sparkContext.defaultParallelism * 2)))
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


def ensure_dataset(engine: GridEngine, cfg: IngestConfig) -> bool:
    """Create the dataset if it does not exist; check the definition if it does.
    Returns True when it was created."""
    ds = cfg.dataset
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


def _assign_fn(bindex, ndim):
    def fn(batches):
        index = bindex.value
        ids = np.array(index.ids, dtype=object)
        for pdf in batches:
            if len(pdf) == 0:
                continue
            pts = pdf[[f"c{i}" for i in range(ndim)]].to_numpy(dtype=np.int64)
            pdf["leaf"] = ids[index.locate(pts)]
            yield pdf

    return fn


def _scan_fn(settings, ds):
    def fn(leaf_ids):
        from gridagg.grid import element_of

        leaf_ids = list(leaf_ids)
        if not leaf_ids:
            return
        store = open_store(settings)
        try:
            for g in leaf_ids:
                for keys, values in store.scan_rows(ds, *prefix_range(grid_prefix(g))):
                    for k, v in zip(keys, values.tolist()):
                        yield (element_of(k).decode(), g, 1, *v)
        finally:
            store.close()

    return fn


def _write_fn(settings, ds, ncols):
    def fn(batches):
        import pandas as pd

        store = open_store(settings)
        try:
            n = 0
            for pdf in batches:
                for start in range(0, len(pdf), WRITE_BATCH):
                    part = pdf.iloc[start:start + WRITE_BATCH]
                    keys = [row_key(g, e.encode()) for g, e in zip(part["leaf"], part["_eid"])]
                    values = part[[f"c{i}" for i in range(ncols)]].to_numpy(dtype=np.int64)
                    store.put_rows(ds, keys, values)
                    n += len(part)
            yield pd.DataFrame({"n": [n]})
        finally:
            store.close()

    return fn


# -------------------------------------------------------------------- driver side


def _stats_exprs(ncols: int):
    from pyspark.sql import functions as F

    exprs = [F.count(F.lit(1)).alias("n"), F.sum("existing").alias("n_old")]
    for i in range(ncols):
        exprs += [F.sum(F.col(f"c{i}").cast("decimal(38,0)")).alias(f"s{i}"),
                  F.min(f"c{i}").alias(f"lo{i}"), F.max(f"c{i}").alias(f"hi{i}")]
    return exprs


def _collect_stats(df, ncols) -> dict[str, tuple[PartialAggregate, int]]:
    out = {}
    for r in df.groupBy("leaf").agg(*_stats_exprs(ncols)).collect():
        agg = PartialAggregate(int(r["n"]), [int(r[f"s{i}"]) for i in range(ncols)],
                               [int(r[f"lo{i}"]) for i in range(ncols)], [int(r[f"hi{i}"]) for i in range(ncols)])
        out[r["leaf"]] = (agg, int(r["n_old"]))
    return out


def run_ingest(spark, settings, cfg: IngestConfig, inputs: list[str], quarantine: str | None = None,
               progress=None, directory: GridDirectory | None = None, store=None) -> Summary:
    """Load the inputs into cfg's dataset (created if needed). `directory` and `store`
    default to ones opened from settings (and closed at the end); executors open their
    own store from settings."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    t0 = time.perf_counter()
    progress = progress or Progress(spark=spark)
    own_dir, own_store = directory is None, store is None
    directory = directory or GridDirectory(settings.effective_pg_url)
    store = store or open_store(settings)
    ds = cfg.dataset
    ndim, ncols = ds.ndim, len(ds.columns)
    summary = Summary(ds.name)
    persisted = []
    try:
        paths = expand_inputs(inputs)
        summary.files = len(paths)
        engine = GridEngine(directory, store)
        created = ensure_dataset(engine, cfg)
        progress(f"dataset {ds.name} {'created' if created else 'exists'}; {len(paths)} input files")
        with directory.writer_lock(ds.name):
            engine.purge_retired(ds)
            leaves = directory.leaves(ds)
            summary.leaves_before = len(leaves)
            grids: dict[str, Grid] = {g.grid_id: g for g in leaves}

            # 1. read + encode; quarantine.
            enc = encode(read_source(spark, cfg, paths), cfg).persist(StorageLevel.MEMORY_AND_DISK)
            persisted.append(enc)
            counts = enc.groupBy(F.col("_reason")).count().collect()
            summary.read = sum(r["count"] for r in counts)
            bad = [(r["_reason"], r["count"]) for r in counts if r["_reason"] is not None]
            summary.quarantined = sum(n for _, n in bad)
            # Group reasons by their kind (the value-independent part) for the summary.
            for reason, n in bad:
                key = _reason_kind(reason)
                summary.reasons[key] = summary.reasons.get(key, 0) + n
            progress(f"read {summary.read} rows, {summary.quarantined} quarantined")
            if summary.quarantined:
                qpath = quarantine or os.path.join(
                    "quarantine", f"{ds.name}-{datetime.now(timezone.utc).strftime('%Y%m%dT%H%M%SZ')}")
                (enc.filter(F.col("_reason").isNotNull())
                 .select(F.col("_file").alias("file"), F.col("_line").alias("line"), F.col("_reason").alias("reason"),
                         F.struct(*[F.col(f"`{f}`") for f in cfg.source_fields]).alias("fields"))
                 .coalesce(1).write.mode("overwrite").json(qpath))
                summary.quarantine_path = qpath
                progress(f"quarantine written to {qpath}")

            good = enc.filter(F.col("_reason").isNull()).select("_eid", *[f"c{i}" for i in range(ncols)])

            # 2. locate current leaves.
            bindex = spark.sparkContext.broadcast(LeafIndex(leaves, ndim))
            assigned_schema = T.StructType(
                [T.StructField("_eid", T.StringType())]
                + [T.StructField(f"c{i}", T.LongType()) for i in range(ncols)]
                + [T.StructField("leaf", T.StringType())])
            assigned = good.mapInPandas(_assign_fn(bindex, ndim), assigned_schema)
            assigned = assigned.withColumn("existing", F.lit(0))

            # 3. stored rows of touched leaves; dedupe by element ID (stored row wins).
            touched = sorted(r["leaf"] for r in assigned.select("leaf").distinct().collect())
            stored_schema = T.StructType(
                [T.StructField("_eid", T.StringType()), T.StructField("leaf", T.StringType()),
                 T.StructField("existing", T.IntegerType())]
                + [T.StructField(f"c{i}", T.LongType()) for i in range(ncols)])
            nslices = max(1, min(len(touched), spark.sparkContext.defaultParallelism * 4))
            stored = spark.createDataFrame(
                spark.sparkContext.parallelize(touched, nslices).mapPartitions(_scan_fn(settings, ds)),
                stored_schema)
            both = assigned.unionByName(stored)
            cols = [f"c{i}" for i in range(ncols)]
            best = F.max(F.struct(F.col("existing"), F.col("leaf"), *[F.col(c) for c in cols])).alias("b")
            rows = (both.groupBy("_eid").agg(best)
                    .select("_eid", F.col("b.existing").alias("existing"), F.col("b.leaf").alias("leaf"),
                            F.col("b.leaf").alias("orig_leaf"), *[F.col(f"b.{c}").alias(c) for c in cols])
                    .persist(StorageLevel.MEMORY_AND_DISK))
            persisted.append(rows)
            cached = rows

            stats = _collect_stats(rows, ncols)
            valid = summary.read - summary.quarantined
            summary.loaded = sum(agg.count - n_old for agg, n_old in stats.values())
            summary.duplicates = valid - summary.loaded
            progress(f"{summary.loaded} new rows, {summary.duplicates} duplicates, in {len(touched)} leaves")

            # 4. split level by level.
            final: dict[str, PartialAggregate] = {}
            pending = {g: (agg, ds.grid.n_size if n_old == 0 else ds.grid.n_threshold)
                       for g, (agg, n_old) in stats.items()}
            level = 0
            while pending:
                splits = []
                for g, (agg, limit) in pending.items():
                    cut = choose_cut(grids[g].next_axis, agg.count, agg.sums, agg.mins, agg.maxs, ndim) \
                        if agg.count > limit else None
                    if cut is None:
                        final[g] = agg
                        continue
                    for child in children(grids[g], cut[0], cut[1], ndim):
                        grids[child.grid_id] = child
                    splits.append((g, cut[0], cut[1]))
                if not splits:
                    break
                level += 1
                split_df = F.broadcast(spark.createDataFrame(splits, "split_leaf string, axis int, cut long"))
                point = F.element_at(F.array(*[F.col(f"c{i}") for i in range(ndim)]), F.col("axis") + 1)
                nxt = (rows.join(split_df, rows["leaf"] == split_df["split_leaf"], "left")
                       .withColumn("moving", F.col("axis").isNotNull())
                       .withColumn("leaf", F.when(F.col("moving"), F.concat(
                           F.col("leaf"), F.when(point <= F.col("cut"), F.lit("0")).otherwise(F.lit("1"))))
                           .otherwise(F.col("leaf")))
                       .drop("split_leaf", "axis", "cut")
                       .persist(StorageLevel.MEMORY_AND_DISK))
                child_stats = _collect_stats(nxt.filter("moving"), ncols)
                cached.unpersist()
                persisted.remove(cached)
                cached = nxt
                persisted.append(nxt)
                rows = nxt.drop("moving")
                pending = {g: (agg, ds.grid.n_size) for g, (agg, _) in child_stats.items()}
                progress(f"level {level}: split {len(splits)} leaves into {len(child_stats)}")

            split_leaves = sorted({g for g in stats if g not in final})
            new_leaves = [grids[g] for g in sorted(final) if g not in stats]
            summary.leaves_split = len(split_leaves)

            # 5. rows under their final keys.
            to_write = rows.filter((F.col("existing") == 0) | (F.col("leaf") != F.col("orig_leaf")))
            written = to_write.mapInPandas(_write_fn(settings, ds, ncols), "n long").agg(F.sum("n")).collect()[0][0]
            progress(f"rows written: {written or 0}")

            # 6. aggregates: touched/new leaves recomputed, ancestors merged from all leaves.
            all_leaf_ids = [g for g in grids_after(leaves, split_leaves, new_leaves)]
            untouched = [g for g in all_leaf_ids if g not in final]
            leaf_aggs = store.get_aggregates(ds, untouched) if untouched else {}
            leaf_aggs.update(final)
            anc: dict[str, PartialAggregate] = {}
            for g in all_leaf_ids:
                agg = leaf_aggs.get(g, PartialAggregate.empty(ncols))
                for a in ancestors(g):
                    anc.setdefault(a, PartialAggregate.empty(ncols)).merge(agg)
            store.put_aggregates(ds, {**final, **anc})
            progress(f"aggregates written: {len(final)} leaves, {len(anc)} ancestors")

            # 7. directory switch.
            if split_leaves:
                directory.replace_leaves(ds, split_leaves, new_leaves)
            progress(f"directory switched: {len(split_leaves)} leaves replaced by {len(new_leaves)}")

            summary.rows_moved = rows.filter((F.col("existing") == 1) & (F.col("leaf") != F.col("orig_leaf"))).count()
            summary.leaves_after = directory.leaf_count(ds.name)
    finally:
        for df in persisted:
            df.unpersist()
        if own_store:
            store.close()
        if own_dir:
            directory.close()
        if isinstance(progress, Progress):
            progress.close()
    summary.seconds = time.perf_counter() - t0
    return summary


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
