"""Blocks: the paper's reuse carried on below the leaves, inside a segment.

A segment's rows (gridagg.store.segments) are cut into blocks by a k-d split of their
own, a small tree in the segment whose nodes are ranges of its blocks. A node of more
than FEWEST_ROWS rows whose rows stand at several positions (a dataset's longitude and
latitude: a sensor archive's rows share the few positions of its stations) is cut along
one of those, so that most blocks hold one station's rows; a node of more than
BLOCK_ROWS rows is cut along the dimension its rows spread furthest on (relative to the
segment's spread). Each cut puts a value's rows on one side, near the median. Every node
keeps its data bounds and partial aggregate (per column: least and greatest value,
values present, the sum's high and low halves, as gridagg.model.aggregate keeps them).

A scan (gridagg.store.kernels, and the region servers' GridScanObserver) walks a
segment's tree as the planner walks the grids: a node whose bounds miss the question is
passed over with its blocks, one inside it answers from its aggregate, a cut one is
descended, and only the rows of the blocks the question's boundary cuts are read. So a
polygon settles a station's block by its position, and a box on the map or in time
reads the blocks at its edge. Inside a block the rows are in column-0 order (time, in a
dataset that has one): a range of it is a binary search, and a series' buckets over it
are runs.
"""

from __future__ import annotations

import numba
import numpy as np

from gridagg.model.aggregate import INT64_MAX, LOW, NULL

# Rows of a block at most, but where rows are equal in every dimension. Smaller blocks
# read fewer rows where a question's boundary cuts a leaf; larger ones are read in fewer,
# longer runs (a box over values cuts most blocks) and keep the trees small (each node
# costs 40 bytes a column). Chosen by measuring the benchmark's held-out families: half
# these sizes were slower over boxes of values, twice these slower over polygons.
BLOCK_ROWS = 1024
# Rows of a node at least for it to be cut along position only: a station with fewer rows
# in a segment shares its block with others.
FEWEST_ROWS = 128
# Per node and column: least, greatest, present, sum's high half, sum's low half.
MIN, MAX, PRESENT, HIGH, LOW_HALF = range(5)
STATS = 5
# Per node: its first block, the block after its last, and its right child (0: a block,
# no children; the left child is the next node).
FIRST, END, RIGHT = range(3)
LINKS = 4  # u32s a node takes: FIRST, END, RIGHT and a pad


def tree_bytes_per_row(ncols: int) -> float:
    """At most what a block tree adds to a segment per row, of rows of ncols columns: a
    block's start and two nodes per block, a block holding at least half BLOCK_ROWS rows
    but where a station's rows are fewer (FEWEST_ROWS)."""
    return (4 + 2 * (4 * LINKS + 8 * STATS * ncols)) / (min(BLOCK_ROWS, FEWEST_ROWS) / 2)


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
def _spread_axis(values, idx, lo, hi, axes, span):
    """Of the dimensions `axes`, the one along which rows idx[lo:hi] spread furthest
    relative to `span` (the segment's spread of each), or -1 when they are equal in all."""
    best, axis = 0.0, -1
    for d in axes:
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
def _cut(idx, values, axis, lo, hi):
    """Reorder rows idx[lo:hi] into those below and above a cut on `axis` near their
    median, rows of one value on one side (a station's position, a timestamp); returns
    where the upper side begins (lo < cut < hi: the rows differ on `axis`)."""
    mid = lo + (hi - lo) // 2
    _select(idx, values, axis, lo, hi, mid)
    pivot = values[idx[mid], axis]
    # Rows equal to the pivot gathered at the edge of each side, then the cut placed before
    # or after all of them, whichever is nearer the middle and leaves both sides rows.
    a = lo
    for r in range(lo, mid):
        if values[idx[r], axis] < pivot:
            idx[a], idx[r] = idx[r], idx[a]
            a += 1
    z = hi
    for r in range(hi - 1, mid, -1):
        if values[idx[r], axis] > pivot:
            z -= 1
            idx[z], idx[r] = idx[r], idx[z]
    if a == lo:
        return z
    if z == hi:
        return a
    return a if mid - a < z - mid else z


@numba.njit(cache=True, nogil=True)
def order(values, ndim, most, fewest, position):
    """(order of the rows, first row of each block and the end, the tree's links
    (nnodes, LINKS) uint32 in preorder): rows `values` ((n, ncols) int64) cut into blocks
    by a k-d split over their first `ndim` columns (see the module docstring), `position`
    the dimensions of a row's position (empty: none); blocks in the tree's order, rows of
    a block by column 0."""
    n = values.shape[0]
    idx = np.arange(n)
    every = np.arange(ndim)
    span = np.ones(ndim, np.float64)
    for d in range(ndim):
        if n:
            span[d] = float(values[:, d].max()) - float(values[:, d].min()) + 1.0
    starts = np.empty(n + 2, np.int64)
    links = np.zeros((2 * n + 1, LINKS), np.uint32)
    nblocks, nnodes = 0, 0
    stack = np.empty((256, 3), np.int64)  # rows lo, hi; the node whose right child it is (-1: none)
    stack[0, 0], stack[0, 1], stack[0, 2] = 0, n, -1
    top = 1
    while top > 0:
        top -= 1
        lo, hi, parent = stack[top, 0], stack[top, 1], stack[top, 2]
        node = nnodes
        nnodes += 1
        if parent >= 0:
            links[parent, RIGHT] = node
        links[node, FIRST] = nblocks
        axis = -1
        if hi - lo > fewest and position.shape[0] > 0:
            axis = _spread_axis(values, idx, lo, hi, position, span)
        if axis < 0 and hi - lo > most:
            axis = _spread_axis(values, idx, lo, hi, every, span)
        if axis < 0:
            block = idx[lo:hi]
            idx[lo:hi] = block[np.argsort(values[block, 0], kind="mergesort")]
            starts[nblocks] = lo
            nblocks += 1
            continue
        cut = _cut(idx, values, axis, lo, hi)
        stack[top, 0], stack[top, 1], stack[top, 2] = cut, hi, node  # the lower side is taken first
        stack[top + 1, 0], stack[top + 1, 1], stack[top + 1, 2] = lo, cut, -1
        top += 2
    starts[nblocks] = n
    links = links[:nnodes].copy()
    # A node's blocks end where the next node outside its subtree begins.
    for node in range(nnodes - 1, -1, -1):
        right = links[node, RIGHT]
        links[node, END] = links[node, FIRST] + 1 if right == 0 else links[right, END]
    return idx, starts[:nblocks + 1].copy(), links


@numba.njit(cache=True, nogil=True)
def table(values, starts, links):
    """Each node's bounds and aggregate: (nnodes, ncols, STATS) int64 of rows `values` (in
    block order) whose block b is values[starts[b]:starts[b + 1]], the tree's `links` as
    order() makes them; NULLs are left out (a column without values: least INT64_MAX,
    greatest NULL, as an empty aggregate)."""
    nnodes, ncols = links.shape[0], values.shape[1]
    out = np.empty((nnodes, ncols, STATS), np.int64)
    for node in range(nnodes - 1, -1, -1):  # children come after their parent
        right = links[node, RIGHT]
        if right != 0:
            for c in range(ncols):
                a, b = out[node + 1, c], out[right, c]
                out[node, c, MIN] = min(a[MIN], b[MIN])
                out[node, c, MAX] = max(a[MAX], b[MAX])
                for s in (PRESENT, HIGH, LOW_HALF):
                    out[node, c, s] = a[s] + b[s]
            continue
        block = links[node, FIRST]
        for c in range(ncols):
            least, most, present, high, low = INT64_MAX, NULL, 0, 0, 0
            for r in range(starts[block], starts[block + 1]):
                v = values[r, c]
                if v == NULL:
                    continue
                present += 1
                least = min(least, v)
                most = max(most, v)
                high += v >> 32
                low += v & LOW
            out[node, c, MIN], out[node, c, MAX], out[node, c, PRESENT] = least, most, present
            out[node, c, HIGH], out[node, c, LOW_HALF] = high, low
    return out
