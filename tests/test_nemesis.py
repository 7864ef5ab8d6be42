"""A short soak under a nemesis, on both stores: servers killed with -9 and started again,
writers and readers killed and replaced, while every answer is checked (loadtest.soak).

The nemesis kills servers, so it gets servers of its own: a PostgreSQL and an HBase in a
data dir and on ports of this module's, started and stopped here through the project's
service code. The suite's shared servers are never touched.
"""

from __future__ import annotations

import shutil
import socket
import tempfile
from pathlib import Path

import pytest

from gridagg import services
from loadtest import soak


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


def _assert_targets(report: soak.SoakReport, kinds: tuple[str, ...]) -> None:
    assert report.nemesis["kinds"] == sorted(kinds), report.nemesis["schedule"]  # each kind came
    assert report.inserts > 0 and report.queries > 0 and report.splits > 0
    assert report.wrong_answers == 0, report.wrong_examples
    assert report.acked_writes_lost == 0
    assert report.half_batches == 0, report.batches
    assert report.check_problems == [], report.recovery
    assert report.final_exact
    assert report.requests["unclear_errors"] == 0, report.requests["unclear_samples"]
    assert report.requests["hung_clients"] == []
    assert report.ok


def test_nemesis_on_the_embedded_store(own_servers):
    kinds = ("pg", "writer", "reader")
    report = soak.run(own_servers.with_(store="embedded"), seconds=60, writers=2, readers=2,
                      progress=lambda _: None, kinds=kinds, seed=3, every=(3, 6))
    _assert_targets(report, kinds)


def test_nemesis_on_hbase(own_servers):
    kinds = ("hbase", "thrift", "pg", "writer", "reader")
    report = soak.run(own_servers.with_(store="hbase"), seconds=120, writers=2, readers=2,
                      progress=lambda _: None, kinds=kinds, seed=4, every=(3, 6))
    _assert_targets(report, kinds)
