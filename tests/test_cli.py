"""The `gridagg` command as a user runs it: help, check and repair of a dataset."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np

from gridagg.directory import GridDirectory
from gridagg.engine import GridEngine
from gridagg.schema import Dataset
from gridagg.store import open_store


def gridagg(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gridagg.cli", *args], capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, timeout=300)


def test_help_lists_every_command():
    out = gridagg("--help")
    assert out.returncode == 0
    for command in ["demo", "services", "ingest", "serve", "check", "repair", "bench"]:
        assert command in out.stdout


def test_check_finds_a_broken_aggregate_and_repair_fixes_it(settings, services, unique_name, tmp_path):
    # The embedded store in a data dir of its own; PostgreSQL is the test servers'.
    env = {"GRIDAGG_DATA_DIR": str(tmp_path), "GRIDAGG_PG_URL": settings.effective_pg_url}
    settings = settings.with_(data_dir=tmp_path)
    engine = GridEngine(GridDirectory(settings.effective_pg_url), open_store(settings))
    try:
        ds = engine.create_dataset(Dataset.from_json({
            "name": unique_name, "dimensions": [{"name": "x", "min": 0, "max": 99}],
            "grid": {"n_size": 5, "n_threshold": 10}}))
        engine.insert_encoded(ds, [f"e{i}".encode() for i in range(30)], np.arange(30).reshape(30, 1))
        assert gridagg("check", unique_name, env=env).returncode == 0
        leaf = engine.leaves(unique_name)[0][0].grid_id
        broken = engine.store.get_aggregates(ds, [leaf])[leaf]
        broken.count += 1
        engine.store.put_aggregates(ds, {leaf: broken})
        engine.store.close()  # let the command open the embedded store
        out = gridagg("check", unique_name, env=env)
        assert out.returncode == 1 and f"grid {leaf}" in out.stdout
        assert gridagg("repair", unique_name, env=env).returncode == 0
        assert gridagg("check", unique_name, env=env).returncode == 0
    finally:
        engine = GridEngine(GridDirectory(settings.effective_pg_url), open_store(settings))
        engine.drop_dataset(unique_name)
        engine.store.close()
