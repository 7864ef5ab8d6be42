"""What a query asks a cell store to read (ScanRequest) and what comes back (ScanAnswer).

The planner (gridagg.query.planner) answers what it can from partial aggregates and hands the
rest to the store in one ScanRequest: the grids whose own rows must be read (leaves the
query box or polygon cuts), the box as range conditions, the columns whose statistics are
wanted, and how matching rows are grouped (all into one group per grid's `group`, or by
time bucket for a series). A store answers it in one pass, wherever the rows are: the
embedded store in this process (gridagg.store.kernels), HBase on its region servers
(hbase/observer), both with the same semantics:

- a grid's rows are its segments (gridagg.store.segments); a row matches when
  lo <= value <= hi for every condition (where `tested` says a grid's box lies inside
  a condition, all its rows do: a store may leave that test out);
- a matching row adds to its group: the count, and for each wanted column whose value is
  not NULL, present, min, max and sum;
- with `buckets`, a row's group is floor((row[column] - base) / step), and rows whose
  group falls outside [0, count) are left out;
- a grid marked in `rows_of` lies on a polygon's edge: each matching row is tested
  against `polygon` (its lon/lat as floats, value / scale): a row inside counts as any
  other, a row outside is left out, and a row within eps of an edge (which only an exact
  test can settle) is handed back whole, every column, for the caller to test. Without
  a polygon every matching row of such a grid is handed back;
- with `skip` (min/max-only queries, the paper's 4.6.2), grids are visited in the given
  order and a grid is passed over when its stored bounds cannot improve the best answer
  found so far (for every min spec its stored min >= the best; for every max spec its
  stored max <= the best);
- with `stop` (a one-byte flag the caller sets when it no longer wants the answer: its
  deadline passed) or `deadline` (seconds since the epoch), a store stops reading at the
  next grid once the flag is set or the deadline has passed, and answers `stopped`. The
  embedded store's threads check the flag, and its stopped answer counts for nothing;
  HBase's region servers, which cannot see the flag, check `deadline` and name the grids
  they left `unread`: every other grid's rows are counted whole.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from gridagg.model.aggregate import AggArrays


class RangeCondition(NamedTuple):
    """Rows must have lo <= value <= hi in column `column` (stored integers)."""

    column: int
    lo: int
    hi: int


class Buckets(NamedTuple):
    """Group rows by floor((row[column] - base) / step), keeping groups 0..count-1."""

    column: int
    base: int
    step: int
    count: int


@dataclass
class Skip:
    """Min/max scan skipping: specs are (column, is_max); bounds[i, j] is grid i's stored
    min (or max) of spec j's column; best[j] is the best answer known before the scan
    (from reused grids), None when there is none yet."""

    specs: list[tuple[int, bool]]
    bounds: np.ndarray
    best: list[int | None]


@dataclass
class PolygonTest:
    """A polygon for the rows of edge grids: edges as rows (x1, y1, x2, y2) of every ring,
    in user units; a stored row's point is (row[lon_column] / lon_scale, row[lat_column]
    / lat_scale) as floats. Rows within eps of an edge go back to the caller."""

    edges: np.ndarray
    lon_column: int
    lat_column: int
    lon_scale: int
    lat_scale: int
    eps: float


@dataclass
class ScanRequest:
    grids: list[str]
    conditions: list[RangeCondition]
    columns: list[int]
    groups: np.ndarray | None = None  # int64 per grid; None: every grid in group 0
    ngroups: int = 1
    buckets: Buckets | None = None
    rows_of: np.ndarray | None = None  # bool per grid
    skip: Skip | None = None
    polygon: PolygonTest | None = None
    rows: np.ndarray | None = None  # int64 per grid: the rows it holds, as the planner knows them
    tested: np.ndarray | None = None  # bool per grid and condition; None: every condition on every grid
    stop: np.ndarray | None = None  # uint8 (1,): set to 1 to stop the scan (this process's stores)
    deadline: float | None = None  # time.time() after which the answer is no longer wanted
    keys: list[bytes] | None = None  # grid_prefix of each grid, from the planner's tree (CellStore.reads_by_key)

    def group_of_grids(self) -> np.ndarray:
        return np.zeros(len(self.grids), np.int64) if self.groups is None else self.groups

    def part(self, g0: int, g1: int) -> "ScanRequest":
        """The same request over grids g0 .. g1-1 only (a skip's bounds are cut too)."""
        cut = lambda a: None if a is None else a[g0:g1]  # noqa: E731
        skip = self.skip
        if skip is not None:
            skip = Skip(skip.specs, skip.bounds[g0:g1], skip.best)
        return ScanRequest(self.grids[g0:g1], self.conditions, self.columns, cut(self.groups), self.ngroups,
                           self.buckets, cut(self.rows_of), skip, self.polygon, cut(self.rows), cut(self.tested),
                           self.stop, self.deadline, cut(self.keys))


@dataclass
class ScanAnswer:
    """aggs: ngroups x len(columns) aggregates of the matching rows; rows: grid index ->
    the rows handed back (an (k, ncols) int64 array; see rows_of); and what the scan
    cost: rows read (of the blocks read, gridagg.store.blocks), rows that matched (not
    counting those handed back), grids read and passed over, blocks answered from their
    aggregates and the rows in them, rows in the grids read; stopped: the scan stopped before its end (request.stop,
    request.deadline), so the answer is incomplete; unread: when a stopped store knows,
    the grids (request indexes) it left unread, in no aggregate and no rows, every other
    grid counted whole (None: not known, the answer counts for nothing)."""

    aggs: AggArrays
    rows: dict[int, np.ndarray] = field(default_factory=dict)
    rows_visited: int = 0
    rows_matched: int = 0
    grids_scanned: int = 0
    grids_skipped: int = 0
    stopped: bool = False
    unread: np.ndarray | None = None
    blocks_reused: int = 0
    rows_in_reused_blocks: int = 0
    rows_in_grids: int = 0

    def merge(self, other: "ScanAnswer", offset: int = 0) -> "ScanAnswer":
        """Add another part of the same request's answer into this one; its rows' grid
        indexes are shifted by `offset` (a part from grid `offset` on)."""
        self.aggs.add_into(np.arange(len(other.aggs)), other.aggs)
        self.rows.update({g + offset: r for g, r in other.rows.items()})
        self.rows_visited += other.rows_visited
        self.rows_matched += other.rows_matched
        self.grids_scanned += other.grids_scanned
        self.grids_skipped += other.grids_skipped
        self.blocks_reused += other.blocks_reused
        self.rows_in_reused_blocks += other.rows_in_reused_blocks
        self.rows_in_grids += other.rows_in_grids
        if other.stopped:  # unread grids stay known while every stopped part names its own
            if other.unread is None or (self.stopped and self.unread is None):
                self.unread = None
            else:
                before = self.unread if self.stopped else np.zeros(0, np.int64)
                self.unread = np.concatenate([before, other.unread + offset])
            self.stopped = True
        return self
