"""Range-aggregate queries: what is asked (QuerySpec, SeriesSpec) and what comes back
(QueryResult, SeriesResult), with the plan that says what an answer cost (QueryPlan).

A query is a box (a closed range per dimension, unbounded dimensions meaning the whole
domain), optionally a polygon region over the lon/lat dimensions, and a list of
aggregates written "count", "count:col", "sum:col", "min:col", "max:col", "avg:col" over
any column. A series adds a time step (and a moving window): one answer per bucket.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

from gridagg.model.aggregate import AggArrays, PartialAggregate
from gridagg.model.errors import InvalidInput, WorkLimitExceeded
from gridagg.model.grid import Box
from gridagg.model.schema import Dataset, parse_duration, stored_bound
from gridagg.query.regions import Region

FUNCTIONS = ("count", "sum", "min", "max", "avg")


@dataclass(frozen=True)
class Aggregate:
    """One requested aggregate: func over column index col (None for count of rows)."""

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
        if func == "count" and not col:
            return cls(text, func, None)
        if not col:
            raise InvalidInput(f"aggregate {text!r} needs a column, e.g. '{func}:{ds.columns[0].name}'", field="aggregates")
        return cls(text, func, ds.column_index(col, "aggregates"))

    def value(self, agg: PartialAggregate):
        """The stored-integer answer (Fraction for avg; None when no value selected)."""
        if self.func == "count":
            return agg.count if self.col is None else agg.present[self.col]
        if self.func == "sum":
            return agg.sums[self.col]
        if not agg.present[self.col]:
            return None
        if self.func == "min":
            return agg.mins[self.col]
        if self.func == "max":
            return agg.maxs[self.col]
        return Fraction(agg.sums[self.col], agg.present[self.col])

    def values(self, aggs: AggArrays, columns: list[int]) -> list:
        """value() of every row of `aggs` (AggArrays over `columns`), a column at a time:
        a series has thousands of rows, and a PartialAggregate per row costs a
        microsecond."""
        nums, dens = self._stored(aggs, columns)
        return nums if dens is None else [None if v is None else Fraction(v, n) for v, n in zip(nums, dens)]

    def decoded(self, ds: Dataset, aggs: AggArrays, columns: list[int]) -> list:
        """decode() of every row's value(), as values() reads them, without a Fraction per
        average (a series' answer decodes thousands)."""
        return self.decode_many(ds, *self._stored(aggs, columns))

    def _stored(self, aggs: AggArrays, columns: list[int]) -> tuple[list, list | None]:
        """Every row's stored answer, None where no value is selected: (values, None), or
        for avg (sums, values present)."""
        if self.col is None:
            return aggs.count.tolist(), None
        j = columns.index(self.col)
        present = aggs.present[:, j].tolist()
        if self.func == "count":
            return present, None
        if self.func in ("min", "max"):
            ends = (aggs.mins if self.func == "min" else aggs.maxs)[:, j].tolist()
            return [v if n else None for v, n in zip(ends, present)], None
        sums = [(h << 32) + low for h, low in zip(aggs.hi[:, j].tolist(), aggs.lo[:, j].tolist())]
        if self.func == "sum":
            return sums, None
        return [v if n else None for v, n in zip(sums, present)], present

    def decode(self, ds: Dataset, value):
        """A stored-integer answer in user units; a sum of timestamps beyond the calendar
        has none and is refused."""
        if self.func == "count":
            return value
        with self._representable():
            return ds.columns[self.col].decode(value)

    def decode_many(self, ds: Dataset, nums: list, dens: list | None = None) -> list:
        """decode() of many stored answers (Column.decode_many: nums, or the means nums[i]
        / dens[i] when dens are given; None stays None)."""
        if self.func == "count":
            return nums
        with self._representable():
            return ds.columns[self.col].decode_many(nums, dens)

    @contextmanager
    def _representable(self):
        try:
            yield
        except (OverflowError, ValueError):
            raise InvalidInput(f"{self.label}: the answer is not a representable timestamp; "
                               "sum over a time column is rarely meaningful", field="aggregates") from None


@dataclass(frozen=True)
class QuerySpec:
    box: Box
    aggregates: tuple[Aggregate, ...]
    region: Region | None = None

    @classmethod
    def parse(cls, ds: Dataset, where: object, aggregates: object, region: object = None,
              limits: Limits | None = None) -> "QuerySpec":
        """where: {dimension: [lo, hi]} in user units (either end may be null for
        unbounded); aggregates: a non-empty list of aggregate strings; region: a GeoJSON
        Polygon or MultiPolygon over the dataset's lon/lat dimensions, or None, of at most
        limits.max_vertices vertices (WorkLimitExceeded beyond)."""
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
        shape = None if region is None else Region(ds, region, None if limits is None else limits.max_vertices)
        return cls(tuple(box) if shape is None else shape.narrow(tuple(box)), parsed, shape)

    @property
    def empty(self) -> bool:
        return any(lo > hi for lo, hi in self.box)

    @property
    def columns(self) -> list[int]:
        """The columns whose statistics the aggregates need."""
        return sorted({a.col for a in self.aggregates if a.col is not None})

    @property
    def minmax_only(self) -> bool:
        return all(a.func in ("min", "max") for a in self.aggregates)

    def values(self, agg: PartialAggregate) -> dict:
        return {a.label: a.value(agg) for a in self.aggregates}

    def decode(self, ds: Dataset, values: dict) -> dict:
        return {a.label: a.decode(ds, values[a.label]) for a in self.aggregates}


@dataclass(frozen=True)
class SeriesSpec:
    """Bucketed or moving-window aggregates over the time dimension.

    Point i stands for the bucket [start + i*step, start + (i+1)*step) and aggregates the
    rows of the window of `window` seconds ending with that bucket (window defaults to
    step: plain buckets). Points run from start to the bucket holding end. The query
    reads nb = points + window/step - 1 buckets from `base` on."""

    query: QuerySpec
    step: int
    window: int
    start: int
    points: int

    @property
    def width(self) -> int:
        """Buckets per window."""
        return self.window // self.step

    @property
    def buckets(self) -> int:
        return self.points + self.width - 1

    @property
    def base(self) -> int:
        return self.start - (self.width - 1) * self.step

    @classmethod
    def parse(cls, ds: Dataset, where: object, aggregates: object, step: object, window: object = None,
              start: object = None, end: object = None, region: object = None, limits: Limits | None = None
              ) -> "SeriesSpec":
        """QuerySpec.parse's where, aggregates, region and limits, and the buckets: step and
        window (durations such as "1d"), start and end (times; default the box's time range
        within the domain), at most limits.max_points points (WorkLimitExceeded beyond)."""
        t = ds.time_axis
        if t is None:
            raise InvalidInput(f"dataset {ds.name} has no time dimension", field="step")
        tcol = ds.dimensions[t]
        if step is None:
            raise InvalidInput("step is required, e.g. '1d'", field="step")
        step = parse_duration(step, "step")
        window = parse_duration(window, "window") if window is not None else step
        if window % step:
            raise InvalidInput(f"window ({window}s) must be a whole number of steps ({step}s)", field="window")
        if limits is not None and limits.max_points is not None and window // step > limits.max_points:
            # A series reads points + window/step - 1 buckets: a wide window costs as points do.
            raise WorkLimitExceeded(f"the window is {window // step} steps wide, more than the limit of "
                                    f"{limits.max_points}; use a larger step or a shorter window", field="window")
        spec = QuerySpec.parse(ds, where, aggregates, region, limits)
        tlo, thi = spec.box[t]
        first = tcol.encode_bound(start, upper=False) if start is not None else max(tlo, tcol.enc_lo)
        last = tcol.encode_bound(end, upper=True) if end is not None else min(thi, tcol.enc_hi)
        if first > last:
            raise InvalidInput("start is after end", field="start")
        points = (last - first) // step + 1
        if limits is not None and limits.max_points is not None and points > limits.max_points:
            raise WorkLimitExceeded(f"the series would have {points} points, more than the limit of "
                                    f"{limits.max_points}; use a larger step or a shorter span", field="step")
        series = cls(spec, step, window, first, points)
        box = list(spec.box)
        box[t] = (max(tlo, series.base), min(thi, series.base + series.buckets * step - 1))
        return cls(QuerySpec(tuple(box), spec.aggregates, spec.region), step, window, first, points)


@dataclass(frozen=True)
class Limits:
    """How much one query may ask for and cost (None: no limit): milliseconds of work,
    as the store's cost model predicts them (a question answered within a deadline is
    not held to it: it stops in time), a series' points and a region's vertices. A query
    beyond one is refused with WorkLimitExceeded naming it."""

    max_ms: float | None = None
    max_points: int | None = None
    max_vertices: int | None = None


@dataclass
class QueryPlan:
    """What a query cost: the paper's Table 3 quantities and round trips per store.

    reused_*: grids fully inside the query answered from partial aggregates, counted as
    the leaves they stand for (before 4.6.1's sibling folding) and as the grids read
    (after: the walk down the tree stops at the first grid inside); scanned_*: leaves
    the query cuts, before and after min/max scan skipping (4.6.2)."""

    total_grids: int = 0
    reused_grids_before: int = 0
    reused_grids_after: int = 0
    rows_in_reused_grids: int = 0
    scanned_grids_before: int = 0
    scanned_grids_after: int = 0
    rows_in_scanned_grids: int = 0
    rows_matched_by_scans: int = 0
    # Below the leaves (gridagg.store.blocks): the rows of the blocks read, and the blocks
    # answered from their aggregates with their rows.
    rows_read: int = 0
    blocks_reused: int = 0
    rows_in_reused_blocks: int = 0
    round_trips: dict = field(default_factory=dict)
    # The store's calls by where they went (HBase: each region server "host:port", and
    # "re-asks": calls repeated for regions that moved, split or whose server failed).
    store_calls: dict | None = None
    elapsed_ms: float = 0.0
    region: dict | None = None  # leaves inside, on the edge of and outside the polygon
    grids: dict | None = None  # with explain: the grid IDs reused and scanned
    rollup_days: int | None = None  # time alone in whole days: days read from the day rollup
    rollup_positions: int | None = None  # a question over position alone: positions added up
    rollup_months: int | None = None  # over position within whole months: months of the month rollup
    bounds: dict | None = None  # with a deadline: grids exact and bounded, rows read and bounded
    n_size_chosen: str | None = None  # when gridagg chose the dataset's n_size: what and why

    @property
    def skip_rate(self) -> float | None:
        if not self.scanned_grids_before:
            return None
        return 1 - self.scanned_grids_after / self.scanned_grids_before

    def to_json(self, count: int | None) -> dict:
        optional = ("region", "grids", "rollup_days", "rollup_positions", "rollup_months", "bounds", "store_calls", "n_size_chosen")
        out = {k: v for k, v in self.__dict__.items() if v is not None or k not in optional}
        out["skip_rate"] = self.skip_rate
        out["reuse_rate"] = (self.rows_in_reused_grids / count) if count else None
        return out


@dataclass
class Progress:
    """How far an answer asked with a deadline got: `found`, the bounds of what was not
    read (gridagg.query.bounds.Intervals; None: nothing, the answer is exact), and the share of
    the cut leaves' rows read. A series that is not exact may still be exact at many
    points: only those that are not carry bounds."""

    found: object | None
    read_share: float

    @classmethod
    def exact(cls) -> "Progress":
        return cls(None, 1.0)

    @property
    def is_exact(self) -> bool:
        return self.found is None

    def exact_at(self, k: int) -> bool:
        """Whether point k's answer is exact (no unread leaf's rows may fall in it)."""
        return self.found is None or not self.found.touched[k]

    def bounds(self, ds: Dataset, spec: QuerySpec, ks: list[int]) -> list[tuple[dict, list[str]]]:
        """For each point k of ks, none exact: ({label: [lo, hi]} in user units, labels
        whose answer may also be null), an aggregate at a time."""
        out: list[tuple[dict, list[str]]] = [({}, []) for _ in ks]
        for a in spec.aggregates:
            j = None if a.col is None else spec.columns.index(a.col)
            lo, lo_dens, hi, hi_dens, maybe = self.found.ends(a.func, ks, j)
            for (bounds, null), low, high, may in zip(out, a.decode_many(ds, lo, lo_dens),
                                                       a.decode_many(ds, hi, hi_dens), maybe):
                bounds[a.label] = [low, high]
                if may:
                    null.append(a.label)
        return out

    def to_json(self) -> dict:
        return {"exact": self.is_exact, "read_share": self.read_share}


@dataclass
class QueryResult:
    """values: label -> stored-integer answer; count: rows selected, or None when scan
    skipping (4.6.2) left it unknown and it was not asked for. With a deadline,
    `progress` says whether the answer is exact; if not, values are those of the rows
    read so far and its bounds hold the exact answer."""

    spec: QuerySpec
    values: dict
    count: int | None
    plan: QueryPlan
    progress: Progress | None = None

    def to_user(self, ds: Dataset) -> dict:
        """Answers in user units, keyed by aggregate label."""
        return self.spec.decode(ds, self.values)

    def to_json(self, ds: Dataset) -> dict:
        """The HTTP API's answer: {"results", "count", "plan"}, and with a deadline
        "exact", "read_share", and "bounds" and "may_be_null" unless exact."""
        out = {"results": self.to_user(ds), "count": self.count, "plan": self.plan.to_json(self.count)}
        if self.progress is not None:
            out.update(self.progress.to_json())
            if not self.progress.exact_at(0):
                out["count"] = None
                out["bounds"], out["may_be_null"] = self.progress.bounds(ds, self.spec, [0])[0]
        return out


@dataclass
class SeriesResult:
    """windows: the aggregate of each point's window, a row per point over the columns
    spec.query.columns."""

    spec: SeriesSpec
    windows: AggArrays
    plan: QueryPlan
    progress: Progress | None = None  # as QueryResult's; bounds per point

    def values(self) -> list[dict]:
        """Each point's stored-integer answers, label -> value (as QuerySpec.values)."""
        q = self.spec.query
        out: list[dict] = [{} for _ in range(len(self.windows))]
        for a in q.aggregates:
            for point, v in zip(out, a.values(self.windows, q.columns)):
                point[a.label] = v
        return out

    def to_json(self, ds: Dataset) -> dict:
        """The HTTP API's answer: {"step", "window", "points", "plan"}, and with a
        deadline "exact", "read_share", and each point's "bounds" and "may_be_null" unless
        exact."""
        s, q = self.spec, self.spec.query
        tcol = ds.dimensions[ds.time_axis]
        steps = np.arange(len(self.windows), dtype=np.int64) * s.step
        times, firsts, lasts = (tcol.decode_times(t + steps) for t in (s.start, s.base, s.start + s.step - 1))
        # Decoded an aggregate at a time: a call per value was most of a streamed series'
        # first line (the tree's answer).
        decoded = [(a.label, a.decoded(ds, self.windows, q.columns)) for a in q.aggregates]
        points = [{"time": times[i], "window": [firsts[i], lasts[i]], "count": count,
                   "results": {label: values[i] for label, values in decoded}}
                  for i, count in enumerate(self.windows.count.tolist())]
        selected = self.plan.rows_in_reused_grids + self.plan.rows_matched_by_scans
        plan = self.plan.to_json(selected)
        plan["buckets"] = s.buckets
        out = {"step": s.step, "window": s.window, "points": points, "plan": plan}
        if self.progress is not None:
            out.update(self.progress.to_json())
            if not self.progress.is_exact:
                bounded = np.flatnonzero(self.progress.found.touched).tolist()
                for k, (bounds, null) in zip(bounded, self.progress.bounds(ds, q, bounded)):
                    point = points[k]
                    point["exact"] = False
                    point["bounds"], point["may_be_null"] = bounds, null
        return out
