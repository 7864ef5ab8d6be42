"""The bulk load's cells in the HBase store's layout (ingest.hfiles, HFileBulkLoad), written
by Spark's JVM and loaded into the real local HBase: a leaf the load makes starts over, a
leaf it appends to keeps its segments, and many appends keep few live segments."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from gridagg_ingest import hfiles
from gridagg_ingest.job import spark_session

from gridagg.model.grid import grid_prefix
from gridagg.model.schema import Column, Dataset
from gridagg.model.stamps import WriteStamps
from gridagg.store.hbase import rows as hbase_rows
from gridagg.store.hbase.bulk import HBaseBulkFormat
from gridagg.store.hbase.store import HBaseStore
from gridagg.store.scan import ScanRequest

FORMAT = HBaseBulkFormat()

NCOLS = 3


@pytest.fixture(scope="module")
def s(settings, services):
    if settings.hbase:
        pytest.skip("bulk loads need the local HBase")
    return settings.with_(store="hbase")


@pytest.fixture(scope="module")
def spark(s):
    session = spark_session("local[1]", shuffle_partitions=1, settings=s)
    yield session
    session.stop()


@pytest.fixture
def loaded(s, unique_name):
    store = HBaseStore(s)
    ds = Dataset(unique_name, (Column("x", lo=-100, hi=100),), (Column("m"), Column("n")))
    store.create_dataset(ds)
    yield store, ds
    store.drop_dataset(ds.name)
    store.close()


def bulk_load(spark, s, ds, cells: list[tuple]) -> None:
    """The cells through HFileBulkLoad.write and a bulk load, as the ingest job does."""
    bulk = hfiles.BulkLoad(spark, s, ds, WriteStamps.local().next())
    try:
        cells.sort(key=lambda c: (c[0], -c[1], c[2]))
        df = spark.createDataFrame([(None, None, 0, FORMAT.pack_cells(cells))],
                                   "leaf string, info string, region int, cells binary")
        assert bulk.write(df).collect() == []
        bulk.load({})
    finally:
        bulk.close()


def rows_of(store, ds, prefix) -> dict[bytes, list[int]]:
    return {e: v.tolist() for e, v in hbase_rows.rows_of(hbase_rows.live(store.grid_segments(ds, [prefix]).get(prefix, []))).items()}


def batch(rng, n, tag):
    eids = [b"%s%d" % (tag, i) for i in range(n)]
    return eids, rng.integers(-50, 50, (n, NCOLS))


def test_a_made_leaf_starts_over_and_an_appended_one_keeps_its_rows(spark, s, loaded):
    store, ds = loaded
    rng = np.random.default_rng(1)
    made, kept = grid_prefix("0" + "1" * 12), grid_prefix("0" + "0" * 12)
    stale, old = batch(rng, 20, b"stale"), batch(rng, 30, b"old")
    store.put_grids(ds, [(made, *stale), (kept, *old)])  # `made` as a crashed run left it
    new_made, new_kept = batch(rng, 25, b"m"), batch(rng, 15, b"k")
    stored = store.grid_segments(ds, [kept])[kept]
    cells = (FORMAT.grid_cells(made, pa.array(new_made[0], pa.binary()), new_made[1], None, ds)
             + FORMAT.grid_cells(kept, pa.array(new_kept[0], pa.binary()), new_kept[1], stored, ds))
    bulk_load(spark, s, ds, cells)
    assert rows_of(store, ds, made) == {e: v.tolist() for e, v in zip(*new_made)}
    assert rows_of(store, ds, kept) == {e: v.tolist() for part in (old, new_kept) for e, v in zip(*part)}
    for prefix, n in ((made, 25), (kept, 45)):
        gid = prefix[1:-1].decode()
        assert store.scan(ds, ScanRequest([gid], [], [1])).aggs.count[0] == n


def test_many_appends_keep_few_live_segments(spark, s, loaded):
    store, ds = loaded
    rng = np.random.default_rng(2)
    prefix = grid_prefix("0" + "01" * 5)
    expected = {}
    for load in range(hbase_rows.MAX_SEGMENTS + 3):
        eids, values = batch(rng, 10 + load, b"l%d-" % load)
        stored = store.grid_segments(ds, [prefix]).get(prefix, [])
        assert len(hbase_rows.live(stored)) <= hbase_rows.MAX_SEGMENTS
        bulk_load(spark, s, ds, FORMAT.grid_cells(prefix, pa.array(eids, pa.binary()), values, stored, ds))
        expected.update(zip(eids, values.tolist()))
        assert rows_of(store, ds, prefix) == expected
    assert len(store.grid_segments(ds, [prefix])[prefix]) < hbase_rows.MAX_SEGMENTS  # older cells deleted
