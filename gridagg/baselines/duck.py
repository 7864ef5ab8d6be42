"""DuckDB alone: what a user might pick instead of gridagg. The stored integers in one
table sorted by time (DuckDB's zone maps then skip most of a time window's row groups),
one file per dataset under <data dir>/duckdb, queried in-process by plain SQL: box
predicates, the aggregate computed by DuckDB (sums as HUGEINT: exact).

Serving processes open the file read-only (DuckDB lets many processes read one file);
`threads` is DuckDB's worker threads per query (the bench measures 1 and 2).
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Iterable

import numpy as np

from ..aggregate import PartialAggregate
from ..query import QueryPlan, QueryResult, QuerySpec
from ..schema import Dataset
from .common import BaselineBackend, build_result, needed


def path_of(settings, name: str) -> Path:
    return Path(settings.data_dir) / "duckdb" / f"{name}.duckdb"


class DuckDBBaseline(BaselineBackend):
    kind = "duckdb"

    def __init__(self, settings, threads: int = 2):
        super().__init__()
        self.settings = settings
        self.threads = threads
        self._local = threading.local()
        self._connections: dict[str, object] = {}
        self._lock = threading.Lock()

    def connection(self, name: str):
        """This thread's read-only cursor on dataset `name`'s file."""
        import duckdb

        cursors = getattr(self._local, "cursors", None)
        if cursors is None:
            cursors = self._local.cursors = {}
        cur = cursors.get(name)
        if cur is None:
            with self._lock:
                con = self._connections.get(name)
                if con is None:
                    con = self._connections[name] = duckdb.connect(
                        str(path_of(self.settings, name)), read_only=True, config={"threads": self.threads})
            cur = cursors[name] = con.cursor()
        return cur

    def create(self, ds: Dataset) -> None:
        self.drop(ds.name)
        path_of(self.settings, ds.name).parent.mkdir(parents=True, exist_ok=True)

    def drop(self, name: str) -> None:
        with self._lock:
            con = self._connections.pop(name, None)
        if con is not None:
            con.close()
        path_of(self.settings, name).unlink(missing_ok=True)
        Path(str(path_of(self.settings, name)) + ".wal").unlink(missing_ok=True)

    def load(self, ds: Dataset, batches: Iterable[tuple[list[bytes], np.ndarray]]) -> int:
        """Every batch into a staging table through Arrow, then the table sorted by time
        (or the first dimension)."""
        import duckdb
        import pyarrow as pa

        names = [c.name for c in ds.columns]
        order = ds.dimensions[ds.time_axis if ds.time_axis is not None else 0].name
        n = 0
        with duckdb.connect(str(path_of(self.settings, ds.name))) as con:
            con.execute("CREATE TABLE staging (id VARCHAR, " + ", ".join(f'"{c}" BIGINT' for c in names) + ")")
            for ids, rows in batches:
                batch = pa.table({"id": pa.array([i.decode() for i in ids], pa.string()),
                                  **{c: pa.array(rows[:, j]) for j, c in enumerate(names)}})
                con.register("batch", batch)
                con.execute("INSERT INTO staging SELECT * FROM batch")
                con.unregister("batch")
                n += len(rows)
            con.execute(f'CREATE TABLE rows AS SELECT * FROM staging ORDER BY "{order}"')
            con.execute("DROP TABLE staging")
            con.execute("CHECKPOINT")
        return n

    def sql(self, ds: Dataset, spec: QuerySpec) -> tuple[str, list[int], list[tuple[str, int]]]:
        """The statement answering spec, its parameters, and the (statistic, column) of
        each selected value after count(*)."""
        domain = ds.domain()
        bounded = [i for i, rng in enumerate(spec.box) if rng != domain[i]]
        stats = sorted((f, c) for c, fs in needed(spec).items() for f in fs)
        select = ["count(*)"] + [f'{f}("{ds.columns[c].name}")' for f, c in stats]
        where = [f'"{ds.columns[i].name}" BETWEEN ? AND ?' for i in bounded]
        stmt = "SELECT " + ", ".join(select) + " FROM rows" + (" WHERE " + " AND ".join(where) if where else "")
        return stmt, [v for i in bounded for v in spec.box[i]], stats

    def run(self, ds: Dataset, spec: QuerySpec) -> QueryResult:
        started = time.perf_counter()
        total = PartialAggregate.empty(len(ds.columns))
        plan = QueryPlan()
        if not spec.empty:
            stmt, params, stats = self.sql(ds, spec)
            row = self.connection(ds.name).execute(stmt, params).fetchone()
            total.count = int(row[0])
            if total.count:
                for (f, c), v in zip(stats, row[1:]):
                    getattr(total, f + "s")[c] = int(v)
            plan.rows_matched_by_scans = total.count
        plan.round_trips = {"duckdb": 0}
        return build_result(ds, spec, total, plan, started)

    def close(self) -> None:
        with self._lock:
            for con in self._connections.values():
                con.close()
            self._connections.clear()
