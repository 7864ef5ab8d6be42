"""The planner's walk down the tree (pure logic, no servers): on random trees, boxes,
polygons and time buckets it settles every leaf the query touches exactly once, reuses
only grids wholly selected within one bucket, and drops only grids wholly outside."""

from __future__ import annotations

import numpy as np
import shapely
from hypothesis import given, settings
from hypothesis import strategies as st
from shapely.geometry import box as shapely_box

from gridagg.model.aggregate import AggArrays
from gridagg.model.schema import Dataset
from gridagg.query.regions import EPSILON
from gridagg.query.walk import CUT, EDGE, SPANNING, WalkQuery, WalkResult, _walk
from gridagg.tree import TreeState, WalkTree

DS = Dataset.from_json({"name": "walk", "dimensions": [
    {"name": "t", "min": 0, "max": 999}, {"name": "lon", "scale": 1, "min": -50, "max": 50},
    {"name": "lat", "scale": 1, "min": -50, "max": 50}]})
DOMAIN = DS.domain()


@st.composite
def trees(draw):
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    leaves = {"0": [list(b) for b in DOMAIN]}
    for _ in range(draw(st.integers(0, 60))):
        g = sorted(leaves)[int(rng.integers(0, len(leaves)))]
        box = leaves[g]
        axis = int(rng.integers(0, 3))
        lo, hi = box[axis]
        if lo == hi:
            continue
        cut = int(rng.integers(lo, hi))
        del leaves[g]
        low, high = [list(b) for b in box], [list(b) for b in box]
        low[axis], high[axis] = [lo, cut], [cut + 1, hi]
        leaves[g + "0"], leaves[g + "1"] = low, high
    rows = [(g, 0, *[v for b in box for v in b]) for g, box in leaves.items()]
    return TreeState.build(DS, 1, None, rows, NoAggregates()), leaves


class NoAggregates:
    """The walk is tested over split boxes: no aggregates needed."""

    reads_by_key = False

    def get_aggregate_arrays(self, ds, grid_ids):
        return AggArrays.empty(len(grid_ids), len(ds.columns))


interval = lambda lo, hi: st.tuples(st.integers(lo, hi), st.integers(lo, hi)).map(sorted)  # noqa: E731
boxes = st.tuples(interval(-10, 1010), interval(-520, 520), interval(-520, 520))
polygons = st.lists(st.tuples(st.integers(-60, 60), st.integers(-60, 60)), min_size=3, max_size=7).map(
    lambda pts: shapely.convex_hull(shapely.MultiPoint(pts)))


def face(b):
    return shapely_box(b[1][0] / 10, b[2][0] / 10, b[1][1] / 10, b[2][1] / 10) \
        if b[1][0] < b[1][1] and b[2][0] < b[2][1] else shapely.LineString(
            [(b[1][0] / 10, b[2][0] / 10), (b[1][1] / 10, b[2][1] / 10)])


def inside(b, q):
    return all(ql <= lo and hi <= qh for (lo, hi), (ql, qh) in zip(b, q))


def touches(b, q):
    return all(lo <= qh and ql <= hi for (lo, hi), (ql, qh) in zip(b, q))


@settings(max_examples=400, deadline=None)
@given(trees(), boxes, st.one_of(st.none(), polygons), st.one_of(st.none(), st.integers(1, 400)),
       st.one_of(st.just(-1), st.integers(0, 12)))
def test_walk_settles_every_touched_leaf_once(tree_leaves, q, polygon, step, budget):
    """Depth first (budget -1), or best first opening at most `budget` grids: then a grid
    listed to read may stand above leaves, each of them settled through it."""
    tree, leaves = tree_leaves
    if polygon is not None and (polygon.is_empty or polygon.area == 0):
        polygon = None
    edges = np.zeros((0, 4))
    if polygon is not None:
        xy = np.asarray(polygon.exterior.coords, np.float64)
        edges = np.hstack([xy[:-1], xy[1:]])
    n = tree.n
    out = WalkResult(*(np.empty(n, np.int64) for _ in range(4)), np.empty((n, len(q)), np.bool_),
                     np.zeros(3, np.int64), np.zeros(4, np.int64))
    # Every third leaf holds no rows; a grid holds its leaves' rows.
    held = {g: int(k % 3 != 0) for k, g in enumerate(sorted(leaves))}
    rows = np.array([sum(r for g, r in held.items() if g.startswith(tree.ids[i])) for i in range(n)], np.int64)
    base = q[0][0]
    # The data bounds are the split boxes here.
    walked = WalkTree(tree.lo, tree.hi, tree.lo, tree.hi, tree.left, tree.right, tree.leaves_below, rows, tree.root)
    query = WalkQuery(np.array([a for a, _ in q]), np.array([b for _, b in q]), edges, 1, 2, 10.0, 10.0, EPSILON,
                      0 if step else -1, base, step or 1)
    nr, ns = _walk(walked, query, out, budget)
    reused, rb, scan, kind, tested, _, tally = out
    assert tally[0] == tree.leaves_below[reused[:nr]].sum()
    bucket = (lambda v: (v - base) // step) if step else (lambda v: 0)
    settled = {}
    for i, b in zip(reused[:nr].tolist(), rb[:nr].tolist()):
        g = tree.ids[i]
        box = tuple(zip(tree.lo[i], tree.hi[i]))
        assert inside(box, q)
        assert polygon is None or polygon.covers(face(box))
        assert bucket(box[0][0]) == bucket(box[0][1]) == b
        for leaf in leaves:
            if leaf.startswith(g):
                assert leaf not in settled
                settled[leaf] = "reused"
    for i, k, t in zip(scan[:ns].tolist(), kind[:ns].tolist(), tested[:ns].tolist()):
        g = tree.ids[i]
        assert (g in leaves or budget >= 0) and rows[i] > 0
        box = tuple(zip(tree.lo[i], tree.hi[i]))
        assert touches(box, q)
        assert t == [not (ql <= lo and hi <= qh) for (lo, hi), (ql, qh) in zip(box, q)]
        if k == SPANNING:
            assert inside(box, q) and bucket(box[0][0]) != bucket(box[0][1])
            assert polygon is None or polygon.covers(face(box))
        elif k == CUT:
            assert polygon is None or polygon.covers(face(box))
            assert not inside(box, q)
        else:
            assert k == EDGE and polygon is not None
        for leaf in leaves:
            if leaf.startswith(g):
                assert leaf not in settled
                settled[leaf] = "scan"
    empty = 0  # leaves reached to read that hold no rows: counted, not read
    for g, box in leaves.items():
        box = tuple(map(tuple, box))
        wanted = touches(box, q) and (polygon is None or polygon.intersects(face(box)))
        if wanted and g not in settled and rows[tree.index[g]] == 0:
            empty += 1
        elif wanted:
            assert g in settled, g
        elif g in settled:  # conservative: on the polygon's edge by the compiled test, or under a cut grid
            assert settled[g] == "scan" and (polygon is not None or budget >= 0)
    # Conservative leaves are reached too, empty or not: only a polygon (or a budget) makes them.
    reached = int(tally[1:].sum())
    assert reached >= ns + empty and (polygon is not None or budget >= 0 or reached == ns + empty)


@settings(max_examples=200, deadline=None)
@given(trees())
def test_a_built_tree_holds_every_ancestor_of_its_leaves_in_preorder_and_no_other_grid(tree_leaves):
    tree, leaves = tree_leaves
    assert tree.ids == sorted({g[:k] for g in leaves for k in range(1, len(g) + 1)})  # sorted IDs: preorder
    for i, g in enumerate(tree.ids):
        assert (tree.left[i] == -1) == (g in leaves)
        if tree.left[i] != -1:
            assert (tree.ids[tree.left[i]], tree.ids[tree.right[i]]) == (g + "0", g + "1")


def test_a_deep_tree_s_grids_are_their_childrens_hull():
    # Time split again and again at its newest end: the rightmost path 60 levels deep,
    # its heap indices past what a double holds exactly.
    (t_lo, t_hi), *space = DOMAIN
    leaves = {"0" + "1" * k + "0": [(t_lo + k, t_lo + k), *space] for k in range(60)}
    leaves["0" + "1" * 60] = [(t_lo + 60, t_hi), *space]
    box_of = lambda i: [tuple(map(int, b)) for b in zip(tree.lo[i], tree.hi[i])]  # noqa: E731
    rows = [(g, 0, *[v for b in box for v in b]) for g, box in leaves.items()]
    tree = TreeState.build(DS, 1, None, rows, NoAggregates())
    for i, g in enumerate(tree.ids):
        if g in leaves:
            assert box_of(i) == leaves[g]
        else:
            kids = [tree.left[i], tree.right[i]]
            assert (tree.lo[i] == tree.lo[kids].min(axis=0)).all() and (tree.hi[i] == tree.hi[kids].max(axis=0)).all()
    assert box_of(tree.root) == list(DOMAIN)
