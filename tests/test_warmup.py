"""The warm-up (gridagg.warmup) leaves nothing for a query to compile: in a fresh process,
after warm(), queries of every kind on both real stores (boxes, min/max skipping,
polygons, series and moving windows, the day rollup, explained plans, nullable and wide
columns, answers within a deadline and as they improve) add no compiled signature to
any of gridagg's numba functions. An API worker's
/healthz says "warming" (503, Retry-After) until its warm-up is done (api.warming)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
import uuid

from gridagg.warmup import warm

# Run in a process of its own: this one may have compiled anything already.
QUERIES = r"""
import json, sys, tempfile, uuid
from gridagg.config import Settings
from gridagg.directory import GridDirectory
from gridagg.engine import GridEngine
from gridagg.model.schema import Dataset
from gridagg.store import open_store
from gridagg.store.embedded import EmbeddedStore
from gridagg.warmup import compiled_functions, warm

warm()
before = {f: set(f.signatures) for f in compiled_functions()}
settings = Settings.from_env()
definition = {
    "dimensions": [
        {"name": "time", "type": "time", "min": "2012-01-01T00:00:00Z", "max": "2012-12-31T23:00:00Z"},
        {"name": "lon", "scale": 2, "min": -10, "max": 10},
        {"name": "lat", "scale": 2, "min": 40, "max": 60}],
    "measures": [{"name": "temperature", "scale": 1, "min": -40, "max": 50},
                 {"name": "pressure", "min": 0, "max": 10000000000, "nullable": True}],
    "grid": {"n_size": 20, "n_threshold": 80, "l_time": "60d"}}
rows = [{"time": f"2012-{m:02d}-{d:02d}T{h:02d}:00:00Z", "lon": (d % 20) - 9.5, "lat": 41 + m + h / 24,
         "temperature": (d * 7 + h) % 80 - 30, "pressure": None if d % 5 == 0 else d * 100000000 + h}
        for m in range(1, 13) for d in range(1, 29) for h in (0, 11)]
square = {"type": "Polygon", "coordinates": [[[-5, 45], [5, 45], [5, 55], [-5, 57], [-5, 45]]]}
box = {"lon": [-3, 4.5], "time": ["2012-02-10T00:00:00Z", "2012-11-20T12:00:00Z"]}
every = ["count", "count:pressure", "sum:temperature", "avg:pressure", "min:temperature", "max:lat"]
for kind in sys.argv[1:]:
    store = EmbeddedStore(tempfile.mkdtemp()) if kind == "embedded" else open_store(settings.with_(store=kind))
    engine = GridEngine(GridDirectory(settings.effective_pg_url), store)
    name = "t_warm_" + uuid.uuid4().hex[:8]
    engine.create_dataset(Dataset.from_json({"name": name, **definition}))
    try:
        engine.insert(name, rows)
        for where, region in ((box, None), ({}, square), (box, square)):
            for aggregates in (every, ["min:temperature", "max:pressure"]):
                engine.query(name, where, aggregates, region=region)
                engine.query(name, where, aggregates, region=region, explain=True)
                for deadline in (0, 30):  # bounds from the tree alone; the scan read in parts
                    engine.query(name, where, aggregates, region=region, deadline=deadline)
                list(engine.query_steps(name, where, aggregates, region=region))
            for step, window in (("1d", "7d"), ("30d", None)):
                engine.series(name, where, every, step, window, region=region)
                engine.series(name, where, every, step, window, region=region, deadline=0)
                list(engine.series_steps(name, where, every, step, window, region=region))
        engine.series(name, {}, every, "1d", "7d")  # the day rollup
        engine.series(name, {}, every, "1d", "7d", deadline=0)
    finally:
        engine.drop_dataset(name)
after = {f: set(f.signatures) for f in compiled_functions()}
print(json.dumps(sorted(f"{f.py_func.__module__}.{f.py_func.__name__}: {sig}"
                        for f, sigs in after.items() for sig in sigs - before.get(f, set()))))
"""


def test_after_the_warm_up_no_query_compiles(services):
    out = subprocess.run([sys.executable, "-c", QUERIES, "embedded", "hbase"], capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == []


def test_the_warm_up_says_what_it_did():
    done = warm()  # this process has compiled or loaded its kernels already, or does now
    assert done.seconds > 0 and done.compiled >= 0 and done.loaded >= 0
    assert str(done).startswith(("compiled", "loaded", "nothing to compile"))


def test_healthz_says_warming_until_the_worker_is_warm(settings, services, tmp_path):
    from engine_support import open_engine
    from gridagg_api import create_app
    from gridagg_api.models.ops import Health, Unhealthy

    release = threading.Event()
    app = create_app(settings, engine=open_engine(settings, "embedded", tmp_path), warmup=lambda engines: release.wait())
    client = app.test_client()
    resp = client.get("/healthz")
    body = resp.get_json()
    assert resp.status_code == 503 and resp.headers["Retry-After"] == "1"
    Unhealthy.model_validate(body, strict=True)
    assert body["status"] == "warming" and "warming up" in body["detail"]
    assert body["checks"] == {"postgresql": "ok", "store": "ok", "store_kind": "embedded"}
    release.set()
    deadline = time.monotonic() + 10
    while (resp := client.get("/healthz")).status_code != 200:
        assert time.monotonic() < deadline, resp.get_json()
        time.sleep(0.01)
    assert Health.model_validate(resp.get_json(), strict=True).status == "ok"


def test_a_failed_warm_up_is_logged_and_the_worker_serves(settings, services, tmp_path, caplog):
    from engine_support import open_engine
    from gridagg_api import create_app

    def broken(engines):
        raise RuntimeError("no compiler today")

    app = create_app(settings, engine=open_engine(settings, "embedded", tmp_path), warmup=broken)
    deadline = time.monotonic() + 10
    while (resp := app.test_client().get("/healthz")).status_code != 200:
        assert time.monotonic() < deadline, resp.get_json()
        time.sleep(0.01)
    assert "warming up failed" in caplog.text and "no compiler today" in caplog.text


def test_a_worker_reads_every_tree_before_it_is_ready(settings, services, tmp_path):
    from engine_support import open_engine
    from gridagg_api.config import ApiConfig
    from gridagg_api.state import EngineHolder
    from gridagg_api.warming import warm_worker

    from gridagg.model.schema import Dataset

    engine = open_engine(settings, "embedded", tmp_path)
    name = "t_warmt_" + uuid.uuid4().hex[:8]
    engine.create_dataset(Dataset.from_json({"name": name, "dimensions": [{"name": "x", "min": 0, "max": 99}]}))
    try:
        engine.insert(name, [{"x": x} for x in range(50)])
        said = warm_worker(EngineHolder(ApiConfig.from_settings(settings), engine))
        assert name in engine.trees._held and "dataset trees read" in said, said
    finally:
        engine.drop_dataset(name)
    # PostgreSQL unreachable: the kernels are warm, the trees are left to the first queries.
    down = EngineHolder(ApiConfig.from_settings(settings.with_(pg_url="postgresql://nobody@127.0.0.1:1/x",
                                                               data_dir=tmp_path)))
    assert "dataset trees not read" in warm_worker(down)


def test_a_worker_is_warm_only_when_every_worker_of_its_server_is(tmp_path):
    from gridagg_api.warming import MARKER, Warming

    def until(condition):
        deadline = time.monotonic() + 10
        while not condition():
            assert time.monotonic() < deadline
            time.sleep(0.01)

    release = threading.Event()
    other = Warming(release.wait, tmp_path)  # another worker (here: this process too), still warming
    mine = Warming(lambda: None, tmp_path)
    until(lambda: mine._done.is_set())
    assert not mine.done and not other.done
    release.set()
    until(lambda: mine.done and other.done)
    assert list(tmp_path.iterdir()) == []
    # A worker killed while warming leaves its marker: a process that is gone warms nothing.
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    (tmp_path / f"{MARKER}{int(gone.stdout)}-x").touch()
    assert Warming(None, tmp_path).done


def test_unreadable_cache_indexes_are_dropped_and_readable_ones_kept(tmp_path):
    """An index naming a class that moved (after an upgrade in place) goes with its data,
    so numba compiles again instead of failing every call; a readable one stays."""
    import pickle

    from gridagg.warmup import drop_unreadable_cache

    good, bad = tmp_path / "kernels.f-10.py311.nbi", tmp_path / "planner._walk-126.py311.nbi"
    good.write_bytes(pickle.dumps("0.61") + pickle.dumps((1.0, {})))
    bad.write_bytes(pickle.dumps("0.61") + b"cgridagg.planner\nNoSuchClass\n.")
    for index in (good, bad):
        index.with_name(index.name.replace(".nbi", ".1.nbc")).write_bytes(b"code")
    assert drop_unreadable_cache(tmp_path) == [bad]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kernels.f-10.py311.1.nbc", "kernels.f-10.py311.nbi"]
