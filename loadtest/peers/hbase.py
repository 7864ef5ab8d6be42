"""HBase alone, as a competent HBase user builds it (Phoenix-style): row key =
order-preserving 8-byte time + element ID, one cell "r:v" per row holding the whole row
(ncols x int64, little-endian), the table pre-split into regions over time.

A query is one Thrift call: the time window is a key range, and the region servers'
GridScanObserver (layout ROW_CELLS, gridagg.store.hbase.scan) scans it, applies the
rest of the box as conditions and aggregates; only the aggregate comes back. Without
the observer on the region servers a query fails, saying so. Before it is measured its
table is read whole by the region servers (`prewarm`), as gridagg's on HBase is.
"""

from __future__ import annotations

import time

import happybase  # noqa: F401 - importing it makes its Thrift types (Hbase_thrift) importable
import numpy as np
from Hbase_thrift import BatchMutation, Mutation

from gridagg.model.aggregate import PartialAggregate
from gridagg.model.schema import Dataset
from gridagg.query.spec import QueryPlan, QueryResult, QuerySpec
from gridagg.store.hbase.gateway import PROBE_ROW, Gateway
from gridagg.store.hbase.regions import Calls, RegionCache
from gridagg.store.hbase.scan import ROW_CELLS, Items, ask
from gridagg.store.scan import RangeCondition, ScanRequest

from .common import Batches, Peer, build_result, statistics

CELL = b"r:v"
SIGN = np.uint64(1 << 63)
REGIONS = 12  # as the paper: the table is pre-split into 12 regions over time
WRITE_ROWS = 5000  # rows per Thrift mutateRows


def table_name(name: str) -> str:
    return f"peer_{name}"


def time_keys(times: np.ndarray) -> np.ndarray:
    """Order-preserving 8-byte keys of int64 times (big-endian, sign bit flipped), as an
    (m, 8) uint8 array."""
    return (np.asarray(times, np.int64).view(np.uint64) ^ SIGN).astype(">u8").view(np.uint8).reshape(-1, 8)


def time_key(t: int) -> bytes:
    return time_keys(np.array([t])).tobytes()


def read_table(gateway: Gateway, table: str) -> None:
    """Have the region servers read every block of `table` (into their block cache and
    the OS page cache) without sending a row back: a scan whose filter matches no row
    key. Used for every table measured on HBase alike."""
    with gateway.connection(slow=True, table=table.encode()) as conn:
        for _ in conn.table(table).scan(filter=f"RowFilter(=, 'binary:{PROBE_ROW.decode()}')"):
            pass


class HBasePeer(Peer):
    kind = "hbase"
    label = "HBase alone"

    def __init__(self, settings, pool_size: int = 8):
        super().__init__()
        self.settings = settings
        self.pool = Gateway(settings, pool_size)
        self.fanout = Gateway(settings, pool_size)  # a scan's calls to its other region servers
        with self.pool.connection():  # an unreachable gateway is reported now
            pass
        self.regions = RegionCache()

    @staticmethod
    def _time_axis(ds: Dataset) -> int:
        t = ds.time_axis
        return 0 if t is None else t

    def create(self, ds: Dataset) -> None:
        self.drop(ds.name)
        families = {"r": {"max_versions": 1}}
        t = ds.columns[self._time_axis(ds)]
        lo, hi = t.enc_lo, t.enc_hi
        splits = [time_key(lo + (hi - lo) * k // REGIONS) for k in range(1, REGIONS)]
        if self.settings.hbase is None:
            from gridagg_hbase.admin import create_presplit_table

            create_presplit_table(self.settings, table_name(ds.name), families, splits)
        else:
            with self.pool.connection(slow=True) as conn:
                conn.create_table(table_name(ds.name), families)
        self.regions.forget(table_name(ds.name).encode())

    def drop(self, name: str) -> None:
        with self.pool.connection(slow=True) as conn:
            if table_name(name).encode() in conn.tables():
                conn.delete_table(table_name(name), disable=True)
        self.regions.forget(table_name(name).encode())

    def load(self, ds: Dataset, batches: Batches) -> int:
        """Batched puts (WRITE_ROWS rows per Thrift mutateRows), then on the local HBase a
        major compaction, as gridagg's tables get after tuning: one file per region, the
        memstore flushed. Thrift1 cannot ask for one: HBase 2's gateway turns its
        majorCompact into a minor compaction, which merges no files this size."""
        t = self._time_axis(ds)
        n = 0
        table = table_name(ds.name).encode()
        with self.pool.connection(slow=True, table=table) as conn:
            for ids, rows in batches:
                rows = np.ascontiguousarray(rows, dtype="<i8")
                keys = time_keys(rows[:, t]).tobytes()
                cells = rows.tobytes()
                width = 8 * rows.shape[1]
                for s in range(0, len(ids), WRITE_ROWS):
                    self.round_trips.add()
                    conn.client.mutateRows(table, [
                        BatchMutation(row=keys[8 * i : 8 * i + 8] + ids[i],
                                      mutations=[Mutation(column=CELL, value=cells[width * i : width * (i + 1)])])
                        for i in range(s, min(s + WRITE_ROWS, len(ids)))], {})
                n += len(ids)
        if self.settings.hbase is None:
            from gridagg_hbase.admin import COMPACT_SECONDS, region_admin

            region_admin(self.settings, "compact", table_name(ds.name), timeout=COMPACT_SECONDS)
        return n

    def run(self, ds: Dataset, spec: QuerySpec) -> QueryResult:
        started = time.perf_counter()
        ncols = len(ds.columns)
        total = PartialAggregate.empty(ncols)
        plan = QueryPlan()
        trips0 = self.round_trips()
        t = self._time_axis(ds)
        tcol = ds.columns[t]
        tlo, thi = max(spec.box[t][0], tcol.enc_lo), min(spec.box[t][1], tcol.enc_hi)
        if not spec.empty and tlo <= thi:
            domain = ds.domain()
            conditions = [RangeCondition(i, lo, hi) for i, (lo, hi) in enumerate(spec.box)
                          if i != t and (lo, hi) != domain[i]]
            columns = sorted({c for _, c in statistics(ds, spec)})
            request = ScanRequest(["window"], conditions, columns)
            window = Items([time_key(tlo)], [time_key(thi + 1)])  # every key of the window: time + element ID
            table = table_name(ds.name).encode()
            with self.pool.connection(slow=True, table=table) as conn:
                answer = ask(Calls(conn.client, self.fanout), table, ROW_CELLS, ncols, request, window, self.regions,
                             self.round_trips, self.settings.hbase_call_timeout)
            total = answer.aggs.aggregate(0, columns, ncols)
        plan.round_trips = {"hbase": self.round_trips() - trips0}
        return build_result(ds, spec, total, plan, started)

    def prewarm(self, ds: Dataset) -> None:
        read_table(self.pool, table_name(ds.name))

    def close(self) -> None:
        self.pool.close()
        self.fanout.close()
