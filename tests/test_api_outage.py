"""A store stopped while the API is under load: requests fail fast with 503 +
Retry-After, never anything else, and the same app answers again once the server is
back, without a restart."""

from __future__ import annotations

import threading
import time

import pytest
from gridagg_api import create_app

from gridagg.cli import services as svc
from gridagg.directory import GridDirectory
from gridagg.engine import GridEngine
from gridagg.model.errors import StoreUnavailable
from gridagg.store import open_store
from gridagg.tree import RECONFIRM_SECONDS

DEFINITION = {"dimensions": [{"name": "x", "min": 0, "max": 100}], "measures": [{"name": "v", "min": 0, "max": 9}],
              "grid": {"n_size": 5, "n_threshold": 10}}


def wait_for(client, path: str, body: dict, seconds: float = 60):
    """Ask until the answer is no longer 503; returns the last response."""
    deadline = time.monotonic() + seconds
    while True:
        resp = client.post(path, json=body)
        if resp.status_code != 503 or time.monotonic() > deadline:
            return resp
        time.sleep(0.5)


def unavailable(problem: dict) -> bool:
    """Whether a problem body is the 503 of a store that does not answer."""
    return (problem["status"], problem["title"], problem["type"]) == (
        503, "Store unavailable", "urn:gridagg:problem:store-unavailable") and bool(problem["detail"])


def _drop_when_ready(engine, name: str, seconds: float = 90) -> None:
    """Drop the dataset; a server just back may refuse table changes for a while (HBase's
    master initializing: StoreUnavailable), as a client would, try again."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            return engine.drop_dataset(name)
        except StoreUnavailable:
            if time.monotonic() > deadline:
                raise
            time.sleep(1)


@pytest.mark.parametrize("store, stop, start", [
    ("embedded", svc.pg_down, svc.pg_up),
    ("hbase", svc.hbase_down, svc.hbase_up),
])
def test_a_stopped_server_gives_503_then_the_api_recovers(settings, services, unique_name, store, stop, start):
    if store == "hbase" and settings.hbase:
        pytest.skip("an external HBase is not ours to stop")
    app_settings = settings.with_(store=store, write_token="t")
    engine = GridEngine(GridDirectory(settings.effective_pg_url), open_store(app_settings))
    client = create_app(app_settings, engine=engine).test_client()
    auth = {"Authorization": "Bearer t"}
    created = client.post("/v1/datasets", json={"name": unique_name, **DEFINITION}, headers=auth)
    assert created.status_code == 201 and created.get_json()["name"] == unique_name, created.get_json()
    rows = [{"x": i, "v": i % 10} for i in range(40)]
    assert client.post(f"/v1/datasets/{unique_name}/rows", json=rows, headers=auth).get_json()["stored"] == 40
    # A box whose ends cut leaves, so answering it reads rows from the store (a query the
    # partial aggregates this process holds answer alone needs no store at all).
    query = {"aggregates": ["count", "sum:v"], "where": {"x": [11, 28]}}
    path = f"/v1/datasets/{unique_name}/query"
    first = client.post(path, json=query).get_json()
    assert first["results"] == {"count": 18, "sum:v": 81}
    assert first["plan"]["scanned_grids_after"] > 0

    # Background load through the whole outage: only 200 and 503 may come back.
    statuses: list[int] = []
    done = threading.Event()

    def hammer():
        own = client.application.test_client()
        while not done.is_set():
            statuses.append(own.post(path, json=query).status_code)
            time.sleep(0.05)

    load = [threading.Thread(target=hammer) for _ in range(3)]
    for t in load:
        t.start()
    try:
        stop(settings)
        try:
            started = time.monotonic()
            # A process may answer from the tree it holds until it is due to be confirmed
            # with PostgreSQL again (RECONFIRM_SECONDS), no longer.
            resp = client.post(path, json=query)
            while resp.status_code == 200 and time.monotonic() - started < RECONFIRM_SECONDS + 1:
                time.sleep(0.1)
                resp = client.post(path, json=query)
            assert resp.status_code == 503, resp.get_json()
            assert resp.headers["Retry-After"]
            assert unavailable(resp.get_json())
            assert time.monotonic() - started < 12 + RECONFIRM_SECONDS  # fails fast, does not hang
            write = client.post(f"/v1/datasets/{unique_name}/rows", json=[{"x": 1, "v": 1}], headers=auth)
            assert write.status_code == 503 and unavailable(write.get_json()), write.get_json()
        finally:
            start(settings)
        resp = wait_for(client, path, query)
        assert resp.status_code == 200, resp.get_json()
        assert set(statuses) <= {200, 503} and 503 in statuses
        assert resp.get_json()["results"] == {"count": 18, "sum:v": 81}  # the refused write wrote nothing
        _drop_when_ready(engine, unique_name)
    finally:
        done.set()
        for t in load:
            t.join()
        engine.store.close()  # an LMDB environment opens once per process: later tests open it again
