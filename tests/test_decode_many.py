"""Column.decode_many, which a series' answer decodes its points with, gives what
Column.decode gives value by value: the same numbers (ints stay ints), means of stored
integers as their Fractions decode, None kept."""

from __future__ import annotations

from datetime import datetime, timezone
from fractions import Fraction

from hypothesis import given
from hypothesis import strategies as st

from gridagg.model.schema import Column

STORED = st.one_of(st.none(), st.integers(-(2**62), 2**62))
DENS = st.integers(1, 2**40)


@given(st.integers(0, 6), st.lists(STORED, max_size=20))
def test_stored_values_decode_as_one_by_one(scale, nums):
    col = Column("x", scale=scale)
    got = col.decode_many(nums)
    want = [col.decode(n) for n in nums]
    assert got == want and [type(v) for v in got] == [type(v) for v in want]


@given(st.integers(0, 6), st.lists(st.tuples(STORED, DENS), max_size=20))
def test_means_decode_as_their_fractions(scale, pairs):
    col = Column("x", scale=scale)
    nums, dens = [n for n, _ in pairs], [d for _, d in pairs]
    got = col.decode_many(nums, dens)
    want = [None if n is None else col.decode(Fraction(n, d)) for n, d in pairs]
    assert got == want and [type(v) for v in got] == [type(v) for v in want]


def test_times_decode_as_one_by_one():
    col = Column("t", kind="time", lo=datetime(2000, 1, 1, tzinfo=timezone.utc),
                 hi=datetime(2030, 1, 1, tzinfo=timezone.utc))
    nums, dens = [0, 86_400 * 3 + 1, None], [1, 2, 5]
    assert col.decode_many(nums) == [col.decode(n) for n in nums]
    assert col.decode_many(nums, dens) == [None if n is None else col.decode(Fraction(n, d))
                                           for n, d in zip(nums, dens)]
