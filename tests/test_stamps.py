"""Write stamps (gridagg.model.stamps): every holder of a dataset's writer lock stamps its
writes later than every earlier holder, and later than the clock's milliseconds HBase
would use."""

from __future__ import annotations

import time

from gridagg.directory import GridDirectory
from gridagg.model.stamps import SPAN, WriteStamps


def test_stamps_increase_across_reservations():
    spans = iter([(10, 12), (12, 14), (20, 22)])
    stamps = WriteStamps(lambda: next(spans))
    assert [stamps.next() for _ in range(6)] == [10, 11, 12, 13, 20, 21]


def test_fixed_stamps_are_one_stamp():
    stamps = WriteStamps.fixed(7)
    assert {stamps.next() for _ in range(5)} == {7}


def test_local_stamps_are_nanoseconds_and_increase():
    stamps = WriteStamps.local()
    got = [stamps.next() for _ in range(1000)]
    assert got == sorted(set(got))
    assert got[0] >= time.time_ns() - 10**9


def test_each_lock_holder_stamps_later_than_the_last(settings, services, unique_name):
    directory = GridDirectory(settings.effective_pg_url)
    try:
        seen = []
        for _ in range(3):  # holders one after the other, each using few of its stamps
            with directory.writer_lock(unique_name) as lock:
                seen.extend(lock.stamps.next() for _ in range(3))
        assert seen == sorted(set(seen))
        assert seen[3] >= seen[0] + SPAN  # a new holder starts past the last span
        assert seen[0] > time.time_ns() - 60 * 10**9  # PostgreSQL's clock, in nanoseconds
    finally:
        directory.close()
