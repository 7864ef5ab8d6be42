"""HBase alone: row key = order-preserving 8-byte binary time + element ID, one column
family "r" with one cell per non-time column (8 big-endian bytes, sign bit flipped, so
byte order is numeric order).

A query is a range scan over the time window; every other bounded dimension is pushed
down as a pair of SingleColumnValueFilters, so only matching rows travel; only the
columns needed (filtered or aggregated) are fetched; the aggregate is computed in Python
(numpy over the joined cells). The window is cut into `parallel` time slices scanned
concurrently on separate Thrift connections (regions are pre-split over time).
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from typing import Iterable

import happybase
import numpy as np

from ..aggregate import PartialAggregate, exact_column_sums
from ..errors import StoreUnavailable
from ..query import QueryPlan, QueryResult, QuerySpec
from ..schema import Dataset
from .common import BaselineBackend, build_result, needed

FAMILY = b"r"
SIGN = np.uint64(1 << 63)
REGIONS = 12  # as the paper: the table is pre-split into 12 regions over time


def encode_cells(values: np.ndarray) -> list[list[bytes]]:
    """Order-preserving 8-byte cells of an (m, ncols) int64 array, row by row: big-endian
    with the sign bit flipped, so byte order is numeric order for HBase's filters."""
    m, ncols = values.shape
    blob = (values.astype(np.int64).view(np.uint64) ^ SIGN).astype(">u8").tobytes()
    return [[blob[(i * ncols + j) * 8 : (i * ncols + j + 1) * 8] for j in range(ncols)] for i in range(m)]


def decode_cells(blob: bytes, nrows: int, ncols: int) -> np.ndarray:
    flipped = np.frombuffer(blob, dtype=">u8").reshape(nrows, ncols)
    return (flipped.astype(np.uint64) ^ SIGN).view(np.int64)


def table_name(name: str) -> str:
    return f"baseline_{name}"


def time_key(t: int) -> bytes:
    return encode_cells(np.array([[t]], dtype=np.int64))[0][0]


def _quote(value: bytes) -> bytes:
    return b"'" + value.replace(b"'", b"''") + b"'"


class HBaseBaseline(BaselineBackend):
    kind = "hbase"

    def __init__(self, settings, pool_size: int = 8, parallel: int = 2, batch_rows: int = 5000):
        super().__init__()
        self.settings = settings
        host, port = settings.effective_hbase
        self.parallel = max(1, parallel)
        self.batch_rows = batch_rows
        try:
            self.pool = happybase.ConnectionPool(pool_size, host=host, port=port, timeout=120000)
        except OSError as exc:
            raise StoreUnavailable(f"HBase Thrift gateway at {host}:{port} is unreachable: {exc}") from exc
        self._executor = ThreadPoolExecutor(self.parallel) if self.parallel > 1 else None

    def close(self) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=False)

    @staticmethod
    def _time_axis(ds: Dataset) -> int:
        t = ds.time_axis
        return 0 if t is None else t

    def _cell_columns(self, ds: Dataset) -> list[int]:
        t = self._time_axis(ds)
        return [i for i in range(len(ds.columns)) if i != t]

    def create(self, ds: Dataset) -> None:
        self.drop(ds.name)
        families = {"r": {"max_versions": 1}}
        t = ds.columns[self._time_axis(ds)]
        lo, hi = t.enc_lo, t.enc_hi
        splits = [time_key(lo + (hi - lo) * k // REGIONS) for k in range(1, REGIONS)]
        if self.settings.hbase is None:
            from hbase.launcher import create_presplit_table

            create_presplit_table(self.settings, table_name(ds.name), families, splits)
        else:
            with self.pool.connection() as conn:
                conn.create_table(table_name(ds.name), families)

    def drop(self, name: str) -> None:
        with self.pool.connection() as conn:
            if table_name(name).encode() in conn.tables():
                conn.delete_table(table_name(name), disable=True)

    def load(self, ds: Dataset, batches: Iterable[tuple[list[bytes], np.ndarray]], chunk: int = 5000) -> int:
        """Batched puts (`chunk` rows per Thrift mutateRows), then a flush-free major
        compaction request (Thrift1 has no flush; the memstore serves reads too)."""
        t = self._time_axis(ds)
        cells_of = self._cell_columns(ds)
        quals = [FAMILY + b":" + ds.columns[i].name.encode() for i in cells_of]
        n = 0
        with self.pool.connection() as conn:
            table = conn.table(table_name(ds.name))
            with table.batch(batch_size=chunk) as b:
                for ids, rows in batches:
                    tk = encode_cells(rows[:, [t]])
                    cells = encode_cells(rows[:, cells_of])
                    for eid, k, row in zip(ids, tk, cells):
                        b.put(k[0] + eid, dict(zip(quals, row)))
                    n += len(rows)
            try:
                conn.compact_table(table_name(ds.name), major=True)
            except Exception:  # compaction is an optimisation; a gateway may refuse it
                pass
        return n

    def _filter(self, ds: Dataset, spec: QuerySpec) -> tuple[bytes | None, list[int]]:
        domain = ds.domain()
        t = self._time_axis(ds)
        parts, cols = [], []
        for i, (lo, hi) in enumerate(spec.box):
            if i == t or (lo, hi) == domain[i]:
                continue
            cols.append(i)
            qual = ds.columns[i].name.encode()
            blo, bhi = encode_cells(np.array([[lo, hi]], dtype=np.int64))[0]
            for op, bound in ((b">=", blo), (b"<=", bhi)):
                parts.append(b"SingleColumnValueFilter ('r', '" + qual + b"', " + op + b", "
                             + _quote(b"binary:" + bound) + b", true, true)")
        return (b" AND ".join(parts) or None), cols

    def _scan(self, ds: Dataset, start: bytes, stop: bytes, flt: bytes | None, fetch: list[int],
              want_time: bool) -> tuple[np.ndarray, np.ndarray | None, int]:
        """(m x len(fetch) values, times or None, round trips) of matching rows."""
        quals = [FAMILY + b":" + ds.columns[i].name.encode() for i in fetch]
        blob: list[bytes] = []
        keys: list[bytes] = []
        m = 0
        with self.pool.connection() as conn:
            table = conn.table(table_name(ds.name))
            if quals:
                scan = table.scan(row_start=start, row_stop=stop, columns=quals, filter=flt,
                                  batch_size=self.batch_rows)
            else:  # count only: keys alone
                scan = table.scan(row_start=start, row_stop=stop, filter=b"FirstKeyOnlyFilter() AND KeyOnlyFilter()",
                                  batch_size=self.batch_rows)
            for key, data in scan:
                m += 1
                if quals:
                    blob.extend([data[q] for q in quals])
                if want_time:
                    keys.append(key[:8])
        values = decode_cells(b"".join(blob), m, len(quals)) if quals else np.empty((m, 0), dtype=np.int64)
        times = decode_cells(b"".join(keys), m, 1)[:, 0] if want_time else None
        return values, times, 2 + m // self.batch_rows

    def run(self, ds: Dataset, spec: QuerySpec) -> QueryResult:
        started = time.perf_counter()
        ncols = len(ds.columns)
        total = PartialAggregate.empty(ncols)
        plan = QueryPlan()
        trips = 0
        if not spec.empty:
            t = self._time_axis(ds)
            tlo, thi = spec.box[t]
            tcol = ds.columns[t]
            tlo, thi = max(tlo, tcol.enc_lo), min(thi, tcol.enc_hi)
            flt, filtered = self._filter(ds, spec)
            stats = needed(spec)
            agg_cols = sorted(stats)
            fetch = sorted((set(filtered) | set(agg_cols)) - {t})
            want_time = t in stats
            if tlo <= thi:
                k = min(self.parallel, max(1, (thi - tlo) // 86400 // 30)) if self._executor else 1
                edges = [tlo + (thi - tlo + 1) * j // k for j in range(k + 1)]
                jobs = [(time_key(edges[j]), time_key(edges[j + 1])) for j in range(k)]
                if k == 1:
                    parts = [self._scan(ds, *jobs[0], flt, fetch, want_time)]
                else:
                    try:
                        scans = self._executor.map(lambda j: self._scan(ds, *j, flt, fetch, want_time), jobs)
                    except RuntimeError as exc:  # refused: the process is shutting down
                        raise StoreUnavailable(f"HBase alone: the server is shutting down ({exc})") from exc
                    parts = list(scans)
                m = sum(len(p[0]) for p in parts)
                trips = sum(p[2] for p in parts)
                total.count = m
                if m:
                    values = np.concatenate([p[0] for p in parts])
                    times = np.concatenate([p[1] for p in parts]) if want_time else None
                    for c, fs in stats.items():
                        col = times if c == t else values[:, fetch.index(c)]
                        if "sum" in fs:
                            total.sums[c] = exact_column_sums(col.reshape(-1, 1))[0]
                        if "min" in fs:
                            total.mins[c] = int(col.min())
                        if "max" in fs:
                            total.maxs[c] = int(col.max())
            plan.rows_matched_by_scans = total.count
        self.round_trips.add(trips)
        plan.round_trips = {"hbase": trips}
        return build_result(ds, spec, total, plan, started)
