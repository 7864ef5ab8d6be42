"""HBase bulk load for the ingest job: the executors write the rows as HFiles and the
region server takes the files whole. Nothing goes through HBase's write path (Thrift,
WAL, memstore, flushes), which is most of what a load into HBase costs.

It applies when the store is the local HBase (`gridagg services up`) and Spark runs
locally: the region server must read the files the executors write, and both share this
machine's disk. Otherwise the job writes rows through the Thrift gateway.

The Java half is hbase/HFileBulkLoad.java. Spark's driver JVM must have it and HBase's
jars on its classpath from the start: spark_session() adds them (`classpath`).
"""

from __future__ import annotations

import shutil
import struct
import uuid


def applies(settings, master: str) -> bool:
    """Whether a job with these settings on this Spark master bulk-loads HFiles."""
    return settings.store == "hbase" and settings.hbase is None and master.startswith("local")


def classpath(settings, master: str) -> str | None:
    """What spark.driver.extraClassPath needs for a bulk load, None when none applies."""
    if not applies(settings, master):
        return None
    from hbase.launcher import spark_bulk_load_classpath

    return spark_bulk_load_classpath(settings)


class BulkLoad:
    """One job's bulk load into dataset `ds`: write() the rows and write_aggregates() the
    aggregates as HFiles under a staging directory, load() them into the table, close()
    removes what is left of the staging."""

    def __init__(self, spark, settings, ds):
        from hbase.launcher import paths

        from gridagg.store.hbase import table_name

        self.spark, self.table = spark, table_name(ds.name)
        self.zk = ("localhost", str(settings.zk_port))
        root = paths(settings).tmp / "bulkload"
        # Under the dataset's writer lock no other job of this dataset runs: staging left
        # here by one is from a job that was killed.
        for stale in root.glob(f"{self.table}-*"):
            shutil.rmtree(stale, ignore_errors=True)
        self.dir = root / f"{self.table}-{uuid.uuid4().hex[:8]}"
        self.jvm = spark._jvm

    def write(self, df):
        """`df`: key (binary), value (binary), then other columns. Returns the DataFrame of
        the rows whose key is null (the others become cells in HFiles when it runs)."""
        from pyspark.sql import DataFrame

        from gridagg.store.hbase import HBaseStore

        family, qualifier = HBaseStore.ROW.decode().split(":")  # a row is one cell
        jdf = self.jvm.HFileBulkLoad.write(df._jdf, self.table, family, qualifier, self.dir.as_uri(), *self.zk)
        return DataFrame(jdf, self.spark)

    def write_aggregates(self, store, ds, aggregates) -> None:
        """Aggregates (grid ID -> PartialAggregate), as the HBase store's cells (all in one
        family), into one HFile."""
        parts = []
        for row, columns in sorted(store.aggregate_cells(ds, aggregates)):
            for column, value in sorted(columns.items()):
                family, qualifier = column.split(b":", 1)
                parts += [struct.pack(">H", len(row)), row, struct.pack(">H", len(qualifier)), qualifier,
                          struct.pack(">I", len(value)), value]
        if parts:
            self.jvm.HFileBulkLoad.writeCells(b"".join(parts), self.dir.as_uri(), family.decode(), "aggregates")

    def load(self) -> None:
        """Hand every HFile written so far to the region server."""
        if any(self.dir.glob("*/*")):
            self.jvm.HFileBulkLoad.load(self.table, self.dir.as_uri(), *self.zk)

    def close(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)


def available(spark, settings) -> bool:
    """Whether a bulk load applies and the session has the Java half (a session made
    without spark_session(settings=...) has not)."""
    from py4j.java_gateway import JavaClass

    return applies(settings, spark.sparkContext.master) and isinstance(spark._jvm.HFileBulkLoad, JavaClass)


def open_bulk_load(spark, settings, ds) -> BulkLoad | None:
    """A BulkLoad when one is available, else None."""
    return BulkLoad(spark, settings, ds) if available(spark, settings) else None


def create_table(spark, settings, ds) -> None:
    """Create ds's table as HBaseStore.create_dataset does, but in Spark's JVM, which has
    HBase's client already: no JVM to start (2 s). Nothing when it exists."""
    from gridagg.store.hbase import FAMILIES, SPLITS, table_name

    families = ",".join(f"{name}:{opts['max_versions']}" for name, opts in FAMILIES.items())
    spark._jvm.HFileBulkLoad.createTable(table_name(ds.name), families, ",".join(k.hex() for k in SPLITS),
                                         "localhost", str(settings.zk_port))

