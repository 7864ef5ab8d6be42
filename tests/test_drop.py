"""Dropping a dataset (GridEngine.drop_dataset), on both stores: its directory, change
log, intents and retention go, its store tables go (the embedded store reuses their
pages, HBase deletes the table), this host's tree file and the process's tree and
rollups go; another process learns it is gone; a dataset made again under its name
starts empty."""

from __future__ import annotations

import os

import numpy as np
import pytest
from tune_support import DIMENSIONS, MEASURES, random_rows

from gridagg.directory import GridDirectory
from gridagg.engine import GridEngine
from gridagg.model.errors import UnknownDataset
from gridagg.model.schema import Dataset

SPEC = {"dimensions": DIMENSIONS, "measures": MEASURES, "grid": {"n_size": 50, "n_threshold": 200}}


def stored_tables(engine, name: str) -> bool:
    """Whether the store holds tables of dataset `name`."""
    if engine.store.kind == "hbase":
        return engine.store.has_table(name)
    with engine.store.env.begin() as txn:  # named databases are keys of the main one
        return any(key.startswith(f"{name}/".encode()) for key, _ in txn.cursor())


def load(engine, ds, n: int, seed: int) -> np.ndarray:
    rows = random_rows(np.random.default_rng(seed), n)
    for s in range(0, n, 5000):
        engine.insert_encoded(ds, [f"a{i}".encode() for i in range(s, min(n, s + 5000))], rows[s:s + 5000])
    return rows


def test_a_drop_takes_everything_of_the_dataset(engine, unique_name):
    ds = engine.create_dataset(Dataset.from_json({"name": unique_name, **SPEC}))
    other = GridEngine(GridDirectory(engine.directory.url), engine.store)
    try:
        load(engine, ds, 2000, seed=1)
        assert other.query(ds.name, {}, ["count"]).values["count"] == 2000
        engine.trees.keep(ds)
        tree_file = engine.trees.files / f"{ds.name}.npz"
        assert tree_file.exists() and stored_tables(engine, ds.name)
        engine.drop_dataset(ds.name)
        assert ds.name not in [d.name for d in engine.directory.datasets()]
        assert not stored_tables(engine, ds.name) and not tree_file.exists()
        for eng in (engine, other):  # this process, and another that held its tree
            with pytest.raises(UnknownDataset):
                eng.query(ds.name, {}, ["count"])
        with engine.directory.connection() as conn:
            for table in ("gridagg_changes", "gridagg_intents", "gridagg_retired"):
                assert conn.execute(f"SELECT count(*) FROM {table} WHERE dataset = %s", (ds.name,)).fetchone()[0] == 0
        # Made again under its name: empty, and its own.
        again = engine.create_dataset(Dataset.from_json({"name": unique_name, **SPEC}))
        assert other.query(again.name, {}, ["count"]).values["count"] == 0
        assert engine.directory.retain(again.name) is None
        engine.drop_dataset(again.name)
    finally:
        other.directory.close()
        engine.drop_dataset(unique_name)


def test_the_embedded_store_reuses_a_dropped_datasets_pages(engine, unique_name):
    """What a drop frees, the next dataset's rows take: the file grows by little."""
    if engine.store.kind != "embedded":
        pytest.skip("HBase frees a deleted table's files itself (its cleaner, a minute here)")
    path = os.path.join(engine.store.env.path(), "data.mdb")
    names = [unique_name, unique_name + "_b"]
    try:
        ds = engine.create_dataset(Dataset.from_json({"name": names[0], **SPEC}))
        load(engine, ds, 40_000, seed=2)
        grown = os.path.getsize(path)
        engine.drop_dataset(ds.name)
        ds = engine.create_dataset(Dataset.from_json({"name": names[1], **SPEC}))
        load(engine, ds, 40_000, seed=3)
        assert os.path.getsize(path) < grown * 1.25
    finally:
        for name in names:
            engine.drop_dataset(name)
