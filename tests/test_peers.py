"""The bench's peers (PostgreSQL alone, HBase alone, DuckDB, ClickHouse through chDB)
answer exactly like the oracle (tests/oracle.py) and like gridagg, on the real servers; they are served
by the bench's own app under /bench/peers/ with gridagg's request and response shapes,
and never by gridagg's API; each applies its own settings (PostgreSQL's sessions and
index trials, the threads of the in-process ones)."""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
import oracle  # noqa: E402
from engine_support import check_query, open_engine  # noqa: E402
from gridagg_loadtest.bench import dashboard, dashboard_sql  # noqa: E402
from gridagg_loadtest.bench.workload import PAPER_CONFIG, definition  # noqa: E402
from gridagg_loadtest.peers import KINDS, open_peer  # noqa: E402
from gridagg_loadtest.peers.app import create_peer_app  # noqa: E402
from gridagg_loadtest.peers.postgres import INDEXES, memory_bytes  # noqa: E402
from gridagg_loadtest.peers.registry import PeerRegistry  # noqa: E402

from gridagg.query.spec import QuerySpec  # noqa: E402

YEAR = 365 * 86400


def make_rows(n: int, seed: int) -> tuple[list[bytes], np.ndarray]:
    """Rows in the weather schema: a few years, clustered values, duplicates of values."""
    rng = np.random.default_rng(seed)
    t = rng.integers(0, 3 * YEAR, n)
    temp = rng.integers(-200, 400, n)
    hum = rng.integers(0, 101, n)
    ill = rng.choice([0, 0, 50, 200, 5000, 20000, 99999, 100000, 120000], n) + rng.integers(0, 3, n)
    wind = rng.integers(0, 300, n)
    rows = np.stack([t, temp, hum, ill, wind], axis=1).astype(np.int64)
    order = np.argsort(rows[:, 0], kind="stable")  # in time order, as the bench loads them
    return [f"e{i}".encode() for i in order.tolist()], rows[order]


QUERIES = [
    ({"time": ["2011-03-01T00:00:00Z", "2012-02-24T00:00:00Z"], "temperature": [10, 35], "humidity": [20, 80],
      "illuminance": [100, 100000]}, ["min:wind_speed"]),
    ({"time": ["2011-03-01T00:00:00Z", "2012-02-24T00:00:00Z"], "temperature": [10, 35], "humidity": [20, 80],
      "illuminance": [100, 100000]}, ["sum:wind_speed", "count"]),
    ({"time": ["2011-06-01T00:00:00Z", "2013-06-01T00:00:00Z"], "temperature": [-5.5, 0.3]},
     ["max:wind_speed", "avg:temperature", "min:time", "max:time", "sum:humidity"]),
    ({}, ["count", "sum:wind_speed", "min:illuminance", "max:illuminance"]),
    ({"humidity": [50, 50]}, ["count", "avg:wind_speed"]),
    ({"time": ["2011-01-01T00:00:00Z", "2011-01-01T00:00:00Z"]}, ["count", "min:wind_speed"]),
    ({"temperature": [39, 40], "humidity": [99, 100], "illuminance": [0, 0]}, ["min:wind_speed", "count"]),
    ({"time": ["2030-01-01T00:00:00Z", None]}, ["count", "min:wind_speed", "sum:wind_speed", "avg:wind_speed"]),
    ({"temperature": [10.05, 10.05]}, ["count", "min:wind_speed", "sum:wind_speed"]),
]


TABLE = oracle.Table.of(tomllib.loads(PAPER_CONFIG.read_text()))


@pytest.fixture(scope="module")
def data():
    return make_rows(4000, 7)


@pytest.fixture(scope="module")
def seen(data):
    """The rows as the oracle reads them."""
    return TABLE.from_stored(data[1])


@pytest.fixture(params=KINDS)
def loaded(request, settings, services, data, unique_name):
    """A peer of each kind holding the rows, registered for the bench's app."""
    kind = request.param
    peer = open_peer(kind, settings)
    ds = definition(unique_name, 50)
    reg = PeerRegistry(settings.effective_pg_url)
    peer.create(ds)
    ids, rows = data
    assert peer.load(ds, [(ids[:1500], rows[:1500]), (ids[1500:], rows[1500:])]) == len(rows)
    peer.prepare(ds, [])
    reg.register(kind, ds, len(rows))
    peer.close()  # loaded: serving opens it anew (ClickHouse from a copy of its own)
    peer = open_peer(kind, settings)
    yield kind, peer, ds
    peer.close()
    peer = open_peer(kind, settings)
    peer.drop(ds.name)
    peer.close()
    reg.unregister(kind, ds.name)
    reg.close()


def test_peers_match_the_oracle(loaded, seen):
    kind, peer, ds = loaded
    for where, aggs in QUERIES:
        result = peer.query(ds, where, aggs)
        oracle.check_answer(result.to_json(ds), oracle.query(TABLE, seen, {"where": where, "aggregates": aggs}),
                            (kind, where, aggs))


def test_the_bench_app_serves_peers_and_gridaggs_api_does_not(loaded, seen, settings):
    from gridagg_api import create_app

    kind, _, ds = loaded
    client = create_peer_app(settings.with_(store="hbase"), knobs={}).test_client()  # LMDB opens once per process
    where, aggs = QUERIES[1]
    resp = client.post(f"/bench/peers/{kind}/{ds.name}/query", json={"where": where, "aggregates": aggs})
    assert resp.status_code == 200, resp.get_json()
    body = resp.get_json()
    assert set(body) == {"results", "count", "plan"}
    oracle.check_answer(body, oracle.query(TABLE, seen, {"where": where, "aggregates": aggs}))
    # A polygon region is refused with a problem naming the field, not a 500.
    resp = client.post(f"/bench/peers/{kind}/{ds.name}/query",
                       json={"aggregates": ["count"], "region": {"type": "Polygon", "coordinates": [
                           [[0, 0], [1, 0], [1, 1], [0, 0]]]}})
    assert resp.status_code == 400 and resp.get_json()["field"] == "region"
    # Unknown peers and peer datasets are unknown datasets.
    assert client.post(f"/bench/peers/{kind}/nosuch/query", json={"aggregates": ["count"]}).status_code == 404
    assert client.post(f"/bench/peers/mysql/{ds.name}/query", json={"aggregates": ["count"]}).status_code == 404
    # gridagg's own API knows no peer: not under its route, nor under the bench's path.
    api = create_app(settings.with_(store="hbase")).test_client()
    assert api.post(f"/bench/peers/{kind}/{ds.name}/query", json={"aggregates": ["count"]}).status_code == 404
    for name in (ds.name, f"{ds.name}__{kind}"):
        resp = api.post(f"/v1/datasets/{name}/query", json={"aggregates": ["count"]})
        assert resp.status_code == 404 and resp.get_json()["title"] == "Unknown dataset"


@pytest.mark.parametrize("store", ["embedded", "hbase"])
def test_gridagg_and_peers_agree(settings, services, data, seen, unique_name, tmp_path, store):
    ids, rows = data
    engine = open_engine(settings, store, tmp_path)
    src = definition(unique_name, 50)
    engine.create_dataset(src)
    peers = {k: open_peer(k, settings) for k in ("pg", "hbase")}
    try:
        engine.insert_encoded(src, ids, rows)
        for p in peers.values():
            p.create(src)
            p.load(src, [(ids, rows)])
        for where, aggs in QUERIES:
            g = check_query(engine, src.name, TABLE, seen, {"where": where, "aggregates": aggs})
            for k, p in peers.items():
                assert p.run(src, QuerySpec.parse(src, where, aggs)).values == g.values, (k, where, aggs)
    finally:
        engine.drop_dataset(src.name)
        for p in peers.values():
            p.drop(src.name)
            p.close()


def test_postgresql_alone_is_set_up_as_its_docs_advise(settings, services, data, seen, unique_name):
    """Its sessions' settings, each of its indexes tried by EXPLAIN ANALYZE and the
    fastest kept (an index-only scan for the covering ones: VACUUM ran), its EXPLAIN
    (ANALYZE, BUFFERS), and parallel workers as a knob."""
    ids, rows = data
    ds = definition(unique_name, 50)
    peer = open_peer("pg", settings, parallel=0)
    try:
        peer.create(ds)
        peer.load(ds, [(ids, rows)])
        with peer.pool.connection() as conn:
            shown = {n: conn.execute(f"SHOW {n}").fetchone()[0] for n in
                     ("max_parallel_workers_per_gather", "jit", "random_page_cost", "effective_cache_size")}
        assert shown["max_parallel_workers_per_gather"] == "0" and shown["jit"] == "off"
        assert shown["random_page_cost"] == "1.1"
        assert shown["effective_cache_size"] != "4GB"  # PostgreSQL's default: here three quarters of the memory
        assert memory_bytes() > 2**30
        samples = [QuerySpec.parse(ds, w, a) for w, a in QUERIES[:2]]
        prepared = peer.prepare(ds, samples)
        assert [t["index"] for t in prepared["tried"]] == list(INDEXES)
        fastest = min(prepared["tried"], key=lambda t: t["median_ms"])
        assert prepared["index"] == fastest["index"] and prepared["build_seconds"] > 0
        covering = {t["index"]: t["plans"] for t in prepared["tried"]}
        assert "Index Only Scan" in covering["btree(dimensions) include(measures)"]
        with peer.pool.connection() as conn:  # the kept index is the one left
            assert conn.execute("SELECT count(*) FROM pg_indexes WHERE tablename = %s",
                                (f"peer_{ds.name}",)).fetchone()[0] == 1
        text = peer.explain(ds, samples[1])
        assert "Buffers:" in text and "Execution Time" in text
        where, aggs = QUERIES[1]
        oracle.check_answer(peer.run(ds, samples[1]).to_json(ds),
                            oracle.query(TABLE, seen, {"where": where, "aggregates": aggs}))
    finally:
        peer.drop(ds.name)
        peer.close()


def test_duckdb_loads_within_half_the_memory_available(settings, services, data, seen, unique_name, monkeypatch):
    """Beside HBase's JVM, DuckDB's default (80% of the machine) got HBase killed at 100M
    rows: its load is limited to half of MemAvailable, and spills past that."""
    import duckdb
    from gridagg_loadtest.peers import duck

    assert 0 < duck.available_memory() <= memory_bytes()
    monkeypatch.setattr(duck, "available_memory", lambda: 512 << 20)
    configs, connect = [], duckdb.connect
    monkeypatch.setattr(duckdb, "connect", lambda path, **kw: configs.append(kw.get("config")) or connect(path, **kw))
    ids, rows = data
    ds = definition(unique_name, 50)
    peer = open_peer("duckdb", settings)
    try:
        peer.create(ds)
        assert peer.load(ds, [(ids, rows)]) == len(rows)
        assert configs[0] == {"memory_limit": "256MB"}
        where, aggs = QUERIES[1]
        oracle.check_answer(peer.run(ds, QuerySpec.parse(ds, where, aggs)).to_json(ds),
                            oracle.query(TABLE, seen, {"where": where, "aggregates": aggs}))
    finally:
        peer.drop(ds.name)
        peer.close()


@pytest.mark.parametrize("kind", ["duckdb", "clickhouse"])
def test_in_process_peers_answer_the_dashboard_as_gridagg(settings, services, tmp_path, unique_name, kind):
    """The dashboard's questions (series and moving windows too) in the peer's SQL give
    gridagg's answers; only the statistics asked are selected; threads is a knob."""
    from dataclasses import replace

    from gridagg_ingest.config import load_config

    from gridagg.model.schema import GridParams

    cfg = load_config(dashboard.CONFIG)
    ds = replace(cfg.dataset, name=unique_name, grid=GridParams(50, 500, cfg.dataset.grid.l_time))
    rng = np.random.default_rng(3)
    n = 3000
    cols = []
    for c in ds.columns:
        if c.name == "time":  # around 2021, where the questions look
            lo = QuerySpec.parse(ds, {"time": ["2020-12-01T00:00:00Z", None]}, ["count"]).box[0][0]
            cols.append(rng.integers(lo, lo + 400 * 86400, n))
        else:
            cols.append(rng.integers(c.enc_lo, c.enc_hi + 1, n))
    rows = np.stack(cols, axis=1).astype(np.int64)
    rows = rows[np.argsort(rows[:, 0], kind="stable")]
    ids = [f"s{i}".encode() for i in range(n)]
    engine = open_engine(settings, "embedded", tmp_path)
    engine.create_dataset(ds)
    peer = open_peer(kind, settings)
    try:
        engine.insert_encoded(ds, ids, rows)
        peer.create(ds)
        peer.load(ds, [(ids, rows)])
        peer.close()
        peer = open_peer(kind, settings)
        for threads in (1, 2):
            peer.set_threads(threads)
            for q in dashboard.QUESTIONS:
                assert dashboard._same(dashboard.values_of(dashboard.ask(engine, ds.name, q)),
                                       dashboard_sql.answer(peer, ds, q.body)), (kind, threads, q.label)
        stmts = []
        fetch = peer.fetch
        peer.fetch = lambda d, stmt, params: stmts.append(stmt) or fetch(d, stmt, params)
        dashboard_sql.answer(peer, ds, {"aggregates": ["max:wind_speed"]})
        assert stmts[0].startswith('SELECT count(*), max("wind_speed") FROM')
    finally:
        engine.drop_dataset(ds.name)
        peer.drop(ds.name)
        peer.close()


def test_postgresql_server_settings_are_set_for_a_run_and_set_back(settings):
    """On a PostgreSQL of the test's own (the restarts would cut the others' connections):
    the bench's server settings hold during the run, and after it the server runs with
    its own again. A quarter of the memory is what the bench asks by default."""
    import shutil
    import socket
    import tempfile

    import psycopg
    from gridagg_loadtest.peers.pg_server import advised, current, server_settings

    from gridagg.cli import services

    assert advised() == {"shared_buffers": f"{memory_bytes() // 4 // 2**20}MB"}
    data_dir = Path(tempfile.mkdtemp(prefix="gridagg-pgset-"))  # short: the unix socket lives in it
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    own = settings.with_(data_dir=data_dir, pg_url=None, pg_port=port)
    try:
        services.pg_up(own)
        before = current(own, ["shared_buffers"])
        with server_settings(own, {"shared_buffers": "48MB"}) as during:
            assert during == {"shared_buffers": "48MB"}
            with psycopg.connect(own.effective_pg_url) as conn:  # the server was restarted with it
                assert conn.execute("SHOW shared_buffers").fetchone()[0] == "48MB"
        assert current(own, ["shared_buffers"]) == before != during
        with server_settings(own, None) as kept:  # keep: as found, no restart
            assert kept == before
        # A run killed inside left its setting behind: the next run sets it back too.
        with psycopg.connect(own.effective_pg_url, autocommit=True) as conn:
            conn.execute("ALTER SYSTEM SET shared_buffers = '48MB'")
        services.pg_down(own)
        services.pg_up(own)
        with server_settings(own, {"shared_buffers": "48MB"}) as during:
            assert during == {"shared_buffers": "48MB"}
        assert current(own, ["shared_buffers"]) == before
    finally:
        services.pg_down(own)
        shutil.rmtree(data_dir, ignore_errors=True)
