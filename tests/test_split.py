"""Algorithm 2 on arrays (gridagg.write.split), pure logic, checked against its definition:
the leaves tile the grid and hold every row once, inside their boxes; every cut is the
floor of the mean of the rows on the first axis (from the grid's next one) whose values
differ; a leaf holds at most N_size rows unless its rows are all equal; every aggregate
equals its rows' own. Given cuts (the tuner's, at the questions' bounds), every leaf lies
on one side of each cut, and no grid is cut where its rows would not part."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from gridagg.model.aggregate import NULL, PartialAggregate
from gridagg.model.grid import Grid
from gridagg.write.split import split_rows


@st.composite
def grids_of_rows(draw):
    ndim = draw(st.integers(1, 3))
    ncols = ndim + draw(st.integers(0, 2))
    m = draw(st.integers(1, 400))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    spread = draw(st.sampled_from([1, 3, 1000, 2**40]))
    values = rng.integers(-spread, spread + 1, (m, ncols))
    if ncols > ndim and draw(st.booleans()):
        values[rng.random(m) < 0.3, ndim] = NULL  # a nullable measure
    box = tuple((int(values[:, d].min()) - draw(st.integers(0, 5)), int(values[:, d].max()) + 1)
                for d in range(ndim))
    grid = Grid("0" + draw(st.sampled_from(["", "1", "01"])), box, draw(st.integers(0, ndim - 1)))
    n_size = draw(st.integers(1, 60))
    return grid, values, ndim, n_size, draw(st.sampled_from([n_size, 4 * n_size]))


def inside(box, row) -> bool:
    return all(lo <= v <= hi for (lo, hi), v in zip(box, row))


@settings(max_examples=150, deadline=None)
@given(grids_of_rows())
def test_split_rows_follows_algorithm_2(case):
    grid, values, ndim, n_size, limit = case
    ncols = values.shape[1]
    done = split_rows(grid, values, PartialAggregate.of_rows(values, ncols), limit, n_size, ndim)
    seen = np.concatenate([ix for _, ix, _ in done.leaves])
    assert sorted(seen.tolist()) == list(range(len(values)))
    assert [leaf.grid_id for leaf, _, _ in done.leaves] == sorted(leaf.grid_id for leaf, _, _ in done.leaves)
    start = 0
    for leaf, ix, agg in done.leaves:
        rows = values[ix]
        assert (done.rows[start:start + len(ix)] == rows).all()  # the rows in the leaves' order
        start += len(ix)
        assert all(inside(leaf.box, r[:ndim]) for r in rows)
        assert agg == PartialAggregate.of_rows(rows, ncols)
        if done.splits:
            assert len(rows) <= n_size or (rows[:, :ndim] == rows[0, :ndim]).all()
    if not done.splits:
        assert len(done.leaves) == 1 and done.leaves[0][0] == grid and not done.inner
        assert len(values) <= limit or (values[:, :ndim] == values[0, :ndim]).all()
        return
    assert done.splits == len(done.inner) + 1
    # Every grid made on the way: its aggregate, and its cut where the mean says.
    made = {leaf.grid_id: leaf for leaf, _, _ in done.leaves}
    assert set(done.inner) | set(made) >= {grid.grid_id + "0", grid.grid_id + "1"}
    for gid, agg in [*done.inner.items(), (grid.grid_id, None)]:
        rows = values[[i for leaf, ix, _ in done.leaves if leaf.grid_id.startswith(gid) for i in ix.tolist()]]
        if agg is not None:
            assert agg == PartialAggregate.of_rows(rows, ncols)
        low = [leaf for leaf, _, _ in done.leaves if leaf.grid_id.startswith(gid + "0")]
        high = [leaf for leaf, _, _ in done.leaves if leaf.grid_id.startswith(gid + "1")]
        assert low and high
        hull = lambda leaves: [(min(g.box[a][0] for g in leaves), max(g.box[a][1] for g in leaves))  # noqa: E731
                               for a in range(ndim)]
        (lo_hull, hi_hull) = hull(low), hull(high)
        axis = next(a for a in range(ndim) if lo_hull[a] != hi_hull[a])
        cut = lo_hull[axis][1]
        assert hi_hull[axis][0] == cut + 1
        assert cut == math.floor(Fraction(int(rows[:, axis].sum()), len(rows)))
        if gid == grid.grid_id:  # axes passed over (from the grid's next one) hold one value each
            order = [(grid.next_axis + k) % ndim for k in range(ndim)]
            assert all(rows[:, a].min() == rows[:, a].max() for a in order[:order.index(axis)])


@settings(max_examples=150, deadline=None)
@given(grids_of_rows(), st.data())
def test_split_rows_at_given_cuts_puts_every_leaf_on_one_side_of_each(case, data):
    grid, values, ndim, _, _ = case
    ncols = values.shape[1]
    cuts = tuple(data.draw(st.lists(st.tuples(st.integers(0, ndim - 1), st.integers(-3, 3)).map(
        lambda c: (c[0], int(np.median(values[:, c[0]])) + c[1])), min_size=1, max_size=6)))
    done = split_rows(grid, values, PartialAggregate.of_rows(values, ncols), 0, 0, ndim, cuts)
    seen = np.concatenate([ix for _, ix, _ in done.leaves])
    assert sorted(seen.tolist()) == list(range(len(values)))
    parts = {tuple(values[:, a] <= at) for a, at in cuts} - {(True,) * len(values), (False,) * len(values)}
    assert (done.splits > 0) == bool(parts)
    start = 0
    for leaf, ix, agg in done.leaves:
        rows = values[ix]
        assert (done.rows[start:start + len(ix)] == rows).all()  # the rows in the leaves' order
        start += len(ix)
        assert all(inside(leaf.box, r[:ndim]) for r in rows)
        assert agg == PartialAggregate.of_rows(rows, ncols)
        for a, at in cuts:
            assert (rows[:, a] <= at).all() or (rows[:, a] > at).all()
    # Each grid cut leaves rows on both sides: no leaf is empty.
    assert all(len(ix) for _, ix, _ in done.leaves)


@settings(max_examples=100, deadline=None)
@given(grids_of_rows())
def test_the_ingest_jobs_tree_locates_every_row_in_its_leaf(case):
    from gridagg_ingest.tree import SplitTree

    grid, values, ndim, n_size, limit = case
    grid = Grid("0", grid.box, grid.next_axis)  # the tree of a dataset starts at its root
    done = split_rows(grid, values, PartialAggregate.of_rows(values, values.shape[1]), limit, n_size, ndim)
    tree = SplitTree([leaf for leaf, _, _ in done.leaves], ndim)
    located = tree.locate(values[:, :ndim])
    for leaf, ix, _ in done.leaves:
        assert all(tree.ids[i] == leaf.grid_id for i in located[ix])
