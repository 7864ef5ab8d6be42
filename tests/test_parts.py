"""Cutting a scan into parts (gridagg.parts): pure logic, and the merge of parts' answers."""

from __future__ import annotations

import numpy as np
from hypothesis import given, strategies as st

from gridagg import parts


@given(st.lists(st.integers(0, 500_000), max_size=40), st.integers(1, 8))
def test_parts_cover_every_grid_once_in_order_and_share_the_rows(rows, threads):
    cut = parts.cut(rows, threads)
    assert cut[0][0] == 0 and cut[-1][1] == len(rows)
    assert all(a < b or len(rows) == 0 for a, b in cut)
    assert all(b == c for (_, b), (c, _) in zip(cut, cut[1:]))
    total = sum(rows)
    n = max(1, min(threads, total // parts.PARALLEL_ROWS))
    assert len(cut) <= n
    if n > 1:  # a part holds about its share: at most one grid more
        assert all(sum(rows[a:b]) <= total / n + max(rows) for a, b in cut)


def test_answers_of_parts_merge_with_their_rows_keyed_in_the_whole_request():
    from gridagg.aggregate import AggArrays
    from gridagg.scan import ScanAnswer

    def answer(g0: int, g1: int) -> ScanAnswer:
        out = ScanAnswer(AggArrays.empty(1, 1), rows={0: np.array([[g0]])}, rows_visited=g1 - g0)
        out.aggs.count[0] = g1 - g0
        return out

    merged = parts.answer_in_parts([(0, 3), (3, 5), (5, 9)], answer, 3)
    assert (int(merged.aggs.count[0]), merged.rows_visited) == (9, 9)
    assert {g: int(r[0, 0]) for g, r in merged.rows.items()} == {0: 0, 3: 3, 5: 5}
