"""Algorithm 2 on arrays: a grid's rows split into leaves. One function for the insert
path (GridEngine) and the bulk load (ingest.tasks) alike.

A grid holding more than `limit` rows is cut at the floor of the mean on its next axis
(gridagg.model.grid.choose_cut: an axis where all values are equal is passed over); each child
holding more than n_size rows is cut again, and so on. The insert path splits a leaf
that grew past N_threshold (limit = N_threshold); a bulk load builds a new leaf's subtree
from nothing (limit = N_size).

The tuner (gridagg.tune.adapt) may instead give the cuts itself: the bounds of the questions
that read a leaf, so that its rows inside a question's box end up in grids of their own.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numba
import numpy as np

from gridagg.model.aggregate import (
    INT64_MAX,
    LOW,
    PartialAggregate,
    ancestor_aggregates,
)
from gridagg.model.grid import Grid, children, choose_cut


@dataclass
class Split:
    """leaves: (leaf, indices of its rows, its aggregate) in grid-ID order; inner: the
    aggregate of every grid made on the way that is not a leaf; splits: grids cut;
    rows: the rows in the leaves' order (the first leaf's first, in the order of its
    indices, then the next leaf's, and so on), so that a caller needs no gather."""

    leaves: list[tuple[Grid, np.ndarray, PartialAggregate]] = field(default_factory=list)
    inner: dict[str, PartialAggregate] = field(default_factory=dict)
    splits: int = 0
    rows: np.ndarray | None = None


def split_rows(grid: Grid, values: np.ndarray, agg: PartialAggregate, limit: int, n_size: int,
               ndim: int, cuts: tuple[tuple[int, int], ...] = (), aggregates: bool = True,
               in_place: bool = False) -> Split:
    """Split `grid`, which holds the rows `values` ((m, ncols) int64) whose aggregate is
    `agg`, as the module docstring says, or, given `cuts` ((axis, at) pairs: rows with
    value <= at on that axis go to the low child), at those instead of the means: each
    grid at the first cut from its parent's on that falls between its rows' least and
    greatest value (limit and n_size are then unused). The grid itself stays out of the
    result's aggregates unless it is the one leaf (nothing to cut). Without `aggregates`
    (a split only priced, gridagg.tune.adapt) the leaves' aggregates are None and inner empty.
    With `in_place`, the cuts reorder `values` itself (when it is a C-ordered int64
    array: Split.rows is then `values`) instead of a copy: a caller done with it saves
    the copy's memory.

    A cut needs only the dimensions' count, sums, mins and maxs of each child, which one
    pass over its rows gives (partition_rows, which also moves each child's rows
    into one run); every column of a leaf is aggregated once, at the end, and
    every inner grid's aggregate is the merge of its leaves'."""
    ncols = values.shape[1]
    # The cuts move the rows (partition_rows): a grid's rows are then rows[a:b],
    # and ix[a:b] their positions in `values`.
    rows = np.ascontiguousarray(values, np.int64) if in_place else np.array(values, np.int64, order="C")
    ix = np.arange(len(rows), dtype=np.int64)
    stats, whole = np.zeros((2, 5, ndim), np.int64), np.zeros((2, 5, ndim), np.int64)
    out = Split(rows=rows)
    dims = (agg.count, agg.sums[:ndim], agg.mins[:ndim], agg.maxs[:ndim])
    stack = [(grid, 0, len(values), dims, limit, 0)]
    while stack:
        g, a, b, (count, sums, mins, maxs), lim, k = stack.pop()
        if cuts:
            k, cut = _next_cut(cuts, k, mins, maxs)
        else:
            cut = choose_cut(g.next_axis, count, sums, mins, maxs, ndim) if count > lim else None
        if cut is None:
            mine = agg if g is grid else PartialAggregate.of_rows(rows[a:b], ncols) if aggregates else None
            out.leaves.append((g, ix[a:b], mine))
            continue
        out.splits += 1
        axis, at = cut
        # A child's mean cut needs its next axis's statistics only (partition_rows
        # takes longer for every axis), the others when that axis holds one value.
        nxt = (axis + 1) % ndim
        d0, d1 = (0, ndim) if cuts else (nxt, nxt + 1)
        mid = partition_rows(rows, ix, a, b, axis, at, d0, d1, stats)
        if not cuts:
            for side, (lo, hi) in enumerate(((a, mid), (mid, b))):
                if hi - lo > n_size and stats[side, 3, nxt] == stats[side, 4, nxt]:
                    # Every axis's statistics of rows[lo:hi]: a cut above all of them.
                    partition_rows(rows, ix, lo, hi, 0, INT64_MAX, 0, ndim, whole)
                    stats[side] = whole[0]
        kids = children(g, axis, at, ndim)
        sides = [(int(s[0, 0]), [(h << 32) + lo for h, lo in zip(s[1].tolist(), s[2].tolist())], s[3].tolist(),
                  s[4].tolist()) for s in stats]
        # The high child first, so that leaves come out in grid-ID order.
        stack.append((kids[1], mid, b, sides[1], n_size, k + 1))
        stack.append((kids[0], a, mid, sides[0], n_size, k + 1))
    if out.splits and aggregates:
        below = len(grid.grid_id)
        out.inner = {g: a for g, a in ancestor_aggregates({leaf.grid_id: a for leaf, _, a in out.leaves},
                                                          ncols).items() if len(g) > below}
    return out


def _next_cut(cuts, k: int, mins, maxs) -> tuple[int, tuple[int, int] | None]:
    """The first of cuts[k:] that leaves rows on both sides (its index), or (len, None)."""
    for j in range(k, len(cuts)):
        axis, at = cuts[j]
        if mins[axis] <= at < maxs[axis]:
            return j, cuts[j]
    return len(cuts), None


@numba.njit(cache=True, nogil=True)
def _add_row(stats, side, rows, r, d0, d1):
    """Row r's columns d0..d1-1 into stats[side] (see partition_rows)."""
    for d in range(d0, d1):
        v = rows[r, d]
        stats[side, 1, d] += v >> 32
        stats[side, 2, d] += v & LOW
        if v < stats[side, 3, d]:
            stats[side, 3, d] = v
        if v > stats[side, 4, d]:
            stats[side, 4, d] = v


@numba.njit(cache=True, nogil=True)
def partition_rows(rows, ix, a, b, axis, at, d0, d1, stats):
    """One cut of a grid's split (gridagg.write.split): rows[a:b] ((m, ncols) int64) and their
    positions ix[a:b] reordered in place so that the rows with rows[r, axis] <= at come
    first. Fills stats[side] (side 0 low, 1 high; (2, 5, ndim)) with [count, sum's high
    halves, sum's low halves, min, max] of columns d0..d1-1 (the count in every column of
    row 0; the halves keep the sums exact: see AggArrays). Returns where the high side
    starts.

    The rows themselves move, two at a time from both ends (no scratch; the order within
    a side is not kept), so every cut reads them in sequence: reading them through their
    positions instead left a child's rows scattered over the leaf, one cache miss each
    (a large leaf in a load's order split several times slower than in the input's own
    order)."""
    for side in range(2):
        for d in range(d0, d1):
            stats[side, 1, d] = 0
            stats[side, 2, d] = 0
            stats[side, 3, d] = INT64_MAX
            stats[side, 4, d] = -INT64_MAX - 1
    ncols = rows.shape[1]
    i, j = a, b - 1
    while True:
        while i <= j and rows[i, axis] <= at:
            _add_row(stats, 0, rows, i, d0, d1)
            i += 1
        while i <= j and rows[j, axis] > at:
            _add_row(stats, 1, rows, j, d0, d1)
            j -= 1
        if i >= j:
            break
        for c in range(ncols):  # rows[i] high, rows[j] low
            rows[i, c], rows[j, c] = rows[j, c], rows[i, c]
        ix[i], ix[j] = ix[j], ix[i]
        _add_row(stats, 0, rows, i, d0, d1)
        _add_row(stats, 1, rows, j, d0, d1)
        i += 1
        j -= 1
    for d in range(stats.shape[2]):
        stats[0, 0, d] = i - a
        stats[1, 0, d] = b - i
    return i
