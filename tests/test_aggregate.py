"""PartialAggregate as the stores keep it (pack() and unpack() lose nothing), the
ancestors' aggregates merged up from the leaves, and AggArrays merging rows of one into
groups of another as PartialAggregate.merge does."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from gridagg.model.aggregate import (
    NULL,
    AggArrays,
    PartialAggregate,
    ancestor_aggregates,
)
from gridagg.model.grid import ROOT, ancestors

INT64 = st.integers(-(2**63), 2**63 - 1)


@st.composite
def aggregates(draw):
    ncols = draw(st.integers(1, 8))
    column = st.lists(INT64, min_size=ncols, max_size=ncols)
    # Sums of many int64 values leave int64: the layout keeps 128 bits of each.
    sums = draw(st.lists(st.integers(-(2**127), 2**127 - 1), min_size=ncols, max_size=ncols))
    return PartialAggregate(draw(st.integers(1, 2**63 - 1)), sums, draw(column), draw(column))


@given(aggregates())
def test_pack_round_trips(agg):
    assert PartialAggregate.unpack(agg.pack(), len(agg.sums)) == agg


def test_empty_aggregate_round_trips():
    assert PartialAggregate.unpack(PartialAggregate.empty(3).pack(), 3) == PartialAggregate.empty(3)


@st.composite
def trees(draw):
    """Leaves of a random tree (grown from the root by splits), each with the aggregate
    of a few random rows of 3 columns, or empty."""
    leaves = [ROOT]
    for _ in range(draw(st.integers(0, 40))):
        g = leaves.pop(draw(st.integers(0, len(leaves) - 1)))
        leaves += [g + "0", g + "1"]
    rows = st.lists(st.lists(st.integers(-(10**6), 10**6), min_size=3, max_size=3), max_size=4)
    return {g: PartialAggregate.of_rows(np.array(draw(rows), dtype=np.int64).reshape(-1, 3), 3) for g in leaves}


@given(trees())
def test_ancestor_aggregates_merge_every_leaf_below(leaves):
    expected = {}
    for g, agg in leaves.items():
        for a in ancestors(g):
            expected.setdefault(a, PartialAggregate.empty(3)).merge(agg)
    assert ancestor_aggregates(leaves, 3) == expected


@settings(deadline=None)  # the first example compiles the merge
@given(st.data())
def test_add_into_merges_chosen_rows_and_columns_into_groups(data):
    ncols = data.draw(st.integers(1, 4))
    value = st.integers(-(2**62), 2**62) | st.just(NULL)
    rows = [np.array(data.draw(st.lists(st.lists(value, min_size=ncols, max_size=ncols), max_size=5)),
                     np.int64).reshape(-1, ncols) for _ in range(data.draw(st.integers(1, 6)))]
    source = AggArrays.of_aggregates([AggArrays.of_rows(r, ncols).aggregate(0) for r in rows], ncols)  # NULL: absent
    picked = data.draw(st.lists(st.integers(0, len(rows) - 1), max_size=8))  # a row may be picked twice
    ngroups = data.draw(st.integers(1, 3))
    groups = data.draw(st.lists(st.integers(0, ngroups - 1), min_size=len(picked), max_size=len(picked)))
    columns = data.draw(st.lists(st.integers(0, ncols - 1), min_size=1, max_size=ncols, unique=True))
    out = AggArrays.empty(ngroups, len(columns))
    merged = out.add_into(np.array(groups, np.int64), source, rows=np.array(picked, np.int64), columns=columns)
    expected = [PartialAggregate.empty(ncols) for _ in range(ngroups)]
    for g, r in zip(groups, picked):
        expected[g].merge(source.aggregate(r))
    assert merged == sum(source.aggregate(r).count for r in picked)
    for g in range(ngroups):
        want = PartialAggregate.empty(ncols)
        want.count = expected[g].count
        for c in columns:
            want.sums[c], want.mins[c] = expected[g].sums[c], expected[g].mins[c]
            want.maxs[c], want.present[c] = expected[g].maxs[c], expected[g].present[c]
        assert out.aggregate(g, columns, ncols) == want

