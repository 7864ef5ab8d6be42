"""Baselines for the paper's experiment: the same data and the same queries without the
grid, so gridagg can be measured against what a user would do otherwise.

- PostgresBaseline ("pg"): one table, a composite B-tree over the dimensions, the
  aggregate computed by SQL.
- HBaseBaseline ("hbase"): row key = order-preserving 8-byte time + element ID, one cell
  per row; the region servers scan the time window, filter by the rest of the box and
  aggregate (GridScanObserver), one Thrift call per query.
- DuckDBBaseline ("duckdb"): what a user might pick instead: the rows in one DuckDB
  table sorted by time, queried in-process by SQL.

Each answers a QuerySpec with a QueryResult whose values are exact stored integers,
like GridEngine.run. A baseline of dataset X is served over HTTP as the dataset
"X__pg" / "X__hbase" (see registry.py and api/baselines.py).
"""

from .common import BaselineBackend, view_name
from .registry import BaselineRegistry

BACKENDS = ("pg", "hbase", "duckdb")

__all__ = ["BACKENDS", "BaselineBackend", "BaselineRegistry", "open_backend", "view_name"]


def open_backend(kind: str, settings, **options) -> BaselineBackend:
    """A baseline backend by kind ("pg", "hbase" or "duckdb")."""
    if kind == "pg":
        from .postgres import PostgresBaseline

        return PostgresBaseline(settings.effective_pg_url, **options)
    if kind == "hbase":
        from .hbase import HBaseBaseline

        return HBaseBaseline(settings, **options)
    if kind == "duckdb":
        from .duck import DuckDBBaseline

        return DuckDBBaseline(settings, **options)
    raise ValueError(f"unknown baseline backend {kind!r}: use one of {', '.join(BACKENDS)}")
