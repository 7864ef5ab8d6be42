"""Blocks: the paper's reuse one level below the leaves, inside a segment.

A segment's rows (gridagg.store.segments) are cut into blocks of at most BLOCK_ROWS rows
by a k-d split of their own: each cut halves a block's rows at the median of the
dimension along which they spread furthest (relative to the segment's own spread), so a
block holds rows close together in every dimension, as a small grid would. Each block
keeps its data bounds and partial aggregate (per column: least and greatest value,
values present, and the sum's high and low halves, as gridagg.model.aggregate keeps
them). A scan (gridagg.store.kernels, and the region servers' GridScanObserver) then
treats the blocks of a cut leaf as the planner treats grids: a block whose bounds miss
the question is passed over, one inside it answers from its aggregate, and only the rows
of blocks the question's boundary cuts are read. Inside a block the rows are in column-0
order (time, in a dataset that has one): a range of it is a binary search, and a
series' buckets over it are runs.
"""

from __future__ import annotations

import numba
import numpy as np

from gridagg.model.aggregate import INT64_MAX, LOW, NULL

# Rows of a block at most (a block holds more than half as many, but where rows are
# equal in every dimension). Smaller blocks read fewer rows where a question's boundary
# cuts a leaf, larger ones keep the block tables small: each block costs 40 bytes a column.
BLOCK_ROWS = 512
# Per block and column: least, greatest, present, sum's high half, sum's low half.
MIN, MAX, PRESENT, HIGH, LOW_HALF = range(5)
STATS = 5


@numba.njit(cache=True, nogil=True)
def _select(idx, values, axis, lo, hi, k):
    """Reorder idx[lo:hi] so that the row at k has the value of column `axis` a sort
    would put there, no row before it greater and none after it smaller (Hoare's
    selection, pivot the median of three)."""
    while hi - lo > 1:
        mid = lo + (hi - lo) // 2
        a, b, c = values[idx[lo], axis], values[idx[mid], axis], values[idx[hi - 1], axis]
        pivot = max(min(a, b), min(max(a, b), c))
        i, j = lo, hi - 1
        while i <= j:
            while values[idx[i], axis] < pivot:
                i += 1
            while values[idx[j], axis] > pivot:
                j -= 1
            if i <= j:
                idx[i], idx[j] = idx[j], idx[i]
                i += 1
                j -= 1
        if k <= j:
            hi = j + 1
        elif k >= i:
            lo = i
        else:
            return


@numba.njit(cache=True, nogil=True)
def _spread_axis(values, idx, lo, hi, ndim, span):
    """The dimension along which rows idx[lo:hi] spread furthest relative to `span`
    (the segment's spread of each), or -1 when they are equal in every dimension."""
    best, axis = 0.0, -1
    for d in range(ndim):
        least, most = values[idx[lo], d], values[idx[lo], d]
        for r in range(lo + 1, hi):
            v = values[idx[r], d]
            least = min(least, v)
            most = max(most, v)
        if most > least:
            spread = (most - least) / span[d]
            if spread > best:
                best, axis = spread, d
    return axis


@numba.njit(cache=True, nogil=True)
def order(values, ndim, most):
    """(order of the rows, first row of each block and the end): rows `values` ((n, ncols)
    int64) cut into blocks of at most `most` rows by a k-d split over their first `ndim`
    columns, blocks in the split's depth-first order, rows of a block by column 0."""
    n = values.shape[0]
    idx = np.arange(n)
    span = np.ones(ndim, np.float64)
    for d in range(ndim):
        if n:
            span[d] = float(values[:, d].max()) - float(values[:, d].min()) + 1.0
    starts = np.empty(n + 2, np.int64)
    nblocks = 0
    stack = np.empty((128, 2), np.int64)
    stack[0, 0], stack[0, 1] = 0, n
    top = 1
    while top > 0:
        top -= 1
        lo, hi = stack[top, 0], stack[top, 1]
        axis = -1 if hi - lo <= most else _spread_axis(values, idx, lo, hi, ndim, span)
        if axis < 0:
            if hi > lo:
                block = idx[lo:hi]
                idx[lo:hi] = block[np.argsort(values[block, 0], kind="mergesort")]
                starts[nblocks] = lo
                nblocks += 1
            continue
        mid = lo + (hi - lo) // 2
        _select(idx, values, axis, lo, hi, mid)
        stack[top, 0], stack[top, 1] = mid, hi  # the lower half is taken first
        stack[top + 1, 0], stack[top + 1, 1] = lo, mid
        top += 2
    starts[nblocks] = n
    return idx, starts[:nblocks + 1].copy()


@numba.njit(cache=True, nogil=True)
def table(values, starts):
    """Each block's bounds and aggregate: (nblocks, ncols, STATS) int64 of rows `values`
    (in block order) whose block b is values[starts[b]:starts[b + 1]]; NULLs are left
    out (a column without values: least INT64_MAX, greatest NULL, as an empty aggregate)."""
    nblocks, ncols = starts.shape[0] - 1, values.shape[1]
    out = np.empty((nblocks, ncols, STATS), np.int64)
    for b in range(nblocks):
        for c in range(ncols):
            least, most, present, high, low = INT64_MAX, NULL, 0, 0, 0
            for r in range(starts[b], starts[b + 1]):
                v = values[r, c]
                if v == NULL:
                    continue
                present += 1
                least = min(least, v)
                most = max(most, v)
                high += v >> 32
                low += v & LOW
            out[b, c, MIN], out[b, c, MAX], out[b, c, PRESENT] = least, most, present
            out[b, c, HIGH], out[b, c, LOW_HALF] = high, low
    return out
