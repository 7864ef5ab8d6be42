"""Retention (gridagg.write.retain, GridEngine.retain and keep_for), on both stores: a
round drops exactly the rows older than the dataset's `retain` at its `now`, reads no
row of a leaf wholly older (only the leaves the cutoff cuts), folds emptied subtrees
into one leaf (within L_time), and leaves every answer, aggregate, tree and rollup
exact; a serving process runs rounds on its schedule; bad retentions are refused
naming the field."""

from __future__ import annotations

import re
import time
import uuid
from datetime import datetime, timedelta, timezone

import numpy as np
import pytest
from engine_support import check_query, check_series, check_tree, from_position_rollup
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from test_engine import NETWORK, NETWORK_TABLE, network_rows

from gridagg.config import Settings
from gridagg.model.errors import InvalidInput
from gridagg.model.schema import Dataset
from gridagg.query.rollups import DayRollups, MonthRollups, PositionRollups
from gridagg.write import retain as retention

YEAR = {"dimensions": [{"name": "t", "type": "time", "min": "2020-01-01T00:00:00Z", "max": "2020-12-31T23:59:59Z"},
                       {"name": "x", "min": 0, "max": 1000}],
        "measures": [{"name": "v", "min": -1000, "max": 1000}],
        "grid": {"n_size": 6, "n_threshold": 24, "l_time": "30d"}}
START = datetime(2020, 1, 1, tzinfo=timezone.utc)


def counting_reads(engine, monkeypatch) -> list[str]:
    """The grids whose rows the engine's store reads whole from now on (read_grid)."""
    read: list[str] = []
    real = engine.store.read_grid

    def read_grid(ds, grid_id):
        read.append(grid_id)
        return real(ds, grid_id)

    monkeypatch.setattr(engine.store, "read_grid", read_grid)
    return read


@hsettings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.lists(st.tuples(st.integers(0, 366 * 86400 - 1), st.integers(0, 1000), st.integers(-1000, 1000)),
                     min_size=20, max_size=200),
       days=st.integers(1, 400), now=st.integers(0, 500))
def test_a_round_drops_exactly_the_rows_older_than_the_retention(engine, data, days, now):
    ds = engine.create_dataset(Dataset.from_json({"name": "r_" + uuid.uuid4().hex[:10], **YEAR}))
    try:
        rows = np.array(data, np.int64)
        engine.insert_encoded(ds, [f"a{i}".encode() for i in range(len(rows))], rows)
        assert engine.keep_for(ds.name, f" {days}d ") == f"{days}d"
        at = START + timedelta(days=now)
        first = int(((at - timedelta(days=days)) - START).total_seconds())
        tree = engine.trees.tree(ds)
        wholly_older = {tree.ids[i] for i in np.flatnonzero((tree.left < 0) & (tree.aggs.count > 0)
                                                              & (tree.dhi[:, 0] < first))}
        with pytest.MonkeyPatch.context() as mp:
            read = counting_reads(engine, mp)
            done = engine.retain(ds.name, now=at)
        kept = rows[rows[:, 0] >= first]
        assert done.rows_before - done.rows_after == len(rows) - len(kept)
        assert not wholly_older & set(read), "a leaf wholly older than the cutoff was read"
        check_tree(engine, ds.name, kept)
        assert engine.check(ds.name) == []
        got = engine.query(ds.name, {}, ["count", "sum:v", "min:t"]).values
        assert [got["count"], got["sum:v"]] == [len(kept), int(kept[:, 2].sum())]
        assert got["min:t"] == (int(kept[:, 0].min()) if len(kept) else None)
        # A second round at the same time finds nothing to drop.
        again = engine.retain(ds.name, now=at)
        assert again.rows_before == again.rows_after
    finally:
        engine.drop_dataset(ds.name)


def test_emptied_grids_fold_into_one_leaf_within_l_time(engine, unique_name):
    """Half a year dropped: its grids fold into the presplit leaves of L_time (30 days)
    at once, without reading a row; the leaves a change cut fold back at a round once
    no query can still need their old rows."""
    ds = engine.create_dataset(Dataset.from_json({"name": unique_name, **YEAR}))
    try:
        rng = np.random.default_rng(2)
        rows = np.stack([rng.integers(0, 366 * 86400, 3000), rng.integers(0, 1001, 3000),
                         rng.integers(-1000, 1001, 3000)], axis=1)
        engine.insert_encoded(ds, [f"a{i}".encode() for i in range(len(rows))], rows)
        leaves = len(engine.leaves(ds.name))
        engine.keep_for(ds.name, "183d")
        done = engine.retain(ds.name, now=datetime(2020, 12, 31, tzinfo=timezone.utc))
        first = int((datetime(2020, 12, 31, tzinfo=timezone.utc) - timedelta(days=183) - START).total_seconds())
        kept = rows[rows[:, 0] >= first]
        assert done.leaves_after < leaves * 0.6
        # The presplit grids (16 of 23 days) were split a moment ago: they are retired, so
        # their halves fold, two leaves for each of the 8 dropped.
        older = [g for g, _ in engine.leaves(ds.name) if g.box[0][1] < first]
        assert len(older) <= 16 + 2
        check_tree(engine, ds.name, kept)
        engine.max_query_seconds = 0.0  # no query can still need the old rows: purged and folded at the next round
        try:
            tidied = engine.retain(ds.name, now=datetime(2020, 12, 31, tzinfo=timezone.utc))
        finally:
            engine.max_query_seconds = 60.0
        assert tidied.rows_before == tidied.rows_after and tidied.leaves_after < done.leaves_after
        older = [g for g, _ in engine.leaves(ds.name) if g.box[0][1] < first]
        assert len(older) <= 8 + 1  # a presplit leaf for each 23 days dropped
        for g, agg in engine.leaves(ds.name):
            assert agg.count or g.box[0][1] - g.box[0][0] + 1 <= 30 * 86400  # folded within L_time only
        check_tree(engine, ds.name, kept)
        assert engine.check(ds.name) == []
    finally:
        engine.drop_dataset(ds.name)


def test_the_rollups_follow_a_retention_round(engine, unique_name, monkeypatch):
    for rollups in (DayRollups, PositionRollups, MonthRollups):
        monkeypatch.setattr(rollups, "REST", 0)
    ds = engine.create_dataset(Dataset.from_json({"name": unique_name, **NETWORK}))
    aggregates = ["count", "sum:temp", "min:temp", "max:temp"]
    triangle = {"type": "Polygon", "coordinates": [[[-8, -8], [0, 0], [8, -8], [-8, -8]]]}
    series = {"aggregates": aggregates, "step": "7d", "start": "2012-01-01T00:00:00Z", "end": "2012-12-30T23:59:59Z"}
    months = {"aggregates": aggregates, "region": triangle, "where": {"time": ["2012-10-01T00:00:00Z", None]}}
    rows = network_rows(2400, seed=12)
    try:
        assert engine.insert(ds.name, rows).stored == len(rows)
        for when, keep in (("2012-12-31T23:00:00", "200d"), ("2013-06-30T00:00:00", "300d")):
            seen = NETWORK_TABLE.rows(rows)
            check_series(engine, ds.name, NETWORK_TABLE, seen, series)
            from_position_rollup(lambda: check_query(engine, ds.name, NETWORK_TABLE, seen,
                                                     {"aggregates": aggregates, "region": triangle}),
                                 engine.planner.positions)
            from_position_rollup(lambda: check_query(engine, ds.name, NETWORK_TABLE, seen, months),
                                 engine.planner.months, lambda result: result.plan.rollup_months is not None)
            engine.keep_for(ds.name, keep)
            now = datetime.fromisoformat(when).replace(tzinfo=timezone.utc)
            engine.retain(ds.name, now=now)
            since = (now - timedelta(days=int(keep[:-1]))).strftime("%Y-%m-%dT%H:%M:%S")
            rows = [r for r in rows if r["time"][:19] >= since]
        seen = NETWORK_TABLE.rows(rows)
        check_series(engine, ds.name, NETWORK_TABLE, seen, series)
        from_position_rollup(lambda: check_query(engine, ds.name, NETWORK_TABLE, seen,
                                                 {"aggregates": aggregates, "region": triangle}),
                             engine.planner.positions)
        assert engine.check(ds.name) == []
    finally:
        engine.drop_dataset(ds.name)


def test_a_serving_process_runs_retention_rounds_on_its_schedule(engine, unique_name):
    ds = engine.create_dataset(Dataset.from_json({"name": unique_name, **YEAR}))
    rounds = None
    try:
        # Rows of 2020: all older than a retention of 30 days now.
        rows = np.array([[d * 86400, d, d] for d in range(0, 366, 5)], np.int64)
        engine.insert_encoded(ds, [f"a{i}".encode() for i in range(len(rows))], rows)
        rounds = retention.start(engine, Settings().with_(retain_every=0.2))
        time.sleep(0.5)
        assert engine.query(ds.name, {}, ["count"]).values["count"] == len(rows)  # no retain: kept
        engine.keep_for(ds.name, "30d")
        deadline = time.monotonic() + 30
        while engine.query(ds.name, {}, ["count"]).values["count"]:
            assert time.monotonic() < deadline, "no round dropped the old rows"
            time.sleep(0.2)
        assert engine.check(ds.name) == []
        assert retention.start(engine, Settings().with_(retain_every=0)) is None  # 0 turns rounds off
    finally:
        if rounds is not None:
            rounds.stop()
        engine.drop_dataset(ds.name)


@pytest.mark.parametrize("given, field, says", [
    ("10", "retain", "must be a whole number and a unit"),
    ("10m", "retain", "d (days), w (weeks) or y (years)"),
    ("0d", "retain", "such as '10y' or '90d', not '0d'"),
    (10, "retain", "not 10"),
])
def test_a_bad_retention_is_refused_naming_it(engine, unique_name, given, field, says):
    ds = engine.create_dataset(Dataset.from_json({"name": unique_name, **YEAR}))
    try:
        with pytest.raises(InvalidInput, match=re.escape(says)) as refused:
            engine.keep_for(ds.name, given)
        assert refused.value.field == field
        assert engine.directory.retain(ds.name) is None
        engine.keep_for(ds.name, "2y")
        assert engine.directory.retain(ds.name) == "2y"
        assert engine.keep_for(ds.name, None) is None and engine.directory.retain(ds.name) is None
    finally:
        engine.drop_dataset(ds.name)


def test_a_dataset_without_time_keeps_no_retention(engine, unique_name):
    ds = engine.create_dataset(Dataset.from_json({"name": unique_name, "dimensions": [{"name": "x", "min": 0,
                                                                                     "max": 9}]}))
    try:
        with pytest.raises(InvalidInput, match="has no time dimension") as refused:
            engine.keep_for(ds.name, "10y")
        assert refused.value.field == "retain"
    finally:
        engine.drop_dataset(ds.name)


def test_the_cutoff_counts_calendar_years_and_days():
    ds = Dataset.from_json({"name": "c", **YEAR})
    leap = datetime(2020, 2, 29, 12, tzinfo=timezone.utc)
    assert retention.cutoff(ds, "1y", datetime(2021, 3, 1, tzinfo=timezone.utc)) == \
        int((datetime(2020, 3, 1, tzinfo=timezone.utc) - START).total_seconds())
    assert retention.cutoff(ds, "1d", leap) == 58 * 86400 + 12 * 3600
    assert retention.cutoff(ds, "1y", datetime(2021, 2, 28, 12, tzinfo=timezone.utc)) == 58 * 86400 + 12 * 3600
    assert retention.cutoff(ds, "2w", datetime(2020, 1, 15, tzinfo=timezone.utc)) == 0
    assert retention.cutoff(ds, "1d", datetime(2019, 1, 1, tzinfo=timezone.utc)) == 0  # before the domain
    end = ds.dimensions[0].enc_hi
    assert retention.cutoff(ds, "1d", datetime(2030, 1, 1, tzinfo=timezone.utc)) == end + 1  # past it: all older
