"""The `gridagg` command as a user runs it: help, settings, errors, check and repair of a
dataset."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from gridagg.cli.main import commands
from gridagg.directory import GridDirectory
from gridagg.engine import GridEngine
from gridagg.model.schema import Dataset
from gridagg.store import open_store

COMMANDS = ["bench", "check", "config", "datasets", "delete", "demo", "drop", "ingest", "query", "repair", "retain",
            "series", "serve", "services", "sql", "tune"]


def gridagg(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gridagg.cli.main", *args], capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, timeout=300)


def test_every_command_registers_through_an_entry_point():
    assert [ep.name for ep in commands()] == COMMANDS


def test_help_lists_every_command_with_its_help():
    out = gridagg("--help")
    assert out.returncode == 0 and out.stderr == ""
    listed = out.stdout.split("positional arguments:")[1].split("options:")[0]
    for command in COMMANDS:
        assert f"    {command} " in listed
    assert "bulk-load archives with Spark" in listed and "GRIDAGG_PG_PORT" in out.stdout


@pytest.mark.parametrize("command, says", [
    ("services", "GRIDAGG_DATA_DIR"), ("check", "GRIDAGG_STORE"), ("repair", "GRIDAGG_STORE"),
    ("config", "GRIDAGG_FAULTS"), ("ingest", "example:NAME"), ("serve", "GRIDAGG_WRITE_TOKEN"),
    ("demo", "--input"), ("bench", "--nsize"),
])
def test_each_command_explains_itself(command, says):
    out = gridagg(command, "--help")
    assert out.returncode == 0 and says in out.stdout
    assert out.stdout.startswith(f"usage: gridagg {command}")


def test_a_bad_setting_is_one_line_and_exit_code_2():
    out = gridagg("config", env={"GRIDAGG_PG_PORT": "abc"})
    assert out.returncode == 2
    assert out.stderr == "gridagg: error: GRIDAGG_PG_PORT must be an integer, not 'abc'\n"


def test_postgresql_down_is_one_line_at_once(tmp_path):
    """Nothing listens on the port: one line naming PostgreSQL, exit code 1, without the
    connection pool's retries and warnings."""
    import socket

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = gridagg("datasets", env={"GRIDAGG_PG_URL": f"postgresql://gridagg@127.0.0.1:{port}/gridagg",
                                   "GRIDAGG_DATA_DIR": str(tmp_path)})
    assert out.returncode == 1
    assert out.stderr.startswith(f"gridagg datasets: error: PostgreSQL at postgresql://gridagg@127.0.0.1:{port}/"
                                 f"gridagg is unreachable: ") and out.stderr.count("\n") == 1, out.stderr


def test_config_shows_the_settings_with_tokens_masked():
    out = gridagg("config", env={"GRIDAGG_WRITE_TOKEN": "w-secret", "GRIDAGG_MAX_POINTS": "77",
                                 "GRIDAGG_PG_PROT": "1"})
    assert out.returncode == 0 and "w-secret" not in out.stdout
    lines = {line.split()[0]: line for line in out.stdout.splitlines()}
    assert "*** (set)" in lines["GRIDAGG_WRITE_TOKEN"]
    assert lines["GRIDAGG_MAX_POINTS"].split()[1:] == ["77", "(environment)"]
    assert "GRIDAGG_PG_PROT is set but is no gridagg setting" in out.stderr


def test_demo_without_archives_says_what_to_pass(tmp_path):
    out = gridagg("demo", "--input", str(tmp_path / "nothing"))
    assert out.returncode == 2
    assert out.stderr == f"gridagg: error: --input {tmp_path / 'nothing'} does not exist\n"


def test_an_installed_demo_asks_for_its_archives(tmp_path, monkeypatch):
    """Where no checkout's archives lie beside the package, --input has no default."""
    import argparse

    from gridagg_demo import cli as demo_cli

    from gridagg.config import Settings
    from gridagg.model.errors import InvalidInput

    monkeypatch.setattr(demo_cli, "CHECKOUT_WEATHER", tmp_path / "shared" / "data" / "weather")
    parser = argparse.ArgumentParser()
    demo_cli.register(parser.add_subparsers())
    args = parser.parse_args(["demo"])
    assert args.input is None
    with pytest.raises(InvalidInput, match="the demo needs --input DIR"):
        args.func(Settings.from_env().with_(data_dir=tmp_path), args)


def test_ingest_names_the_shipped_examples(tmp_path):
    out = gridagg("ingest", "example:nosuch", str(tmp_path))
    assert out.returncode == 2
    assert "no example config 'nosuch'; the examples: weather, weather_generated" in out.stderr


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
        exact = f"{unique_name}: aggregates exact, every row under a leaf\n"
        out = gridagg("check", unique_name, env=env)
        assert (out.returncode, out.stdout) == (0, exact), out.stderr
        leaves = engine.leaves(unique_name)
        leaf = leaves[0][0].grid_id
        broken = engine.store.get_aggregates(ds, [leaf])[leaf]
        broken.count += 1
        engine.store.put_aggregates(ds, {leaf: broken})
        engine.store.close()  # let the command open the embedded store
        out = gridagg("check", unique_name, env=env)
        assert out.returncode == 1 and f"grid {leaf}" in out.stdout
        out = gridagg("repair", unique_name, env=env)
        assert (out.returncode, out.stdout) == (
            0, f"{unique_name}: rebuilt the aggregates of {len(leaves)} leaves from their rows\n"), out.stderr
        out = gridagg("check", unique_name, env=env)
        assert (out.returncode, out.stdout) == (0, exact), out.stderr
    finally:
        engine = GridEngine(GridDirectory(settings.effective_pg_url), open_store(settings))
        engine.drop_dataset(unique_name)
        engine.store.close()
