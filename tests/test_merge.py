"""Merging leaves in place (gridagg.tune.merge, `gridagg tune NAME`): answers stay exact before,
during (a reader querying all along) and after merges, on both stores; a merge dying at
any step of the write protocol is recovered like a split; the tree stays exact."""

from __future__ import annotations

import textwrap
import threading

import numpy as np
import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from tune_support import (
    BOXES,
    DIMENSIONS,
    MEASURES,
    answer,
    brute,
    holds_exactly,
    insert,
    kill_child_at,
    model_merging_up_to,
    random_rows,
    recovered_by_next_writer,
    same_tree,
)

from gridagg.model.schema import Dataset
from gridagg.tune.merge import tune
from gridagg.write import faults

SPEC = {"dimensions": DIMENSIONS, "measures": MEASURES, "grid": {"n_size": 4, "n_threshold": 40}}


points = st.lists(st.tuples(st.integers(0, 1000), st.integers(0, 1000), st.integers(-1000, 1000)),
                  min_size=20, max_size=150)
ranges = st.tuples(st.integers(0, 1000), st.integers(0, 1000)).map(sorted).map(tuple)
boxes = st.lists(st.tuples(ranges, ranges), min_size=3, max_size=6)


@hsettings(max_examples=6, deadline=None, suppress_health_check=list(HealthCheck))
@given(points, boxes, st.integers(2, 40), points)
def test_merges_keep_every_answer_exact(engine, unique_name, data, qs, target, more):
    ds = engine.create_dataset(Dataset.from_json({"name": f"{unique_name}_{len(data)}_{target}", **SPEC}))
    try:
        rows = np.array(data, dtype=np.int64)
        insert(engine, ds, rows, "a")
        leaves_before = len(engine.leaves(ds.name))
        wrong, stop = [], threading.Event()

        def reader():  # queries all along while the merges run: never a wrong answer
            while not stop.is_set():
                for box in qs:
                    got = answer(engine, ds.name, box)
                    if got != brute(rows, box):
                        wrong.append((box, got))

        t = threading.Thread(target=reader)
        t.start()
        try:
            merges, _ = tune(engine, ds.name, model_merging_up_to(target))
        finally:
            stop.set()
            t.join()
        assert wrong == []
        assert len(engine.leaves(ds.name)) == leaves_before - sum(len(m.leaves) - 1 for m in merges)
        holds_exactly(engine, ds, rows, qs)
        # Writes after merges: rows land in merged leaves, answers stay exact.
        extra = np.array(more, dtype=np.int64)
        insert(engine, ds, extra, "b")
        rows = np.vstack([rows, extra])
        for box in qs:
            assert answer(engine, ds.name, box) == brute(rows, box)
        assert engine.check(ds.name) == []
    finally:
        engine.drop_dataset(ds.name)


@pytest.mark.parametrize("point", [p for p in faults.POINTS if p.startswith("tune.")])
def test_a_merge_dying_at_any_step_is_recovered_by_the_next_writer(engine, unique_name, point):
    ds = engine.create_dataset(Dataset.from_json({"name": unique_name, **SPEC}))
    try:
        rng = np.random.default_rng(8)
        rows = random_rows(rng, 120)
        insert(engine, ds, rows, "a")
        with faults.armed(f"{point}=raise"), pytest.raises(faults.FaultInjected):
            tune(engine, ds.name, model_merging_up_to(30))
        assert engine.directory.pending_intents(ds.name), "the dying merge left no intent"
        rows = recovered_by_next_writer(engine, ds, rows, random_rows(rng, 10))
        tune(engine, ds.name, model_merging_up_to(30))  # and merging again works
        for box in BOXES:
            assert answer(engine, ds.name, box) == brute(rows, box)
    finally:
        engine.drop_dataset(ds.name)


MERGER = textwrap.dedent("""
    from gridagg.tune.merge import tune
    faults.arm({sys.argv[4]: "kill"})
    tune(engine, sys.argv[1], CostModel("test", 0.1, 30e-6, 1e-6, 0.0))
    print("not killed", flush=True)
""")


@pytest.mark.parametrize("point", [p for p in faults.POINTS if p.startswith("tune.")])
def test_a_merge_killed_at_any_step_is_recovered_like_a_split(engine, unique_name, point):
    ds = engine.create_dataset(Dataset.from_json({"name": unique_name, **SPEC}))
    try:
        rng = np.random.default_rng(9)
        rows = random_rows(rng, 120)
        insert(engine, ds, rows, "a")
        kill_child_at(MERGER, engine, ds, point)
        recovered_by_next_writer(engine, ds, rows, rows[:5])
    finally:
        engine.drop_dataset(ds.name)


def test_merged_leaves_keep_their_rows_through_the_purge_and_split_again_after_it(engine, unique_name):
    ds = engine.create_dataset(Dataset.from_json({"name": unique_name, **SPEC}))
    try:
        rng = np.random.default_rng(10)
        rows = random_rows(rng, 150)
        insert(engine, ds, rows, "a")
        merges, _ = tune(engine, ds.name, model_merging_up_to(40))
        assert merges
        engine.max_query_seconds = 0.0  # nothing can still be running: purge at the next write
        try:
            # Rows into the merged grids until they pass N_threshold: they split at this
            # write only once the old leaves' rows are purged (which it does first).
            more = random_rows(rng, 400)
            insert(engine, ds, more, "b")
        finally:
            engine.max_query_seconds = 60.0
        rows = np.vstack([rows, more])
        assert not set(engine.directory.retired_before(ds.name, 0)) & {g for m in merges for g in m.leaves}
        holds_exactly(engine, ds, rows, BOXES)  # no leaf past N_threshold: the merged grids split again
    finally:
        engine.drop_dataset(ds.name)


def test_a_tree_held_from_before_merges_and_splits_again_is_rebuilt(engine, unique_name):
    from gridagg.tree import TreeCache

    ds = engine.create_dataset(Dataset.from_json({"name": unique_name, **SPEC}))
    try:
        rng = np.random.default_rng(12)
        rows = random_rows(rng, 150)
        insert(engine, ds, rows, "a")
        held = TreeCache(engine.directory, engine.store)  # another reader's tree, from before
        held.tree(ds)
        assert tune(engine, ds.name, model_merging_up_to(40))[0]
        engine.max_query_seconds = 0.0
        try:  # the merged leaves split again, under the IDs of the leaves they replaced
            more = random_rows(rng, 400)
            insert(engine, ds, more, "b")
        finally:
            engine.max_query_seconds = 60.0
        tree = held.tree(ds)
        leaves = {tree.ids[i] for i in range(tree.n) if tree.left[i] < 0}
        assert len(set(tree.ids)) == len(tree.ids)
        assert leaves == {g.grid_id for g in engine.directory.leaves(ds)}
        assert int(tree.aggs.count[tree.root]) == len(rows) + len(more)
    finally:
        engine.drop_dataset(ds.name)


def test_a_tree_held_from_before_merges_follows_them_without_a_whole_load(engine, unique_name):
    """A process holding the tree sees merges as changes like any other (the merged grids
    become leaves, the grids below them go) and ends where a whole load from the directory
    would: every grid, child, parent, leaf count and aggregate the same."""
    from gridagg.tree import TreeCache

    ds = engine.create_dataset(Dataset.from_json({"name": unique_name, **SPEC}))
    try:
        rng = np.random.default_rng(13)
        rows = random_rows(rng, 300)
        insert(engine, ds, rows, "a")
        held = TreeCache(engine.directory, engine.store)
        held.tree(ds)
        loads = dict(held._loads)
        assert tune(engine, ds.name, model_merging_up_to(40))[0]
        tree = held.tree(ds)
        assert held._loads == loads, "the merges were followed with a whole load"
        fresh = TreeCache(engine.directory, engine.store).tree(ds)
        same_tree(tree, fresh)
        assert tree.touched_since(fresh.version) == set() and tree.touched_since(0) is None
        holds_exactly(engine, ds, rows, BOXES)
    finally:
        engine.drop_dataset(ds.name)
