"""PostgreSQL alone: one table per dataset with the stored integers, a composite B-tree
over the dimensions (the paper: the four query dimensions, time first), the aggregate
computed by SQL in one statement. Sums come back as numeric (exact)."""

from __future__ import annotations

import io
import time
from typing import Iterable

import numpy as np
import psycopg
from psycopg import sql
from psycopg_pool import ConnectionPool

from ..aggregate import PartialAggregate
from ..directory import check_pool
from ..errors import StoreUnavailable
from ..query import QueryPlan, QueryResult, QuerySpec
from ..schema import Dataset
from .common import BaselineBackend, build_result, needed


def table_name(name: str) -> str:
    return f"baseline_{name}"


class PostgresBaseline(BaselineBackend):
    kind = "pg"

    def __init__(self, url: str, max_connections: int = 8):
        super().__init__()
        self.pool = ConnectionPool(url, min_size=1, max_size=max_connections, kwargs={"autocommit": True},
                                   open=False)
        try:
            self.pool.open(wait=True, timeout=15)
        except Exception as exc:
            raise StoreUnavailable(f"PostgreSQL at {url} is unreachable: {exc}") from exc
        self._statements: dict[tuple, sql.Composed] = {}

    def close(self) -> None:
        self.pool.close()

    def create(self, ds: Dataset) -> None:
        t = sql.Identifier(table_name(ds.name))
        cols = sql.SQL(", ").join(sql.SQL("{} bigint NOT NULL").format(sql.Identifier(c.name)) for c in ds.columns)
        with self.pool.connection() as conn:
            conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(t))
            conn.execute(sql.SQL("CREATE TABLE {} (id text NOT NULL, {})").format(t, cols))

    def drop(self, name: str) -> None:
        with self.pool.connection() as conn:
            conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(sql.Identifier(table_name(name))))

    def load(self, ds: Dataset, batches: Iterable[tuple[list[bytes], np.ndarray]]) -> int:
        """COPY every batch (text format, built with numpy), then build the composite
        B-tree and ANALYZE: the index build is part of the load."""
        t = sql.Identifier(table_name(ds.name))
        names = sql.SQL(", ").join(sql.Identifier(c.name) for c in ds.columns)
        n = 0
        with self.pool.connection() as conn:
            with conn.cursor() as cur:
                with cur.copy(sql.SQL("COPY {} (id, {}) FROM STDIN").format(t, names)) as copy:
                    for ids, rows in batches:
                        buf = io.StringIO()
                        body = np.char.mod("%d", rows)
                        lines = ["\t".join((i.decode(), *r)) for i, r in zip(ids, body.tolist())]
                        buf.write("\n".join(lines))
                        buf.write("\n")
                        copy.write(buf.getvalue())
                        n += len(rows)
            dims = sql.SQL(", ").join(sql.Identifier(c.name) for c in ds.dimensions)
            conn.execute(sql.SQL("CREATE INDEX {} ON {} ({})").format(
                sql.Identifier(f"{table_name(ds.name)}_dims"), t, dims))
            conn.execute(sql.SQL("ANALYZE {}").format(t))
        return n

    def _statement(self, ds: Dataset, spec: QuerySpec) -> tuple[sql.Composed, list[int], list[tuple[str, int]]]:
        domain = ds.domain()
        bounded = [i for i, rng in enumerate(spec.box) if rng != domain[i]]
        stats = sorted((f, c) for c, fs in needed(spec).items() for f in fs)
        key = (ds.name, tuple(bounded), tuple(stats))
        stmt = self._statements.get(key)
        if stmt is None:
            select = [sql.SQL("count(*)")] + [
                sql.SQL("{}({})").format(sql.SQL(f), sql.Identifier(ds.columns[c].name)) for f, c in stats]
            where = [sql.SQL("{} BETWEEN %s AND %s").format(sql.Identifier(ds.columns[i].name)) for i in bounded]
            stmt = sql.SQL("SELECT {} FROM {}{}").format(
                sql.SQL(", ").join(select), sql.Identifier(table_name(ds.name)),
                sql.SQL(" WHERE ") + sql.SQL(" AND ").join(where) if where else sql.SQL(""))
            self._statements[key] = stmt
        return stmt, bounded, stats

    def run(self, ds: Dataset, spec: QuerySpec) -> QueryResult:
        started = time.perf_counter()
        ncols = len(ds.columns)
        total = PartialAggregate.empty(ncols)
        plan = QueryPlan()
        if not spec.empty:
            stmt, bounded, stats = self._statement(ds, spec)
            params = [v for i in bounded for v in spec.box[i]]
            try:
                with self.pool.connection(timeout=5) as conn:
                    self.round_trips.add()
                    row = conn.execute(stmt, params, prepare=True).fetchone()
            except psycopg.OperationalError as exc:
                check_pool(self.pool)  # as the grid directory does: replace broken connections
                raise StoreUnavailable(f"PostgreSQL is unreachable: {exc}") from exc
            total.count = int(row[0])
            if total.count:
                for (f, c), v in zip(stats, row[1:]):
                    getattr(total, f + "s")[c] = int(v)
            plan.rows_matched_by_scans = total.count
        plan.round_trips = {"postgresql": 1 if not spec.empty else 0}
        return build_result(ds, spec, total, plan, started)
