"""What the tests of changes in place (test_merge: merges; test_adapt: splits and merges
for sampled questions) share: a two-dimensional dataset with one measure, its answers
against brute force, and the checks after a writer that died or was killed mid-change."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import numpy as np
from engine_support import check_tree

from gridagg.model.aggregate import AggArrays
from gridagg.model.grid import grid_prefix
from gridagg.tune.costmodel import CostModel

AGGS = ["count", "sum:v", "min:v", "max:v"]
DIMENSIONS = [{"name": "x", "min": 0, "max": 1000}, {"name": "y", "min": 0, "max": 1000}]
MEASURES = [{"name": "v", "min": -1000, "max": 1000}]
BOXES = (((0, 1000), (0, 1000)), ((100, 600), (250, 900)), ((0, 300), (0, 300)))

# The head of a child process's script: an engine on the test's store (argv: dataset,
# store kind, LMDB path for the embedded store, fault point to arm).
CHILD_ENGINE = textwrap.dedent("""
    import sys
    from gridagg.write import faults
    from gridagg.config import Settings
    from gridagg.tune.costmodel import CostModel
    from gridagg.directory import GridDirectory
    from gridagg.engine import GridEngine
    from gridagg.store import open_store
    from gridagg.store.embedded import EmbeddedStore
    settings = Settings.from_env()
    store = EmbeddedStore(sys.argv[3]) if sys.argv[2] == "embedded" else open_store(settings.with_(store="hbase"))
    engine = GridEngine(GridDirectory(settings.effective_pg_url), store)
""")


def brute(rows: np.ndarray, box) -> list:
    """[count, sum, min, max] of v over the rows inside box ((x0, x1), (y0, y1))."""
    (x0, x1), (y0, y1) = box
    v = rows[(rows[:, 0] >= x0) & (rows[:, 0] <= x1) & (rows[:, 1] >= y0) & (rows[:, 1] <= y1), 2]
    return [len(v), int(v.sum()), int(v.min()) if len(v) else None, int(v.max()) if len(v) else None]


def answer(engine, name: str, box) -> list:
    """The engine's [count, sum, min, max] of v over box."""
    got = engine.query(name, {"x": list(box[0]), "y": list(box[1])}, AGGS).values
    return [None if got[a] is None else int(got[a]) for a in AGGS]


def insert(engine, ds, rows: np.ndarray, prefix: str) -> None:
    """Insert rows (x, y, v) with element IDs prefix0, prefix1, ..."""
    engine.insert_encoded(ds, [f"{prefix}{i}".encode() for i in range(len(rows))], rows.astype(np.int64))


def random_rows(rng, n: int) -> np.ndarray:
    """n rows (x, y, v) spread over the whole data space."""
    return np.stack([rng.integers(0, 1001, n), rng.integers(0, 1001, n), rng.integers(-1000, 1001, n)], 1)


def kill_child_at(script: str, engine, ds, point: str) -> None:
    """Run `script` (after CHILD_ENGINE) in a child process with fault point `point`
    armed to kill it; asserts it was killed there and left an intent."""
    store_path = engine.store.env.path() if engine.store.kind == "embedded" else ""
    out = subprocess.run([sys.executable, "-c", CHILD_ENGINE + script, ds.name, engine.store.kind, store_path, point],
                         capture_output=True, text=True, env=os.environ.copy(), timeout=120)
    assert out.returncode == -signal.SIGKILL and "not killed" not in out.stdout, out.stderr[-2000:]
    assert engine.directory.pending_intents(ds.name), "the killed change left no intent"


def holds_exactly(engine, ds, rows: np.ndarray, boxes) -> None:
    """Dataset `ds` holds `rows`, its tree well formed (engine_support.check_tree) and its
    stored aggregates true to its rows, and answers every box as brute force does."""
    check_tree(engine, ds.name, rows)
    assert engine.check(ds.name) == []
    for box in boxes:
        assert answer(engine, ds.name, box) == brute(rows, box)


def recovered_by_next_writer(engine, ds, rows: np.ndarray, later: np.ndarray) -> np.ndarray:
    """Insert `later` (the next writer recovers the change that died first) and check that
    no intent is left, the stored aggregates hold and every box of BOXES is exact. Returns
    every row now in the dataset."""
    insert(engine, ds, later, "b")
    rows = np.vstack([rows, later])
    assert not engine.directory.pending_intents(ds.name)
    assert engine.check(ds.name) == []
    for box in BOXES:
        assert answer(engine, ds.name, box) == brute(rows, box)
    return rows


def model_merging_up_to(rows: int) -> CostModel:
    """A cost model in which a cut grid costs as much as `rows` rows."""
    return CostModel("test", 0.1, rows * 1e-6, 1e-6, 0.0)


def same_tree(tree, fresh) -> None:
    """TreeState `tree` (kept current by changes) holds what `fresh` (a whole load) does:
    every grid, row key, child, parent, leaf count, box and aggregate, whatever their order."""
    assert sorted(tree.ids) == sorted(fresh.ids) and tree.leaf_count == fresh.leaf_count
    for t in (tree, fresh):  # made for a store that reads by key (HBase) alone
        assert t.keys == ([grid_prefix(g) for g in t.ids] if fresh.keys is not None else None)
    order = [tree.index[g] for g in fresh.ids]

    def relabel(t, links):
        return [t.ids[j] if j >= 0 else None for j in links.tolist()]

    for name in ("left", "right", "parent"):
        assert relabel(tree, getattr(tree, name)[order]) == relabel(fresh, getattr(fresh, name))
    assert (tree.leaves_below[order] == fresh.leaves_below).all()
    for name in AggArrays.FIELDS:
        assert (getattr(tree.aggs, name)[order] == getattr(fresh.aggs, name)).all()
    for name in ("lo", "hi", "dlo", "dhi"):
        assert (getattr(tree, name)[order] == getattr(fresh, name)).all()
