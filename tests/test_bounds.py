"""Bounds from the tree (gridagg.query.bounds), pure logic: on random rows, leaves, boxes and
series, with any leaves left unread, every bound contains the brute-force answer, and a
point no unread leaf touches is exact."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from gridagg.model.aggregate import NULL, AggArrays
from gridagg.query.bounds import Unread, _sum_range, intervals

NDIM, NCOLS = 2, 4  # dimensions t and x, measures u (never null) and v (nullable)


def brute(rows: np.ndarray, func: str, col: int | None):
    if func == "count":
        return len(rows) if col is None else int((rows[:, col] != NULL).sum())
    vals = [int(v) for v in rows[:, col] if v != NULL]
    if func == "sum":
        return sum(vals)
    if not vals:
        return None
    return {"min": min(vals), "max": max(vals), "avg": Fraction(sum(vals), len(vals))}[func]


@st.composite
def cases(draw):
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    n = draw(st.integers(0, 300))
    rows = np.stack([rng.integers(0, 100, n), rng.integers(-50, 50, n), rng.integers(-1000, 1000, n),
                     np.where(rng.random(n) < 0.3, NULL, rng.integers(0, 10**6, n))], axis=1).astype(np.int64)
    # Leaves: cuts of t into ranges, then of x.
    tcuts = sorted(set(rng.integers(1, 100, draw(st.integers(0, 6))).tolist()))
    leaves = []
    for tlo, thi in zip([0, *tcuts], [*(c - 1 for c in tcuts), 99]):
        xcut = int(rng.integers(-49, 50))
        leaves += [((tlo, thi), (-50, xcut - 1)), ((tlo, thi), (xcut, 49))]
    qt = sorted(rng.integers(0, 100, 2).tolist())
    qx = sorted(rng.integers(-50, 50, 2).tolist())
    step = draw(st.sampled_from([None, 7, 25]))
    width = draw(st.sampled_from([1, 3])) if step else 1
    unread_share = draw(st.floats(0, 1))
    return rows, leaves, (qt, qx), step, width, rng.random(len(leaves)) < unread_share


def inside(rows, box):
    return np.all([(rows[:, d] >= lo) & (rows[:, d] <= hi) for d, (lo, hi) in enumerate(box)], axis=0) \
        if len(rows) else np.zeros(0, bool)


@settings(max_examples=300, deadline=None)
@given(cases())
def test_every_bound_contains_the_brute_force_answer(case):
    rows, leaves, box, step, width, unread_mask = case
    cols = [0, 1, 2, 3]
    base = box[0][0]
    nbuckets = 1 if step is None else (box[0][1] - base) // step + 1
    points = nbuckets - width + 1
    if points < 1:
        return
    bucket = (lambda v: 0) if step is None else (lambda v: (v - base) // step)
    # Per leaf: its aggregate over all its rows; data bounds.
    members = [inside(rows, leaf) for leaf in leaves]
    aggs = AggArrays.empty(len(leaves), NCOLS)
    dlo = np.zeros((len(leaves), NDIM), np.int64)
    dhi = np.zeros((len(leaves), NDIM), np.int64)
    for i, m in enumerate(members):
        aggs.add_into(np.array([i]), AggArrays.of_rows(rows[m], NCOLS))
        dlo[i] = rows[m][:, :NDIM].min(axis=0) if m.any() else 1
        dhi[i] = rows[m][:, :NDIM].max(axis=0) if m.any() else 0
    selected = inside(rows, box)
    exact_buckets = AggArrays.empty(nbuckets, len(cols))
    unread, first, last = [], [], []
    for i, m in enumerate(members):
        if not m.any() or dlo[i][0] > box[0][1] or dhi[i][0] < box[0][0] or dlo[i][1] > box[1][1] \
                or dhi[i][1] < box[1][0]:
            continue  # the walk drops a leaf whose rows lie outside
        if unread_mask[i]:
            unread.append(i)
            first.append(bucket(max(dlo[i][0], box[0][0])))
            last.append(bucket(min(dhi[i][0], box[0][1])))
            continue
        got = rows[m & selected]
        for b in range(nbuckets):
            in_b = got[[bucket(v) == b for v in got[:, 0]]] if len(got) else got
            exact_buckets.add_into(np.array([b]), AggArrays.of_rows(in_b, NCOLS))
    windows = AggArrays.empty(points, len(cols))
    for pt in range(points):
        windows.add_into(np.full(width, pt), exact_buckets, rows=np.arange(pt, pt + width))
    got = intervals(aggs, dlo, dhi, Unread(np.array(unread, np.int64), np.zeros(len(unread), bool),
                                           np.array(first, np.int64), np.array(last, np.int64)),
                    cols, np.array(box, np.int64), windows, width)
    for pt in range(points):
        in_window = selected & np.array([pt <= bucket(v) < pt + width for v in rows[:, 0]], bool) \
            if len(rows) else selected
        chosen = rows[in_window]
        touched = any(first[q] - width + 1 <= pt <= last[q] for q in range(len(unread)))
        for func, col in [("count", None), *((f, j) for f in ("count", "sum", "min", "max", "avg") for j in cols)]:
            want = brute(chosen, func, col)
            lo, hi, null = got.of(func, pt, col)
            if want is None:
                assert null, (func, col, pt)
                continue
            assert lo is None or lo <= want, (func, col, pt, lo, want)
            assert hi is None or want <= hi, (func, col, pt, hi, want)
            if not touched:
                assert lo == hi == want, (func, col, pt, lo, hi, want)


@settings(max_examples=500, deadline=None)
@given(st.lists(st.integers(-20, 20), min_size=1, max_size=12), st.data())
def test_a_leafs_kept_sum_lies_in_its_range(values, data):
    """Every subset of a leaf's values whose members lie in [a, b] sums within _sum_range."""
    m, big = min(values), max(values)
    a = data.draw(st.integers(m, big))
    b = data.draw(st.integers(a, big))
    keep = data.draw(st.lists(st.booleans(), min_size=len(values), max_size=len(values)))
    kept = [v for v, k in zip(values, keep) if k and a <= v <= b]
    lo, hi = _sum_range(len(values), sum(values), a, b, m, big)
    assert lo <= sum(kept) <= hi
