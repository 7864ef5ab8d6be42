"""The walk of Algorithm 3: the dataset's tree taken top down in compiled code (numba), over
each grid's data bounds, for a box, a polygon and the buckets of a series at once.

- a grid whose rows lie outside the box, or outside the polygon, is dropped with
  everything below it;
- a grid whose rows lie inside the box and the polygon, within one bucket of the query
  (a plain query has one bucket), answers from its partial aggregate: the walk stops
  there, so sibling folding (the paper's 4.6.1) falls out of it;
- any other grid is descended into; a leaf reached that way is read: a leaf the box or
  the polygon cuts, or one inside that spans several buckets.

The planner (gridagg.query.planner) turns what the walk found into one store scan; the
tuner (gridagg.tune) walks sampled questions over other trees to price them.
"""

from __future__ import annotations

from typing import NamedTuple

import numba
import numpy as np

from gridagg.store.polygon import face
from gridagg.tree import TreeState

# Leaves the walk reads: cut by the box, on the polygon's edge (rows come back), or
# inside but spanning several buckets.
CUT, EDGE, SPANNING = 0, 1, 2
NO_EDGES = np.zeros((0, 4), np.float64)  # a query without a polygon


class WalkQuery(NamedTuple):
    """What the walk selects: the box qlo..qhi (stored values, inclusive); the polygon's
    edges (none: no polygon) over dimensions lon_axis/lat_axis, whose stored values are
    divided by lon_scale/lat_scale, with eps its margin; and the time buckets of a series
    (t_axis -1: one bucket), bucket b = (t - base) // step."""

    qlo: np.ndarray
    qhi: np.ndarray
    edges: np.ndarray
    lon_axis: int
    lat_axis: int
    lon_scale: float
    lat_scale: float
    eps: float
    t_axis: int
    base: int
    step: int


class WalkResult(NamedTuple):
    """What the walk fills, each array as long as the tree (the walk says how much it
    used): reused/reused_bucket, the grids answered from their aggregates and their
    bucket; scan/scan_kind, the leaves to read that hold rows and their kind (CUT, EDGE
    or SPANNING); tested, per leaf to read and dimension, whether the leaf's split box
    (which holds every row it will ever have) reaches outside the query's range, so its
    rows must be tested there; region_leaves, leaves settled [inside, on the edge of,
    outside] the polygon; tally, [leaves below the reused grids, leaves reached to read
    (empty ones too) of kind CUT, EDGE, SPANNING]."""

    reused: np.ndarray
    reused_bucket: np.ndarray
    scan: np.ndarray
    scan_kind: np.ndarray
    tested: np.ndarray
    region_leaves: np.ndarray
    tally: np.ndarray


@numba.njit(cache=True, nogil=True)
def _walk(tree, query, out, budget):
    """The walk of the module docstring over a gridagg.tree.WalkTree for a WalkQuery, filling a
    WalkResult, depth first (budget < 0). With a budget >= 0, for the tree's answer
    alone: the grids are taken heaviest first (rows times buckets their rows span), at
    most `budget` are opened, and a cut grid met after that is listed to read whole, as
    a leaf (its own aggregate and data bounds bound its rows). Returns (number reused,
    number to read)."""
    lo, hi, left, right, leaves_below = tree.lo, tree.hi, tree.left, tree.right, tree.leaves_below
    qlo, qhi, edges = query.qlo, query.qhi, query.edges
    reused, scan, tally, region_leaves = out.reused, out.scan, out.tally, out.region_leaves
    ndim = qlo.shape[0]
    polygon = edges.shape[0] > 0
    best_first = budget >= 0
    size = 2 * budget + 1 if best_first else 4096  # best first: the root and two children per grid opened
    stack = np.empty(size, np.int64)  # grids waiting (best first: the heap's entries)
    known_inside = np.empty(size, np.bool_)  # the polygon covers the parent, so this grid too
    # Best first: heap[:top] holds entries of stack, by weight; at first entry 0, the root.
    heap, weight = np.zeros(size if best_first else 0, np.int64), np.zeros(size if best_first else 0, np.int64)
    stack[0], known_inside[0] = tree.root, not polygon
    top, entries, opened, nr, ns = 1, 1, 0, 0, 0
    while top > 0:
        if best_first:
            e, top = _heap_pop(heap, top, weight)
        else:
            top -= 1
            e = top
        i, state_known = stack[e], known_inside[e]
        touches = True
        inside = True
        for d in range(ndim):
            if lo[i, d] > qhi[d] or hi[i, d] < qlo[d]:
                touches = False
                break
            if lo[i, d] < qlo[d] or hi[i, d] > qhi[d]:
                inside = False
        if not touches:
            continue
        state = 2
        if not state_known:
            state = face(lo[i, query.lon_axis] / query.lon_scale, hi[i, query.lon_axis] / query.lon_scale,
                          lo[i, query.lat_axis] / query.lat_scale, hi[i, query.lat_axis] / query.lat_scale,
                          edges, query.eps)
            if state == 0:
                region_leaves[2] += leaves_below[i]
                continue
        if inside and state == 2:
            b0, b1 = 0, 0
            if query.t_axis >= 0:
                b0 = (lo[i, query.t_axis] - query.base) // query.step
                b1 = (hi[i, query.t_axis] - query.base) // query.step
            if b0 == b1:
                reused[nr], out.reused_bucket[nr] = i, b0
                nr += 1
                region_leaves[0] += leaves_below[i]
                tally[0] += leaves_below[i]
                continue
        if left[i] < 0 or opened == budget:
            kind = SPANNING if (inside and state == 2) else (EDGE if state == 1 else CUT)
            tally[1 + kind] += leaves_below[i]
            region_leaves[0 if state == 2 else 1] += leaves_below[i]
            if tree.count[i] == 0:
                continue
            scan[ns] = i
            out.scan_kind[ns] = kind
            for d in range(ndim):
                out.tested[ns, d] = tree.split_lo[i, d] < qlo[d] or tree.split_hi[i, d] > qhi[d]
            ns += 1
            continue
        opened += 1
        if best_first:
            for child in (left[i], right[i]):
                stack[entries], known_inside[entries] = child, state == 2
                weight[entries] = tree.count[child]
                if query.t_axis >= 0:  # the buckets its rows may fall in
                    t = query.t_axis
                    span = (min(hi[child, t], qhi[t]) - max(lo[child, t], qlo[t])) // query.step + 1
                    weight[entries] *= max(span, 1)
                top = _heap_push(heap, top, weight, entries)
                entries += 1
            continue
        if top + 2 > stack.shape[0]:
            grown = np.empty(2 * stack.shape[0], np.int64)
            grown[:top] = stack[:top]
            stack = grown
            flags = np.empty(2 * known_inside.shape[0], np.bool_)
            flags[:top] = known_inside[:top]
            known_inside = flags
        stack[top], stack[top + 1] = right[i], left[i]
        known_inside[top] = known_inside[top + 1] = state == 2
        top += 2
    return nr, ns


@numba.njit(cache=True, nogil=True, inline="always")  # called per grid
def _heap_push(heap, n, key, e):
    """Add entry e to the max-heap heap[:n] ordered by key[entry]; returns its new size."""
    heap[n] = e
    c = n
    while c > 0:
        p = (c - 1) // 2
        if key[heap[p]] >= key[heap[c]]:
            break
        heap[p], heap[c] = heap[c], heap[p]
        c = p
    return n + 1


@numba.njit(cache=True, nogil=True, inline="always")  # called per grid
def _heap_pop(heap, n, key):
    """(the entry of greatest key, the new size) of the max-heap heap[:n]."""
    top = heap[0]
    n -= 1
    heap[0] = heap[n]
    c = 0
    while True:
        m = 2 * c + 1
        if m >= n:
            break
        if m + 1 < n and key[heap[m + 1]] > key[heap[m]]:
            m += 1
        if key[heap[c]] >= key[heap[m]]:
            break
        heap[c], heap[m] = heap[m], heap[c]
        c = m
    return top, n


def walk(tree: TreeState, query: WalkQuery, budget: int | None = None):
    """The walk (_walk) of `query` over `tree`: (reused grids, their buckets, leaves to
    read, their kinds, their tested dimensions, [leaves inside, on the edge of, outside
    the polygon], tally), each array of rows of the tree; budget as for _walk (None: the
    whole walk)."""
    n = tree.n
    out = WalkResult(np.empty(n, np.int64), np.empty(n, np.int64), np.empty(n, np.int64), np.empty(n, np.int64),
                     np.empty((n, len(query.qlo)), np.bool_), np.zeros(3, np.int64), np.zeros(4, np.int64))
    nr, ns = _walk(tree.walk, query, out, -1 if budget is None else budget)
    return (out.reused[:nr], out.reused_bucket[:nr], out.scan[:ns], out.scan_kind[:ns], out.tested[:ns],
            out.region_leaves, out.tally)


@numba.njit(cache=True, nogil=True)
def face_each(box, edges, lon_scale, lat_scale, eps):
    """face() of each box (lon_lo, lon_hi, lat_lo, lat_hi) in stored values."""
    out = np.empty(box.shape[0], np.int64)
    for i in range(box.shape[0]):
        out[i] = face(box[i, 0] / lon_scale, box[i, 1] / lon_scale, box[i, 2] / lat_scale, box[i, 3] / lat_scale,
                      edges, eps)
    return out
