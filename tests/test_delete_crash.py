"""Crash safety of deletes, corrections and retention (gridagg.write.change), on both
stores: a change that dies at any fault point of the write protocol, by an exception or
a kill -9 of its process, leaves either nothing of it (before its directory switch) or
all of it (from the switch on); the next writer or `repair` finishes or undoes it, and
every aggregate, tree and answer is exact after. A change applied in place (a leaf whose
box is a single point) ends whole once its intent is recorded."""

from __future__ import annotations

import textwrap
from datetime import datetime, timezone

import numpy as np
import pytest
from tune_support import BOXES, DIMENSIONS, MEASURES, holds_exactly, insert, kill_child_at, random_rows

from gridagg.model.schema import Dataset
from gridagg.write import faults

SPEC = {"dimensions": DIMENSIONS, "measures": MEASURES, "grid": {"n_size": 6, "n_threshold": 20}}
# Retention needs time: x is the day of 2020, y a place; stored t is seconds from its start.
TIMED = {"dimensions": [{"name": "x", "type": "time", "min": "2020-01-01T00:00:00Z", "max": "2020-12-31T23:59:59Z"},
                        {"name": "y", "min": 0, "max": 1000}], "measures": MEASURES,
         "grid": {"n_size": 6, "n_threshold": 20}}
NOW = datetime(2020, 10, 1, tzinfo=timezone.utc)  # retain 100d keeps from 2020-06-23 on
KEEP_FROM = (datetime(2020, 6, 23, tzinfo=timezone.utc) - datetime(2020, 1, 1, tzinfo=timezone.utc)).days * 86400
STEPS = ("rows_written", "switching", "switched")

# Each kind of change: its dataset, its rows, the change as a child process makes it
# (after tune_support.CHILD_ENGINE), and the rows it leaves.
CHANGES = {
    "delete": (SPEC, "engine.delete(sys.argv[1], {'x': [200, 600], 'y': [100, 1000]}, wait=60)",
               lambda rows: rows[~((rows[:, 0] >= 200) & (rows[:, 0] <= 600) & (rows[:, 1] >= 100))]),
    "correct": (SPEC, "ds = engine.dataset(sys.argv[1]); rows = np.load(sys.argv[5]); "
                      "engine.correct_encoded(ds, [f'a{i}'.encode() for i in range(0, len(rows), 3)], "
                      "np.column_stack([rows[::3, :2], -rows[::3, 2]]))",
                lambda rows: np.column_stack([rows[:, :2], np.where(np.arange(len(rows)) % 3 == 0, -rows[:, 2],
                                                                      rows[:, 2])])),
    "retain": (TIMED, "from datetime import datetime, timezone; "
                      "engine.retain(sys.argv[1], now=datetime(2020, 10, 1, tzinfo=timezone.utc), wait=60)",
               lambda rows: rows[rows[:, 0] >= KEEP_FROM]),
}


def loaded(engine, unique_name: str, kind: str, seed: int):
    """A dataset for a change of `kind` with its rows stored: (dataset, rows)."""
    spec, _, _ = CHANGES[kind]
    ds = engine.create_dataset(Dataset.from_json({"name": unique_name, **spec}))
    rng = np.random.default_rng(seed)
    rows = random_rows(rng, 150)
    if kind == "retain":
        rows[:, 0] = rng.integers(0, 366 * 86400, len(rows))
        engine.keep_for(ds.name, "100d")
    insert(engine, ds, rows, "a")
    return ds, rows


def change(engine, ds, kind: str, rows: np.ndarray):
    """The change of `kind`, made in this process."""
    if kind == "delete":
        return engine.delete(ds.name, {"x": [200, 600], "y": [100, 1000]})
    if kind == "correct":
        at = np.arange(0, len(rows), 3)
        return engine.correct_encoded(ds, [f"a{i}".encode() for i in at], np.column_stack([rows[at, :2], -rows[at, 2]]))
    return engine.retain(ds.name, now=NOW)


def holds(engine, ds, rows: np.ndarray) -> None:
    """Exactness after the change (the timed dataset's boxes are asked in its times)."""
    holds_exactly(engine, ds, rows, BOXES if ds.time_axis is None else ())
    got = engine.query(ds.name, {"y": [0, 500]}, ["count", "sum:v"]).values
    assert [got["count"], got["sum:v"]] == [int((rows[:, 1] <= 500).sum()), int(rows[rows[:, 1] <= 500, 2].sum())]
    assert not engine.directory.pending_intents(ds.name)


def recover_by(engine, ds, how: str) -> None:
    """The next writer (a delete of an element ID never stored) or `repair`."""
    if how == "repair":
        engine.repair(ds.name)
    else:
        assert engine.delete(ds.name, ids=["never-stored"]).rows_before == 0


@pytest.mark.parametrize("recovered_by", ["the next writer", "repair"])
@pytest.mark.parametrize("point", STEPS)
@pytest.mark.parametrize("kind", list(CHANGES))
def test_a_change_dying_at_any_step_leaves_it_whole_or_not_at_all(engine, unique_name, kind, point, recovered_by):
    ds, rows = loaded(engine, unique_name, kind, seed=4)
    try:
        with faults.armed(f"{kind}.{point}=raise"), pytest.raises(faults.FaultInjected):
            change(engine, ds, kind, rows)
        assert engine.directory.pending_intents(ds.name), "the dying change left no intent"
        recover_by(engine, ds, recovered_by)
        # Before its directory switch nothing of it counts; from the switch on, all of it.
        holds(engine, ds, CHANGES[kind][2](rows) if point == "switched" else rows)
    finally:
        engine.drop_dataset(ds.name)


@pytest.mark.parametrize("point", STEPS)
@pytest.mark.parametrize("kind", list(CHANGES))
def test_a_change_killed_at_any_step_leaves_it_whole_or_not_at_all(engine, unique_name, kind, point, tmp_path):
    ds, rows = loaded(engine, unique_name, kind, seed=5)
    try:
        np.save(tmp_path / "rows.npy", rows)
        script = textwrap.dedent(f"""
            import numpy as np
            sys.argv.append({str(tmp_path / 'rows.npy')!r})
            faults.arm({{sys.argv[4]: "kill"}})
            {CHANGES[kind][1]}
            print("not killed", flush=True)
        """)
        kill_child_at(script, engine, ds, f"{kind}.{point}")
        recover_by(engine, ds, "the next writer")
        holds(engine, ds, CHANGES[kind][2](rows) if point == "switched" else rows)
        # And the same change again ends where it must.
        change(engine, ds, kind, rows)
        holds(engine, ds, CHANGES[kind][2](rows))
    finally:
        engine.drop_dataset(ds.name)


# Leaves whose boxes are single points: y has one value, and x two, each past N_size.
POINTS = {"dimensions": [{"name": "x", "min": 0, "max": 1}, {"name": "y", "min": 0, "max": 0}], "measures": MEASURES,
          "grid": {"n_size": 5, "n_threshold": 20}}


@pytest.mark.parametrize("point", [None, *STEPS])
def test_a_change_of_a_leaf_that_is_one_point_is_applied_in_place_and_ends_whole(engine, unique_name, point):
    ds = engine.create_dataset(Dataset.from_json({"name": unique_name, **POINTS}))
    try:
        rows = np.array([[i % 2, 0, i] for i in range(60)], np.int64)
        insert(engine, ds, rows, "a")
        assert {g.box for g, _ in engine.leaves(ds.name)} == {((0, 0), (0, 0)), ((1, 1), (0, 0))}
        ids = [f"a{i}" for i in range(0, 60, 4)]  # x = 0 alone
        if point is None:
            assert engine.delete(ds.name, ids=ids).in_place
        else:
            with faults.armed(f"delete.{point}=raise"), pytest.raises(faults.FaultInjected):
                engine.delete(ds.name, ids=ids)
            recover_by(engine, ds, "the next writer")
        left = rows[np.arange(60) % 4 != 0]
        holds_exactly(engine, ds, left, (((0, 1), (0, 0)), ((0, 0), (0, 0)), ((1, 1), (0, 0))))
        assert not engine.directory.pending_intents(ds.name)
    finally:
        engine.drop_dataset(ds.name)
