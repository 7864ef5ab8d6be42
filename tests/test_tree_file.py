"""The tree file (gridagg.tree.TreeCache): a new process on the host starts from the tree
a process before it kept, catches up through the change log, and holds what a whole load
would (so does a process holding the tree, whatever the changes); a file the log no longer reaches back to, a damaged one, or one of a dataset
dropped and made again is passed over; one that cannot be written fails no query. On
both stores."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
from tune_support import (
    BOXES,
    DIMENSIONS,
    MEASURES,
    holds_exactly,
    insert,
    model_merging_up_to,
    random_rows,
    same_tree,
)

from gridagg import tree as tree_module
from gridagg.directory import changes
from gridagg.directory.leaves import LeavesOverlap
from gridagg.model.grid import Grid, children
from gridagg.model.schema import Dataset
from gridagg.tree import TreeCache, TreeState
from gridagg.tune.merge import tune

SPEC = {"dimensions": DIMENSIONS, "measures": MEASURES, "grid": {"n_size": 4, "n_threshold": 40}}


def new_process(engine) -> TreeCache:
    """The trees of a process that starts now on the engine's host (its board)."""
    return TreeCache(engine.directory, engine.store, engine.store.board)


def whole_load(engine, ds):
    return TreeCache(engine.directory, engine.store).tree(ds)


def test_a_new_process_starts_from_the_tree_file_and_catches_up(engine, unique_name):
    ds = engine.create_dataset(Dataset.from_json({"name": unique_name, **SPEC}))
    try:
        rng = np.random.default_rng(21)
        rows = random_rows(rng, 300)
        insert(engine, ds, rows, "a")
        engine.trees.tree(ds)  # the process's first query of the dataset: a whole load
        kept = engine.trees.files / f"{ds.name}.npz"
        assert kept.exists(), "the whole load wrote no tree file"
        # Since the file: rows added (leaves split) and grids merged.
        more = random_rows(rng, 200)
        insert(engine, ds, more, "b")
        assert tune(engine, ds.name, model_merging_up_to(40))[0]
        rows = np.concatenate([rows, more])
        later = new_process(engine)
        tree = later.tree(ds)
        assert not later._loads, "it loaded the tree whole"
        same_tree(tree, whole_load(engine, ds))
        holds_exactly(engine, ds, rows, BOXES)
    finally:
        engine.drop_dataset(ds.name)
    assert not kept.exists(), "the drop left the tree file"


def test_a_tree_grown_by_refreshes_is_put_back_in_preorder_as_it_drifts_and_in_its_file(engine, unique_name,
                                                                                         monkeypatch):
    ds = engine.create_dataset(Dataset.from_json({"name": unique_name, **SPEC}))
    try:
        rng = np.random.default_rng(26)
        rows = random_rows(rng, 300)
        insert(engine, ds, rows, "a")
        engine.trees.tree(ds)  # a whole load: in preorder
        # (batch, file due, share of grids out of order the process bears, in preorder after)
        for batch, due, share, ordered in (("b", False, 100, False), ("c", False, 1 / 8, True), ("d", True, 100, True)):
            monkeypatch.setattr(tree_module, "TREE_FILE_SECONDS", 0 if due else 3600)
            monkeypatch.setattr(tree_module, "OUT_OF_ORDER_SHARE", share)
            more = random_rows(rng, 1500)
            insert(engine, ds, more, batch)  # leaves split: the refresh appends their grids
            rows = np.concatenate([rows, more])
            held = engine.trees.tree(ds)
            assert (held.ids == sorted(held.ids)) == ordered, f"batch {batch}: the walk's order"
            same_tree(held, whole_load(engine, ds))
        kept = TreeState.read(engine.trees.files / f"{ds.name}.npz", ds, engine.store)
        assert kept.ids == sorted(kept.ids) and kept.version == held.version
        same_tree(kept, held)
        holds_exactly(engine, ds, rows, BOXES)
    finally:
        engine.drop_dataset(ds.name)


def test_a_tree_file_out_of_the_change_logs_reach_is_passed_over(engine, unique_name, monkeypatch):
    ds = engine.create_dataset(Dataset.from_json({"name": unique_name, **SPEC}))
    try:
        rng = np.random.default_rng(22)
        insert(engine, ds, random_rows(rng, 300), "a")
        engine.trees.tree(ds)
        insert(engine, ds, random_rows(rng, 100), "b")
        monkeypatch.setattr(changes, "CHANGE_LOG_SECONDS", 0)
        engine.directory.prune_changes(ds.name)  # the log forgets every change the file would need
        later = new_process(engine)
        same_tree(later.tree(ds), whole_load(engine, ds))
        assert later._loads, "it caught up from a file the log no longer reaches"
    finally:
        engine.drop_dataset(ds.name)


def test_a_damaged_tree_file_or_one_of_a_dataset_made_before_is_passed_over(engine, unique_name, tmp_path):
    spec = {"name": unique_name, **SPEC}
    ds = engine.create_dataset(Dataset.from_json(spec))
    insert(engine, ds, random_rows(np.random.default_rng(23), 300), "a")
    engine.trees.forget(ds.name)
    engine.trees.tree(ds)
    kept = engine.trees.files / f"{ds.name}.npz"
    shutil.copy(kept, tmp_path / "before.npz")
    engine.drop_dataset(ds.name)
    ds = engine.create_dataset(Dataset.from_json(spec))
    try:
        rows = random_rows(np.random.default_rng(24), 50)
        insert(engine, ds, rows, "a")
        no_version = tmp_path / "no-version.npz"
        with np.load(tmp_path / "before.npz") as f:
            np.savez(no_version, **{k: f[k] for k in f.files if k != "version"})
        for stale in (tmp_path / "before.npz", no_version, None):
            if stale is None:
                kept.write_bytes(b"not a tree")
            else:
                shutil.copy(stale, kept)
            later = new_process(engine)
            same_tree(later.tree(ds), whole_load(engine, ds))
            assert later._loads, "it started from a file it should have passed over"
        holds_exactly(engine, ds, rows, BOXES)
    finally:
        engine.drop_dataset(ds.name)


def test_a_tree_file_that_cannot_be_written_costs_the_query_nothing(engine, unique_name, tmp_path, caplog):
    ds = engine.create_dataset(Dataset.from_json({"name": unique_name, **SPEC}))
    try:
        insert(engine, ds, random_rows(np.random.default_rng(25), 100), "a")
        process = new_process(engine)
        process.files = tmp_path / "a file, not a folder"
        process.files.write_bytes(b"")
        same_tree(process.tree(ds), whole_load(engine, ds))
        assert "tree file" in caplog.text and unique_name in caplog.text
    finally:
        engine.drop_dataset(ds.name)


def switch(engine, ds, old: list[str], new: list) -> None:
    """Replace leaves `old` by `new` (Grids) in one write, as a merge or a cut does (the
    dataset holds no rows)."""
    with engine.writing(ds, "tune") as write:
        write.intend(old + [g.grid_id for g in new])
        write.switch(old, new)
        write.end([g.grid_id for g in new])


def test_a_process_follows_a_merged_grid_cut_again_elsewhere(engine, unique_name):
    """A change cuts a leaf where the rows left after it lie (gridagg.write.change), so a
    grid merged into one leaf may come back under the IDs the held tree knows as its
    inner grids, in other boxes: a process holding the tree from before takes the boxes
    from the directory, not its own."""
    ds = engine.create_dataset(Dataset.from_json({"name": unique_name, **SPEC}))
    try:
        root = engine.directory.grid(ds, "0")
        low, high = children(root, 0, 500, 2)
        switch(engine, ds, ["0"], [low, high])
        switch(engine, ds, [low.grid_id, high.grid_id], [*children(low, 1, 500, 2), *children(high, 1, 500, 2)])
        other = TreeCache(engine.directory, engine.store)
        assert other.tree(ds).leaf_count == 4
        switch(engine, ds, ["000", "001", "010", "011"], [root])  # merged into the root
        switch(engine, ds, ["0"], list(children(root, 0, 700, 2)))  # and cut again elsewhere
        same_tree(other.tree(ds), whole_load(engine, ds))
    finally:
        engine.drop_dataset(ds.name)


def test_a_switch_to_leaves_that_overlap_is_refused(engine, unique_name):
    """The directory switch checks its new leaves against the others on the GiST index: a
    writer whose tree was not the directory's switches nothing, and its process loads the
    tree whole at its next use."""
    ds = engine.create_dataset(Dataset.from_json({"name": unique_name, **SPEC}))
    try:
        root = engine.directory.grid(ds, "0")
        low, high = children(root, 0, 500, 2)
        switch(engine, ds, ["0"], [low, high])
        engine.trees.tree(ds)
        wider = Grid(low.grid_id, ((0, 700), low.box[1]), low.next_axis)  # reaches into the high child
        with pytest.raises(LeavesOverlap, match=f"leaf 00 of dataset '{ds.name}' would overlap leaf 01"):
            switch(engine, ds, [low.grid_id], [wider])
        assert engine.directory.leaves(ds) == [low, high]
        assert engine.directory.pending_intents(ds.name), "the refused write left its intent for the next writer"
        assert ds.name not in engine.trees._held
        switch(engine, ds, [high.grid_id], list(children(high, 1, 300, 2)))  # the next write recovers, and goes on
        assert engine.check(ds.name) == []
        same_tree(engine.trees.tree(ds), whole_load(engine, ds))
    finally:
        engine.drop_dataset(ds.name)
