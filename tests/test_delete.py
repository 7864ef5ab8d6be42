"""Deletes and corrections through the engine (gridagg.write.change), on both stores
against the real servers: after any sequence of deletes (boxes, element IDs), corrections
and inserts every answer, stored aggregate and tree equals brute force; a query running
while a change happens is exact for the rows before it or after it, never a mix;
another process's tree follows through the change log; the bounds of an answer within a
deadline hold; polygons, and the day, position and month rollups, follow the changes."""

from __future__ import annotations

import threading
import time
import uuid

import numpy as np
import oracle
import pytest
from engine_support import check_query, check_series, from_position_rollup
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from test_engine import NETWORK, NETWORK_TABLE, network_rows
from tune_support import AGGS, DIMENSIONS, MEASURES, answer, brute, holds_exactly, same_tree

from gridagg.directory import GridDirectory
from gridagg.engine import GridEngine
from gridagg.model.schema import Dataset
from gridagg.query.rollups import DayRollups, MonthRollups, PositionRollups
from gridagg.store import open_store
from gridagg.tree import TreeState

SPEC = {"dimensions": DIMENSIONS, "measures": MEASURES, "grid": {"n_size": 6, "n_threshold": 20}}

coordinate = st.integers(0, 1000)
ranges = st.tuples(coordinate, coordinate).map(sorted).map(tuple)
boxes = st.tuples(ranges, ranges)
# A change: a box deleted, element IDs deleted (indexes into the rows held), rows
# corrected (indexes and their new value), rows inserted.
changes = st.one_of(
    st.tuples(st.just("box"), boxes),
    st.tuples(st.just("ids"), st.lists(st.integers(0, 10**6), min_size=1, max_size=12)),
    st.tuples(st.just("correct"), st.lists(st.tuples(st.integers(0, 10**6), st.integers(-1000, 1000)),
                                           min_size=1, max_size=12)),
    st.tuples(st.just("insert"), st.lists(st.tuples(coordinate, coordinate, st.integers(-1000, 1000)),
                                          min_size=1, max_size=30)),
)


class Held:
    """The rows a dataset holds, as brute force sees them: element IDs and (x, y, v)."""

    def __init__(self, ids: list[str], rows: np.ndarray):
        self.ids, self.rows = list(ids), rows.astype(np.int64)
        self.made = len(ids)

    def apply(self, engine, ds, change) -> None:
        """Make `change` (see `changes`) through the engine and here."""
        kind, what = change
        if kind == "box":
            (x0, x1), (y0, y1) = what
            engine.delete(ds.name, {"x": [x0, x1], "y": [y0, y1]})
            gone = (self.rows[:, 0] >= x0) & (self.rows[:, 0] <= x1) & (self.rows[:, 1] >= y0) & (self.rows[:, 1] <= y1)
        elif kind == "ids":
            if not self.ids:
                return
            picked = sorted({i % len(self.ids) for i in what})
            engine.delete(ds.name, ids=[self.ids[i] for i in picked] + ["never-stored"])
            gone = np.isin(np.arange(len(self.ids)), picked)
        elif kind == "correct":
            if not self.ids:
                return
            fixed = {i % len(self.ids): v for i, v in what}
            at = sorted(fixed)
            new = self.rows[at].copy()
            new[:, 2] = [fixed[i] for i in at]
            result = engine.correct_encoded(ds, [self.ids[i].encode() for i in at], new)
            assert result.replaced + result.duplicates == len(at) and result.stored == 0
            self.rows[at] = new
            return
        else:
            new = np.array(what, np.int64)
            ids = [f"n{self.made + i}" for i in range(len(new))]
            self.made += len(new)
            engine.insert_encoded(ds, [i.encode() for i in ids], new)
            self.ids += ids
            self.rows = np.vstack([self.rows, new])
            return
        self.ids = [e for e, g in zip(self.ids, gone) if not g]
        self.rows = self.rows[~gone]


def observer(engine) -> GridEngine:
    """Another engine on the same servers, as another serving process of the host: its
    tree follows the board's epochs and the change log."""
    return GridEngine(GridDirectory(engine.directory.url), engine.store)


def follows(engine, other, ds, held: Held, qs) -> None:
    """Everything holds after a change: the stored aggregates, the tree, brute-force
    answers (also within a deadline of 0: bounds), and the other engine's tree, kept
    current through the change log, is what a whole load gives."""
    holds_exactly(engine, ds, held.rows, qs)
    for box in qs:
        assert answer(other, ds.name, box) == brute(held.rows, box)
        bounded = other.query(ds.name, {"x": list(box[0]), "y": list(box[1])}, ["count", "sum:v"], deadline=0)
        want = brute(held.rows, box)
        body = bounded.to_json(ds)
        if body["exact"]:
            assert [body["results"]["count"], body["results"]["sum:v"]] == want[:2]
        else:
            for label, value in zip(("count", "sum:v"), want[:2]):
                lo, hi = body["bounds"][label]
                assert (lo is None or lo <= value) and (hi is None or value <= hi), (label, value, lo, hi)
    kept = other.trees.tree(ds)
    version, incarnation, leaves = other.directory.load_tree(ds)
    assert kept.version == version
    same_tree(kept, TreeState.build(ds, version, incarnation, leaves, other.store))


@hsettings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.lists(st.tuples(coordinate, coordinate, st.integers(-1000, 1000)), min_size=10, max_size=120),
       steps=st.lists(changes, min_size=1, max_size=6), qs=st.lists(boxes, min_size=2, max_size=4))
def test_changes_keep_every_answer_aggregate_and_tree_exact(engine, data, steps, qs):
    ds = engine.create_dataset(Dataset.from_json({"name": "d_" + uuid.uuid4().hex[:10], **SPEC}))
    other = observer(engine)
    try:
        held = Held([f"a{i}" for i in range(len(data))], np.array(data))
        engine.insert_encoded(ds, [e.encode() for e in held.ids], held.rows)
        other.query(ds.name, {}, ["count"])  # the other process holds the tree from now on
        for change in steps:
            held.apply(engine, ds, change)
            follows(engine, other, ds, held, qs)
    finally:
        other.directory.close()
        engine.drop_dataset(ds.name)


@hsettings(max_examples=5, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.lists(st.tuples(coordinate, coordinate, st.integers(-1000, 1000)), min_size=40, max_size=160),
       steps=st.lists(changes.filter(lambda c: c[0] != "insert"), min_size=2, max_size=5),
       qs=st.lists(boxes, min_size=2, max_size=4))
def test_a_query_during_a_change_is_exact_before_or_after_it(engine, data, steps, qs):
    """Readers (of this process and of another one) query all along while deletes and
    corrections run: each answer equals brute force over the rows of some state between
    the last change done before it began and the last begun before it ended. (An insert
    is counted row by row as it lands: docs/consistency.md.)"""
    ds = engine.create_dataset(Dataset.from_json({"name": "d_" + uuid.uuid4().hex[:10], **SPEC}))
    other = observer(engine)
    try:
        held = Held([f"a{i}" for i in range(len(data))], np.array(data))
        engine.insert_encoded(ds, [e.encode() for e in held.ids], held.rows)
        states, begun, stop = [held.rows.copy()], [0], threading.Event()
        seen: list[tuple[int, int, tuple, list]] = []

        def reader(eng):
            while not stop.is_set():
                for box in qs:
                    first = len(states) - 1
                    got = answer(eng, ds.name, box)
                    seen.append((first, begun[0], box, got))

        readers = [threading.Thread(target=reader, args=(e,)) for e in (engine, other)]
        for t in readers:
            t.start()
        try:
            for change in steps:
                begun[0] += 1
                held.apply(engine, ds, change)
                states.append(held.rows.copy())
                time.sleep(0.01)
        finally:
            stop.set()
            for t in readers:
                t.join()
        assert seen
        for first, last, box, got in seen:
            assert got in [brute(states[k], box) for k in range(first, last + 1)], (first, last, box, got)
        follows(engine, other, ds, held, qs)
    finally:
        other.directory.close()
        engine.drop_dataset(ds.name)


def test_a_host_with_a_board_of_its_own_follows_changes_through_postgresql(engine, settings, tmp_path, unique_name):
    """A serving process of another host (HBase: a board of its own) learns of a delete
    and a correction through NOTIFY and the change log: its answers are the rows before
    or after, and after within a second or so."""
    if engine.store.kind != "hbase":
        pytest.skip("the embedded store's board is its LMDB directory's: one host")
    ds = engine.create_dataset(Dataset.from_json({"name": unique_name, **SPEC}))
    away = GridEngine(GridDirectory(settings.effective_pg_url),
                      open_store(settings.with_(store="hbase", epoch_dir=tmp_path / "epochs")))
    try:
        rng = np.random.default_rng(3)
        held = Held([f"a{i}" for i in range(200)], np.stack([rng.integers(0, 1001, 200), rng.integers(0, 1001, 200),
                                                             rng.integers(-1000, 1001, 200)], axis=1))
        engine.insert_encoded(ds, [e.encode() for e in held.ids], held.rows)
        box = ((0, 1000), (0, 1000))
        assert answer(away, ds.name, box) == brute(held.rows, box)
        away.directory.listening.wait(10)
        for change in (("box", ((200, 700), (0, 1000))), ("correct", [(5, 999), (6, -999)]), ("ids", [1, 2, 3])):
            before = brute(held.rows, box)
            held.apply(engine, ds, change)
            after = brute(held.rows, box)
            deadline = time.monotonic() + 5
            while (got := answer(away, ds.name, box)) != after:
                assert got == before and time.monotonic() < deadline, (change, got, before, after)
                time.sleep(0.05)
    finally:
        away.close()
        engine.drop_dataset(ds.name)


def test_polygons_and_the_rollups_follow_deletes_and_corrections(engine, unique_name, monkeypatch):
    """A station's month deleted, a polygon deleted, rows corrected: the day series (day
    rollup), questions over position (position rollup) and over position in whole months
    (month rollup) stay brute force, the rollups made again only where the changes
    were."""
    for rollups in (DayRollups, PositionRollups, MonthRollups):
        monkeypatch.setattr(rollups, "REST", 0)
    ds = engine.create_dataset(Dataset.from_json({"name": unique_name, **NETWORK}))
    aggregates = ["count", "sum:temp", "min:temp", "max:temp"]
    triangle = {"type": "Polygon", "coordinates": [[[-8, -8], [0, 0], [8, -8], [-8, -8]]]}  # (0, 0) on its edge
    by_position = [{"aggregates": aggregates, "region": triangle},
                   {"aggregates": aggregates, "where": {"lon": [1.5, 1.5], "lat": [-2, 3.25]}}]
    in_months = [{"aggregates": aggregates, "region": triangle,
                  "where": {"time": ["2012-03-01T00:00:00Z", "2012-05-31T23:59:59Z"]}}]
    series = {"aggregates": aggregates, "step": "7d", "start": "2012-01-01T00:00:00Z", "end": "2012-12-30T23:59:59Z"}
    rows = [{"id": f"r{i}", **row} for i, row in enumerate(network_rows(2400, seed=9))]
    try:
        assert engine.insert(ds.name, rows).stored == len(rows)

        def all_exact():
            seen = NETWORK_TABLE.rows([{k: v for k, v in r.items() if k != "id"} for r in rows])
            check_series(engine, ds.name, NETWORK_TABLE, seen, series)
            for request in by_position:
                from_position_rollup(lambda: check_query(engine, ds.name, NETWORK_TABLE, seen, request),
                                     engine.planner.positions)
            for request in in_months:
                from_position_rollup(lambda: check_query(engine, ds.name, NETWORK_TABLE, seen, request),
                                     engine.planner.months, lambda result: result.plan.rollup_months is not None)

        all_exact()
        # One station's March.
        engine.delete(ds.name, {"lon": [1.5, 1.5], "lat": [3.25, 3.25],
                                "time": ["2012-03-01T00:00:00Z", "2012-03-31T23:59:59Z"]})
        rows = [r for r in rows if not (r["lon"] == 1.5 and r["lat"] == 3.25 and r["time"].startswith("2012-03"))]
        all_exact()
        # Every row inside a polygon (its edge included).
        engine.delete(ds.name, region=triangle)
        inside = {i for i, r in enumerate(NETWORK_TABLE.rows([{k: v for k, v in r.items() if k != "id"} for r in rows]))
                  if oracle.select(NETWORK_TABLE, [r], {"region": triangle})}
        rows = [r for i, r in enumerate(rows) if i not in inside]
        all_exact()
        # Corrections of a few rows, and element IDs deleted at the data's edges.
        fixed = [{**r, "temp": 44.4} for r in rows[:40]]
        assert engine.insert(ds.name, fixed, replace=True).replaced == sum(r["temp"] != 44.4 for r in rows[:40])
        rows = fixed + rows[40:]
        first, last = min(rows, key=lambda r: r["time"]), max(rows, key=lambda r: r["time"])
        engine.delete(ds.name, ids=[first["id"], last["id"]])
        rows = [r for r in rows if r["id"] not in (first["id"], last["id"])]
        all_exact()
        assert engine.check(ds.name) == []
    finally:
        engine.drop_dataset(ds.name)
