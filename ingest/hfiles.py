"""HBase bulk load for the ingest job: the executors write the rows as HFiles and the
region server takes the files whole. Nothing goes through HBase's write path (Thrift,
WAL, memstore, flushes), which is most of what a load into HBase costs.

What the files hold is the store's business: the cells of its bulk-load format
(gridagg.store.bulk_format: which table, which cells for a leaf's rows and for the
aggregates). This module is the Spark side: it hands those cells to the JVM, which
writes them as HFiles and has the region server load them.

It applies when the store is the local HBase (`gridagg services up`, standalone or with
several region servers) and Spark runs on this machine (local[...], or a standalone
cluster whose master is at 127.0.0.1 or localhost, such as ingest.spark_standalone's):
the region servers must read the files the executors write, and all share this machine's
disk. Otherwise the job writes rows through the Thrift gateway.

The Java half is hbase/HFileBulkLoad.java. Spark's driver and executor JVMs must have it
and HBase's jars on their classpath from the start: spark_session() adds them
(`classpath`).
"""

from __future__ import annotations

import shutil
import struct
import threading
import uuid


def applies(settings, master: str) -> bool:
    """Whether a job with these settings on this Spark master bulk-loads HFiles."""
    on_this_machine = master.startswith(("local", "spark://127.0.0.1:", "spark://localhost:"))
    return settings.store == "hbase" and settings.hbase is None and on_this_machine


def classpath(settings, master: str) -> str | None:
    """What spark.driver.extraClassPath and spark.executor.extraClassPath need for a bulk
    load, None when none applies."""
    if not applies(settings, master):
        return None
    from gridagg_hbase.admin import spark_bulk_load_classpath

    return spark_bulk_load_classpath(settings)


class BulkLoad:
    """One job's bulk load into dataset `ds`: write() the rows as HFiles under a staging
    directory, load() the aggregates as HFiles too and every file into the table;
    close() removes what is left of the staging."""

    def __init__(self, spark, settings, ds, stamp: int, new_table=None):
        from gridagg_hbase.jvm import paths

        from gridagg.store import bulk_format

        self.format = bulk_format(settings)
        self.spark, self.table = spark, self.format.table(ds.name)
        self.zk = ("localhost", str(settings.zk_port))
        root = paths(settings).tmp / "bulkload"
        # Under the dataset's writer lock no other job of this dataset runs: staging left
        # here by one is from a job that was killed.
        for stale in root.glob(f"{self.table}-*"):
            shutil.rmtree(stale, ignore_errors=True)
        self.dir = root / f"{self.table}-{uuid.uuid4().hex[:8]}"
        self.jvm = spark._jvm
        self.new_table = new_table
        self.stamp = stamp  # every cell's timestamp (gridagg.model.stamps)
        self._starts = None

    def region_starts(self) -> list[bytes]:
        """The start key of each of the table's regions, in order (the first is b"").
        A table being made will have the store's pre-split regions."""
        if self._starts is None:
            self._starts = ([b"", *self.format.split_keys()] if self.new_table else
                            [bytes(k) for k in self.jvm.HFileBulkLoad.regionStarts(self.table, *self.zk)])
        return self._starts

    def wait_for_table(self) -> None:
        """Return once the table exists (at once unless it is being made); raises what
        making it raised."""
        if self.new_table:
            self.new_table.result()

    def write(self, df):
        """`df`: rows (region, cells) to write, cells from pack_cells with cells of the
        region numbered `region` (in region_starts), and other rows, whose cells are
        null. Returns the DataFrame of the other rows; when it runs, the cells become
        HFiles, one per task and region."""
        from pyspark.sql import DataFrame

        family = self.format.rows_family
        return DataFrame(self.jvm.HFileBulkLoad.write(df._jdf, family.decode(), self.format.block_bytes(family),
                                                      self.format.encoding(family), self.dir.as_uri(), self.stamp),
                         self.spark)

    def load(self, aggregates) -> None:
        """Write the aggregates (grid ID -> PartialAggregate), as the store's cells, into an
        HFile per region (a file across regions would be split first), then hand every
        HFile written so far, the rows' too, to the region servers."""
        import pyarrow as pa

        family, qualifier = self.format.aggregate_column()
        cells = self.format.aggregate_cells(aggregates)
        rows = pa.array([row for row, _ in cells], pa.binary())
        # The cells reach the JVM as a file, gone before the load (the bulk load would
        # take anything in the staging directory for a column family's files).
        self.dir.mkdir(parents=True, exist_ok=True)
        path = self.dir / "aggregates.cells"
        for r, (a, b) in enumerate(region_bounds(rows, self.region_starts())):
            if a < b:
                path.write_bytes(b"".join(
                    struct.pack(">H", len(row)) + row + struct.pack(">H", len(qualifier)) + qualifier
                    + struct.pack(">I", len(value)) + value for row, value in cells[a:b]))
                try:
                    self.jvm.HFileBulkLoad.writeCells(path.as_uri(), self.dir.as_uri(), family.decode(),
                                                      self.format.block_bytes(family), self.format.encoding(family),
                                                      f"aggregates-r{r}", self.stamp)
                finally:
                    path.unlink()
        self.wait_for_table()
        if any(self.dir.glob("*/*")):
            self.jvm.HFileBulkLoad.load(self.table, self.dir.as_uri(), *self.zk)

    def close(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)


def region_bounds(keys, starts: list[bytes]) -> list[tuple[int, int]]:
    """(first, end) in `keys` (sorted, an Arrow binary array) of each region, given the
    regions' start keys."""
    import pyarrow as pa
    import pyarrow.compute as pc

    at = [0] + [pc.sum(pc.less(keys, pa.scalar(s, pa.binary()))).as_py() or 0 for s in starts[1:]] + [len(keys)]
    return list(zip(at[:-1], at[1:]))


def available(spark, settings) -> bool:
    """Whether a bulk load applies and the session has the Java half (a session made
    without spark_session(settings=...) has not)."""
    from py4j.java_gateway import JavaClass

    return applies(settings, spark.sparkContext.master) and isinstance(spark._jvm.HFileBulkLoad, JavaClass)


def open_bulk_load(spark, settings, ds, stamp: int, new_table=None) -> BulkLoad | None:
    """A BulkLoad whose cells are stamped `stamp` when one is available, else None.
    `new_table`: the Future of ds's table being made (create_table_later), if it is."""
    return BulkLoad(spark, settings, ds, stamp, new_table) if available(spark, settings) else None


def warm_up(spark, settings) -> None:
    """Start, in a thread of its own, what a session's first bulk load would otherwise
    start cold in Spark's JVM: HBase's connection, the HFile writer and the bulk-load tool
    (HFileBulkLoad.warmUp), so that a session's first job into HBase ends sooner. Best
    effort: a failure here only leaves them cold."""
    from gridagg_hbase.jvm import paths
    from gridagg_hbase.launcher import running_pid

    if not available(spark, settings) or running_pid(settings, "master") is None:
        return
    file = paths(settings).tmp / "bulkload" / f"warm-up-{uuid.uuid4().hex[:8]}"

    def run():
        try:
            file.parent.mkdir(parents=True, exist_ok=True)
            spark._jvm.HFileBulkLoad.warmUp("localhost", str(settings.zk_port), file.as_uri())
        except Exception:  # noqa: BLE001 - the job does the same work, and reports its errors
            pass

    # A daemon thread, not a pool's: nothing waits for it, not even the interpreter's exit.
    threading.Thread(target=run, name="hbase-warm-up", daemon=True).start()


def create_table(spark, settings, ds) -> None:
    """Create ds's table as the store's create_dataset does, but in Spark's JVM, which has
    HBase's client already: no JVM to start. Nothing when it exists."""
    from gridagg.store import bulk_format

    fmt = bulk_format(settings)
    spark._jvm.HFileBulkLoad.createTable(fmt.table(ds.name), fmt.families(),
                                         ",".join(k.hex() for k in fmt.split_keys()), "localhost",
                                         str(settings.zk_port))


def create_table_later(spark, settings, ds):
    """create_table in a thread of its own: returns its Future."""
    from concurrent.futures import ThreadPoolExecutor

    pool = ThreadPoolExecutor(1, thread_name_prefix="create-table")
    try:
        return pool.submit(create_table, spark, settings, ds)
    finally:
        pool.shutdown(wait=False)  # the thread ends with its one task
