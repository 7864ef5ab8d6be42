"""PostgreSQL alone, set up as PostgreSQL's documentation advises for a read-mostly box
whose data fits in memory: one table per dataset with the stored integers, loaded in
time order by COPY, then VACUUM ANALYZE (statistics, and the visibility map that lets an
index-only scan skip the heap); the index its EXPLAIN ANALYZE shows fastest on the
workload (`prepare`); sessions that know the cache is large (effective_cache_size),
random reads cheap (random_page_cost) and JIT not worth compiling for queries of
milliseconds; parallel workers per query as a knob the bench measures. Server settings
that need a restart (shared_buffers) are pg_server.py's. Sums come back as numeric
(exact).
"""

from __future__ import annotations

import io
import os
import statistics as stats_
import time

import numpy as np
import psycopg
from psycopg import sql
from psycopg_pool import ConnectionPool

from gridagg.model.errors import StoreUnavailable
from gridagg.model.schema import Dataset
from gridagg.query.spec import QueryPlan, QueryResult, QuerySpec

from .common import (
    Batches,
    Peer,
    aggregate_of,
    box_where,
    build_result,
    select_list,
    statistics,
)

# The indexes `prepare` tries, by name: (method, key columns, included columns), over
# the dataset's dimensions D (time first, as the paper's composite index) and measures M.
INDEXES = {
    "btree(dimensions)": ("btree", "D", ""),  # the paper's composite index: the heap read for the measure
    "btree(dimensions) include(measures)": ("btree", "D", "M"),  # index-only scans of the whole box
    "btree(time) include(all)": ("btree", "T", "R"),  # index-only scans of the time window
    "brin(time)": ("brin", "T", ""),  # rows in time order: block ranges of the window
}
DEFAULT_INDEX = "btree(dimensions) include(measures)"
SAMPLE_RUNS = 2  # EXPLAIN ANALYZE runs per sample query; the last is kept (warm)


def table_name(name: str) -> str:
    return f"peer_{name}"


def memory_bytes() -> int:
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def session_settings(parallel: int) -> dict[str, str]:
    """What each of the peer's sessions sets: the OS cache holds most of memory
    (effective_cache_size, three quarters of RAM as the docs' examples size it); the
    data is cached, so a random page costs about a sequential one (random_page_cost);
    JIT compiles for long analytical queries, not for milliseconds (off); `parallel`
    workers per query (max_parallel_workers_per_gather)."""
    return {"effective_cache_size": f"{memory_bytes() * 3 // 4 // 2**20}MB", "random_page_cost": "1.1",
            "jit": "off", "max_parallel_workers_per_gather": str(parallel)}


class PostgresPeer(Peer):
    kind = "pg"
    label = "PostgreSQL alone"
    KNOBS = {"parallel": (2, 0)}  # max_parallel_workers_per_gather: PostgreSQL's default, and none

    def __init__(self, settings, parallel: int = 2, max_connections: int = 8):
        super().__init__()
        self.parallel = int(parallel)
        url = settings.effective_pg_url
        self.session = session_settings(self.parallel)
        self.pool = ConnectionPool(url, min_size=1, max_size=max_connections, kwargs={"autocommit": True},
                                   configure=self._configure, open=False)
        try:
            self.pool.open(wait=True, timeout=15)
        except Exception as exc:
            raise StoreUnavailable(f"PostgreSQL at {url} is unreachable: {exc}") from exc
        self._statements: dict[tuple, str] = {}

    def _configure(self, conn: psycopg.Connection) -> None:
        for name, value in self.session.items():
            conn.execute(sql.SQL("SET {} = {}").format(sql.Identifier(name), sql.Literal(value)))

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

    def load(self, ds: Dataset, batches: Batches) -> int:
        """COPY every batch (text format, built with numpy), then VACUUM ANALYZE; the
        index is `prepare`'s."""
        t = sql.Identifier(table_name(ds.name))
        names = sql.SQL(", ").join(sql.Identifier(c.name) for c in ds.columns)
        n = 0
        with self.pool.connection() as conn:
            with conn.cursor() as cur:
                with cur.copy(sql.SQL("COPY {} (id, {}) FROM STDIN").format(t, names)) as copy:
                    for ids, rows in batches:
                        buf = io.StringIO()
                        body = np.char.mod("%d", rows)
                        buf.write("\n".join("\t".join((i.decode(), *r)) for i, r in zip(ids, body.tolist())))
                        buf.write("\n")
                        copy.write(buf.getvalue())
                        n += len(rows)
            conn.execute(sql.SQL("VACUUM ANALYZE {}").format(t))
        return n

    def build_index(self, ds: Dataset, index: str) -> float:
        """Create INDEXES[index] on ds's table; returns the seconds it took."""
        method, key, include = INDEXES[index]
        groups = {"D": [c.name for c in ds.dimensions], "M": [c.name for c in ds.measures],
                  "T": [ds.dimensions[ds.time_axis or 0].name]}
        groups["R"] = [c.name for c in ds.columns if c.name not in groups["T"]]
        ident = lambda names: sql.SQL(", ").join(map(sql.Identifier, names))  # noqa: E731
        stmt = sql.SQL("CREATE INDEX {} ON {} USING {} ({})").format(
            sql.Identifier(f"{table_name(ds.name)}_idx"), sql.Identifier(table_name(ds.name)), sql.SQL(method),
            ident(groups[key]))
        if include:
            stmt += sql.SQL(" INCLUDE ({})").format(ident(groups[include]))
        t0 = time.perf_counter()
        with self.pool.connection() as conn:
            conn.execute(stmt)
        return time.perf_counter() - t0

    def drop_index(self, ds: Dataset) -> None:
        with self.pool.connection() as conn:
            conn.execute(sql.SQL("DROP INDEX IF EXISTS {}").format(sql.Identifier(f"{table_name(ds.name)}_idx")))

    def prepare(self, ds: Dataset, samples: list[QuerySpec]) -> dict:
        """Every index of INDEXES in turn, timed by EXPLAIN ANALYZE on the sample queries
        (median execution time of each one's last run); keeps the fastest. Without
        samples, builds DEFAULT_INDEX. Returns {"index", "build_seconds", "tried": [...]}."""
        tried = []
        for index in INDEXES if samples else [DEFAULT_INDEX]:
            self.drop_index(ds)
            secs = self.build_index(ds, index)
            times, plans = [], set()
            for spec in samples:
                for _ in range(SAMPLE_RUNS):
                    plan = self._explain(ds, spec, "ANALYZE, FORMAT JSON")[0][0][0]  # one row: a JSON list of one plan
                times.append(plan["Execution Time"])
                plans.add(_scan_node(plan["Plan"]))
            tried.append({"index": index, "build_seconds": secs,
                          "median_ms": round(stats_.median(times), 3) if times else None,
                          "plans": ", ".join(sorted(plans))})
        best = min(tried, key=lambda t: t["median_ms"] if t["median_ms"] is not None else 0)
        if best is not tried[-1]:
            self.drop_index(ds)
            best["build_seconds"] = self.build_index(ds, best["index"])
        return {"index": best["index"], "build_seconds": best["build_seconds"], "tried": tried}

    def _explain(self, ds: Dataset, spec: QuerySpec, options: str):
        stmt, params = self._statement(ds, spec)
        with self.pool.connection() as conn:
            return conn.execute(f"EXPLAIN ({options}) {stmt}", params).fetchall()

    def explain(self, ds: Dataset, spec: QuerySpec) -> str:
        """EXPLAIN (ANALYZE, BUFFERS) of spec in one of the peer's sessions."""
        return "\n".join(r[0] for r in self._explain(ds, spec, "ANALYZE, BUFFERS"))

    def prewarm(self, ds: Dataset) -> None:
        """The table and its index into shared buffers (pg_prewarm; without it, a full
        scan reads the table at least)."""
        table = table_name(ds.name)
        with self.pool.connection() as conn:
            try:
                conn.execute("CREATE EXTENSION IF NOT EXISTS pg_prewarm")
                for rel in (table, f"{table}_idx"):
                    conn.execute("SELECT pg_prewarm(%s, 'buffer')", (rel,))
            except psycopg.Error:
                conn.execute(sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(table)))

    def _statement(self, ds: Dataset, spec: QuerySpec) -> tuple[str, list[int]]:
        where, params = box_where(ds, spec, lambda i: "%s")
        stats = statistics(ds, spec)
        key = (ds.name, where, tuple(stats))
        stmt = self._statements.get(key)
        if stmt is None:
            stmt = self._statements[key] = f'SELECT {select_list(ds, stats)} FROM "{table_name(ds.name)}"{where}'
        return stmt, params

    def run(self, ds: Dataset, spec: QuerySpec) -> QueryResult:
        started = time.perf_counter()
        stats = statistics(ds, spec)
        row = (0,)
        if not spec.empty:
            stmt, params = self._statement(ds, spec)
            try:
                with self.pool.connection(timeout=5) as conn:
                    self.round_trips.add()
                    row = conn.execute(stmt, params, prepare=True).fetchone()
            except psycopg.OperationalError as exc:
                _replace_broken(self.pool)
                raise StoreUnavailable(f"PostgreSQL is unreachable: {exc}") from exc
        plan = QueryPlan(round_trips={"postgresql": 0 if spec.empty else 1})
        return build_result(ds, spec, aggregate_of(ds, stats, row), plan, started)


def _scan_node(plan: dict) -> str:
    """The scan a JSON plan ends in (e.g. "Index Only Scan"), below aggregates and gathers."""
    while plan.get("Plans") and "Scan" not in plan["Node Type"]:
        plan = plan["Plans"][0]
    return plan["Node Type"]


def _replace_broken(pool: ConnectionPool) -> None:
    """Test the pool's idle connections and replace the broken ones (after a failure)."""
    try:
        pool.check()
    except Exception:  # noqa: BLE001 - best effort: the server may still be down
        pass
