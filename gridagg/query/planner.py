"""Algorithm 3, once for every kind of query: boxes, polygon regions and time series.

The planner walks the dataset's tree (gridagg.query.walk): grids inside the question
answer from their partial aggregates, grids outside are dropped, and the leaves its
boundary cuts are read. Work therefore follows the grids the question's boundary cuts,
not the leaves inside it. The leaves to read go to the store in one ScanRequest
(gridagg.store.scan): conditions for the box, rows grouped by time bucket for a series,
the rows themselves for leaves on the polygon's edge (tested here against the polygon,
exactly), and for min/max-only queries the leaves in the order most likely to hold the
answer, so the store passes over the ones that cannot improve it (4.6.2).

Some questions skip the walk for a rollup (gridagg.query.rollups): a series of time alone in
whole days; a plain question over time alone in whole days, and one over longitude and
latitude alone, once their rollup is made (the walk answers them until then).
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass, field

import numba
import numpy as np

from gridagg.model.aggregate import AggArrays
from gridagg.model.errors import WorkLimitExceeded
from gridagg.model.schema import Dataset
from gridagg.query import bounds
from gridagg.query.questions import QuestionSample
from gridagg.query.regions import EPSILON, Region
from gridagg.query.rollups import (
    DAY,
    DayRollups,
    MonthRollups,
    PositionCells,
    PositionRollups,
    in_whole_months,
)
from gridagg.query.spec import (
    Limits,
    Progress,
    QueryPlan,
    QueryResult,
    QuerySpec,
    SeriesResult,
    SeriesSpec,
)
from gridagg.query.walk import CUT, EDGE, NO_EDGES, SPANNING, WalkQuery, face_each, walk
from gridagg.store import parts
from gridagg.store.scan import Buckets, RangeCondition, ScanAnswer, ScanRequest, Skip
from gridagg.tree import TreeState

# A plan lists at most this many grid IDs of each kind when asked to explain itself.
EXPLAIN_GRIDS = 10_000
# The rollups that answer a question once made (Planner._rollup_for), but the day rollup's
# (first day, number of days).
POSITIONS, MONTHS = "positions", "months"
# Rows of a part of a scan read against a deadline: small enough that a part ends soon
# after a deadline, large enough that handing it to a thread (or HBase) costs little.
CHUNK_ROWS = 32_768
_NONE = np.zeros(0, np.int64)  # no leaves to read
# Share of the time left that a store stopping at a deadline itself (HBase's region
# servers) stops earlier, so that what it read arrives by the caller's deadline.
STOP_MARGIN = 0.25
# Grids the walk for the tree's answer alone (deadline 0) opens, heaviest first, before it
# bounds each cut grid still waiting whole (None: every cut leaf, however many). Bounds
# over every cut leaf cost milliseconds for questions cutting most of a large tree's
# leaves; within this budget they cost a fraction of one at any size, and are only
# wider where exact grids lie deeper than the walk went.
FRONTIER_GRIDS: int | None = 512


@dataclass
class _Walked:
    """One query's walk: the tree it used, the aggregates it has so far (per bucket, over
    the wanted columns `cols`), the polygon (None: none, or a rectangle read as a box),
    the series' buckets; the leaves left to read (`scan`, rows of the tree) with their
    kind, tested conditions and rows in all, how many lie on the polygon's edge, and how many a
    min/max-only query passed over."""

    tree: TreeState
    out: AggArrays
    cols: list[int]
    region: Region | None
    buckets: Buckets | None
    scan: np.ndarray = field(default_factory=lambda: _NONE)
    kind: np.ndarray = field(default_factory=lambda: _NONE)
    tested: np.ndarray = field(default_factory=lambda: _NONE)
    scan_rows: int = 0  # rows in the leaves of scan
    edges: int = 0
    passed_over: int = 0

    def skips(self, spec: QuerySpec, series: SeriesSpec | None) -> bool:
        """Whether the read passes over leaves that cannot improve a min/max (4.6.2)."""
        return spec.minmax_only and series is None and not self.edges


class Planner:
    """Answers QuerySpecs and SeriesSpecs over the trees of `trees` (a gridagg.tree.TreeCache)
    and the rows of `store` (a CellStore), within the Limits given per query; `directory`
    (a GridDirectory) only counts its round trips into each plan; `costs`, the store's
    cost model (gridagg.tune.costmodel.CostModel; None: none), prices a question before
    it is read, for Limits.max_ms."""

    def __init__(self, trees, store, directory, costs=None):
        self.trees, self.store, self.directory, self.costs = trees, store, directory, costs
        self.rollups = DayRollups(store)
        self.positions = PositionRollups(store)
        self.months = MonthRollups(store)
        self.sample = QuestionSample()  # the questions walked, for the online tuner (gridagg.tune.online)
        self.lead = parts.Lead()  # how much sooner than a deadline reading stops

    def query(self, ds: Dataset, spec: QuerySpec, limits: Limits, explain: bool = False,
              deadline: float | None = None) -> QueryResult:
        """The answer to spec. With a deadline (seconds from now; 0: from the tree alone),
        the answer as it stands then (progress): exact if every read finished, or if the
        position rollup answers."""
        if deadline is not None:
            (last,) = self.progress(ds, spec, None, limits, explain, deadline)
            return last
        started = time.perf_counter()
        plan, trips = QueryPlan(n_size_chosen=ds.grid.chosen), self._trips()  # the tree's refresh counts
        rollup = self._rollup_for(ds, spec)
        answered = None if rollup is None else self._by_rollup(ds, spec, rollup)
        if answered is not None:
            return answered
        buckets, count_known = self._evaluate(ds, spec, None, limits, plan, explain, started, offer=rollup is None)
        total = buckets.aggregate(0, spec.columns, len(ds.columns))
        self._finish(plan, trips, started)
        return QueryResult(spec, spec.values(total), total.count if count_known else None, plan)

    def series(self, ds: Dataset, series: SeriesSpec, limits: Limits, explain: bool = False,
               deadline: float | None = None) -> SeriesResult:
        """The series of `series`; deadline as for query."""
        if deadline is not None and not rollup_answers(ds, series):
            (last,) = self.progress(ds, series.query, series, limits, explain, deadline)
            return last
        started = time.perf_counter()
        plan, trips = QueryPlan(n_size_chosen=ds.grid.chosen), self._trips()
        days = _series_days(ds, series)
        if days is not None:  # time alone, in whole days: the day rollup answers
            tree = self.trees.tree(ds)
            first, count = days
            buckets = _from_days(self.rollups.current(ds, tree), first, count, series.query, plan, tree,
                                 (first + np.arange(count) - series.base // DAY) // (series.step // DAY),
                                 series.buckets)
        else:
            buckets, _ = self._evaluate(ds, series.query, series, limits, plan, explain, started)
        windows = _windows(buckets, series.width)
        self._finish(plan, trips, started)
        result = SeriesResult(series, windows, plan)
        if deadline is not None:  # the rollup's answer is exact at once
            result.progress = Progress.exact()
        return result

    def progress(self, ds: Dataset, spec: QuerySpec, series: SeriesSpec | None, limits: Limits, explain: bool,
                 deadline: float, every: float | None = None):
        """The answer as it improves, a result at a time (QueryResult, or SeriesResult for
        a series), the last exact, or as it stands once `deadline` seconds have passed (0:
        the tree's answer only, no store call). With `every` (seconds), also the tree's
        answer at once (exact where it can be, bounds elsewhere) and one whenever parts of
        the scan have finished `every` seconds after the one before; else the last alone.
        (That first answer comes from the walk within FRONTIER_GRIDS, as deadline 0's.)
        The leaves to read go to the store in parts, those with the most rows first
        (min/max-only queries: the most promising first), at most settings.scan_threads
        at once; at the deadline, less the lead the planner learned (parts.Lead), the
        parts not finished are stopped. A store that stops at a deadline itself and names
        what it left unread (HBase) gets them as one scan (cut as without a deadline) to
        stop STOP_MARGIN of the time earlier: what it read by then narrows the answer."""
        rollup = self._rollup_for(ds, spec) if series is None else None
        answered = None if rollup is None else self._by_rollup(ds, spec, rollup)
        if answered is not None:  # exact at once
            answered.progress = Progress.exact()
            yield answered
            return
        started = time.perf_counter()
        shown = None  # when the last answer was given (None: not yet)
        if every is not None and deadline > 0 and FRONTIER_GRIDS is not None:
            # The tree's answer at once from the walk within the budget, before the walk to
            # every cut leaf (longer on a large tree): its bounds hold those of the cut
            # leaves, so the answers that follow only narrow them.
            yield from self.progress(ds, spec, series, limits, explain, 0)
            shown = time.monotonic()
        plan, trips = QueryPlan(n_size_chosen=ds.grid.chosen), self._trips()
        alone = deadline <= 0  # nothing is read: the walk may stop above the cut leaves
        walked = self._walked(ds, spec, series, limits, plan, explain, FRONTIER_GRIDS if alone else None,
                              offer=rollup is None)
        store = self.store
        order, skip = np.arange(len(walked.scan)), None
        if walked.skips(spec, series):
            skip, order = _skip(spec, walked.cols, walked.tree.aggs, walked.scan, walked.out)
            walked.passed_over = len(walked.scan) - len(order)
        elif not alone:  # within a deadline: no limit of cost, the reading stops in time
            order = np.argsort(-walked.tree.aggs.count[walked.scan], kind="stable")
        unread = np.zeros(len(walked.scan), np.bool_)
        unread[order] = True
        plan.scanned_grids_after = 0
        rows_total = int(walked.tree.aggs.count[walked.scan[order]].sum())
        rows_read = 0

        def state() -> QueryResult | SeriesResult:
            nonlocal shown
            shown = time.monotonic()
            self._finish(plan, trips, started)
            return self._bounded(ds, spec, series, walked, unread, rows_read, rows_total, plan)

        if (every is not None and shown is None) or alone or not unread.any():
            yield state()
        if alone or not unread.any():
            return
        rows = walked.tree.aggs.count[walked.scan][order]
        # A store that stops at the deadline and names what it left (HBase) gets one scan,
        # cut into parts as without a deadline; the others small parts, a few at once.
        whole = store.names_unread
        chunks = [(0, len(order))] if whole else parts.chunks(rows, CHUNK_ROWS)
        requests = []
        for c0, c1 in chunks:
            pos = order[c0:c1]
            part_skip = None if skip is None else Skip(skip.specs, skip.bounds[c0:c1], skip.best)
            requests.append(self._request(ds, spec, series, walked, pos, part_skip))
        lead = self.lead.before(deadline)
        left = deadline - lead - (time.perf_counter() - started)
        until = time.monotonic() + left
        changed = False
        for i, answer in parts.read_until(lambda r: store.scan(ds, r), requests, until,
                                          store.scan_threads, STOP_MARGIN * left if whole else 0.0):
            pos = order[chunks[i][0]:chunks[i][1]]
            self._merge(walked, answer, plan)
            unread[pos] = False
            if answer.stopped:  # the grids it names stay unread; every other was read whole
                unread[pos[answer.unread]] = True
                pos = pos[~unread[pos]]
            rows_read += int(walked.tree.aggs.count[walked.scan[pos]].sum())
            changed = True
            if every is not None and unread.any() and time.monotonic() - shown >= every:
                changed = False
                yield state()
        if changed or shown is None:
            last = state()
            self.lead.learn(lead, time.perf_counter() - started, deadline)
            yield last

    # -- the rollups -------------------------------------------------------------------

    def _by_rollup(self, ds: Dataset, spec: QuerySpec, rollup) -> QueryResult | None:
        """The answer from the rollup that answers the question (_rollup_for), when it is
        made: the position rollup's (see _from_positions), the month rollup's
        (_from_months) or the day rollup's; else None."""
        started = time.perf_counter()
        plan, trips = QueryPlan(n_size_chosen=ds.grid.chosen), self._trips()
        if rollup == POSITIONS:
            buckets = self._from_positions(ds, spec, plan)
        elif rollup == MONTHS:
            buckets = self._from_months(ds, spec, plan)
        else:
            tree = self.trees.tree(ds)
            made = self.rollups.made(ds, tree)
            buckets = None if made is None else _from_days(made, *rollup, spec, plan, tree,
                                                           np.zeros(rollup[1], np.int64), 1)
        if buckets is None:
            return None
        total = buckets.aggregate(0, spec.columns, len(ds.columns))
        self._finish(plan, trips, started)
        return QueryResult(spec, spec.values(total), total.count, plan)

    def _rollup_for(self, ds: Dataset, spec: QuerySpec):
        """Which rollup answers the question once made, or None (the walk does):
        POSITIONS when it selects by longitude and latitude (a box or a polygon) and takes
        every row of every other dimension; MONTHS when it does so within whole calendar
        months (gridagg.query.rollups.in_whole_months), not all of them; (first day, number of
        days) when it selects by time alone in whole days, not all of them (the day
        rollup's). A question that takes every row is the walk's: the root's aggregate
        answers it."""
        tree = self.trees.tree(ds)
        root = tree.root
        if spec.empty or tree.dlo[root, 0] > tree.dhi[root, 0]:  # nothing selected, or no rows
            return None
        box = np.array(spec.box, np.int64)
        whole = (box[:, 0] <= tree.dlo[root]) & (box[:, 1] >= tree.dhi[root])  # takes every row's value there
        axes, t = ds.lonlat_axes, ds.time_axis
        if axes is not None and (spec.region is not None or not whole[list(axes)].all()):
            rest = [d for d in range(ds.ndim) if d not in axes and not whole[d]]
            if not rest:
                return POSITIONS
            if rest == [t] and in_whole_months(ds.dimensions[t], *spec.box[t]):
                return MONTHS
        days = _whole_days(ds, spec)
        return None if days is None or whole[t] else days

    def _from_positions(self, ds: Dataset, spec: QuerySpec, plan: QueryPlan) -> AggArrays | None:
        """The question's aggregates over spec.columns from the position rollup (see
        _from_cells). None while the rollup is not as of the tree's version, or the
        question cuts cells that are not single positions: those are being made
        (gridagg.query.rollups.PositionRollups), the tree answers meanwhile."""
        tree = self.trees.tree(ds)
        cells = self.positions.current(ds, tree)
        if cells is None:
            return None
        inside, wide = _cells_inside(ds, spec, cells)
        if inside is None:
            self.positions.refine(ds, tree, cells, wide)
            return None
        return _from_cells(cells, inside, spec, plan, tree)

    def _from_months(self, ds: Dataset, spec: QuerySpec, plan: QueryPlan) -> AggArrays | None:
        """The question's aggregates over spec.columns from the month rollup: the cells of
        its months, as _from_cells adds them up. None while the rollup is not as of the
        tree's version, or the question cuts cells that are not single positions: those
        are being made (gridagg.query.rollups.MonthRollups), the tree answers meanwhile."""
        tree = self.trees.tree(ds)
        made = self.months.current(ds, tree)
        if made is None:
            return None
        pick, cells = made.within(*spec.box[ds.time_axis])
        inside, wide = _cells_inside(ds, spec, cells)
        if inside is None:
            self.months.refine(ds, tree, made, pick[wide])
            return None
        plan.rollup_months = len(np.unique(made.lo[pick]))
        return _from_cells(cells, inside, spec, plan, tree)

    # -- the walk and the scan ---------------------------------------------------------

    def _evaluate(self, ds: Dataset, spec: QuerySpec, series: SeriesSpec | None, limits: Limits,
                  plan: QueryPlan, explain: bool, started: float, offer: bool = True) -> tuple[AggArrays, bool]:
        """Aggregates of the selected rows per bucket (one bucket for a plain query) over
        spec.columns, and whether their counts are exact (scan skipping can leave a
        min/max-only query's count unknown); offer: as for _walked."""
        walked = self._walked(ds, spec, series, limits, plan, explain, offer=offer)
        if not len(walked.scan):
            return walked.out, True
        positions, skip = np.arange(len(walked.scan)), None
        if walked.skips(spec, series):
            skip, positions = _skip(spec, walked.cols, walked.tree.aggs, walked.scan, walked.out)
            # Leaves that cannot beat what the reused grids found already stay unread.
            walked.passed_over = len(walked.scan) - len(positions)
            if not len(positions):
                plan.scanned_grids_after = 0
                return walked.out, False
        self._check_cost(walked, positions, limits, plan)
        answer = self.store.scan(ds, self._request(ds, spec, series, walked, positions, skip))
        plan.scanned_grids_after = plan.rows_in_scanned_grids = plan.rows_matched_by_scans = 0
        plan.rows_read = plan.blocks_reused = plan.rows_in_reused_blocks = 0
        self._merge(walked, answer, plan)
        return walked.out, not (answer.grids_skipped or walked.passed_over)

    def _walked(self, ds: Dataset, spec: QuerySpec, series: SeriesSpec | None, limits: Limits, plan: QueryPlan,
                explain: bool, budget: int | None = None, offer: bool = True) -> "_Walked":
        """The walk of one query: the grids it reuses added up (per bucket), the leaves
        left to read, and the plan's counts so far. With a budget (grids to open), the
        walk for the tree's answer alone (see _walk): what is left to read may be cut
        grids above the leaves, each bounded whole. A whole walk offers the question to
        the tuner's sample, unless not to `offer`: a rollup answers it once made (leaves
        split for it would be spent for nothing)."""
        cols = spec.columns
        nbuckets = series.buckets if series is not None else 1
        tree = self.trees.tree(ds)
        plan.total_grids = tree.leaf_count
        # A rectangle selects exactly the rows of the box narrow() made of it.
        region = spec.region if spec.region is not None and not spec.region.rectangle else None
        walked = _Walked(tree, AggArrays.empty(nbuckets, len(cols)), cols, region,
                         None if series is None else Buckets(ds.time_axis, series.base, series.step, nbuckets))
        if region is not None:
            plan.region = {"leaves_inside": 0, "leaves_on_edge": 0, "leaves_outside": 0}
        if spec.empty:
            return walked
        query = self._walk_query(ds, spec, series, region)
        reused, rbucket, scan, kind, tested, region_leaves, tally = walk(tree, query, budget)
        walked.scan, walked.kind, walked.tested, walked.edges = scan, kind, tested, int(tally[1 + EDGE])
        walked.scan_rows = int(tree.aggs.count[scan].sum())
        if budget is None and offer:
            self.sample.offer(ds.name, query, len(scan), walked.scan_rows)
        reached = int(tally[1:].sum())  # leaves to read, empty ones too
        if region is not None:
            plan.region = dict(zip(("leaves_inside", "leaves_on_edge", "leaves_outside"),
                                   (int(v) for v in region_leaves)))
        elif spec.region is not None:  # a rectangle, read as a box: its leaves inside and cut
            plan.region = {"leaves_inside": int(tally[0] + tally[1 + SPANNING]),
                           "leaves_on_edge": int(tally[1 + CUT]), "leaves_outside": 0, "rectangle": True}
        plan.reused_grids_before = int(tally[0])
        plan.reused_grids_after = len(reused)
        plan.rows_in_reused_grids = walked.out.add_into(rbucket, tree.aggs, rows=reused, columns=cols)
        plan.scanned_grids_before = reached
        if explain:
            plan.grids = {"reused": [tree.ids[i] for i in reused[:EXPLAIN_GRIDS].tolist()],
                          "scanned": [tree.ids[i] for i in scan[:EXPLAIN_GRIDS].tolist()],
                          "truncated": max(len(reused), len(scan)) > EXPLAIN_GRIDS}
        return walked

    def _check_cost(self, walked: "_Walked", positions: np.ndarray, limits: Limits, plan: QueryPlan) -> None:
        """WorkLimitExceeded when reading the walked leaves at `positions` would cost more
        than limits.max_ms, as the store's cost model predicts it."""
        if limits.max_ms is None or self.costs is None:
            return
        leaves = walked.scan[positions]
        rows = int(walked.tree.aggs.count[leaves].sum())
        cost = self.costs.predict(len(leaves), rows, plan.reused_grids_after)
        if cost > limits.max_ms:
            raise WorkLimitExceeded(
                f"the question would cost about {cost:,.0f} ms of work ({len(leaves):,} leaves to read holding "
                f"{rows:,} rows, {plan.reused_grids_after:,} aggregates, by the {self.costs.store} store's cost "
                f"model), more than the limit of {limits.max_ms:,.0f} ms (GRIDAGG_MAX_QUERY_MS); narrow it, or give "
                f"deadline_ms (such as {max(100, int(limits.max_ms)):d}) for an answer within bounds by then")

    def _request(self, ds: Dataset, spec: QuerySpec, series: SeriesSpec | None, walked: "_Walked",
                 positions: np.ndarray, skip: Skip | None) -> ScanRequest:
        """What the store is asked to read: the walked leaves at these positions."""
        tree, scan = walked.tree, walked.scan[positions]
        at = scan.tolist()
        conditions = _conditions(ds, spec)
        return ScanRequest(
            grids=list(map(tree.ids.__getitem__, at)),
            keys=None if tree.keys is None else list(map(tree.keys.__getitem__, at)),
            conditions=conditions,
            columns=walked.cols,
            ngroups=len(walked.out),
            buckets=walked.buckets,
            rows_of=(walked.kind[positions] == EDGE) if walked.region is not None else None,
            skip=skip,
            polygon=walked.region.test() if walked.region is not None else None,
            rows=tree.aggs.count[scan] if skip is None else None,  # a skipping scan is not cut into parts
            tested=walked.tested[positions][:, [c.column for c in conditions]],
        )

    @staticmethod
    def _merge(walked: "_Walked", answer: ScanAnswer, plan: QueryPlan) -> None:
        """Add a store's answer into what the query has so far."""
        nbuckets = len(walked.out)
        plan.scanned_grids_after += answer.grids_scanned
        plan.rows_in_scanned_grids += answer.rows_in_grids
        plan.rows_read += answer.rows_visited
        plan.blocks_reused += answer.blocks_reused
        plan.rows_in_reused_blocks += answer.rows_in_reused_blocks
        walked.out.add_into(np.arange(nbuckets), answer.aggs)
        matched = answer.rows_matched
        for rows in answer.rows.values():
            rows = rows[walked.region.mask(rows)] if len(rows) else rows
            matched += len(rows)
            _add_rows(walked.out, rows, walked.cols, walked.buckets)
        plan.rows_matched_by_scans += matched

    def _bounded(self, ds: Dataset, spec: QuerySpec, series: SeriesSpec | None, walked: "_Walked",
                 unread: np.ndarray, rows_read: int, rows_total: int, plan: QueryPlan):
        """The result as it stands: exact where nothing is left unread, else the exact
        part's values and bounds from the tree for the unread leaves (gridagg.query.bounds)."""
        width = series.width if series is not None else 1
        windows = _windows(walked.out, width)
        leaves = walked.scan[unread]
        tree = walked.tree
        if series is not None:
            t, lo, hi = ds.time_axis, *spec.box[ds.time_axis]
            bucket = lambda v: np.clip((v - series.base) // series.step, 0, series.buckets - 1)  # noqa: E731
            first, last = bucket(np.maximum(tree.dlo[leaves, t], lo)), bucket(np.minimum(tree.dhi[leaves, t], hi))
        else:
            first = last = np.zeros(len(leaves), np.int64)
        unread_leaves = bounds.Unread(leaves, walked.kind[unread] == EDGE, first, last)
        found = bounds.intervals(tree.aggs, tree.dlo, tree.dhi, unread_leaves, walked.cols,
                                 np.array(spec.box, np.int64), windows, width) if len(leaves) else None
        plan.bounds = {"exact_grids": plan.reused_grids_after + int((~unread).sum()), "bounded_grids": len(leaves),
                       "rows_read": rows_read, "rows_bounded": rows_total - rows_read}
        progress = Progress(found, rows_read / rows_total if rows_total else 1.0)
        if series is None:
            total = windows.aggregate(0, spec.columns, len(ds.columns))
            exact = found is None and not walked.passed_over
            result = QueryResult(spec, spec.values(total), total.count if exact or not spec.minmax_only else None,
                                 copy.copy(plan))
        else:
            # A copy: the scan's later parts add into the buckets (the windows, for w = 1).
            result = SeriesResult(series, windows.copy(), copy.copy(plan))
        result.progress = progress
        return result

    @staticmethod
    def _walk_query(ds: Dataset, spec: QuerySpec, series: SeriesSpec | None, region: Region | None) -> WalkQuery:
        """What the walk selects for this question, in stored integers."""
        box = np.array(spec.box, np.int64)
        return WalkQuery(
            box[:, 0], box[:, 1], region.edges if region is not None else NO_EDGES,
            region.lon_axis if region else 0, region.lat_axis if region else 0,
            float(region.lon_scale) if region else 1.0, float(region.lat_scale) if region else 1.0, EPSILON,
            ds.time_axis if series is not None else -1, series.base if series else 0, series.step if series else 1)

    # -- bookkeeping -------------------------------------------------------------------

    def _trips(self) -> tuple[int, int, dict]:
        store = self.store.round_trips
        return self.directory.round_trips(), store(), store.labelled()

    def _finish(self, plan: QueryPlan, trips: tuple[int, int, dict], started: float) -> None:
        store = self.store
        plan.round_trips = {"postgresql": self.directory.round_trips() - trips[0],
                            store.kind: store.round_trips() - trips[1]}
        plan.store_calls = store.round_trips.since(trips[2], store.round_trips.labelled()) or None
        plan.elapsed_ms = round((time.perf_counter() - started) * 1000, 3)


def _cells_inside(ds: Dataset, spec: QuerySpec, cells: PositionCells) -> tuple[np.ndarray | None, np.ndarray]:
    """(the cells inside the question's box and polygon, the single positions a
    polygon's edge comes near settled by the exact point test; the cells it cuts that
    are not single positions). The first is None when there are such cells: the cells
    cannot tell the answer."""
    x, y = ds.lonlat_axes
    box = np.array(spec.box, np.int64)
    region = spec.region if spec.region is not None and not spec.region.rectangle else None
    side = _sides(cells, box[x], box[y], region)
    cut = np.flatnonzero(side == 1)
    wide = cut[~cells.points(cut)]
    if len(wide):
        return None, wide
    if len(cut):  # single positions a polygon's edge comes near
        rows = np.zeros((len(cut), len(ds.columns)), np.int64)
        rows[:, x], rows[:, y] = cells.box[cut, 0], cells.box[cut, 2]
        side[cut] = np.where(region.mask(rows), 2, 0)
    return np.flatnonzero(side == 2), wide


def _from_cells(cells: PositionCells, inside: np.ndarray, spec: QuerySpec, plan: QueryPlan,
                tree: TreeState) -> AggArrays:
    """The aggregates over spec.columns of these cells added up; the plan says how many."""
    out = AggArrays.empty(1, len(spec.columns))
    plan.total_grids = tree.leaf_count
    plan.rows_in_reused_grids = out.add_into(np.zeros(len(inside), np.int64), cells.aggs, rows=inside,
                                             columns=spec.columns)
    plan.rollup_positions = len(inside)
    return out


def _sides(cells: PositionCells, xr: np.ndarray, yr: np.ndarray, region: Region | None) -> np.ndarray:
    """Per cell: 0 outside the box lon xr by lat yr (stored values) or the polygon, 2
    inside both, 1 cut (for the polygon: an edge comes near, see face)."""
    b = cells.box
    out = (b[:, 1] < xr[0]) | (b[:, 0] > xr[1]) | (b[:, 3] < yr[0]) | (b[:, 2] > yr[1])
    inside = (b[:, 0] >= xr[0]) & (b[:, 1] <= xr[1]) & (b[:, 2] >= yr[0]) & (b[:, 3] <= yr[1])
    side = np.where(out, 0, np.where(inside, 2, 1))
    if region is not None:
        near = np.flatnonzero(side > 0)
        side[near] = np.minimum(side[near], face_each(b[near], region.edges, float(region.lon_scale),
                                                   float(region.lat_scale), EPSILON))
    return side


def rollup_answers(ds: Dataset, series: SeriesSpec) -> bool:
    """Whether the day rollup answers this series (exact, without a walk or a read)."""
    return _series_days(ds, series) is not None


def _series_days(ds: Dataset, series: SeriesSpec) -> tuple[int, int] | None:
    """(first day, number of days) when the series asks about time alone over whole days,
    in buckets of whole days (what the day rollup holds), else None."""
    if series.step % DAY or series.base % DAY:
        return None
    return _whole_days(ds, series.query)


def _whole_days(ds: Dataset, spec: QuerySpec) -> tuple[int, int] | None:
    """(first day, number of days) when the question asks about time alone, over whole
    days, else None."""
    t = ds.time_axis
    if t is None or spec.region is not None:
        return None
    domain = ds.domain()
    if any(rng != domain[i] for i, rng in enumerate(spec.box) if i != t):
        return None
    lo, hi = spec.box[t]
    # A day cut by the domain's end holds no rows past it: the rollup's day is that part.
    if lo > hi or lo % DAY and lo != domain[t][0] or (hi + 1) % DAY and hi != domain[t][1]:
        return None
    return lo // DAY, hi // DAY - lo // DAY + 1


def _from_days(rollup, first: int, count: int, spec: QuerySpec, plan: QueryPlan, tree: TreeState,
               bucket: np.ndarray, buckets: int) -> AggArrays:
    """The aggregates over spec.columns of days first .. first+count-1 from the day
    rollup, day i into bucket[i] of `buckets`; the plan says so."""
    out = AggArrays.empty(buckets, len(spec.columns))
    plan.total_grids = tree.leaf_count
    plan.rows_in_reused_grids = out.add_into(bucket, rollup.days(first, count), columns=spec.columns)
    plan.rollup_days = count
    return out


def _conditions(ds: Dataset, spec: QuerySpec) -> list[RangeCondition]:
    """The box as conditions on the dimensions it narrows."""
    domain = ds.domain()
    return [RangeCondition(i, lo, hi) for i, (lo, hi) in enumerate(spec.box) if (lo, hi) != domain[i]]


def _skip(spec: QuerySpec, cols: list[int], aggs: AggArrays, scan: np.ndarray,
          found: AggArrays) -> tuple[Skip, np.ndarray]:
    """4.6.2 for a min/max-only query: which leaves to read (positions in `scan`, rows of
    the tree's aggregates), in the order most likely to hold the answer (by the first
    aggregate's stored bound), leaving out those whose stored bounds cannot improve the
    best answers the reused grids gave already; and the Skip the store gets."""
    specs = [(a.col, a.func == "max") for a in spec.aggregates]
    best = []
    for c, m in specs:
        j = cols.index(c)
        seen = found.present[0, j] > 0
        best.append(int((found.maxs if m else found.mins)[0, j]) if seen else None)
    known = all(b is not None for b in best)
    keep, bounds = _skip_order(scan, aggs.mins, aggs.maxs, np.array([c for c, _ in specs], np.int64),
                               np.array([m for _, m in specs], np.bool_),
                               np.array([b if known else 0 for b in best], np.int64), known)
    # The kernel reads bounds by the request's column order of the specs' columns.
    return Skip(specs, bounds, best), keep


@numba.njit(cache=True, nogil=True)
def _skip_order(scan, mins, maxs, spec_col, spec_max, best, known):
    """_skip's leaves in one compiled pass: (positions in scan to read, in order, and
    their stored bounds, a column per spec). Spec j bounds a leaf by its stored max
    (spec_max[j]) or min of column spec_col[j]; the order is by spec 0's bound, best
    first (stable). With `known` (every spec has a best answer already), a leaf is left
    out when no spec's bound beats its best."""
    n, k = scan.shape[0], spec_col.shape[0]
    bounds = np.empty((n, k), np.int64)
    for i in range(n):
        for j in range(k):
            bounds[i, j] = maxs[scan[i], spec_col[j]] if spec_max[j] else mins[scan[i], spec_col[j]]
    order = np.argsort(-bounds[:, 0] if spec_max[0] else bounds[:, 0], kind="mergesort")
    keep = np.empty(n, np.int64)
    kept = 0
    for i in order:
        useless = known
        for j in range(k):
            if spec_max[j]:
                useless = useless and bounds[i, j] <= best[j]
            else:
                useless = useless and bounds[i, j] >= best[j]
        if not useless:
            keep[kept] = i
            kept += 1
    return keep[:kept], bounds[keep[:kept]]


def _add_rows(out: AggArrays, rows: np.ndarray, cols: list[int], buckets: Buckets | None) -> None:
    """Add selected rows (every column) into their buckets."""
    if not len(rows):
        return
    if buckets is None:
        out.add_into(np.zeros(1, np.int64), AggArrays.of_rows(rows[:, cols], len(cols)))
        return
    group = (rows[:, buckets.column] - buckets.base) // buckets.step
    keep = (group >= 0) & (group < buckets.count)
    rows, group = rows[keep], group[keep]
    for g in np.unique(group).tolist():
        out.add_into(np.array([g]), AggArrays.of_rows(rows[group == g][:, cols], len(cols)))


def _windows(buckets: AggArrays, w: int) -> AggArrays:
    """Row i: the merge of buckets i .. i+w-1, for every full window."""
    if w == 1:
        return buckets
    n = len(buckets) - w + 1

    def run_sum(a):
        c = np.cumsum(a, axis=0)
        c = np.concatenate([np.zeros((1,) + a.shape[1:], a.dtype), c])
        return c[w:] - c[:n]

    view = np.lib.stride_tricks.sliding_window_view
    return AggArrays(run_sum(buckets.count), run_sum(buckets.present),
                     view(buckets.mins, w, axis=0).min(axis=-1), view(buckets.maxs, w, axis=0).max(axis=-1),
                     run_sum(buckets.hi), run_sum(buckets.lo))
