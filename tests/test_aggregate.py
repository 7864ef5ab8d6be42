"""PartialAggregate as the stores keep it (pack() and unpack() lose nothing), and the
ancestors' aggregates merged up from the leaves."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

import numpy as np

from gridagg.aggregate import PartialAggregate, ancestor_aggregates
from gridagg.grid import ROOT, ancestors

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
