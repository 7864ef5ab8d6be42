"""A distributed HBase of three region servers, started once for the module by the
project's own service code (`gridagg services up --region-servers 3`), with a
PostgreSQL, in a data dir and on ports of this module's own (the suite's shared servers
are never touched):

- `services status` lists each region server with its regions per table, a new
  dataset's table spread over all three;
- answers equal brute force (hypothesis) while regions move and split under them, and a
  split between two queries is asked again for exactly what the stale region list missed;
- a region server killed with -9 while queries run: every answer is exact or a clear 503
  (StoreUnavailable) within 10 s, never partial; the dead server's regions answer again
  within 30 s; every write acknowledged just before the kill is kept;
- two API servers with epoch boards of their own (as on two hosts) see each other's
  writes within 1 s, through PostgreSQL;
- a standalone Spark master and two workers bulk-load into the three region servers, and
  a rerun adds nothing.

(That the data survives `services down` and `up`, also into another layout, was checked
by hand: a minute's restart is more than this module's share of CI.)
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

import numpy as np
import pytest
from gridagg_hbase import admin, jvm
from gridagg_loadtest.soak import nemesis, oracle, visibility
from gridagg_loadtest.soak.check import COLUMNS
from gridagg_loadtest.soak.clients import (
    AGGS,
    batch_rows,
    definition,
    element_ids,
    open_engine,
    random_query,
)
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from gridagg.cli import services
from gridagg.model.errors import StoreUnavailable
from gridagg.model.grid import grid_prefix
from gridagg.store.hbase.regions import REASK
from gridagg.store.scan import ScanRequest

SERVERS = 3
HUNG = 10.0  # seconds: an answer or a 503 comes sooner
REGIONS_BACK = 30.0  # seconds from a server's death until its regions answer again
WEATHER = Path(__file__).resolve().parents[2] / "shared" / "data" / "weather"  # TMY3 files to generate from


def _free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


def _ports() -> tuple[int, int, int]:
    """Free PostgreSQL, Thrift and ZooKeeper ports, the master's and region servers'
    ports (ZooKeeper's + 14000 on) free too; all below Linux's ephemeral ports (32768
    on), which outgoing connections take at any moment."""
    rng = np.random.default_rng()
    while True:
        pg, thrift, zk = (int(p) for p in rng.integers(10000, 32768 - jvm.RPC_PORT_OFFSET - SERVERS, 3))
        rpc = [zk + jvm.RPC_PORT_OFFSET + i for i in range(SERVERS + 1)]
        if len({pg, thrift, zk, *rpc}) == SERVERS + 4 and all(map(_free, [pg, thrift, zk, *rpc])):
            return pg, thrift, zk


@pytest.fixture(scope="module")
def cluster(settings):
    """Settings of this module's PostgreSQL and 3-region-server HBase, running."""
    data_dir = Path(tempfile.mkdtemp(prefix="gridagg-cluster-"))  # short: PostgreSQL's socket lives there
    pg_port, hbase_port, zk_port = _ports()
    own = settings.with_(data_dir=data_dir, pg_url=None, hbase=None, pg_port=pg_port, hbase_port=hbase_port,
                         zk_port=zk_port, hbase_region_servers=SERVERS, hbase_heap="1g", store="hbase",
                         epoch_dir=None)
    try:
        services.up(own)
        yield own
    finally:
        services.down(own)
        shutil.rmtree(data_dir, ignore_errors=True)


@pytest.fixture(scope="module")
def loaded(cluster):
    """(engine, dataset, its rows): 16 batches of the soak's dataset, split into many leaves."""
    engine = open_engine(cluster)
    ds = engine.create_dataset(definition("c_" + uuid.uuid4().hex[:8]))
    rows = []
    for b in range(16):
        engine.insert_encoded(ds, element_ids("0.0", b), batch_rows("0.0", b))
        rows.append(batch_rows("0.0", b))
    yield engine, ds, rows
    engine.drop_dataset(ds.name)
    engine.store.close()
    engine.directory.close()


def _exact(engine, ds, rows, where) -> bool:
    return engine.query(ds.name, where, AGGS).values == oracle.answer(COLUMNS, np.vstack(rows), where, AGGS)


def test_status_lists_each_region_server_with_its_regions(cluster, loaded):
    _, ds, _ = loaded
    (report,) = [r for r in services.status(cluster) if r.service == "HBase"]
    assert report.state == "running" and f"{SERVERS} region servers" in report.detail
    assert len(report.more) == SERVERS
    held = [int(line.split(f"gridagg_{ds.name} ")[1].split(",")[0]) if ds.name in line else 0
            for line in report.more]
    assert sum(held) == 8 and min(held) >= 2, report.more  # pre-split, spread over every server


def test_answers_stay_exact_while_regions_move_and_split(cluster, loaded):
    engine, ds, rows = loaded
    table = f"gridagg_{ds.name}"
    changes: list[str] = []

    def change_regions():
        rng = np.random.default_rng(1)
        for change in ("move", "split", "move", "split", "move"):
            regions = nemesis.soak_regions(cluster, ds.name)
            region = regions[int(rng.integers(len(regions)))]
            try:
                if change == "split":
                    admin.region_admin(cluster, "split", table, nemesis.middle(region.start, region.end).hex())
                else:
                    to = [s for s in nemesis.region_servers(cluster) if s != region.server]
                    admin.region_admin(cluster, "move", table, (region.start or b"\0").hex(),
                                          to[int(rng.integers(len(to)))].rpartition(":")[2])
                changes.append(change)
            except jvm.LauncherError as exc:  # e.g. the region was in transition: the next one
                changes.append(f"refused: {exc}")

    @hsettings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(st.integers(0, 9999), st.integers(0, 9999), st.integers(0, 9999), st.integers(0, 9999))
    def exact(x0, x1, y0, y1):
        where = {"x": sorted([x0, x1]), "y": sorted([y0, y1])}
        assert _exact(engine, ds, rows, where)

    changer = threading.Thread(target=change_regions, daemon=True)
    changer.start()
    while True:  # queries all the while the regions change
        exact()
        if not changer.is_alive():
            break
    changer.join()
    assert changes.count("move") >= 2 and changes.count("split") >= 1, changes

    # A split between two scans of every leaf: the stale region list misses a daughter,
    # which is asked again; the answer stays exact.
    request = ScanRequest([g.grid_id for g in engine.directory.leaves(ds)], [], [2])
    engine.store.scan(ds, request)
    # Split the region holding most leaves at its middle leaf: both daughters hold some.
    keys = sorted(grid_prefix(g) for g in request.grids)
    held = [[k for k in keys if r.start < k and (not r.end or k < r.end)]
            for r in nemesis.soak_regions(cluster, ds.name)]
    most = max(held, key=len)
    assert len(most) >= 2, held
    admin.region_admin(cluster, "split", table, most[len(most) // 2].hex())
    before = engine.store.round_trips.labelled()
    answer = engine.store.scan(ds, request)
    calls = engine.store.round_trips.since(before, engine.store.round_trips.labelled())
    assert calls.get(REASK, 0) >= 1, calls
    all_rows = np.vstack(rows)
    assert answer.aggs.aggregate(0, [2], 3).count == len(all_rows)
    assert answer.aggs.aggregate(0, [2], 3).sums[2] == int(all_rows[:, 2].sum())


@pytest.fixture(scope="module")
def killed(cluster, loaded):
    """A region server killed with -9 right after a writer's last acknowledged batch,
    while two readers query. Returns (acknowledged rows, the readers' outcomes as
    (start, end, "exact" | "wrong" | "503"), seconds until each of its regions answered
    again). The server is started again afterwards."""
    engine, ds, rows = loaded
    acked = []
    for b in range(16, 28):
        engine.insert_encoded(ds, element_ids("0.0", b), batch_rows("0.0", b))
        acked.append(batch_rows("0.0", b))
    regions = nemesis.soak_regions(cluster, ds.name)
    server = max({r.server for r in regions}, key=lambda s: sum(r.server == s for r in regions))
    role = next(r for r in jvm.roles(SERVERS) if r.startswith("rs") and server.endswith(
        f":{jvm.rpc_port(cluster, r)}"))
    killed_at = time.time()
    services.hbase_crash(cluster, role)
    expected = [*rows, *acked]
    outcomes: list[tuple[float, float, str]] = []
    stop = threading.Event()

    def reader(seed: int):
        mine = open_engine(cluster)
        rng = np.random.default_rng(seed)
        try:
            while not stop.is_set():
                where, _ = random_query(rng)
                began = time.time()
                try:
                    ok = _exact(mine, ds, expected, where)
                    outcomes.append((began, time.time(), "exact" if ok else "wrong"))
                except StoreUnavailable:
                    outcomes.append((began, time.time(), "503"))
        finally:
            mine.store.close()
            mine.directory.close()

    readers = [threading.Thread(target=reader, args=(i,), daemon=True) for i in range(2)]
    for t in readers:
        t.start()
    back = nemesis.regions_back(cluster, ds.name, [r for r in regions if r.server == server], killed_at)
    time.sleep(3)  # answers after the regions are back
    stop.set()
    for t in readers:
        t.join()
    services.hbase_up(cluster)
    return expected, outcomes, back


def test_a_region_server_killed_mid_query_gives_exact_answers_or_503s(killed):
    _, outcomes, back = killed
    assert outcomes and not [o for o in outcomes if o[2] == "wrong"]
    assert all(end - began < HUNG for began, end, _ in outcomes)
    assert None not in back and max(back) < REGIONS_BACK, back
    assert outcomes[-1][2] == "exact"  # answering again once the regions are back


def test_writes_acknowledged_before_a_kill_are_kept(cluster, loaded, killed):
    engine, ds, _ = loaded
    expected, _, _ = killed
    assert _exact(engine, ds, expected, {})
    assert engine.check(ds.name) == []


def test_two_api_hosts_with_boards_of_their_own_see_each_others_writes_within_a_second(cluster):
    report = visibility.run(cluster, writes=30)
    assert report["violations"] == 0, report["violation_examples"]
    assert report["lag_ms"]["max"] < 1000 * visibility.VISIBLE_AFTER, report


# Both loads in one Spark session (as `gridagg ingest --master URL` runs one): a session's
# JVMs take longer to start than these loads to run.
TWO_LOADS = """
import json, sys
from gridagg.config import Settings
from gridagg_ingest.cli import example_config
from gridagg_ingest.config import load_config
from gridagg_ingest.job import Progress, run_ingest, spark_session
settings = Settings.from_env()
spark = spark_session(sys.argv[1], settings=settings)
config = load_config(example_config("weather_generated"))
for _ in range(2):
    print(json.dumps(run_ingest(spark, settings, config, [sys.argv[2]], progress=Progress(quiet=True)).to_json()))
"""


def test_spark_standalone_bulk_loads_into_the_region_servers_and_a_rerun_adds_nothing(cluster, tmp_path):
    """A standalone Spark master and two workers on this machine (ingest.spark_standalone)
    run the ingest job: its executors write HFiles per region, each region server takes
    its regions' files; the same input again adds nothing."""
    from gridagg_ingest import spark_standalone
    from gridagg_ingest.generate import generate

    archive = tmp_path / "archive"
    generate([str(WEATHER)], 10000, str(archive), "csv", 1)
    url = spark_standalone.up(cluster, workers=2)
    try:
        out = subprocess.run([sys.executable, "-c", TWO_LOADS, url, str(archive)], env=cluster.environ(),
                             capture_output=True, text=True, timeout=900)
    finally:
        spark_standalone.down(cluster)
    assert out.returncode == 0, out.stderr[-2000:]
    runs = [json.loads(line) for line in out.stdout.strip().splitlines()[-2:]]
    assert (runs[0]["loaded"], runs[1]["loaded"], runs[1]["duplicates"]) == (10000, 0, 10000), runs
    loaded = [ln for r in range(1, SERVERS + 1)
              for ln in (cluster.data_dir / "hbase" / "logs" / f"rs{r}.log").read_text().splitlines()
              if "Successfully loaded" in ln and "gridagg_weather_gen" in ln]
    assert {ln.split("port=")[1][:5] for ln in loaded} == {  # every region server took its regions' files
        str(jvm.rpc_port(cluster, f"rs{r}")) for r in range(1, SERVERS + 1)}
    engine = open_engine(cluster)
    try:
        assert engine.query("weather_gen", {}, ["count"]).values["count"] == 10000
        assert engine.check("weather_gen") == []
    finally:
        engine.drop_dataset("weather_gen")
        engine.store.close()
        engine.directory.close()
