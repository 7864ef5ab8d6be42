"""The soak's oracle (loadtest/soak/oracle.py, pure): its answers equal the tests' own
oracle's (tests/oracle.py), two readings of the same request made apart, and its bounds
on an answer given while rows were written hold what the soak's checker needs."""

from __future__ import annotations

import numpy as np
import oracle as tests_oracle
import pytest
from gridagg_loadtest.soak import oracle
from gridagg_loadtest.soak.clients import AGGS, definition_json
from hypothesis import given
from hypothesis import strategies as st

DEFINITION = definition_json("soak")
COLUMNS = oracle.Columns(DEFINITION)

rows_st = st.lists(st.tuples(st.integers(0, 9999), st.integers(0, 9999), st.integers(0, 1000)), max_size=40)
end_st = st.one_of(st.none(), st.integers(-5, 10005), st.floats(-5, 10005, allow_nan=False), st.just("17.5"))


@st.composite
def where_st(draw):
    where = {}
    for dim in draw(st.sets(st.sampled_from(["x", "y"]))):
        lo, hi = draw(end_st), draw(end_st)
        if lo is not None and hi is not None and float(lo) > float(hi):
            lo, hi = hi, lo
        where[dim] = [lo, hi]
    return where


@given(rows_st, where_st(), st.lists(st.sampled_from(AGGS), min_size=1, max_size=4, unique=True))
def test_the_soaks_oracle_answers_as_the_tests_oracle(rows, where, aggs):
    array = np.array(rows, dtype=np.int64).reshape(-1, 3)
    table = tests_oracle.Table.of(DEFINITION)
    want = tests_oracle.query(table, table.rows([dict(zip("xyv", r)) for r in rows]),
                              {"where": where, "aggregates": aggs})
    assert oracle.answer(COLUMNS, array, where, aggs) == want["results"]


def test_bounds_are_inclusive_and_read_as_written():
    rows = np.array([[10, 0, 5], [11, 0, 7], [12, 0, 9]])
    assert oracle.answer(COLUMNS, rows, {"x": [10, 11]}, ["count"]) == {"count": 2}
    assert oracle.answer(COLUMNS, rows, {"x": [10.5, None]}, ["count", "min:v"]) == {"count": 2, "min:v": 7}
    assert oracle.answer(COLUMNS, rows, {"x": ["11", "11.9"]}, ["sum:v", "max:v"]) == {"sum:v": 7, "max:v": 7}
    assert oracle.answer(COLUMNS, rows, {"y": [1, 5]}, ["sum:v", "min:v"]) == {"sum:v": 0, "min:v": None}


def test_an_answer_within_the_rows_surely_in_and_perhaps_in():
    labels = ["count", *AGGS]
    rows = np.array([[1, 1, 5], [2, 2, 3], [3, 3, 8]])
    surely, perhaps = np.array([True, False, False]), np.array([True, True, True])
    held = oracle.bounds(COLUMNS, rows, rows, surely, perhaps, labels)
    for good in ({"count": 1, "sum:v": 5, "min:v": 5, "max:v": 5}, {"count": 3, "sum:v": 16, "min:v": 3, "max:v": 8}):
        assert all(oracle.holds(v, held[k]) for k, v in good.items()), good
    for label, bad in (("count", 0), ("count", 4), ("sum:v", 4), ("sum:v", 17), ("min:v", 2), ("min:v", 6),
                       ("max:v", 4), ("max:v", 9), ("min:v", None)):
        assert not oracle.holds(bad, held[label]), (label, bad)
    nothing = np.zeros(3, bool)
    assert oracle.holds(None, oracle.bounds(COLUMNS, rows, rows, nothing, perhaps, labels)["min:v"])
    assert not oracle.holds(1, oracle.bounds(COLUMNS, rows, rows, nothing, nothing, labels)["max:v"])


def test_a_corrected_row_counts_with_any_value_it_may_have_had():
    """Row 0 was corrected from 5 to 9 while the question ran: either value may count."""
    low, high = np.array([[1, 1, 5], [2, 2, 3]]), np.array([[1, 1, 9], [2, 2, 3]])
    both = np.array([True, True])
    held = oracle.bounds(COLUMNS, low, high, both, both, ["count", *AGGS])
    for value in (5, 9):
        assert all(oracle.holds(v, held[k]) for k, v in {"count": 2, "sum:v": 3 + value, "min:v": 3,
                                                          "max:v": value}.items())
    assert not oracle.holds(7, held["sum:v"]) and not oracle.holds(13, held["sum:v"])
    assert not oracle.holds(4, held["max:v"]) and not oracle.holds(10, held["max:v"])


def test_it_reads_whole_number_columns_only():
    with pytest.raises(ValueError, match="whole-number columns only"):
        oracle.Columns({"dimensions": [{"name": "t", "type": "time"}]})
    with pytest.raises(ValueError, match="count, sum, min and max"):
        oracle.answer(COLUMNS, np.zeros((1, 3), np.int64), None, ["avg:v"])
