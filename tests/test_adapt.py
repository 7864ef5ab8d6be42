"""The tree adapted to the questions asked (gridagg.query.questions, gridagg.tune.adapt,
gridagg.tune.online): splits in place keep every answer exact on both stores with a reader
and a writer at work all along; a split in place dying or killed at any step of the
write protocol is recovered by the next writer; the online tuner moves the tree where
the questions go."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
import time
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from tune_support import (
    AGGS,
    BOXES,
    DIMENSIONS,
    MEASURES,
    answer,
    brute,
    holds_exactly,
    insert,
    kill_child_at,
    random_rows,
    recovered_by_next_writer,
)

from gridagg.model.schema import Dataset
from gridagg.query.questions import QuestionSample
from gridagg.tree import TreeState
from gridagg.tune import adapt as adapt_module
from gridagg.tune import costmodel
from gridagg.tune.adapt import adapt
from gridagg.tune.costmodel import CostModel
from gridagg.tune.online import OnlineTuner
from gridagg.write import faults

SPEC = {"dimensions": DIMENSIONS, "measures": MEASURES, "grid": {"n_size": 40, "n_threshold": 400}}
# A store on which a cut grid costs as much as 2 rows: leaves that small boxes cut are
# worth splitting.
CHEAP_GRIDS = CostModel("test", 0.0, 2e-6, 1e-6, 0.0)


@pytest.fixture(autouse=True)
def quick_purge(request):
    """The rows of merged leaves purged 10 s after the merge, not 2 minutes: a tuning run
    waits for that purge before it splits a merged leaf anew (queries here take
    milliseconds)."""
    if "engine" not in request.fixturenames:
        yield
        return
    engine = request.getfixturevalue("engine")
    engine.max_query_seconds, before = 5.0, engine.max_query_seconds
    yield
    engine.max_query_seconds = before


def leaves_in(engine, name: str, box) -> int:
    """Leaves whose split box meets `box`."""
    (x0, x1), (y0, y1) = box
    return sum(1 for g, _ in engine.leaves(name)
               if g.box[0][0] <= x1 and g.box[0][1] >= x0 and g.box[1][0] <= y1 and g.box[1][1] >= y0)


def test_the_sample_is_uniform_and_bounded():
    sample = QuestionSample(size=50)
    for i in range(5000):
        sample.offer("a", i, 1, 10)
    assert sample.seen("a") == 5000 and sample.names() == ["a"]
    kept = [q.query for q in sample.take("a")]
    assert len(kept) == 50 and len(set(kept)) == 50
    assert 1000 < np.mean(kept) < 4000  # spread over all questions offered, not the first ones
    assert sample.seen("a") == 0 and sample.take("a") == []  # a take starts anew


points = st.lists(st.tuples(st.integers(0, 1000), st.integers(0, 1000), st.integers(-1000, 1000)),
                  min_size=100, max_size=400)
ranges = st.tuples(st.integers(0, 1000), st.integers(0, 60)).map(lambda r: (r[0], min(1000, r[0] + r[1])))
boxes = st.lists(st.tuples(ranges, ranges), min_size=3, max_size=8)


@hsettings(max_examples=5, deadline=None, suppress_health_check=list(HealthCheck))
@given(points, boxes, points)
def test_splits_in_place_keep_every_answer_exact_with_a_reader_and_a_writer(engine, unique_name, data, qs, more):
    ds = engine.create_dataset(Dataset.from_json({"name": f"{unique_name}_{len(data)}_{len(more)}", **SPEC}))
    try:
        rows = np.array(data, dtype=np.int64)
        insert(engine, ds, rows, "a")
        for box in qs:  # the questions asked: small boxes, which cut leaves worth splitting
            assert answer(engine, ds.name, box) == brute(rows, box)
        questions = engine.planner.sample.take(ds.name)
        assert len(questions) == len(qs)
        extra = np.array(more, dtype=np.int64)
        batches = np.array_split(extra, 4)
        # Every state a reader may see: the rows after 0, 1, ... of the writer's batches.
        states = [np.vstack([rows, *batches[:k]]) for k in range(len(batches) + 1)]
        wrong, stop = [], threading.Event()

        def reader():
            while not stop.is_set():
                for box in qs:
                    got = answer(engine, ds.name, box)
                    if all(got != brute(s, box) for s in states):
                        wrong.append((box, got))

        def writer():
            for k, batch in enumerate(batches):
                insert(engine, ds, batch, f"b{k}_")

        threads = [threading.Thread(target=reader), threading.Thread(target=writer)]
        for t in threads:
            t.start()
        try:
            done = adapt(engine, ds.name, CHEAP_GRIDS, questions)
        finally:
            threads[1].join()
            stop.set()
            threads[0].join()
        assert wrong == []
        assert all(c.kind == "split" for c in done.changes)
        rows = states[-1]
        holds_exactly(engine, ds, rows, qs)
    finally:
        engine.drop_dataset(ds.name)


def test_small_boxes_split_the_leaves_they_cut_and_a_plan_changes_nothing(engine, unique_name):
    ds = engine.create_dataset(Dataset.from_json({"name": unique_name, **SPEC}))
    try:
        rng = np.random.default_rng(5)
        rows = random_rows(rng, 800)
        insert(engine, ds, rows, "a")
        qs = [((x, x + 30), (y, y + 30)) for x, y in rng.integers(0, 300, (40, 2)).tolist()]
        for box in qs:
            answer(engine, ds.name, box)
        questions = engine.planner.sample.take(ds.name)
        leaves = len(engine.leaves(ds.name))
        planned = adapt(engine, ds.name, CHEAP_GRIDS, questions, apply=False)
        assert planned.changes and len(engine.leaves(ds.name)) == leaves  # only looked
        made = adapt(engine, ds.name, CHEAP_GRIDS, questions)
        assert {c.grid_id for c in made.changes} == {c.grid_id for c in planned.changes}
        assert made.gain_per_question() > 0
        assert len(engine.leaves(ds.name)) == leaves + sum(c.new_leaves - 1 for c in made.changes)
        # Where no question went, nothing changed.
        assert leaves_in(engine, ds.name, ((500, 1000), (500, 1000))) < 0.2 * len(engine.leaves(ds.name))
        for box in qs:
            assert answer(engine, ds.name, box) == brute(rows, box)
        assert engine.check(ds.name) == []
    finally:
        engine.drop_dataset(ds.name)


def test_a_dashboards_fixed_ranges_end_up_read_from_aggregates_alone(engine, unique_name):
    """Questions asked again and again with the same ranges: rounds of splits at their
    bounds (and of merges split anew) until one has nothing left to do, after which no
    leaf is read to answer them (the rows inside sit in grids of their own), and every
    answer stays exact."""
    ds = engine.create_dataset(Dataset.from_json({"name": unique_name, **SPEC}))
    try:
        rows = random_rows(np.random.default_rng(11), 1500)
        insert(engine, ds, rows, "a")
        asked = [((213, 687), (0, 1000)), ((0, 1000), (151, 420)), ((213, 687), (151, 420))]
        rounds = 0
        while True:
            for box in asked * 4:
                assert answer(engine, ds.name, box) == brute(rows, box)
            if adapt(engine, ds.name, CHEAP_GRIDS, engine.planner.sample.take(ds.name)).still:
                break
            rounds += 1
        assert rounds >= 1
        for (x0, x1), (y0, y1) in asked:
            got = engine.query(ds.name, {"x": [x0, x1], "y": [y0, y1]}, AGGS)
            assert got.plan.scanned_grids_after == 0
        holds_exactly(engine, ds, rows, BOXES)
    finally:
        engine.drop_dataset(ds.name)


def test_leaves_a_band_cuts_across_are_merged_and_split_anew_along_it(engine, unique_name):
    """Questions over one band of y and windows of x anywhere: the load cut x and y in
    turn, so each window's edge crosses the band in several small leaves. A round merges
    subtrees priced with their rows split anew; once the old leaves' rows are purged, a
    later round splits them; windows not in the sample then cut fewer leaves, and every
    answer stays exact throughout."""
    ds = engine.create_dataset(Dataset.from_json({"name": unique_name, **SPEC}))
    try:
        rng = np.random.default_rng(3)
        rows = random_rows(rng, 3000)
        insert(engine, ds, rows, "a")

        def windows(seed: int) -> list:
            return [((x, x + 150), (151, 420)) for x in np.random.default_rng(seed).integers(0, 850, 40).tolist()]

        def cut(boxes) -> float:
            return float(np.mean([engine.query(ds.name, {"x": list(x), "y": list(y)}, ["count"])
                                  .plan.scanned_grids_after for x, y in boxes]))

        held_out = windows(99)
        before = cut(held_out)
        for box in windows(1):
            answer(engine, ds.name, box)
        questions = engine.planner.sample.take(ds.name)
        model = CostModel("test", 0.0, 2e-4, 1e-6, 1e-4)  # a cut grid costs 200 rows, a reused aggregate 100
        settled: set = set()
        made = []
        while not (done := adapt(engine, ds.name, model, questions, settled=settled, most_leaves=250)).still:
            made += done.changes
            for box in held_out[:5]:
                assert answer(engine, ds.name, box) == brute(rows, box)
        resplit = {c.grid_id for c in made if c.kind == "merge" and c.resplit}
        assert resplit
        assert resplit & {c.grid_id for c in made if c.kind == "split"}  # split anew after the purge
        assert cut(held_out) < 0.5 * before
        holds_exactly(engine, ds, rows, BOXES + tuple(held_out))
    finally:
        engine.drop_dataset(ds.name)


def test_rounds_on_one_sample_price_each_leaf_once(engine, unique_name, monkeypatch):
    """A tuning run's rounds share one settled set: a leaf priced with no split worth
    making is not priced again, so rounds pricing one leaf each still reach every leaf
    the questions read, each once, and are still (Adapted.still) when none is left."""
    monkeypatch.setattr(adapt_module, "MARGIN", 1.0)  # no change can save all it costs: none is worth making
    monkeypatch.setattr(adapt_module, "RESPLIT_SHARE", 10**9)  # leaves alone are priced
    ds = engine.create_dataset(Dataset.from_json({"name": unique_name, **SPEC}))
    try:
        rng = np.random.default_rng(7)
        insert(engine, ds, random_rows(rng, 800), "a")
        questions = split_questions(engine, ds, rng)
        at_once: set = set()
        assert adapt(engine, ds.name, CHEAP_GRIDS, questions, candidates=10_000, settled=at_once).settled > 1
        settled: set = set()
        rounds = []
        while not (done := adapt(engine, ds.name, CHEAP_GRIDS, questions, candidates=1, settled=settled)).still:
            rounds.append(done)
        assert [(r.changes, r.settled) for r in rounds] == [([], 1)] * len(at_once)
        assert settled == at_once
    finally:
        engine.drop_dataset(ds.name)


def test_splits_keep_the_tree_within_its_leaf_budget(engine, unique_name):
    """Every serving process loads the whole tree: with a budget of leaves (what loads in
    tree_load_seconds, measured at the last load) a round adds no more than fits, the
    splits saving most per leaf added first, after merging parts of the tree no question
    goes to; splits left out are held, not settled, and are made once the budget grows."""
    ds = engine.create_dataset(Dataset.from_json({"name": unique_name, **SPEC}))
    try:
        rng = np.random.default_rng(9)
        rows = random_rows(rng, 1200)
        insert(engine, ds, rows, "a")
        corner = ((0, 400), (0, 400))  # every question here; the rest of the map is asked nothing
        for x, y in rng.integers(0, 370, (40, 2)).tolist():
            answer(engine, ds.name, ((x, x + 30), (y, y + 30)))
        questions = engine.planner.sample.take(ds.name)
        free = adapt(engine, ds.name, CHEAP_GRIDS, questions, apply=False)
        splits = [c for c in free.changes if c.kind == "split"]
        assert len(splits) > 2 and free.held == 0
        leaves = len(engine.leaves(ds.name))
        outside = leaves - leaves_in(engine, ds.name, corner)
        settled: set = set()
        at_budget = adapt(engine, ds.name, CHEAP_GRIDS, questions, settled=settled, most_leaves=leaves)
        made = [c for c in at_budget.changes if c.kind == "split"]
        unread = [c for c in at_budget.changes if c.kind == "merge" and c.before == 0]
        assert made and unread and at_budget.held == len(splits) - len(made)
        assert len(engine.leaves(ds.name)) <= leaves
        assert leaves - leaves_in(engine, ds.name, corner) < outside  # leaves left where nobody asks
        held = {(c.grid_id, c.rows) for c in splits} - {(c.grid_id, c.rows) for c in made}
        assert not settled.intersection(held)
        rest = adapt(engine, ds.name, CHEAP_GRIDS, questions, most_leaves=None)
        assert rest.held == 0
        holds_exactly(engine, ds, rows, BOXES)
        # The budget lowered below the tree: merged back within it where no question goes.
        grown = len(engine.leaves(ds.name))
        lowered = adapt(engine, ds.name, CHEAP_GRIDS, questions, most_leaves=grown - 3)
        assert lowered.changes and all(c.kind == "merge" and c.before == 0 for c in lowered.changes)
        assert len(engine.leaves(ds.name)) <= grown - 3
        holds_exactly(engine, ds, rows, BOXES)
    finally:
        engine.drop_dataset(ds.name)


def test_the_leaf_budget_follows_a_whole_load_of_the_tree(engine, unique_name):
    ds = engine.create_dataset(Dataset.from_json({"name": unique_name, **SPEC}))
    try:
        insert(engine, ds, random_rows(np.random.default_rng(3), 300), "a")
        engine.trees.forget(ds.name)
        engine.trees.tree(ds)  # started from the tree file: no whole load
        # A tree of a few leaves loads in far less than a tenth of 5 s: a time so short
        # bounds nothing (it is the calls' fixed cost, not a rate).
        assert engine.trees.leaves_loadable(ds, 5.0) is None
        took, leaves = engine.trees._loads[ds.name]  # the whole load that ask made, timed
        assert leaves == len(engine.leaves(ds.name))
        # A budget of about that load's time is about that many leaves, and twice it twice as many.
        one = engine.trees.leaves_loadable(ds, took)
        assert one in (leaves - 1, leaves)  # leaves x took / took, in floating point
        assert engine.trees.leaves_loadable(ds, 2 * took) in (2 * one - 1, 2 * one, 2 * one + 1)
        assert engine.trees.leaves_loadable(ds, 0.0) is None  # 0: no limit
    finally:
        engine.drop_dataset(ds.name)


def split_questions(engine, ds, rng) -> list:
    for x, y in rng.integers(0, 950, (40, 2)).tolist():
        answer(engine, ds.name, ((x, x + 30), (y, y + 30)))
    return engine.planner.sample.take(ds.name)


@pytest.mark.parametrize("point", [p for p in faults.POINTS if p.startswith("tune.")])
def test_a_split_in_place_dying_at_any_step_is_recovered_by_the_next_writer(engine, unique_name, point):
    ds = engine.create_dataset(Dataset.from_json({"name": unique_name, **SPEC}))
    try:
        rng = np.random.default_rng(6)
        rows = random_rows(rng, 600)
        insert(engine, ds, rows, "a")
        questions = split_questions(engine, ds, rng)
        with faults.armed(f"{point}=raise"), pytest.raises(faults.FaultInjected):
            adapt(engine, ds.name, CHEAP_GRIDS, questions)
        assert engine.directory.pending_intents(ds.name), "the dying split left no intent"
        rows = recovered_by_next_writer(engine, ds, rows, random_rows(rng, 10))
        assert adapt(engine, ds.name, CHEAP_GRIDS, questions).changes  # and splitting again works
        assert engine.check(ds.name) == []
        for box in BOXES:
            assert answer(engine, ds.name, box) == brute(rows, box)
    finally:
        engine.drop_dataset(ds.name)


SPLITTER = textwrap.dedent("""
    import numpy as np
    from gridagg.tune.adapt import adapt
    for x, y in np.random.default_rng(7).integers(0, 950, (40, 2)).tolist():
        engine.query(sys.argv[1], {"x": [x, x + 30], "y": [y, y + 30]}, ["count"])
    faults.arm({sys.argv[4]: "kill"})
    adapt(engine, sys.argv[1], CostModel("test", 0.0, 2e-6, 1e-6, 0.0), engine.planner.sample.take(sys.argv[1]))
    print("not killed", flush=True)
""")


@pytest.mark.parametrize("point", [p for p in faults.POINTS if p.startswith("tune.")])
def test_a_split_in_place_killed_at_any_step_is_recovered(engine, unique_name, point):
    ds = engine.create_dataset(Dataset.from_json({"name": unique_name, **SPEC}))
    try:
        rows = random_rows(np.random.default_rng(8), 600)
        insert(engine, ds, rows, "a")
        kill_child_at(SPLITTER, engine, ds, point)
        recovered_by_next_writer(engine, ds, rows, rows[:5])
    finally:
        engine.drop_dataset(ds.name)


def test_the_online_tuner_moves_the_tree_where_the_questions_go(engine, unique_name, tmp_path):
    costmodel.save(tmp_path, CostModel(engine.store.kind, *(CHEAP_GRIDS.per_query, CHEAP_GRIDS.per_grid,
                                                            CHEAP_GRIDS.per_row, CHEAP_GRIDS.per_reused)))
    chosen = {**SPEC, "grid": {**SPEC["grid"], "chosen": "by the test"}}  # only such datasets are tuned online
    ds = engine.create_dataset(Dataset.from_json({"name": unique_name, **chosen}))
    given = engine.create_dataset(Dataset.from_json({"name": unique_name + "_given", **SPEC}))
    tuner = OnlineTuner(engine, tmp_path, every=0.2, min_questions=20).start()
    try:
        rng = np.random.default_rng(9)
        rows = random_rows(rng, 1000)
        insert(engine, ds, rows, "a")
        insert(engine, given, rows, "a")
        leaves_given = len(engine.leaves(given.name))
        low, high = ((0, 400), (0, 400)), ((600, 1000), (600, 1000))
        before_low, before_high = leaves_in(engine, ds.name, low), leaves_in(engine, ds.name, high)

        def ask(area, until) -> None:
            """Small boxes in `area`, every answer exact, until `until()` holds (at most 60 s)."""
            (x0, x1), (y0, y1) = area
            deadline = time.monotonic() + 60
            while not until():
                assert time.monotonic() < deadline, "the tree did not move"
                for _ in range(20):
                    x, y = int(rng.integers(x0, x1 - 30)), int(rng.integers(y0, y1 - 30))
                    box = ((x, x + 30), (y, y + 30))
                    assert answer(engine, ds.name, box) == brute(rows, box)
                    answer(engine, given.name, box)

        ask(low, lambda: leaves_in(engine, ds.name, low) > 2 * before_low)
        assert leaves_in(engine, ds.name, high) == before_high  # no question went there yet
        ask(high, lambda: leaves_in(engine, ds.name, high) > 2 * before_high)
        tuner.stop()  # check() reads every row: no write may be under way
        assert engine.check(ds.name) == []
        assert len(engine.leaves(given.name)) == leaves_given  # its n_size was given: left alone
    finally:
        tuner.stop()
        engine.drop_dataset(ds.name)
        engine.drop_dataset(given.name)


@pytest.mark.parametrize("store", ["embedded", "hbase"])
def test_gridagg_tune_prices_the_sampled_questions_prints_what_it_split_and_compacts(settings, services, unique_name,
                                                                                      store):
    from gridagg.engine import GridEngine
    from gridagg.tune.online import sample_path, save_sample

    one_leaf = {**SPEC, "grid": {"n_size": 5000, "n_threshold": 50000}}
    # The CLI prices splits with the store's model in the data dir. A calibration may fit
    # rows no cost (HBase's did on a fresh CI machine), and then no split pays: the test
    # gives the store a model where one does, and puts the calibrated one back after.
    models = costmodel.path(settings.data_dir)
    calibrated = models.read_bytes() if models.exists() else None
    costmodel.save(settings.data_dir, replace(CHEAP_GRIDS, store=store))
    with GridEngine.open(settings.with_(store=store)) as engine:
        ds = engine.create_dataset(Dataset.from_json({"name": unique_name, **one_leaf}))
        try:
            rng = np.random.default_rng(10)
            rows = random_rows(rng, 5000)
            insert(engine, ds, rows, "a")
            for x, y in rng.integers(0, 950, (40, 2)).tolist():
                answer(engine, ds.name, ((x, x + 30), (y, y + 30)))
            save_sample(settings.data_dir, store, ds.name, engine.planner.sample.take(ds.name))
            env = settings.with_(store=store).environ()
            tune = [sys.executable, "-m", "gridagg.cli.main", "tune", ds.name]
            looked = subprocess.run([*tune, "--dry-run"], capture_output=True, text=True, env=env, timeout=120)
            assert looked.returncode == 0, looked.stderr
            assert "priced on 40 questions" in looked.stdout and "would split 1 leaves into" in looked.stdout
            assert len(engine.leaves(ds.name)) == 1
            done = subprocess.run(tune, capture_output=True, text=True, env=env, timeout=120)
            assert done.returncode == 0, done.stderr
            assert "split 1 leaves into" in done.stdout and "predicted gain" in done.stdout
            # HBase keeps the cells a split replaced until a major compaction; tune waits for one.
            compacted = (f"gridagg_{ds.name} major-compacted (a=NONE r=ROW_INDEX_V1)" if store == "hbase"
                         else "nothing to compact")
            assert compacted in done.stdout
            assert len(engine.leaves(ds.name)) > 1
            # New processes start from the tuned tree, in the walk's order (TreeCache.keep).
            assert "tree kept for new processes" in done.stdout
            kept = TreeState.read(engine.trees.files / f"{ds.name}.npz", ds, engine.store)
            assert kept.ids == sorted(kept.ids) and kept.leaf_count == len(engine.leaves(ds.name))
            for box in (((0, 1000), (0, 1000)), ((100, 600), (250, 900))):
                assert answer(engine, ds.name, box) == brute(rows, box)
        finally:
            engine.drop_dataset(ds.name)
            sample_path(settings.data_dir, store, ds.name).unlink(missing_ok=True)
            if calibrated is None:
                models.unlink(missing_ok=True)
            else:
                models.write_bytes(calibrated)
