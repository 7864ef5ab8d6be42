"""PartialAggregate as the stores keep it: pack() and unpack() lose nothing."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from gridagg.aggregate import PartialAggregate

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
