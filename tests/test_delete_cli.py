"""`gridagg delete`, `gridagg retain` and `gridagg drop` as a user runs them (the embedded
store in a data dir of its own, the test servers' PostgreSQL): what they print, what
they change, and bad input as one line and exit code 2, changing nothing."""

from __future__ import annotations

import json

import numpy as np
import pytest
from test_cli import gridagg

from gridagg.directory import GridDirectory
from gridagg.engine import GridEngine
from gridagg.model.schema import Dataset
from gridagg.store import open_store

DEFINITION = {
    "dimensions": [{"name": "time", "type": "time", "min": "2020-01-01T00:00:00Z", "max": "2020-12-31T23:59:59Z"},
                   {"name": "lon", "scale": 1, "min": -10, "max": 10}, {"name": "lat", "scale": 1, "min": -10, "max": 10}],
    "measures": [{"name": "v", "min": -1000, "max": 1000}],
    "grid": {"n_size": 10, "n_threshold": 40},
}


@pytest.fixture
def made(settings, services, unique_name, tmp_path):
    """A dataset of 366 rows, one a day, lon = day % 20 - 10: (its name, the env of
    commands on its store, a function giving its row count)."""
    env = {"GRIDAGG_DATA_DIR": str(tmp_path), "GRIDAGG_PG_URL": settings.effective_pg_url}
    local = settings.with_(data_dir=tmp_path)

    def engine():
        return GridEngine(GridDirectory(local.effective_pg_url), open_store(local))

    with engine() as eng:
        ds = eng.create_dataset(Dataset.from_json({"name": unique_name, **DEFINITION}))
        days = np.arange(366)
        eng.insert_encoded(ds, [f"d{d}".encode() for d in days],
                           np.stack([days * 86400, (days % 20) * 10 - 100, np.zeros(366, int), days], axis=1))

    def count() -> int:
        with engine() as eng:
            return eng.query(unique_name, {}, ["count"]).values["count"]

    yield unique_name, env, count
    with engine() as eng:
        eng.drop_dataset(unique_name)


def test_delete_takes_the_rows_of_a_box_of_ids_or_all(made, tmp_path):
    name, env, count = made
    out = gridagg("delete", name, "--where", "lon=-10:-9", "--where", "time=2020-01-01..2020-06-30T23:59:59Z", env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith(f"{name}: deleted 20 rows (leaves ")  # days 0, 20, ... 180 and 1, 21, ... 181
    out = gridagg("delete", name, "--id", "d5", "--id", "d6", "--id", "no-such", "--json", env=env)
    assert (out.returncode, json.loads(out.stdout)) == (0, {"dataset": name, "deleted": 2}), out.stderr
    square = tmp_path / "square.geojson"
    square.write_text(json.dumps({"type": "Polygon", "coordinates": [[[5, -1], [9.5, -1], [9.5, 1], [5, 1], [5, -1]]]}))
    out = gridagg("delete", name, "--region", str(square), "--json", env=env)
    assert out.returncode == 0 and json.loads(out.stdout)["deleted"] == sum(15 <= d % 20 for d in range(366))
    left = count()
    assert left == 366 - 20 - 2 - json.loads(out.stdout)["deleted"]
    out = gridagg("delete", name, "--all", env=env)
    assert out.returncode == 0 and out.stdout.startswith(f"{name}: deleted {left} rows"), out.stderr
    assert count() == 0


@pytest.mark.parametrize("args, says", [
    ([], "name the rows: --where, --region, --id, or --all for every row"),
    (["--all", "--id", "d1"], "--all takes every row: give it alone"),
    (["--where", "pressure=1:2"], "'pressure' is not a dimension"),
    (["--where", "lon=5:-5"], "lo '5' is greater than hi '-5'"),
    (["--where", "lon=east"], "is not LO:HI"),
    (["--region", "/no/such/file.geojson"], "No such file or directory"),
])
def test_a_bad_delete_is_one_line_and_exit_code_2_and_deletes_nothing(made, args, says):
    name, env, count = made
    out = gridagg("delete", name, *args, env=env)
    assert out.returncode == 2 and says in out.stderr and out.stderr.count("\n") == 1, out.stderr
    assert count() == 366


def test_delete_of_an_unknown_dataset_is_exit_code_2(made):
    _, env, _ = made
    out = gridagg("delete", "no_such_set", "--all", env=env)
    assert (out.returncode, out.stderr) == (2, "gridagg delete: error: no dataset named 'no_such_set'\n")


def test_retain_keeps_a_retention_and_drops_older_rows(made):
    name, env, count = made
    out = gridagg("retain", name, env=env)
    assert out.returncode == 0 and out.stdout.startswith(f"{name}: keeps its rows for ever"), out.stderr
    out = gridagg("retain", name, "--keep", "ten years", env=env)
    assert out.returncode == 2 and "--keep must be a whole number and a unit" in out.stderr, out.stderr
    out = gridagg("retain", name, "--keep", "30d", "--now", "2020-12-31T00:00:00Z", env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith(f"{name}: keeps 30d: deleted 335 rows older than that")  # days 0-334 (Dec 1 on kept)
    assert count() == 31
    out = gridagg("retain", name, "--now", "2020-12-31T00:00:00Z", "--json", env=env)
    assert json.loads(out.stdout) == {"dataset": name, "retain": "30d", "deleted": 0}
    out = gridagg("retain", name, "--keep", "forever", "--now", "2021-06-01T00:00:00Z", env=env)
    assert out.returncode == 0 and count() == 31


def test_drop_asks_for_the_name_unless_yes(made, unique_name):
    name, env, count = made
    import subprocess
    import sys

    def drop(*args, answer=""):
        import os

        return subprocess.run([sys.executable, "-m", "gridagg.cli.main", "drop", name, *args], input=answer,
                              capture_output=True, text=True, env={**os.environ, **env}, timeout=300)

    out = drop(answer="yes\n")
    assert out.returncode == 1 and f"drop dataset {name}: its 366 rows" in out.stdout
    assert out.stdout.endswith(f"{name}: not dropped\n") and count() == 366
    out = drop(answer=f"{name}\n")
    assert out.returncode == 0 and out.stdout.endswith(f"{name}: dropped\n"), out.stderr
    out = drop("--yes")
    assert (out.returncode, out.stderr) == (2, f"gridagg drop: error: no dataset named '{name}'\n")
