"""What both baselines share: the interface, naming, and turning per-column statistics
into a QueryResult exactly like the grid engine's."""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from typing import Iterable

import numpy as np

from ..aggregate import PartialAggregate
from ..query import QueryPlan, QueryResult, QuerySpec
from ..schema import Dataset
from ..trips import TripCounter

SUFFIX = {"pg": "__pg", "hbase": "__hbase", "duckdb": "__duckdb"}


def view_name(source: str, kind: str) -> str:
    """The dataset name a baseline of `source` is served under over HTTP."""
    return source + SUFFIX[kind]


def needed(spec: QuerySpec) -> dict[int, set[str]]:
    """column index -> statistics ("sum", "min", "max") the aggregates need."""
    out: dict[int, set[str]] = {}
    for a in spec.aggregates:
        if a.func == "count":
            continue
        out.setdefault(a.col, set()).add("sum" if a.func in ("sum", "avg") else a.func)
    return out


def build_result(ds: Dataset, spec: QuerySpec, total: PartialAggregate, plan: QueryPlan,
                 started: float) -> QueryResult:
    total.present = [total.count] * len(ds.columns)  # baselines hold no NULLs
    values = {a.label: a.value(total) for a in spec.aggregates}
    plan.elapsed_ms = round((time.perf_counter() - started) * 1000, 3)
    return QueryResult(spec, values, total.count, plan)


class BaselineBackend(ABC):
    """A dataset stored without the grid. ds is the dataset definition (its name is the
    baseline's own name, e.g. "weather__pg")."""

    kind: str

    def __init__(self):
        self.round_trips = TripCounter()

    @abstractmethod
    def create(self, ds: Dataset) -> None:
        """Create (or recreate empty) the storage of ds."""

    @abstractmethod
    def drop(self, name: str) -> None:
        """Remove the storage of the baseline `name` (idempotent)."""

    @abstractmethod
    def load(self, ds: Dataset, batches: Iterable[tuple[list[bytes], np.ndarray]]) -> int:
        """Bulk load (element IDs, (m, ncols) int64 stored rows) batches; returns rows
        loaded. Indexes, flushes and the like are part of the load."""

    @abstractmethod
    def run(self, ds: Dataset, spec: QuerySpec) -> QueryResult:
        """Aggregates over the rows inside spec.box, exact in stored integers."""

    def query(self, ds: Dataset, where: dict | None, aggregates: list[str]) -> QueryResult:
        return self.run(ds, QuerySpec.parse(ds, where, aggregates))

    def close(self) -> None:
        pass
