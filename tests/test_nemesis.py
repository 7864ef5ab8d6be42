"""A short soak under a nemesis, on both stores: servers killed with -9 and started again,
writers and readers killed and replaced, while every answer is checked (loadtest.soak).

The nemesis kills servers, so it gets servers of its own: a PostgreSQL and an HBase in a
data dir and on ports of this module's, started and stopped here through the project's
service code. The suite's shared servers are never touched.

Then what the nemesis found, on the shared servers (nothing is killed but clients):
- embedded store: a writer killed while LMDB writes its commit's meta page leaves a
  commit no reader sees until the next write transaction; the next writer's recovery
  must not read before that (CellStore.settle);
- HBase: a killed writer's request, held by the Thrift gateway while HBase was away,
  lands after the next writer's recovery (the gateway keeps retrying for its client
  after the client is gone). Shown step by step: the write stamps (gridagg.model.stamps) and
  recovery's seal fence such late writes off.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import numpy as np
import pytest
from engine_support import open_engine
from gridagg_ingest.generate import generate
from gridagg_loadtest.bench.heldout_gridagg import config_without_n_size, ingest
from gridagg_loadtest.soak import nemesis
from gridagg_loadtest.soak import run as soak
from gridagg_loadtest.soak.beside import Beside
from gridagg_loadtest.soak.clients import BATCH, batch_rows, definition, element_ids
from gridagg_loadtest.soak.report import SoakReport

from gridagg.cli import services
from gridagg.model.aggregate import PartialAggregate
from gridagg.model.grid import ancestors, row_key
from gridagg.model.schema import Dataset


ROOT = Path(__file__).resolve().parents[1]
WEATHER = ROOT.parent / "shared" / "data" / "weather"
HELDOUT_CONFIG = ROOT / "ingest" / "examples" / "weather_generated.toml"


def _free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


@pytest.fixture(scope="module")
def own_servers(settings):
    """Settings of a PostgreSQL and an HBase of this module's own, running."""
    # A short path: PostgreSQL's unix socket lives in the data dir.
    data_dir = Path(tempfile.mkdtemp(prefix="gridagg-nemesis-"))
    pg_port, hbase_port, zk_port = _free_ports(3)
    own = settings.with_(data_dir=data_dir, pg_url=None, hbase=None, pg_port=pg_port, hbase_port=hbase_port,
                         zk_port=zk_port)
    try:
        services.up(own)
        yield own
    finally:
        services.down(own)
        shutil.rmtree(data_dir, ignore_errors=True)


def _assert_targets(report: SoakReport, kinds: tuple[str, ...]) -> None:
    assert report.nemesis["kinds"] == sorted(kinds), report.nemesis["schedule"]  # each kind came
    assert report.inserts > 0 and report.queries > 0 and report.splits > 0
    assert report.wrong_answers == 0, report.wrong_examples
    assert report.acked_writes_lost == 0
    assert report.half_batches == 0, report.batches
    assert report.acked_changes_lost == 0 and report.half_changes == 0, report.changes_wrong
    assert report.changes["deletes"] > 0 and report.changes["corrections"] > 0
    assert report.check_problems == [], report.recovery
    assert report.final_exact
    assert report.requests["unclear_errors"] == 0, report.requests["unclear_samples"]
    assert report.requests["hung_clients"] == []
    assert report.ok


def test_fault_kinds_by_store_and_layout():
    assert nemesis.parse_kinds("all", "embedded") == ("pg", "writer", "reader", "deleter", "corrector")
    assert nemesis.parse_kinds("all", "hbase") == ("hbase", "thrift", "pg", "writer", "reader", "deleter", "corrector")
    assert nemesis.parse_kinds("all", "hbase", 3)[-4:] == ("regionserver", "move", "split", "balance")
    with pytest.raises(ValueError, match="several region servers"):
        nemesis.parse_kinds("move", "hbase", 0)
    with pytest.raises(ValueError, match="needs the HBase store"):
        nemesis.parse_kinds("regionserver", "embedded", 3)
    plan = nemesis.schedule(("regionserver", "split"), 200, 1, (5, 10), 2, 2)
    assert {f.kind for f in plan} == {"regionserver", "split"}
    assert all(nemesis.REGIONSERVER_DOWN[0] <= f.down <= nemesis.REGIONSERVER_DOWN[1]
               for f in plan if f.kind == "regionserver")


def test_a_split_key_lies_inside_its_region():
    for start, end in [(b"", b" "), (b" ", b"@"), (b" ", b"!"), (b"\xe0", b""), (b" \x80", b"!"), (b"", b"")]:
        key = nemesis.middle(start, end)
        assert start < key and (not end or key < end), (start, end, key)


def test_nemesis_on_the_embedded_store(own_servers, tmp_path):
    """With askers beside: a dataset nobody writes, read through the faults by held-out
    questions, each answer the reference's (DuckDB over its archive)."""
    kinds = ("pg", "writer", "reader", "deleter", "corrector")
    here = own_servers.with_(store="embedded")
    generate([str(WEATHER)], 20000, str(tmp_path / "archive"), "parquet", seed=3, stations=12)
    config = config_without_n_size(HELDOUT_CONFIG, "beside", tmp_path / "beside.toml")
    ingest(here, "embedded", "beside", config, tmp_path / "archive", tmp_path / "logs")
    # Each kind comes in the first 25 s of the seeded schedule: 50 s gives each its
    # recovery and a second round (longer soaks: loadtest/soak, docs/soak/).
    report = soak.run(here, seconds=50, writers=2, readers=2, progress=lambda _: None, kinds=kinds, seed=3,
                      every=(3, 6), deleters=1, correctors=1, beside=Beside(config, tmp_path / "archive", 2))
    _assert_targets(report, kinds)
    x = report.beside
    assert x["answers"] > 0 and x["wrong"] == 0, x["wrong_examples"]
    assert x["refused"] == 0 and x["region_servers"] == {}  # the embedded store has none
    assert "askers beside, on beside" in "\n".join(report.markdown("soak", None, None))


def test_nemesis_on_hbase(own_servers):
    kinds = ("hbase", "thrift", "pg", "writer", "reader", "deleter", "corrector")
    # Each kind comes in the first 34 s of pauses; HBase's kill comes last of them, so its
    # restart (20 s or more on a loaded machine) delays no other kind past the run's end.
    report = soak.run(own_servers.with_(store="hbase"), seconds=100, writers=2, readers=2,
                      progress=lambda _: None, kinds=kinds, seed=3, every=(3, 6), deleters=1, correctors=1)
    _assert_targets(report, kinds)


DYING_WRITER = textwrap.dedent("""
    import sys
    import numpy as np
    from gridagg.config import Settings
    from gridagg.directory import GridDirectory
    from gridagg.model.grid import row_key
    from gridagg.store.embedded import EmbeddedStore
    directory = GridDirectory(Settings.from_env().effective_pg_url, max_connections=1)
    store = EmbeddedStore(sys.argv[2])
    ds = directory.dataset(sys.argv[1])
    leaves = directory.leaves(ds)
    with directory.writer_lock(ds.name) as lock:
        directory.begin_intent(lock, [g.grid_id for g in leaves])
        print("writing", flush=True)
        for i in range(10**9):  # a commit a row, leaf after leaf, until killed: mostly inside a commit
            g = leaves[i % len(leaves)]
            store.put_rows(ds, [row_key(g.grid_id, f"{sys.argv[3]}.{i}".encode())], np.array([[g.box[0][0], 1]]))
""")


def test_the_next_writer_recovers_every_commit_of_a_writer_killed_while_committing(settings, services,
                                                                                   unique_name, tmp_path):
    # The LMDB file stays open in this process throughout, as in a server.
    engine = open_engine(settings, "embedded", tmp_path)
    ds = engine.create_dataset(Dataset.from_json({
        "name": unique_name, "dimensions": [{"name": "x", "min": 0, "max": 100000}],
        "measures": [{"name": "v", "min": 0, "max": 1000}], "grid": {"n_size": 10, "n_threshold": 100}}))
    x = np.arange(0, 100000, 100)
    engine.insert_encoded(ds, [f"base{i}".encode() for i in range(len(x))], np.stack([x, x % 7], axis=1))
    rng = np.random.default_rng(8)
    try:
        # About a third of these kills land while LMDB writes a commit's meta page: without
        # CellStore.settle, recovery read the rows before that commit showed.
        for round_ in range(10):
            writer = subprocess.Popen([sys.executable, "-c", DYING_WRITER, ds.name, str(tmp_path), str(round_)],
                                      stdout=subprocess.PIPE, text=True, env=os.environ.copy())
            assert writer.stdout.readline().strip() == "writing"
            try:
                writer.wait(float(rng.uniform(0.05, 0.3)))
            except subprocess.TimeoutExpired:
                writer.send_signal(signal.SIGKILL)
            writer.wait()
            engine.insert_encoded(ds, [f"next{round_}".encode()], np.array([[50, 1]]))  # recovers first
            assert engine.check(ds.name) == [], f"round {round_}"
    finally:
        engine.drop_dataset(ds.name)
        engine.store.close()


@pytest.fixture
def hbase_engine(settings, services, unique_name):
    if settings.hbase:
        pytest.skip("the late write is the local gateway's")
    engine = open_engine(settings, "hbase", None)
    ds = engine.create_dataset(definition(unique_name))
    engine.insert_encoded(ds, element_ids("0.0", 0), batch_rows("0.0", 0))
    yield engine, ds
    engine.drop_dataset(ds.name)


def test_rows_of_a_dead_writer_that_land_after_recovery_change_nothing(hbase_engine):
    engine, ds = hbase_engine
    # Writer A takes the lock, records its intent and sends its rows; HBase is away, the
    # gateway holds the request and retries it; A is killed (its lock goes with it).
    rows, ids = batch_rows("1.0", 0), element_ids("1.0", 0)
    leaf_of = engine.directory.locate(ds, rows[:, :2])
    with engine.writing(ds, "insert") as a:
        a.intend(sorted(set(leaf_of)))
    stamps_of_a = a.stamps
    # HBase is back: the next writer recovers A's intent (no rows of A yet) and writes.
    engine.insert_encoded(ds, element_ids("2.0", 0), batch_rows("2.0", 0))
    # Then the gateway's retry of A's request goes through.
    engine.store.put_rows(ds, [row_key(g, e) for g, e in zip(leaf_of, ids)], rows, stamps_of_a)
    assert engine.check(ds.name) == []  # A's rows are fenced off: not stored, not counted
    assert engine.query(ds.name, {}, ["count"]).values["count"] == 2 * BATCH


def test_aggregates_a_dead_writer_sends_late_do_not_hide_acknowledged_rows(hbase_engine):
    engine, ds = hbase_engine
    # Writer A stores its rows, reads the aggregates and sends them merged with its
    # delta; HBase is away, the gateway holds that request; A is killed.
    rows, ids = batch_rows("1.0", 0), element_ids("1.0", 0)
    leaf_of = engine.directory.locate(ds, rows[:, :2])
    with engine.writing(ds, "insert") as a:
        a.intend(sorted(set(leaf_of)))
        a.put_rows([row_key(g, e) for g, e in zip(leaf_of, ids)], rows)
    stamps_of_a = a.stamps
    ncols = len(ds.columns)
    grids = sorted({a for g in leaf_of for a in [*ancestors(g), g]})
    held = engine.store.get_aggregates(ds, grids)
    for g, row in zip(leaf_of, rows):
        for a in [*ancestors(g), g]:
            held.setdefault(a, PartialAggregate.empty(ncols)).merge(PartialAggregate.of_rows(row[None, :], ncols))
    # HBase is back: the next writer recovers A's intent and writes a batch: acknowledged.
    engine.insert_encoded(ds, element_ids("2.0", 0), batch_rows("2.0", 0))
    # Then the gateway's retry of A's aggregates goes through.
    engine.store.put_aggregates(ds, held, stamps_of_a)
    assert engine.check(ds.name) == []
    assert engine.query(ds.name, {}, ["count"]).values["count"] == 3 * BATCH  # A's rows counted once, B's kept


def test_a_dead_writers_split_that_lands_late_leaves_no_rows_behind(hbase_engine):
    engine, ds = hbase_engine
    # Writer A splits a leaf: it names the new grids in its intent, then its rows for
    # them are held by the gateway; A is killed before the directory switch.
    leaf = engine.directory.leaves(ds)[0].grid_id
    rows, ids = batch_rows("1.0", 0), element_ids("1.0", 0)
    with engine.writing(ds, "insert") as a:
        a.intend([leaf])
        a.intend([leaf + "0", leaf + "1"])
    stamps_of_a = a.stamps
    engine.insert_encoded(ds, element_ids("2.0", 0), batch_rows("2.0", 0))  # recovers A's intent
    engine.store.put_rows(ds, [row_key(leaf + "0", e) for e in ids], rows, stamps_of_a)
    assert engine.check(ds.name) == []  # no rows under a grid that is no leaf
