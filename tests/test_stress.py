"""A bounded stress test against the real servers: writer and reader processes at once,
with splits all the time; every answer satisfies the oracle condition of the soak (loadtest/soak)
and the final aggregates are exact."""

from __future__ import annotations

import pytest
from gridagg_loadtest.soak import run as soak


@pytest.mark.parametrize("store", ["embedded", "hbase"])
def test_concurrent_writers_and_readers_give_no_wrong_answer(settings, services, store, tmp_path):
    s = settings.with_(store=store, data_dir=tmp_path) if store == "embedded" else settings.with_(store=store)
    report = soak.run(s, seconds=15, writers=2, readers=2, progress=lambda _: None)
    assert report.inserts > 0 and report.queries > 0 and report.splits > 0
    assert report.wrong_answers == 0
    assert report.final_exact
    assert report.check_problems == []
