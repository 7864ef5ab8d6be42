"""Algorithm 2 on arrays (gridagg.split), pure logic: random rows split into leaves that
partition them, each within its box, none over N_size unless all its rows are one
point, and every aggregate (leaves and grids between) equal to its rows'."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings, strategies as st

from gridagg.aggregate import PartialAggregate
from gridagg.grid import Grid
from gridagg.split import split_rows


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 3), st.integers(0, 300), st.integers(1, 20), st.integers(0, 40))
def test_split_rows_partitions_the_rows(seed, ndim, n, n_size, spread):
    rng = np.random.default_rng(seed)
    values = rng.integers(0, spread + 1, (n, ndim + 1)).astype(np.int64)
    grid = Grid("0", tuple((0, spread) for _ in range(ndim)), 0)
    agg = PartialAggregate.of_rows(values, ndim + 1)
    done = split_rows(grid, values, agg, n_size, n_size, ndim)
    seen = np.concatenate([ix for _, ix, _ in done.leaves]) if done.leaves else np.zeros(0, int)
    assert sorted(seen.tolist()) == list(range(n))
    assert [g.grid_id for g, _, _ in done.leaves] == sorted(g.grid_id for g, _, _ in done.leaves)
    by_id = {}
    for leaf, ix, a in done.leaves:
        rows = values[ix]
        assert a == PartialAggregate.of_rows(rows, ndim + 1)
        for d, (lo, hi) in enumerate(leaf.box):
            assert ((rows[:, d] >= lo) & (rows[:, d] <= hi)).all()
        if len(rows) > n_size:
            assert (rows[:, :ndim] == rows[0, :ndim]).all()
        by_id[leaf.grid_id] = rows
    for g, a in done.inner.items():
        rows = np.concatenate([r for leaf, r in by_id.items() if leaf.startswith(g)])
        assert a == PartialAggregate.of_rows(rows, ndim + 1)
    assert done.splits == len(done.inner) + (1 if len(done.leaves) > 1 else 0)
