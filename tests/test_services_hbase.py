"""Against the real local HBase through its Thrift1 gateway (happybase)."""

from __future__ import annotations

import os
import signal
import struct
import subprocess
import time
from pathlib import Path

import pytest
from gridagg_hbase import admin, jvm, launcher

from gridagg.cli import services as services_mod

SPLITS = [b"\x40", b"\x80", b"\xc0"]  # first key byte: 4 regions


@pytest.fixture
def table(settings, hbase_conn, unique_name):
    if settings.hbase:
        pytest.skip("pre-split creation needs the local HBase (GRIDAGG_HBASE is set)")
    admin.create_presplit_table(settings, unique_name, {"m": {}, "h": {"max_versions": 3}}, SPLITS)
    yield hbase_conn.table(unique_name)
    hbase_conn.delete_table(unique_name, disable=True)


def be(v: int) -> bytes:
    """Signed int -> 8 bytes big-endian, sign bit flipped: byte order == numeric order."""
    return struct.pack(">Q", (v + (1 << 63)) & 0xFFFF_FFFF_FFFF_FFFF)


def unbe(b: bytes) -> int:
    return struct.unpack(">Q", b)[0] - (1 << 63)


def literal(value: bytes) -> bytes:
    """A quoted filter-language literal: single quotes are escaped by doubling."""
    return b"'" + value.replace(b"'", b"''") + b"'"


def value_range_filter(family: bytes, qualifier: bytes, lo: int, hi: int) -> bytes:
    def scvf(op: bytes, v: int) -> bytes:
        return (b"SingleColumnValueFilter(" + literal(family) + b"," + literal(qualifier) + b"," + op
                + b"," + literal(b"binary:" + be(v)) + b",true,true)")

    return scvf(b">=", lo) + b" AND " + scvf(b"<", hi)


def test_presplit_regions(table):
    regions = table.regions()
    assert len(regions) == 4
    assert sorted(r["start_key"] for r in regions) == [b"", *SPLITS]
    assert set(table.families()) == {b"m", b"h"}
    assert table.families()[b"h"]["max_versions"] == 3


def test_family_specs():
    """Families as CreatePresplitTable takes them: a block size only where one is set."""
    assert admin.family_specs({"r": {"max_versions": 1, "block_size": 1 << 20}, "a": {"max_versions": 3}}) == [
        "r:1:1048576", "a:3"]
    assert admin.family_specs(["m", "h"]) == ["m:1", "h:1"]


def test_presplit_rejects_existing_table(settings, table):
    with pytest.raises(jvm.LauncherError, match="already exists"):
        admin.create_presplit_table(settings, table.name.decode(), ["m"], SPLITS)


def test_put_get_delete(table):
    rows = {bytes([b]) + b"-row": {b"m:v": bytes([b]) * 3, b"h:x": b"x"} for b in (0x01, 0x41, 0x81, 0xC1)}
    for key, data in rows.items():
        table.put(key, data)
    for key, data in rows.items():  # one row in each region
        assert table.row(key) == data
    assert table.row(b"\x41-row", columns=[b"m"]) == {b"m:v": b"AAA"}
    table.delete(b"\x41-row", columns=[b"h:x"])
    assert table.row(b"\x41-row") == {b"m:v": b"AAA"}
    table.delete(b"\x41-row")
    assert table.row(b"\x41-row") == {}
    assert len(list(table.scan())) == 3


def test_versions(table):
    for i in range(4):
        table.put(b"v", {b"h:c": b"%d" % i}, timestamp=1000 + i)
    assert table.cells(b"v", b"h:c") == [b"3", b"2", b"1"]  # family keeps 3 versions


def test_prefix_scan_across_regions(table):
    with table.batch(batch_size=200) as b:
        for first in (0x3F, 0x40, 0x41, 0x80):
            for i in range(50):
                b.put(bytes([first]) + b"p" + struct.pack(">H", i), {b"m:i": b"%d" % i})
        b.put(b"\x40q", {b"m:i": b"x"})
    got = [k for k, _ in table.scan(row_prefix=b"\x40p")]
    assert len(got) == 50 and all(k.startswith(b"\x40p") for k in got)
    assert got == sorted(got)
    assert len(list(table.scan(row_start=b"\x3f", row_stop=b"\x41"))) == 101  # crosses a split


def test_counter(table):
    assert table.counter_inc(b"c", b"m:n") == 1
    assert table.counter_inc(b"c", b"m:n", value=41) == 42
    assert table.counter_dec(b"c", b"m:n", value=2) == 40
    assert table.counter_get(b"c", b"m:n") == 40
    # Counters are stored as 8-byte big-endian signed integers.
    assert table.row(b"c")[b"m:n"] == struct.pack(">q", 40)


VALUES = [-(1 << 63), -300, -1, 0, 1, 39, 0x27, 0x2727, 255, 256, 10**12, 0x27 << 56, (1 << 63) - 1]


def test_binary_filter_on_big_endian_values(table):
    """A `bytes` filter string reaches HBase unchanged: raw non-ASCII comparator bytes work.

    Values containing a single quote (0x27) only need the quote doubled.
    """
    for i, v in enumerate(VALUES):
        table.put(b"%c-%03d" % (0x10 + i * 19, i), {b"m:v": be(v), b"h:other": b"x"})
    for lo, hi in [(-1, 41), (39, 257), (0, 10**13), (-(1 << 63), 0), (0x2727, 0x2728),
                   (-5, 1 << 62), (1 << 40, 1 << 41)]:
        f = value_range_filter(b"m", b"v", lo, hi)
        got = sorted(unbe(d[b"m:v"]) for _, d in table.scan(filter=f))
        assert got == sorted(v for v in VALUES if lo <= v < hi), (lo, hi)


def test_filter_combined_with_prefix_and_columns(table):
    for i in range(20):
        table.put(b"\x90" + bytes([i]), {b"m:v": be(i * 10), b"m:w": b"w"})
        table.put(b"\x91" + bytes([i]), {b"m:v": be(i * 10)})
    f = value_range_filter(b"m", b"v", 50, 100)
    got = list(table.scan(row_prefix=b"\x90", filter=f, columns=[b"m:v"]))
    assert [unbe(d[b"m:v"]) for _, d in got] == [50, 60, 70, 80, 90]
    assert all(set(d) == {b"m:v"} for _, d in got)


def test_str_filter_is_utf8_encoded(table):
    """A `str` filter is UTF-8 encoded by thriftpy2: '\\xff' becomes b'\\xc3\\xbf'.

    So binary comparators must be given as bytes, never as str.
    """
    table.put(b"a", {b"m:v": b"\xff"})
    table.put(b"b", {b"m:v": b"\xc3\xbf"})
    as_str = "SingleColumnValueFilter('m','v',=,'binary:\xff',true,true)"
    as_bytes = as_str.encode("latin-1")
    assert [k for k, _ in table.scan(filter=as_str)] == [b"b"]
    assert [k for k, _ in table.scan(filter=as_bytes)] == [b"a"]


def test_unescaped_quote_in_filter_is_an_error(table):
    table.put(b"a", {b"m:v": be(0x27)})
    bad = b"SingleColumnValueFilter('m','v',=,'binary:" + be(0x27) + b"',true,true)"
    with pytest.raises(Exception):
        list(table.scan(filter=bad))
    good = b"SingleColumnValueFilter('m','v',=," + literal(b"binary:" + be(0x27)) + b",true,true)"
    assert [k for k, _ in table.scan(filter=good)] == [b"a"]


def test_region_servers_that_loaded_another_observer_are_named_for_a_restart(settings, services):
    if settings.hbase:
        pytest.skip("the local HBase's launcher records its observer; an external one is deployed by hand")
    assert launcher.stale_observer(settings) == []  # `up` restarted any that were
    p = jvm.paths(settings)
    recorded = {r: p.observer_file(r) for r in launcher.running_roles(settings) if p.observer_file(r).exists()}
    kept = {r: f.read_text() for r, f in recorded.items()}
    try:
        for f in recorded.values():
            f.write_text("an observer built from another source")
        assert launcher.stale_observer(settings) == list(recorded) != []
    finally:
        for r, f in recorded.items():
            f.write_text(kept[r])


def test_the_heap_a_region_server_keeps_after_gc_is_read_from_its_gc_log(settings, services):
    """What is live after a collection is what the heap must hold: `services status`
    says it, and the soak reports its peak against the heap's maximum."""
    if settings.hbase:
        pytest.skip("the GC log is the local HBase's")
    role = "master" if not jvm.layout(settings) else "rs1"
    since = time.time() - 1  # the log's times are to the millisecond
    jcmd = Path(jvm.java_bin()).with_name("jcmd")  # the JDK's own, beside java
    subprocess.run([str(jcmd), str(launcher.running_pid(settings, role)), "GC.run"], check=True,
                   capture_output=True, timeout=60)
    heap = jvm.heap_after_gc(settings, role, since=since)
    assert heap is not None and heap.collections >= 1
    assert 0 < heap.last_mb <= heap.peak_mb <= heap.max_mb and heap.max_mb == jvm.megabytes(
        jvm.region_server_heap(settings))
    assert jvm.heap_after_gc(settings, role, since=time.time() + 60) is None
    assert "heap after GC " in services_mod.hbase_status(settings).line()


def test_the_heap_to_keep_room_for_is_what_mixed_and_full_collections_leave(settings, tmp_path):
    """After a young collection the old generation still holds its garbage; the heap
    after GC that counts is the most a mixed or full collection left."""
    here = settings.with_(data_dir=str(tmp_path))
    jvm.paths(here).logs.mkdir(parents=True)
    (jvm.paths(here).logs / "master-gc-7.log").write_text("\n".join([
        "[2026-12-08T01:23:20.119+0000] GC(275) Pause Young (Normal) (G1 Evacuation Pause) 5200M->4900M(6032M) 20.1ms",
        "[2026-12-08T01:23:20.500+0000] GC(276) Pause Remark 4950M->2400M(6032M) 7.2ms",
        "[2026-12-08T01:23:21.119+0000] GC(277) Pause Young (Prepare Mixed) (G1 Evacuation Pause) 4501M->2499M(6032M) 25ms",
        "[2026-12-08T01:23:21.148+0000] GC(278) Pause Young (Mixed) (G1 Evacuation Pause) 2563M->1906M(6032M) 14.5ms",
        "[2026-12-08T01:23:22.148+0000] GC(279) Pause Full (G1 Compaction Pause) 3000M->1700M(6032M) 900ms",
        "[2026-12-08T01:23:23.194+0000] GC(280) Pause Young (Normal) (G1 Evacuation Pause) 2162M->1567M(6032M) 9.2ms",
    ]))
    heap = jvm.heap_after_gc(here, "master")
    assert (heap.last_mb, heap.peak_mb, heap.collections, heap.full) == (1567, 1906, 5, 1)


def test_the_gc_logs_of_a_jvms_last_lives_are_kept(settings, tmp_path):
    """Each life of a JVM logs its collections to a file of its own (a restart keeps what
    the lives before it logged); a start keeps those of the last GC_LOG_LIVES lives."""
    here = settings.with_(data_dir=str(tmp_path))
    logs = jvm.paths(here).logs
    logs.mkdir(parents=True)
    for pid in range(jvm.GC_LOG_LIVES + 3):
        for part in ("", ".0"):
            f = logs / f"master-gc-{1000 + pid}.log{part}"
            f.write_text("")
            os.utime(f, (pid, pid))
    (logs / "rs1-gc-5.log").write_text("")
    jvm.prune_gc_logs(here, "master")
    kept = sorted(f.name for f in jvm.paths(here).gc_logs("master"))
    assert kept == sorted(f"master-gc-{1000 + pid}.log{part}" for pid in range(3, jvm.GC_LOG_LIVES + 3)
                          for part in ("", ".0"))
    assert (logs / "rs1-gc-5.log").exists()


def test_a_standalone_hbase_outlives_a_stall_longer_than_zookeepers_default_session(settings, services,
                                                                                  hbase_conn):
    """A JVM stalled past its ZooKeeper session (10 s by default in standalone) had its
    master abort and take the whole HBase down, as a busy shared machine or a slow disk
    flush can do: its session is a minute now (jvm.STANDALONE_SESSION_MS)."""
    if settings.hbase or jvm.layout(settings):
        pytest.skip("the standalone layout's own JVM")
    pid = launcher.running_pid(settings, "master")
    os.kill(pid, signal.SIGSTOP)
    try:
        time.sleep(15)
    finally:
        os.kill(pid, signal.SIGCONT)
    time.sleep(10)  # past the moment a lapsed session is told so, and an abort ends the JVM
    assert launcher.running_pid(settings, "master") == pid
    assert launcher.thrift_answers("127.0.0.1", settings.hbase_port)
    hbase_conn.tables()  # answered through ZooKeeper and the master
