"""The grid engine on the real PostgreSQL with each store: splits, statistics, bad input."""

from __future__ import annotations

import time

import numpy as np
import oracle
import pytest
from engine_support import check_query, check_series, check_tree, from_position_rollup

from gridagg.directory import GridDirectory
from gridagg.engine import GridEngine
from gridagg.model.errors import InvalidInput, UnknownDataset
from gridagg.model.schema import Dataset
from gridagg.query import rollups
from gridagg.query.rollups import (
    DAY,
    DayRollups,
    MonthRollups,
    PositionRollups,
    in_whole_months,
    month_windows,
)

WEATHER = {
    "dimensions": [
        {"name": "time", "type": "time", "min": "2012-01-01T00:00:00Z", "max": "2012-12-31T23:00:00Z"},
        {"name": "temperature", "scale": 1, "min": -40, "max": 50, "unit": "C"},
        {"name": "humidity", "min": 0, "max": 100},
    ],
    "measures": [{"name": "wind_speed", "scale": 1, "min": 0, "max": 70}],
    "grid": {"n_size": 50, "n_threshold": 200, "l_time": "60d"},
}
TABLE = oracle.Table.of(WEATHER)


@pytest.fixture
def weather(engine, unique_name):
    """A small 3-D weather dataset, dropped after the test."""
    ds = engine.create_dataset(Dataset.from_json({"name": unique_name, **WEATHER}))
    yield ds
    engine.drop_dataset(ds.name)


def weather_rows(n: int, seed: int = 7) -> tuple[list[dict], np.ndarray]:
    """n rows as a user sends them, and as gridagg stores them (for check_tree)."""
    rng = np.random.default_rng(seed)
    hours = rng.integers(0, 366 * 24 - 1, n)
    temp = rng.integers(-100, 350, n)
    hum = rng.integers(10, 100, n)
    wind = rng.integers(0, 200, n)
    rows = [
        {"time": "2012-01-01T00:00:00Z", "temperature": t / 10, "humidity": int(h), "wind_speed": w / 10}
        for t, h, w in zip(temp, hum, wind)
    ]
    for row, hr in zip(rows, hours):
        row["time"] = np.datetime_as_string(np.datetime64("2012-01-01T00:00:00") + np.timedelta64(int(hr), "h")) + "Z"
    encoded = np.stack([hours * 3600, temp, hum, wind], axis=1).astype(np.int64)
    return rows, encoded


def test_inserts_split_and_queries_match_the_oracle(engine, weather):
    rows, encoded = weather_rows(3000)
    for start in range(0, 3000, 750):
        result = engine.insert(weather.name, rows[start : start + 750])
        assert result.stored == 750 and not result.rejected
    check_tree(engine, weather.name, encoded)
    assert len(engine.leaves(weather.name)) > 3000 // 200
    seen = TABLE.rows(rows)
    for where in [
        {},
        {"temperature": [15, 35]},
        {"time": ["2012-03-01T00:00:00Z", "2012-08-31T23:00:00Z"], "humidity": [20, 40]},
        {"temperature": [0.05, 0.15]},  # holds one stored value: 0.1
        {"temperature": ["-0.05", "0.0"], "time": ["2012-02-01T00:00:00.5Z", "2012-06-01T02:00:00+02:00"]},
        {"humidity": [200, 300]},  # outside the domain: empty
        {"humidity": [None, 50.5], "temperature": [-3.25, None]},
    ]:
        check_query(engine, weather.name, TABLE, seen, {"where": where, "aggregates": [
            "count", "sum:wind_speed", "min:wind_speed", "max:temperature", "avg:humidity", "min:time"]})


def test_statistics_show_reuse_collapse_and_skipping(engine, weather):
    rows = weather_rows(4000, seed=3)[0]
    engine.insert(weather.name, rows)
    seen = TABLE.rows(rows)
    whole = check_query(engine, weather.name, TABLE, seen, {"aggregates": ["count"]})
    plan = whole.plan
    # The whole domain: every leaf reused, and 4.6.1 folds them all into the root.
    assert plan.reused_grids_before == plan.total_grids and plan.reused_grids_after == 1
    assert plan.scanned_grids_before == 0 and plan.rows_in_reused_grids == 4000

    box = {"time": ["2012-02-01T00:00:00Z", "2012-11-30T00:00:00Z"], "temperature": [-5, 30]}
    summed = check_query(engine, weather.name, TABLE, seen, {"where": box, "aggregates": ["sum:wind_speed"]})
    assert summed.plan.scanned_grids_after == summed.plan.scanned_grids_before > 0
    # The tree is current and its epoch has not moved: no round trip to PostgreSQL.
    assert summed.plan.round_trips["postgresql"] == 0

    lowest = check_query(engine, weather.name, TABLE, seen, {"where": box, "aggregates": ["min:wind_speed"]})
    assert lowest.plan.skip_rate > 0.5  # 4.6.2: most partial grids cannot beat the minimum
    assert lowest.count is None  # skipped grids leave the count unknown; it was not asked


def test_split_moves_on_when_an_axis_is_constant(engine, unique_name):
    definition = {"dimensions": [{"name": "x", "min": 0, "max": 100}, {"name": "y", "min": 0, "max": 100}],
                  "grid": {"n_size": 4, "n_threshold": 8}}
    ds = engine.create_dataset(Dataset.from_json({"name": unique_name, **definition}))
    try:
        # x is always 7: every split must use y.
        rows = [{"x": 7, "y": y} for y in range(40)]
        # 20 copies of one point: that leaf can never be split, and must not loop.
        rows += [{"x": 50, "y": 50} for _ in range(20)]
        result = engine.insert(ds.name, rows)
        assert result.stored == 60
        encoded = np.array([[r["x"], r["y"]] for r in rows], dtype=np.int64)
        check_tree(engine, ds.name, encoded)
        biggest = max(agg.count for _, agg in engine.leaves(ds.name))
        assert biggest == 20  # the single-point leaf, left whole
        table = oracle.Table.of(definition)
        check_query(engine, ds.name, table, table.rows(rows), {"where": {"y": [10, 50]},
                                                              "aggregates": ["count", "sum:y", "max:x"]})
    finally:
        engine.drop_dataset(ds.name)


def test_empty_selection(engine, weather):
    engine.insert(weather.name, weather_rows(10)[0])
    result = engine.query(weather.name, {"humidity": [0, 5]}, ["count", "sum:wind_speed", "min:wind_speed",
                                                               "max:wind_speed", "avg:wind_speed"])
    assert result.to_user(weather) == {"count": 0, "sum:wind_speed": 0.0, "min:wind_speed": None,
                                       "max:wind_speed": None, "avg:wind_speed": None}


def test_element_ids_make_inserts_idempotent(engine, weather):
    row = {"id": "station-1/2012-05-01T10", "time": "2012-05-01T10:00:00Z", "temperature": 21.5,
           "humidity": 40, "wind_speed": 3.2}
    assert engine.insert(weather.name, [row]).stored == 1
    again = engine.insert(weather.name, [row, row])
    assert again.stored == 0 and again.duplicates == 2
    assert engine.query(weather.name, {}, ["count"]).values["count"] == 1


@pytest.mark.parametrize("row, field", [
    ({"time": "2013-06-01T00:00:00Z", "temperature": 1, "humidity": 1, "wind_speed": 1}, "time"),
    ({"time": "2012-06-01T00:00:00Z", "temperature": 99, "humidity": 1, "wind_speed": 1}, "temperature"),
    ({"time": "2012-06-01T00:00:00Z", "humidity": 1, "wind_speed": 1}, "temperature"),
    ({"time": "2012-06-01T00:00:00Z", "temperature": "warm", "humidity": 1, "wind_speed": 1}, "temperature"),
    ({"time": "2012-06-01T00:00:00Z", "temperature": float("nan"), "humidity": 1, "wind_speed": 1}, "temperature"),
    ({"time": "2012-06-01T00:00:00Z", "temperature": float("inf"), "humidity": 1, "wind_speed": 1}, "temperature"),
    ({"time": "2012-06-01T00:00:00Z", "temperature": 1.25, "humidity": 1, "wind_speed": 1}, "temperature"),
    ({"time": "June", "temperature": 1, "humidity": 1, "wind_speed": 1}, "time"),
    ({"time": "2012-06-01T00:00:00Z", "temperature": 1, "humidity": 1, "wind_speed": 1, "gust": 3}, "gust"),
    ({"time": "2012-06-01T00:00:00Z", "temperature": 1, "humidity": True, "wind_speed": 1}, "humidity"),
])
def test_bad_rows_are_refused_by_name_and_nothing_is_written(engine, weather, row, field):
    good = {"time": "2012-06-01T00:00:00Z", "temperature": 1, "humidity": 1, "wind_speed": 1}
    result = engine.insert(weather.name, [good, row])
    assert result.stored == 1
    assert [(i, f) for i, f, _ in result.rejected] == [(1, field)]
    assert field in result.rejected[0][2]
    assert engine.query(weather.name, {}, ["count"]).values["count"] == 1


@pytest.mark.parametrize("where, aggregates, field", [
    ({"pressure": [1, 2]}, ["count"], "where.pressure"),
    ({"wind_speed": [1, 2]}, ["count"], "where.wind_speed"),
    ({"temperature": [30, 10]}, ["count"], "where.temperature"),
    ({"temperature": [10]}, ["count"], "where.temperature"),
    ({"time": ["yesterday", None]}, ["count"], "time"),
    ({}, ["median:temperature"], "aggregates"),
    ({}, ["sum:pressure"], "aggregates"),
    ({}, ["sum"], "aggregates"),
    ({}, [], "aggregates"),
])
def test_bad_queries_name_the_problem(engine, weather, where, aggregates, field):
    with pytest.raises(InvalidInput) as err:
        engine.query(weather.name, where, aggregates)
    assert err.value.field == field


def test_unknown_dataset(engine):
    with pytest.raises(UnknownDataset):
        engine.query("no_such_dataset", {}, ["count"])
    with pytest.raises(UnknownDataset):
        engine.insert("no_such_dataset", [{}])


def test_definitions_survive_a_new_engine_and_datasets_live_side_by_side(engine, weather, settings, unique_name):
    other = engine.create_dataset(Dataset.from_json({
        "name": unique_name + "_b", "dimensions": [{"name": "x", "min": 0, "max": 9}]}))
    try:
        engine.insert(other.name, [{"x": 3}, {"x": 4}])
        engine.insert(weather.name, weather_rows(5)[0])
        fresh = GridEngine(GridDirectory(settings.effective_pg_url), engine.store)
        assert fresh.dataset(weather.name) == weather
        assert fresh.query(other.name, {}, ["sum:x"]).values["sum:x"] == 7
        assert fresh.query(weather.name, {}, ["count"]).values["count"] == 5
    finally:
        engine.drop_dataset(other.name)


def test_a_write_in_another_process_is_seen_by_the_next_query(engine, weather, settings):
    """Each process holds the tree and its aggregates in memory. A writer's committed
    change moves the dataset's epoch on the machine's board: the next query of every
    process reads what changed (one round trip) and re-reads only the aggregates it needs."""
    writer = GridEngine(GridDirectory(settings.effective_pg_url), engine.store)
    box = {"time": ["2012-02-01T00:00:00Z", "2012-11-30T00:00:00Z"], "temperature": [-5, 30]}
    rows = weather_rows(2000, seed=11)[0]
    seen = TABLE.rows(rows)
    try:
        writer.insert(weather.name, rows[:1000])
        check_query(engine, weather.name, TABLE, seen[:1000], {"where": box, "aggregates": ["count", "sum:wind_speed"]})
        assert engine.directory.listening.wait(10)  # its start counts as "anything may have changed"
        engine.query(weather.name, box, ["count"])
        steady = engine.query(weather.name, box, ["count", "sum:wind_speed"])
        assert steady.plan.round_trips["postgresql"] == 0
        # The scan (a call per region server on HBase); every aggregate is held.
        assert steady.plan.round_trips[engine.store.kind] == len(steady.plan.store_calls or [engine.store.kind])
        version = engine.trees.tree(weather).version

        splits = writer.insert(weather.name, rows[1000:2000]).splits  # new leaves, new aggregates
        assert splits > 0
        after = check_query(engine, weather.name, TABLE, seen, {"where": box, "aggregates": [
            "count", "sum:wind_speed", "min:wind_speed"]})
        assert after.plan.round_trips["postgresql"] == 1  # what changed since the version held
        assert engine.trees.tree(weather).version != version
        check_query(engine, weather.name, TABLE, seen, {"aggregates": ["count", "max:humidity"]})
    finally:
        writer.directory.close()


def test_a_writer_that_dies_before_moving_the_epoch_is_seen_after_reconfirm_seconds(
        engine, weather, settings, monkeypatch):
    """A writer that commits and dies before moving the epoch on (or one on another
    machine, with a board of its own): other processes confirm the version with
    PostgreSQL within RECONFIRM_SECONDS anyway."""
    import gridagg.tree as tree_mod

    writer = GridEngine(GridDirectory(settings.effective_pg_url), engine.store)
    writer.directory.board = None  # commits, never moves the epoch: as if it died there
    monkeypatch.setattr(tree_mod, "RECONFIRM_SECONDS", 0.2)
    rows = weather_rows(2000, seed=13)[0]
    seen = TABLE.rows(rows)
    try:
        writer.insert(weather.name, rows[:1000])
        check_query(engine, weather.name, TABLE, seen[:1000], {"aggregates": ["count"]})
        splits = writer.insert(weather.name, rows[1000:]).splits
        assert splits > 0
        time.sleep(0.25)
        check_query(engine, weather.name, TABLE, seen, {"aggregates": ["count", "sum:wind_speed", "max:wind_speed"]})
    finally:
        writer.directory.close()


def test_questions_over_time_alone_read_day_rollups_kept_current(engine, weather, settings, monkeypatch):
    """A series whose only condition is time, in whole days, reads the day rollup, no
    rows, made as it asks. A plain question over whole days (a month) reads it too, once
    a background thread has made it (the tree answers meanwhile), and is not offered to
    the tuner. After another process's inserts (new days, splits) and a repair the
    rollup follows the change log and the answers stay brute force."""
    monkeypatch.setattr(DayRollups, "REST", 0)
    writer = GridEngine(GridDirectory(settings.effective_pg_url), engine.store)
    rows = weather_rows(3000, seed=21)[0]
    seen = TABLE.rows(rows)
    aggregates = ["count", "sum:wind_speed", "min:temperature", "max:humidity", "avg:wind_speed"]
    request = {"aggregates": aggregates, "step": "7d", "start": "2012-01-01T00:00:00Z", "end": "2012-12-30T23:59:59Z"}
    month = {"aggregates": aggregates, "where": {"time": ["2012-03-01T00:00:00Z", "2012-03-31T23:59:59Z"]}}
    try:
        for part in (slice(0, 1500), slice(1500, 3000)):
            assert writer.insert(weather.name, rows[part]).stored == 1500
            engine.planner.sample.take(weather.name)
            first = check_query(engine, weather.name, TABLE, seen[: part.stop], month)
            assert first.plan.rollup_days is None  # the tree's answer: the rollup is behind the inserts
            engine.settle()
            result = check_query(engine, weather.name, TABLE, seen[: part.stop], month)
            assert result.plan.rollup_days == 31 and result.plan.rows_in_scanned_grids == 0
            assert engine.planner.sample.take(weather.name) == []
            result = check_series(engine, weather.name, TABLE, seen[: part.stop], request)
            assert result.plan.rollup_days == 366 and result.plan.rows_in_scanned_grids == 0  # 2012, to its end
        writer.repair(weather.name)
        check_series(engine, weather.name, TABLE, seen, {**request, "window": "28d"})
        check_query(engine, weather.name, TABLE, seen, month)
    finally:
        writer.directory.close()


NETWORK = {
    "dimensions": [
        {"name": "time", "type": "time", "min": "2012-01-01T00:00:00Z", "max": "2012-12-31T23:00:00Z"},
        {"name": "lon", "scale": 2, "min": -10, "max": 10},
        {"name": "lat", "scale": 2, "min": -10, "max": 10},
    ],
    "measures": [{"name": "temp", "scale": 1, "nullable": True}],
    "grid": {"n_size": 40, "n_threshold": 160, "l_time": "60d"},
}
NETWORK_TABLE = oracle.Table.of(NETWORK)


def network_rows(n: int, seed: int) -> list[dict]:
    """n hourly rows of 27 stations: some share a longitude, some a latitude, one both
    (so the rollup's first cells hold several positions, and some stay whole until a
    question cuts them), one stands on the polygons' edges below."""
    rng = np.random.default_rng(seed)
    places = [(round(float(x), 2), round(float(y), 2)) for x, y in rng.uniform(-9, 9, (18, 2))]
    places += [(1.5, -2.0), (1.5, 3.25), (1.5, 7.0), (-4.0, 2.5), (6.75, 2.5), (6.75, 7.0), (-6.0, 5.5), (-6.0, -7.25),
               (0.0, 0.0)]
    station = rng.integers(0, len(places), n)
    hours = rng.integers(0, 366 * 24 - 1, n)
    temp = rng.integers(-100, 350, n)
    return [{"time": str(np.datetime64("2012-01-01T00:00:00") + np.timedelta64(int(h), "h")) + "Z",
             "lon": places[s][0], "lat": places[s][1], "temp": None if t % 9 == 0 else t / 10}
            for s, h, t in zip(station, hours, temp)]


def test_questions_over_position_alone_read_the_position_rollup_kept_current(engine, settings, unique_name,
                                                                             monkeypatch):
    """A box or polygon over lon/lat alone (every time, all of it) is answered from the
    position rollup, no rows read by the question, once a background thread has made it
    (the tree answers meanwhile): the cells it cuts are refined down to single positions,
    those on a polygon's edge tested exactly. After another process's inserts (splits)
    and a repair the rollup follows the change log; the answers stay brute force. A
    question that also narrows time reads the tree, and only it is offered to the tuner."""
    monkeypatch.setattr(PositionRollups, "REST", 0)
    ds = engine.create_dataset(Dataset.from_json({"name": unique_name, **NETWORK}))
    writer = GridEngine(GridDirectory(settings.effective_pg_url), engine.store)
    aggregates = ["count", "sum:temp", "min:temp", "max:temp", "avg:temp"]
    triangle = {"type": "Polygon", "coordinates": [[[-8, -8], [0, 0], [8, -8], [-8, -8]]]}  # (0, 0) on its edge
    holed = {"type": "Polygon", "coordinates": [[[-9, -9], [9, -9], [9, 9], [-9, 9], [-9, -9]],
                                                [[1, -3], [2, -3], [2, 8], [1, 8], [1, -3]]]}  # around lon 1.5
    by_position = [
        {"aggregates": aggregates, "region": triangle},
        {"aggregates": aggregates, "region": holed},
        {"aggregates": aggregates, "region": {"type": "Polygon", "coordinates": [[[1, 0], [7, 0], [7, 5], [1, 5],
                                                                                 [1, 0]]]}},
        {"aggregates": aggregates, "where": {"lon": [1.5, 1.5], "lat": [-2, 3.25]}},
        {"aggregates": aggregates, "where": {"lat": [2.5, None], "time": ["2011-06-01T00:00:00Z", None]}},
    ]
    rows = network_rows(2400, seed=5)
    seen = NETWORK_TABLE.rows(rows)
    try:
        for part in (slice(0, 1200), slice(1200, 2400)):
            assert writer.insert(ds.name, rows[part]).stored == 1200
            for request in by_position:
                result = from_position_rollup(
                    lambda: check_query(engine, ds.name, NETWORK_TABLE, seen[: part.stop], request),
                    engine.planner.positions)
                assert result.plan.rows_in_scanned_grids == 0
        writer.repair(ds.name)
        for request in by_position:
            from_position_rollup(lambda: check_query(engine, ds.name, NETWORK_TABLE, seen, request),
                                 engine.planner.positions)
        narrowed = check_query(engine, ds.name, NETWORK_TABLE, seen,
                               {"aggregates": aggregates, "region": triangle,
                                "where": {"time": ["2012-03-01T00:00:00Z", "2012-09-01T00:00:00Z"]}})
        assert narrowed.plan.rollup_positions is None
        # Only the narrowed question is the tree's to answer: the tuner is offered no other.
        assert len(engine.planner.sample.take(ds.name)) == 1
    finally:
        writer.directory.close()
        engine.drop_dataset(ds.name)


def test_questions_over_position_in_whole_months_read_the_month_rollup_kept_current(engine, settings, unique_name,
                                                                                    monkeypatch):
    """A box or polygon over lon/lat within whole calendar months (every other dimension
    whole) is answered from the month rollup, no rows read, once a background thread has
    made it (the tree answers meanwhile); after another process's inserts and a repair it
    follows the change log, and the answers stay brute force. Such questions are not
    offered to the tuner; one whose time range ends inside a month is the tree's."""
    monkeypatch.setattr(MonthRollups, "REST", 0)
    ds = engine.create_dataset(Dataset.from_json({"name": unique_name, **NETWORK}))
    writer = GridEngine(GridDirectory(settings.effective_pg_url), engine.store)
    aggregates = ["count", "sum:temp", "min:temp", "max:temp", "avg:temp"]
    triangle = {"type": "Polygon", "coordinates": [[[-8, -8], [0, 0], [8, -8], [-8, -8]]]}  # (0, 0) on its edge
    in_months = [
        {"aggregates": aggregates, "region": triangle, "where": {"time": ["2012-03-01T00:00:00Z", "2012-05-31T23:59:59Z"]}},
        {"aggregates": aggregates, "where": {"lon": [-3, 7], "time": ["2012-02-01T00:00:00Z", "2012-02-29T23:59:59Z"]}},
        # From the domain's start, and to its end (2012-12-31T23:00:00Z): whole months too.
        {"aggregates": aggregates, "where": {"lat": [-9, 2.5], "time": [None, "2012-01-31T23:59:59Z"]}},
        {"aggregates": aggregates, "region": triangle, "where": {"time": ["2012-07-01T00:00:00Z", None]}},
    ]
    rows = network_rows(2400, seed=6)
    seen = NETWORK_TABLE.rows(rows)
    answered = lambda result: result.plan.rollup_months is not None  # noqa: E731
    try:
        for part in (slice(0, 1200), slice(1200, 2400)):
            assert writer.insert(ds.name, rows[part]).stored == 1200
            first = check_query(engine, ds.name, NETWORK_TABLE, seen[: part.stop], in_months[0])
            assert first.plan.rollup_months is None  # the tree's answer: the rollup is behind the inserts
            for request in in_months:
                result = from_position_rollup(
                    lambda: check_query(engine, ds.name, NETWORK_TABLE, seen[: part.stop], request),
                    engine.planner.months, answered)
                assert result.plan.rows_in_scanned_grids == 0 and result.plan.rollup_positions > 0
        assert result.plan.rollup_months == 6
        writer.repair(ds.name)
        for request in in_months:
            from_position_rollup(lambda: check_query(engine, ds.name, NETWORK_TABLE, seen, request),
                                 engine.planner.months, answered)
        engine.planner.sample.take(ds.name)
        inside_a_month = check_query(engine, ds.name, NETWORK_TABLE, seen,
                                     {"aggregates": aggregates, "region": triangle,
                                      "where": {"time": ["2012-03-01T00:00:00Z", "2012-05-31T23:00:00Z"]}})
        assert inside_a_month.plan.rollup_months is None
        assert len(engine.planner.sample.take(ds.name)) == 1  # only that one is the tree's to answer
        # Month cells past their byte budget are not kept: the tree answers, exactly.
        monkeypatch.setattr(rollups, "MONTH_CELLS_BYTES", 1)
        assert writer.insert(ds.name, network_rows(50, seed=7)).stored == 50
        seen = NETWORK_TABLE.rows(rows + network_rows(50, seed=7))
        for _ in range(2):
            result = check_query(engine, ds.name, NETWORK_TABLE, seen, in_months[0])
            engine.planner.months.settle()
        assert result.plan.rollup_months is None and result.plan.rows_in_scanned_grids > 0
    finally:
        writer.directory.close()
        engine.drop_dataset(ds.name)


def test_whole_months_are_counted_from_the_calendar_whatever_the_domain_start():
    """Month windows in stored times (seconds from the domain's start) for a domain that
    starts mid-month at a fraction of a second: the first window is cut at the domain's
    start, a window starts at the first stored second inside its month, and a range is
    whole months when each end is a month's edge or the domain's."""
    col = Dataset.from_json({"name": "m", "dimensions": [
        {"name": "time", "type": "time", "min": "2011-12-15T12:00:00.5Z", "max": "2012-03-10T00:00:00Z"}],
        "measures": []}).dimensions[0]
    jan = 17 * DAY - 43_200  # 2012-01-01T00:00:00.5, the first stored second of January
    feb, mar = jan + 31 * DAY, jan + 60 * DAY
    assert month_windows(col, 0, col.enc_hi) == [(0, jan - 1), (jan, feb - 1), (feb, mar - 1), (mar, col.enc_hi)]
    assert month_windows(col, jan + 5, feb) == [(jan, feb - 1), (feb, mar - 1)]
    assert in_whole_months(col, 0, jan - 1) and in_whole_months(col, jan, mar - 1) and in_whole_months(col, feb, col.enc_hi)
    assert not in_whole_months(col, jan, mar - 2) and not in_whole_months(col, jan + 1, mar - 1)


def test_a_writer_on_another_machine_is_heard_through_notify(engine, weather, settings, monkeypatch):
    """A writer with a board of its own (as on another machine) moves no epoch here; its
    change reaches this process through PostgreSQL's NOTIFY, well before
    RECONFIRM_SECONDS (made an hour here)."""
    import gridagg.tree as tree_mod

    monkeypatch.setattr(tree_mod, "RECONFIRM_SECONDS", 3600)
    elsewhere = GridEngine(GridDirectory(settings.effective_pg_url), engine.store)
    elsewhere.directory.board = None
    rows = weather_rows(400, seed=17)[0]
    seen = TABLE.rows(rows)
    try:
        elsewhere.insert(weather.name, rows[:200])
        check_query(engine, weather.name, TABLE, seen[:200], {"aggregates": ["count"]})
        elsewhere.insert(weather.name, rows[200:])
        deadline = time.monotonic() + 5
        while engine.query(weather.name, {}, ["count"]).values["count"] != 400:
            assert time.monotonic() < deadline, "the change was not heard"
            time.sleep(0.01)
        check_query(engine, weather.name, TABLE, seen, {"aggregates": ["count", "sum:wind_speed"]})
    finally:
        elsewhere.directory.close()


def test_a_dataset_dropped_and_made_again_elsewhere_is_read_anew(engine, settings, unique_name):
    """Another process drops a dataset and makes it again with another definition: this
    process's next query reads the new definition and tree (and a dropped one is 'no
    dataset', never an error)."""
    other = GridEngine(GridDirectory(settings.effective_pg_url), engine.store)
    first = {"name": unique_name, "dimensions": [{"name": "x", "min": 0, "max": 100}]}
    second = {**first, "measures": [{"name": "v", "min": 0, "max": 9}]}
    try:
        other.create_dataset(Dataset.from_json(first))
        other.insert(unique_name, [{"x": i} for i in range(10)])
        assert engine.query(unique_name, {}, ["count"]).values == {"count": 10}
        other.drop_dataset(unique_name)
        with pytest.raises(UnknownDataset):
            engine.query(unique_name, {}, ["count"])
        other.create_dataset(Dataset.from_json(second))
        other.insert(unique_name, [{"x": i, "v": i % 3} for i in range(7)])
        assert engine.query(unique_name, {}, ["count", "sum:v"]).values == {"count": 7, "sum:v": 6}
        other.drop_dataset(unique_name)  # and made again at once: no query sees it missing
        other.create_dataset(Dataset.from_json(first))
        other.insert(unique_name, [{"x": i} for i in range(4)])
        assert engine.query(unique_name, {"x": [1, 2]}, ["count", "max:x"]).values == {"count": 2, "max:x": 2}
    finally:
        other.drop_dataset(unique_name)
        other.directory.close()
