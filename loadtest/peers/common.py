"""What every peer shares: the interface, the statistics a query asks for, its SQL
pieces, and turning those statistics into a QueryResult exactly like the grid engine's."""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable

import numpy as np

from gridagg.model.aggregate import PartialAggregate
from gridagg.model.schema import Dataset
from gridagg.model.trips import TripCounter
from gridagg.query.spec import QueryPlan, QueryResult, QuerySpec

Batches = Iterable[tuple[list[bytes], np.ndarray]]


def statistics(ds: Dataset, spec: QuerySpec) -> list[tuple[str, int]]:
    """The (statistic, column index) pairs the aggregates asked need besides count(*),
    and no more: sum for sum and avg, min, max, and the values present ("count") only
    of a nullable column whose count or average is asked."""
    out = set()
    for a in spec.aggregates:
        if a.col is None:
            continue
        if a.func in ("sum", "avg"):
            out.add(("sum", a.col))
        if a.func in ("min", "max"):
            out.add((a.func, a.col))
        if a.func in ("count", "avg") and ds.columns[a.col].nullable:
            out.add(("count", a.col))
    return sorted(out)


def select_list(ds: Dataset, stats: list[tuple[str, int]], sum_of: Callable[[str], str] = "sum({})".format) -> str:
    """count(*) and each statistic as SQL; sum_of writes an exact sum of a quoted
    column (a dialect whose sum of integers may overflow widens it first)."""
    exprs = ["count(*)"]
    for f, c in stats:
        col = f'"{ds.columns[c].name}"'
        exprs.append(sum_of(col) if f == "sum" else f"{f}({col})")
    return ", ".join(exprs)


def box_where(ds: Dataset, spec: QuerySpec, placeholder: Callable[[int], str]) -> tuple[str, list[int]]:
    """" WHERE ..." over the box's bounded dimensions ("" when none) with its parameters;
    placeholder(i) writes the i-th parameter's marker in the dialect."""
    domain = ds.domain()
    bounded = [i for i, rng in enumerate(spec.box) if rng != domain[i]]
    terms = [f'"{ds.columns[i].name}" BETWEEN {placeholder(2 * k)} AND {placeholder(2 * k + 1)}'
             for k, i in enumerate(bounded)]
    return (" WHERE " + " AND ".join(terms) if terms else ""), [v for i in bounded for v in spec.box[i]]


def aggregate_of(ds: Dataset, stats: list[tuple[str, int]], row) -> PartialAggregate:
    """The partial aggregate of a result row (count(*), then the statistics in order).
    A column whose present values were not asked has them all (not nullable)."""
    agg = PartialAggregate.empty(len(ds.columns))
    agg.count = int(row[0] or 0)
    agg.present = [agg.count] * len(ds.columns)
    for (f, c), v in zip(stats, row[1:]):
        if f == "count":
            agg.present[c] = int(v or 0)
        elif f == "sum":
            agg.sums[c] = int(v or 0)
        elif v is not None:
            getattr(agg, f + "s")[c] = int(v)
    return agg


def build_result(ds: Dataset, spec: QuerySpec, total: PartialAggregate, plan: QueryPlan,
                 started: float) -> QueryResult:
    values = {a.label: a.value(total) for a in spec.aggregates}
    plan.rows_matched_by_scans = total.count
    plan.elapsed_ms = round((time.perf_counter() - started) * 1000, 3)
    return QueryResult(spec, values, total.count, plan)


class Peer(ABC):
    """A dataset stored without the grid, in a system a user might pick instead.

    kind: the peer's short name ("pg", "hbase", "duckdb", "clickhouse"); label: its name
    in reports; KNOBS: its own settings the bench tries (name -> values, the default
    first), each given to the constructor as a keyword."""

    kind: str
    label: str
    KNOBS: dict[str, tuple] = {}

    def __init__(self):
        self.round_trips = TripCounter()

    @abstractmethod
    def create(self, ds: Dataset) -> None:
        """Create (or recreate empty) the storage of ds."""

    @abstractmethod
    def drop(self, name: str) -> None:
        """Remove the storage of the peer dataset `name` (idempotent)."""

    @abstractmethod
    def load(self, ds: Dataset, batches: Batches) -> int:
        """Bulk load (element IDs, (m, ncols) int64 stored rows) batches, in time order;
        returns rows loaded. What makes the data ready to serve (indexes, sorting,
        compaction) is part of the load."""

    @abstractmethod
    def run(self, ds: Dataset, spec: QuerySpec) -> QueryResult:
        """Aggregates over the rows inside spec.box, exact in stored integers."""

    def prepare(self, ds: Dataset, samples: list[QuerySpec]) -> dict:
        """After the load: settle what the peer's experts would settle for these queries
        (PostgreSQL: its index, by EXPLAIN); returns what was tried and chosen, for the
        report (empty when nothing is chosen)."""
        return {}

    def prewarm(self, ds: Dataset) -> None:
        """Read ds's data into the caches a serving process reads it from."""

    def query(self, ds: Dataset, where: dict | None, aggregates: list[str]) -> QueryResult:
        return self.run(ds, QuerySpec.parse(ds, where, aggregates))

    def close(self) -> None:
        pass


class SqlPeer(Peer):
    """A peer asked in SQL in this process (DuckDB, ClickHouse through chDB): the pieces
    of its dialect, fetch, and the box query written with them (the dashboard writes
    its series with the same pieces). Its knob is `threads` per query."""

    threads: int

    def set_threads(self, n: int) -> None:
        """Answer with n threads per query from now on."""
        self.threads = n

    def table(self, ds: Dataset) -> str:
        """ds's table in a FROM clause."""
        raise NotImplementedError

    def placeholder(self, i: int) -> str:
        """The marker of the i-th parameter."""
        return "?"

    def sum_of(self, col: str) -> str:
        """An exact sum of a quoted integer column."""
        return f"sum({col})"

    def floor_div(self, expr: str, by: int) -> str:
        """expr // by for integers (expr >= 0)."""
        return f"({expr}) // {by}"

    def numbers(self, n: int) -> str:
        """A query of one column b holding 0 .. n-1."""
        return f"SELECT range AS b FROM range(0, {n})"

    @abstractmethod
    def fetch(self, ds: Dataset, stmt: str, params: list[int]) -> list[tuple]:
        """The rows of a statement over ds's table, with positional parameters."""

    def run(self, ds: Dataset, spec: QuerySpec) -> QueryResult:
        started = time.perf_counter()
        stats = statistics(ds, spec)
        row = (0,)
        if not spec.empty:
            where, params = box_where(ds, spec, self.placeholder)
            row = self.fetch(ds, f"SELECT {select_list(ds, stats, self.sum_of)} FROM {self.table(ds)}{where}", params)[0]
        plan = QueryPlan(round_trips={self.kind: 0})
        return build_result(ds, spec, aggregate_of(ds, stats, row), plan, started)
