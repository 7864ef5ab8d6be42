"""Cutting a scan into parts (gridagg.store.parts): pure logic, and the merge of parts' answers."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from gridagg.store import parts


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
    from gridagg.model.aggregate import AggArrays
    from gridagg.store.scan import ScanAnswer

    def answer(g0: int, g1: int) -> ScanAnswer:
        out = ScanAnswer(AggArrays.empty(1, 1), rows={0: np.array([[g0]])}, rows_visited=g1 - g0)
        out.aggs.count[0] = g1 - g0
        return out

    merged = parts.answer_in_parts([(0, 3), (3, 5), (5, 9)], answer, 3)
    assert (int(merged.aggs.count[0]), merged.rows_visited) == (9, 9)
    assert {g: int(r[0, 0]) for g, r in merged.rows.items()} == {0: 0, 3: 3, 5: 5}


def test_scans_read_against_a_deadline_get_their_parts_answered_while_they_hold_every_thread():
    """Two scans read at once (read_until, 2 threads), each cut in parts as HBase's are
    (answer_in_parts): while both hold a reading thread, their parts still run. With one
    pool for both, each waited for its part queued behind the other: neither answered."""
    import threading
    import time

    from gridagg.model.aggregate import AggArrays
    from gridagg.store.scan import ScanAnswer, ScanRequest

    both_reading = threading.Barrier(2, timeout=30)

    def part(g0: int, g1: int) -> ScanAnswer:
        out = ScanAnswer(AggArrays.empty(1, 1))
        out.aggs.count[0] = g1 - g0
        return out

    def scan(_: ScanRequest) -> ScanAnswer:
        both_reading.wait()  # both reading threads are taken now
        return parts.answer_in_parts([(0, 1), (1, 3)], part, 2)

    got = []

    def read():
        request = ScanRequest.__new__(ScanRequest)  # read_until only sets its stop and deadline
        got.extend(int(a.aggs.count[0]) for _, a in parts.read_until(scan, [request], time.monotonic() + 30, 2))

    readers = [threading.Thread(target=read) for _ in range(2)]
    for t in readers:
        t.start()
    for t in readers:
        t.join(60)
    assert got == [3, 3]


def test_a_late_answer_makes_reading_stop_that_much_sooner_and_answers_on_time_give_it_back():
    lead = parts.Lead()
    assert lead.before(0.005) == 0.0
    lead.learn(0.0, 0.0058, 0.005)  # 1.05 ms after the aim (5% of the deadline early)
    assert abs(lead.before(0.005) - 0.00105) < 1e-9
    lead.learn(lead.before(0.005), 0.0040, 0.005)  # 0.75 ms to spare: a tenth given back
    assert abs(lead.before(0.005) - 0.000975) < 1e-9
    lead.learn(0.0, 0.1, 0.005)  # a stall: the lead never takes more than half a deadline
    assert lead.before(0.005) == 0.0025
    assert abs(lead.before(1.0) - 0.09525) < 1e-9
    for _ in range(200):  # answers on time give it back, down to nothing
        lead.learn(lead.before(0.005), 0.001, 0.005)
    assert lead.before(0.005) == 0.0


@given(st.lists(st.tuples(st.floats(0.001, 1.0), st.floats(0.0, 2.0)), max_size=30))
def test_the_lead_stays_within_half_of_any_deadline_and_is_never_negative(answers):
    lead = parts.Lead()
    for deadline, share in answers:
        used = lead.before(deadline)
        assert 0.0 <= used <= deadline / 2
        lead.learn(used, deadline * share, deadline)
