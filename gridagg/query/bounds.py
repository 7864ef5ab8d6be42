"""Hard bounds on an answer from the tree alone, for the rows a query has not read.

Every serving process holds each grid's partial aggregate (gridagg.tree): before reading
a row the planner knows the exact aggregate of every grid inside the question and, for
each leaf the question cuts, its row count c, and per column the values present p, their
sum s and their range [m, M]. A leaf not read contributes some subset of its rows; what
the tree proves about that subset, for each column j:

- its rows lie in the box, so a dimension's values lie in [a, b] = [m, M] clipped to the
  box's range (a measure keeps [m, M]);
- count: between a floor and c. The floor is 0, except for a leaf the box cuts in one
  dimension only (its data bounds inside the box in every other): the rows holding that
  dimension's min and max are in when the box holds those values (1 or 2 rows); a leaf
  inside the box (a series' leaf that spans buckets) holds all c rows for a window that
  covers its buckets;
- sum over j: the t values kept lie in [a, b] and the p - t left out in [m, M], adding
  up to s: the least sum is the minimum over t of max(t a, s - (p - t) M), the greatest
  the maximum over t of min(t b, s - (p - t) m) (each a max or min of two lines in t,
  so its extreme lies at an end or where the lines cross);
- min over j: at least the least a; at most the b of any leaf sure to keep a value (or
  the exact part's min); when nothing is sure the answer may be null;
- max: the mirror image;
- avg: with the exact part's sum S over n values, the least average adds the leaves'
  blocks of p values at a, lowest first, while they lower it (the greatest: blocks at b,
  highest first); with no exact values, the least a and the greatest b.

For a series each point's window gets the bounds of the leaves whose rows may fall in
it. Exact parts stay exact: a point no unread leaf touches has lo = hi = its answer.
Bounds always contain the exact answer; they are computed with int64 arithmetic, and
where values times rows could overflow it (never for stored values of sensor archives:
they stay within +-2**53, rows within 2**62 / that) the bound is left open (None).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import NamedTuple

import numba
import numpy as np

from gridagg.model.aggregate import INT64_MAX, NULL, AggArrays

SAFE = 2**62  # |value| x rows below this: int64 arithmetic cannot overflow


@dataclass
class Unread:
    """The leaves a query has not read: rows of the tree, whether each is on a polygon's
    edge (its rows' positions unknown), and the buckets its rows may fall in
    (first..last; 0..0 for a plain query)."""

    leaves: np.ndarray
    edge: np.ndarray
    first: np.ndarray
    last: np.ndarray

    def __len__(self) -> int:
        return len(self.leaves)


@dataclass
class Intervals:
    """Per point (window) and wanted column: the least and greatest possible answer of
    each statistic (arrays of shape (points,) for the row count, (points, columns) for
    the rest); may_be_null[k, j]: the column may have no value selected at point k;
    open[k]: a point whose bounds overflowed int64 and stay open."""

    count_lo: np.ndarray
    count_hi: np.ndarray
    present_lo: np.ndarray
    present_hi: np.ndarray
    sum_lo: np.ndarray
    sum_hi: np.ndarray
    min_lo: np.ndarray
    min_hi: np.ndarray
    max_lo: np.ndarray
    max_hi: np.ndarray
    avg: np.ndarray  # (4, points, columns): least average's numerator and denominator, greatest's (den 0: none)
    may_be_null: np.ndarray
    open: np.ndarray
    touched: np.ndarray  # unread leaves whose rows may fall in each point: 0, exact

    def of(self, func: str, k: int, j: int | None):
        """(lo, hi, may be null) of aggregate func over wanted column j (None: rows) at
        point k, stored integers (Fractions for avg), None for an open end."""
        lo, lo_den, hi, hi_den, null = self.ends(func, [k], j)
        if func != "avg":
            return lo[0], hi[0], null[0]
        mean = lambda v, d: None if v is None else Fraction(v, d)  # noqa: E731
        return mean(lo[0], lo_den[0]), mean(hi[0], hi_den[0]), null[0]

    def ends(self, func: str, ks: list[int], j: int | None) -> tuple[list, list | None, list, list | None, list]:
        """of() at each point of ks, an array at a time (a series bounds hundreds):
        (lows, their denominators, highs, theirs, may be null), lists of Python values;
        the denominators are None but for avg, whose ends are lows[i] / lows' dens[i]."""
        ks = np.asarray(ks, np.int64)
        shut = self.open[ks]  # open points: both ends None
        dens = None
        if func == "count":
            lo, hi = (self.count_lo[ks], self.count_hi[ks]) if j is None else (self.present_lo[ks, j],
                                                                               self.present_hi[ks, j])
            null = np.zeros(len(ks), np.bool_)
        elif func == "sum":
            lo, hi, null = self.sum_lo[ks, j], self.sum_hi[ks, j], np.zeros(len(ks), np.bool_)
        else:
            none = self.present_hi[ks, j] == 0  # no value can be selected
            shut = shut | none
            null = self.may_be_null[ks, j] | shut
            if func == "min":
                lo, hi = self.min_lo[ks, j], self.min_hi[ks, j]
            elif func == "max":
                lo, hi = self.max_lo[ks, j], self.max_hi[ks, j]
            else:
                lo, lo_den, hi, hi_den = self.avg[:, ks, j]
                dens = lo_den.tolist(), hi_den.tolist()
        lows, highs = ([None if s else v for v, s in zip(end.tolist(), shut.tolist())] for end in (lo, hi))
        if dens is not None:  # a denominator 0: no such average
            lows, highs = ([None if d == 0 else v for v, d in zip(end, den)] for end, den in zip((lows, highs), dens))
        return lows, None if dens is None else dens[0], highs, None if dens is None else dens[1], null.tolist()


def intervals(aggs: AggArrays, dlo: np.ndarray, dhi: np.ndarray, unread: Unread, columns: list[int],
              box: np.ndarray, exact: AggArrays, width: int = 1) -> Intervals:
    """The bounds of each point, given the tree's aggregates `aggs` and data bounds
    dlo/dhi (rows of the tree, dimensions), the unread leaves, the wanted columns, the
    query's box (ndim x 2, stored values), the exact part per point `exact` (the windows
    of what was answered from aggregates or read: one row per point, the wanted columns)
    and the window width in buckets (1: plain buckets or a plain query)."""
    points, k = len(exact), len(columns)
    cols = np.asarray(columns, np.int64)
    out = Intervals(*(np.zeros(points, np.int64) for _ in range(2)),
                    *(np.zeros((points, k), np.int64) for _ in range(8)), np.zeros((4, points, k), np.int64),
                    np.zeros((points, k), np.bool_), np.zeros(points, np.bool_), np.zeros(points, np.int64))
    exact_sums = exact.hi * 2**32 + exact.lo  # int64: exact parts hold realistic sums
    leaves = unread.leaves
    held = aggs.present[leaves][:, cols] > 0
    span = max(int(np.abs(np.where(held, aggs.mins[leaves][:, cols], 0)).max(initial=0)),
               int(np.abs(np.where(held, aggs.maxs[leaves][:, cols], 0)).max(initial=0)),
               int(np.abs(np.where(exact.present > 0, exact.mins, 0)).max(initial=0)),
               int(np.abs(np.where(exact.present > 0, exact.maxs, 0)).max(initial=0)))
    rows = int(aggs.count[leaves].sum()) + int(exact.count.sum()) + 1
    if span * rows >= SAFE or (np.abs(exact.hi) >= 2**29).any():
        out.open[:] = True
        out.touched[:] = 1
        return out
    _bounds(_Tree(aggs.count, aggs.present, aggs.mins, aggs.maxs, aggs.hi, aggs.lo, dlo, dhi),
            _Unread(leaves, unread.edge, unread.first, unread.last), _Asked(cols, box[:, 0], box[:, 1], width),
            _Exact(exact.count, exact.present, exact.mins, exact.maxs, exact_sums),
            _Out(out.count_lo, out.count_hi, out.present_lo, out.present_hi, out.sum_lo, out.sum_hi,
                 out.min_lo, out.min_hi, out.max_lo, out.max_hi, out.may_be_null, out.touched, out.avg))
    return out


class _Tree(NamedTuple):
    """The tree's aggregates (rows of the tree, columns) and data bounds (dimensions)."""

    count: np.ndarray
    present: np.ndarray
    mins: np.ndarray
    maxs: np.ndarray
    hi: np.ndarray
    lo: np.ndarray
    dlo: np.ndarray
    dhi: np.ndarray


class _Unread(NamedTuple):
    """Unread's arrays, as the compiled code takes them."""

    leaves: np.ndarray
    edge: np.ndarray
    first: np.ndarray
    last: np.ndarray


class _Asked(NamedTuple):
    """The wanted columns, the query's box (lo, hi per dimension) and the window width."""

    cols: np.ndarray
    qlo: np.ndarray
    qhi: np.ndarray
    width: int


class _Exact(NamedTuple):
    """The exact part per point: count, and per wanted column present, min, max, sum."""

    count: np.ndarray
    present: np.ndarray
    mins: np.ndarray
    maxs: np.ndarray
    sums: np.ndarray


class _Out(NamedTuple):
    """Intervals' arrays that _bounds fills."""

    count_lo: np.ndarray
    count_hi: np.ndarray
    present_lo: np.ndarray
    present_hi: np.ndarray
    sum_lo: np.ndarray
    sum_hi: np.ndarray
    min_lo: np.ndarray
    min_hi: np.ndarray
    max_lo: np.ndarray
    max_hi: np.ndarray
    may_be_null: np.ndarray
    touched: np.ndarray
    avg: np.ndarray


@numba.njit(cache=True, nogil=True)
def _sum_range(p, s, a, b, m, big):
    """(least, greatest) sum of the values kept of a leaf's p values (sum s, range
    [m, big]) when those kept lie in [a, b]: see the module docstring."""
    lo, hi = 0, 0  # keeping none
    if p == 0:
        return lo, hi
    # Least: g(t) = max(t a, s - (p - t) big), convex; its lines cross at t = (p big - s) / (big - a).
    # (Candidates as a tuple, not a list: a list is a heap allocation per leaf and column.)
    t = (p * big - s) // (big - a) if big > a else 1
    for c in (1, p, t, t + 1):
        if 1 <= c <= p:
            lo = min(lo, max(c * a, s - (p - c) * big))
    # Greatest: h(t) = min(t b, s - (p - t) m), concave; crossing at t = (s - p m) / (b - m).
    t = (s - p * m) // (b - m) if b > m else 1
    for c in (1, p, t, t + 1):
        if 1 <= c <= p:
            hi = max(hi, min(c * b, s - (p - c) * m))
    return lo, hi


@numba.njit(cache=True, nogil=True)
def _bounds(tree, unread, asked, exact, out):
    """Fills `out` (_Out) with the bounds of each point from the tree's aggregates and
    data bounds (_Tree), the unread leaves (_Unread), what was asked (_Asked) and the
    exact part (_Exact): see intervals."""
    count, present, mins, maxs, hi, lo, dlo, dhi = tree
    leaves, edge, first, last = unread
    cols, qlo, qhi, width = asked
    e_count, e_present, e_mins, e_maxs, e_sums = exact
    (count_lo, count_hi, present_lo, present_hi, sum_lo, sum_hi, min_lo, min_hi, max_lo, max_hi, may_be_null,
     touched, avg) = out
    points, k, ndim = e_count.shape[0], cols.shape[0], qlo.shape[0]
    # Start from the exact part.
    sure = np.zeros((points, k), np.bool_)  # a value is sure to be selected
    any_lo = np.full((points, k), INT64_MAX, np.int64)  # least a of any leaf that may add a value
    any_hi = np.full((points, k), NULL, np.int64)  # greatest b of any such leaf
    sure_min = np.full((points, k), INT64_MAX, np.int64)  # least b of leaves sure to add a value
    sure_max = np.full((points, k), NULL, np.int64)  # greatest a of those
    for pt in range(points):
        count_lo[pt] = count_hi[pt] = e_count[pt]
        for j in range(k):
            present_lo[pt, j] = present_hi[pt, j] = e_present[pt, j]
            sum_lo[pt, j] = sum_hi[pt, j] = e_sums[pt, j]
            if e_present[pt, j] > 0:
                sure[pt, j] = True
                sure_min[pt, j], sure_max[pt, j] = e_mins[pt, j], e_maxs[pt, j]
    # Per leaf and wanted column, once: values present, the range [a, b] kept values lie
    # in, and the least and greatest sum of them.
    nl = leaves.shape[0]
    lp, la, lb = np.zeros((nl, k), np.int64), np.zeros((nl, k), np.int64), np.zeros((nl, k), np.int64)
    lsl, lsh = np.zeros((nl, k), np.int64), np.zeros((nl, k), np.int64)
    for i in range(nl):
        r = leaves[i]
        for j in range(k):
            col = cols[j]
            pj = present[r, col]
            if pj == 0:
                continue
            m, big = mins[r, col], maxs[r, col]
            a, b = m, big
            if col < ndim:
                a, b = max(a, qlo[col]), min(b, qhi[col])
            lp[i, j], la[i, j], lb[i, j] = pj, a, b
            lsl[i, j], lsh[i, j] = _sum_range(pj, hi[r, col] * 2**32 + lo[r, col], a, b, m, big)
    for i in range(nl):
        r = leaves[i]
        c = count[r]
        # Rows sure to be selected: the leaf's floor (module docstring).
        floor = 0
        if not edge[i]:
            cut, at = 0, -1
            for d in range(ndim):
                if dlo[r, d] < qlo[d] or dhi[r, d] > qhi[d]:
                    cut += 1
                    at = d
            if cut == 0:
                floor = c
            elif cut == 1:
                floor = (qlo[at] <= dlo[r, at]) + (dhi[r, at] <= qhi[at])
        p0, p1 = max(0, first[i] - width + 1), min(points - 1, last[i])
        for pt in range(p0, p1 + 1):
            whole = pt <= first[i] and last[i] <= pt + width - 1  # every bucket of the leaf in this window
            f = floor if whole else 0
            count_lo[pt] += f
            count_hi[pt] += c
            touched[pt] += 1
            for j in range(k):
                pj = lp[i, j]
                if pj == 0:
                    continue
                a, b = la[i, j], lb[i, j]
                sure_values = max(0, f - (c - pj))
                present_lo[pt, j] += sure_values
                present_hi[pt, j] += pj
                sum_lo[pt, j] += lsl[i, j]
                sum_hi[pt, j] += lsh[i, j]
                any_lo[pt, j] = min(any_lo[pt, j], a)
                any_hi[pt, j] = max(any_hi[pt, j], b)
                if sure_values > 0:
                    sure[pt, j] = True
                    sure_min[pt, j] = min(sure_min[pt, j], b)
                    sure_max[pt, j] = max(sure_max[pt, j], a)
    for pt in range(points):
        for j in range(k):
            has = e_present[pt, j] > 0
            may_be_null[pt, j] = not sure[pt, j]
            min_lo[pt, j] = min(any_lo[pt, j], e_mins[pt, j] if has else INT64_MAX)
            max_hi[pt, j] = max(any_hi[pt, j], e_maxs[pt, j] if has else NULL)
            # With a value sure to be selected, the min is at most the least such value;
            # else (when there is one at all) at most the greatest any leaf may add.
            min_hi[pt, j] = sure_min[pt, j] if sure[pt, j] else any_hi[pt, j]
            max_lo[pt, j] = sure_max[pt, j] if sure[pt, j] else any_lo[pt, j]
    _averages(lp, la, lb, first, last, width, touched, e_present, e_sums, any_lo, any_hi, avg)


@numba.njit(cache=True, nogil=True)
def _averages(lp, la, lb, first, last, width, touched, e_present, e_sums, any_lo, any_hi, avg):
    """avg[0..1]: the least average (numerator, denominator), avg[2..3] the greatest, per
    point and column (den 0: no value possible), from the unread leaves' values present
    lp and ranges la..lb (leaf x column)."""
    points, k = e_present.shape[0], lp.shape[1]
    # Each point's leaves: positions into the leaves, grouped by point.
    start = np.zeros(points + 1, np.int64)
    start[1:] = np.cumsum(touched)
    at = start[:-1].copy()
    member = np.empty(start[points], np.int64)
    for i in range(lp.shape[0]):
        for pt in range(max(0, first[i] - width + 1), min(points - 1, last[i]) + 1):
            member[at[pt]] = i
            at[pt] += 1
    for pt in range(points):
        mine = member[start[pt]:start[pt + 1]]
        for j in range(k):
            n, s = e_present[pt, j], e_sums[pt, j]
            if mine.shape[0] == 0:  # exact
                if n > 0:
                    avg[0, pt, j], avg[1, pt, j], avg[2, pt, j], avg[3, pt, j] = s, n, s, n
                continue
            if n == 0:  # no exact values: any one value may stand alone
                if any_hi[pt, j] != NULL:
                    avg[0, pt, j], avg[1, pt, j] = any_lo[pt, j], 1
                    avg[2, pt, j], avg[3, pt, j] = any_hi[pt, j], 1
                continue
            ln, ls = n, s  # least: add blocks at a, lowest first, while a < ls / ln
            for q in mine[np.argsort(la[mine, j])]:
                if lp[q, j] == 0:
                    continue
                if la[q, j] * ln >= ls:
                    break
                ls += la[q, j] * lp[q, j]
                ln += lp[q, j]
            gn, gs = n, s  # greatest: blocks at b, highest first, while b > gs / gn
            for q in mine[np.argsort(-lb[mine, j])]:
                if lp[q, j] == 0:
                    continue
                if lb[q, j] * gn <= gs:
                    break
                gs += lb[q, j] * lp[q, j]
                gn += lp[q, j]
            avg[0, pt, j], avg[1, pt, j], avg[2, pt, j], avg[3, pt, j] = ls, ln, gs, gn
