"""Range-aggregate queries: what is asked (QuerySpec) and what comes back (QueryResult).

A query is a box (a closed range per dimension, unbounded dimensions meaning the whole
domain) and a list of aggregates written "count", "sum:col", "min:col", "max:col",
"avg:col" over any column.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction

from .aggregate import PartialAggregate
from .errors import InvalidInput
from .grid import Box
from .schema import Dataset, stored_bound

FUNCTIONS = ("count", "sum", "min", "max", "avg")


@dataclass(frozen=True)
class Aggregate:
    """One requested aggregate: func over column index col (None for count)."""

    label: str
    func: str
    col: int | None

    @classmethod
    def parse(cls, ds: Dataset, text: object) -> "Aggregate":
        if not isinstance(text, str):
            raise InvalidInput(f"aggregate {text!r} must be a string like 'min:temperature'", field="aggregates")
        func, _, col = text.partition(":")
        if func not in FUNCTIONS:
            raise InvalidInput(
                f"unsupported aggregate {text!r}: use one of {', '.join(FUNCTIONS)}", field="aggregates"
            )
        if func == "count":
            if col:
                raise InvalidInput(f"aggregate {text!r}: count takes no column", field="aggregates")
            return cls(text, func, None)
        if not col:
            raise InvalidInput(f"aggregate {text!r} needs a column, e.g. '{func}:{ds.columns[0].name}'", field="aggregates")
        return cls(text, func, ds.column_index(col, "aggregates"))

    def value(self, agg: PartialAggregate):
        """The stored-integer answer (Fraction for avg; None when nothing selected)."""
        if self.func == "count":
            return agg.count
        if self.func == "sum":
            return agg.sums[self.col]
        if agg.count == 0:
            return None
        if self.func == "min":
            return agg.mins[self.col]
        if self.func == "max":
            return agg.maxs[self.col]
        return Fraction(agg.sums[self.col], agg.count)


@dataclass(frozen=True)
class QuerySpec:
    box: Box
    aggregates: tuple[Aggregate, ...]

    @classmethod
    def parse(cls, ds: Dataset, where: object, aggregates: object) -> "QuerySpec":
        """where: {dimension: [lo, hi]} in user units (either end may be null for
        unbounded); aggregates: a non-empty list of aggregate strings."""
        if where is None:
            where = {}
        if not isinstance(where, dict):
            raise InvalidInput("where must be an object of dimension: [lo, hi]", field="where")
        dims = {c.name: i for i, c in enumerate(ds.dimensions)}
        box = list(ds.domain())
        for name, rng in where.items():
            if name not in dims:
                what = "a measure, not a dimension" if name in {c.name for c in ds.measures} else "not a dimension"
                raise InvalidInput(f"where: {name!r} is {what} of dataset {ds.name}", field=f"where.{name}")
            if not isinstance(rng, (list, tuple)) or len(rng) != 2:
                raise InvalidInput(f"where.{name} must be [lo, hi]", field=f"where.{name}")
            col = ds.dimensions[dims[name]]
            lo_x, hi_x = (None if v is None else col.exact(v) for v in rng)
            if lo_x is not None and hi_x is not None and lo_x > hi_x:
                raise InvalidInput(f"where.{name}: lo {rng[0]!r} is greater than hi {rng[1]!r}", field=f"where.{name}")
            lo, hi = box[dims[name]]
            box[dims[name]] = (lo if lo_x is None else stored_bound(lo_x, upper=False),
                               hi if hi_x is None else stored_bound(hi_x, upper=True))
        if not isinstance(aggregates, (list, tuple)) or not aggregates:
            raise InvalidInput("aggregates must be a non-empty list", field="aggregates")
        parsed = tuple(Aggregate.parse(ds, a) for a in aggregates)
        return cls(tuple(box), parsed)

    @property
    def empty(self) -> bool:
        return any(lo > hi for lo, hi in self.box)


@dataclass
class QueryPlan:
    """What a query cost: the paper's Table 3 quantities and round trips per store.

    reused_*: fully contained grids answered from partial aggregates, before and after
    replacing sibling pairs by their parent (4.6.1); scanned_*: partially overlapping
    grids, before and after min/max scan skipping (4.6.2)."""

    total_grids: int = 0
    reused_grids_before: int = 0
    reused_grids_after: int = 0
    rows_in_reused_grids: int = 0
    scanned_grids_before: int = 0
    scanned_grids_after: int = 0
    rows_in_scanned_grids: int = 0
    rows_matched_by_scans: int = 0
    round_trips: dict = field(default_factory=dict)
    elapsed_ms: float = 0.0

    @property
    def skip_rate(self) -> float | None:
        if not self.scanned_grids_before:
            return None
        return 1 - self.scanned_grids_after / self.scanned_grids_before

    def to_json(self, count: int | None) -> dict:
        out = {k: v for k, v in self.__dict__.items()}
        out["skip_rate"] = self.skip_rate
        out["reuse_rate"] = (self.rows_in_reused_grids / count) if count else None
        return out


@dataclass
class QueryResult:
    """values: label -> stored-integer answer; count: rows selected, or None when scan
    skipping (4.6.2) left it unknown and it was not asked for."""

    spec: QuerySpec
    values: dict
    count: int | None
    plan: QueryPlan

    def to_user(self, ds: Dataset) -> dict:
        """Answers in user units, keyed by aggregate label."""
        out = {}
        for a in self.spec.aggregates:
            v = self.values[a.label]
            out[a.label] = v if a.func == "count" else ds.columns[a.col].decode(v)
        return out
