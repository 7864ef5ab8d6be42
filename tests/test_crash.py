"""Crash safety: writes that die half-way are recovered by the next writer or `repair`,
split leaves keep their rows for running queries, and `check` finds what is wrong."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest
from engine_support import check_tree

from gridagg.model.grid import grid_prefix, prefix_range, row_key
from gridagg.model.schema import Dataset
from gridagg.write import faults

SPEC = {
    "dimensions": [{"name": "x", "min": 0, "max": 1000}, {"name": "y", "min": 0, "max": 1000}],
    "measures": [{"name": "v", "min": -1000, "max": 1000}],
    "grid": {"n_size": 10, "n_threshold": 30},
}


@pytest.fixture
def dataset(engine, unique_name):
    ds = engine.create_dataset(Dataset.from_json({"name": unique_name, **SPEC}))
    yield ds
    engine.drop_dataset(ds.name)


def rows_of(seed: int, n: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.stack([rng.integers(0, 1001, n), rng.integers(0, 1001, n), rng.integers(-1000, 1001, n)], axis=1)


def insert(engine, ds, rows: np.ndarray, prefix: str):
    ids = [f"{prefix}{i}".encode() for i in range(len(rows))]
    return engine.insert_encoded(ds, ids, rows.astype(np.int64))


@pytest.mark.parametrize("recovered_by", ["the next writer", "repair"])
@pytest.mark.parametrize("point", [p for p in faults.POINTS if p.startswith("insert.")])
def test_an_insert_dying_at_any_step_of_the_write_protocol_is_recovered(engine, dataset, point, recovered_by):
    base = rows_of(4, 30)  # exactly N_threshold: the next rows split the leaf
    insert(engine, dataset, base, "a")
    crashed = rows_of(5, 5)
    with faults.armed(f"{point}=raise"), pytest.raises(faults.FaultInjected):
        insert(engine, dataset, crashed, "b")
    assert engine.directory.pending_intents(dataset.name), "the dying write left no intent"
    if recovered_by == "repair":
        engine.repair(dataset.name)
    later = rows_of(6, 40)  # splits again
    insert(engine, dataset, later, "c")
    # The dying write had stored its rows at every step: after recovery they count once.
    check_tree(engine, dataset.name, np.vstack([base, crashed, later]))
    assert engine.check(dataset.name) == []
    assert not engine.directory.pending_intents(dataset.name)


@pytest.mark.parametrize("recovered_by", ["the next writer", "repair"])
def test_an_insert_that_stored_part_of_its_rows_is_completed_by_recovery(engine, dataset, recovered_by):
    # HBase applies a put of many grid rows row by row: a writer killed during it (or an
    # HBase failing under it) leaves some of its rows stored and the others not.
    base = rows_of(4, 30)
    insert(engine, dataset, base, "a")
    crashed = rows_of(5, 8)
    ids = [f"b{i}".encode() for i in range(len(crashed))]
    with pytest.raises(RuntimeError, match="died"):
        with engine.writing(dataset, "insert") as write:
            leaf_of = engine.directory.locate(dataset, crashed[:, : dataset.ndim])
            write.intend(sorted(set(leaf_of)), (ids, crashed))
            write.put_rows([row_key(g, e) for g, e in zip(leaf_of[:3], ids)], crashed[:3])
            raise RuntimeError("the writer died with 3 of its 8 rows stored")
    if recovered_by == "repair":
        engine.repair(dataset.name)
    later = rows_of(6, 40)  # splits
    insert(engine, dataset, later, "c")
    check_tree(engine, dataset.name, np.vstack([base, crashed, later]))
    assert engine.check(dataset.name) == []
    assert insert(engine, dataset, crashed, "b").duplicates == len(crashed)  # a retry finds every row stored


def test_split_leaves_keep_their_rows_until_no_query_needs_them(engine, dataset):
    insert(engine, dataset, rows_of(7, 31), "a")  # splits the root
    retired = engine.directory.retired_before(dataset.name, 0)
    assert retired == ["0"]
    old_rows = list(engine.store.scan_rows(dataset, *prefix_range(grid_prefix("0"))))
    assert sum(len(k) for k, _ in old_rows) == 31  # still there for queries that saw "0"
    engine.max_query_seconds = 0.0  # nothing can still be running: purge at the next write
    try:
        insert(engine, dataset, rows_of(8, 1), "b")
    finally:
        engine.max_query_seconds = 60.0
    assert engine.directory.retired_before(dataset.name, 0) == []
    assert list(engine.store.scan_rows(dataset, *prefix_range(grid_prefix("0")))) == []
    assert engine.check(dataset.name) == []


WRITER = textwrap.dedent("""
    import sys, numpy as np
    from gridagg.config import Settings
    from gridagg.directory import GridDirectory
    from gridagg.engine import GridEngine
    from gridagg.store import open_store
    from gridagg.store.embedded import EmbeddedStore
    settings = Settings.from_env()
    store = EmbeddedStore(sys.argv[3]) if sys.argv[2] == "embedded" else open_store(settings.with_(store="hbase"))
    engine = GridEngine(GridDirectory(settings.effective_pg_url), store)
    ds = engine.dataset(sys.argv[1])
    rng = np.random.default_rng(11)
    for batch in range(10_000):
        rows = np.stack([rng.integers(0, 1001, 20), rng.integers(0, 1001, 20), rng.integers(-1000, 1001, 20)], axis=1)
        engine.insert_encoded(ds, [f"k{batch}-{i}".encode() for i in range(20)], rows)
        print(batch, flush=True)  # acknowledged
""")


def test_a_writer_killed_at_random_points_loses_nothing_acknowledged(engine, dataset, settings, tmp_path):
    store_path = getattr(engine.store.env, "path", lambda: "")() if engine.store.kind == "embedded" else ""
    rng = np.random.default_rng(5)
    acknowledged = -1
    for round_ in range(3):
        proc = subprocess.Popen(
            [sys.executable, "-c", WRITER, dataset.name, engine.store.kind, store_path],
            stdout=subprocess.PIPE, text=True, env=os.environ.copy(),
        )
        deadline = time.monotonic() + 60
        seen = 0
        target = int(rng.integers(3, 12))
        while seen < target and time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            seen += 1
            acknowledged = max(acknowledged, int(line))
        time.sleep(float(rng.uniform(0, 0.3)))  # land somewhere inside a write
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        assert seen == target, "the writer did not get going"
    engine.repair(dataset.name)
    assert engine.check(dataset.name) == []
    # Every acknowledged batch is there, counted once (each run rewrites the same keys).
    stored = {k for keys, _ in engine.store.scan_rows(dataset, b"", b"\xff\xff") for k in keys
              if engine.directory.grid(dataset, k[1 : k.index(b"-", 1)].decode())}
    elements = {k[k.index(b"-", 1) + 1 :] for k in stored}
    assert len(elements) == len(stored)  # no element under two leaves
    for batch in range(acknowledged + 1):
        assert f"k{batch}-0".encode() in elements
    total = engine.query(dataset.name, {}, ["count"]).values["count"]
    assert total == len(stored)
