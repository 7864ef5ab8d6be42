"""The bulk ingest job against real PostgreSQL, with the embedded store and HBase.

One Spark session (local[2]) for the module. The expected rows are computed without
Spark: the TMY3 parser plus the reference encoder (gridagg.model.schema.Column.encode); queries
over them are checked against the oracle (tests/oracle.py).
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import tomllib
from dataclasses import replace
from pathlib import Path

import numpy as np
import oracle
import pytest
from engine_support import check_random_boxes, check_tree
from gridagg_ingest import hfiles, job
from gridagg_ingest.config import load_config, parse_config
from gridagg_ingest.encode import element_id, encode_value
from gridagg_ingest.job import Progress, run_ingest, spark_session
from gridagg_ingest.readers import parse_tmy3

from gridagg.directory import GridDirectory
from gridagg.engine import GridEngine
from gridagg.model.grid import grid_prefix, prefix_range
from gridagg.model.schema import GridParams
from gridagg.store import open_store
from gridagg.tree import TreeCache
from gridagg.write import faults

ROOT = Path(__file__).resolve().parents[1]
from samples import FILES, WEATHER, weather_samples  # noqa: E402,F401 - the fixture below
EXAMPLE = ROOT / "ingest" / "examples" / "weather.toml"
TABLE = oracle.Table.of(tomllib.loads(EXAMPLE.read_text()))

pytestmark = pytest.mark.usefixtures("weather_samples")


@pytest.fixture(scope="module")
def spark(settings, services):
    # With the HBase settings: the HBase tests bulk-load HFiles, as `gridagg ingest` does.
    s = spark_session("local[2]", shuffle_partitions=2, settings=settings.with_(store="hbase"))
    yield s
    s.stop()


def weather_cfg(name: str, n_size=300, n_threshold=1200):
    cfg = load_config(EXAMPLE)
    ds = replace(cfg.dataset, name=name, grid=GridParams(n_size, n_threshold, cfg.dataset.grid.l_time))
    return replace(cfg, dataset=ds)


def expected_rows(cfg, files) -> tuple[np.ndarray, int]:
    """Encoded good rows (deduplicated by element ID) and the number of bad rows."""
    fields = cfg.source_fields
    seen: dict[str, list[int]] = {}
    bad = 0
    for f in files:
        for rec in parse_tmy3(str(f), Path(f).read_text(), fields):
            values = dict(zip(fields, rec[: len(fields)]))
            if rec[-1] is not None:
                bad += 1
                continue
            row = []
            for col, src in zip(cfg.dataset.columns, cfg.sources):
                enc, why = encode_value(col, src, values[src.source])
                if why:
                    break
                row.append(enc)
            else:
                seen.setdefault(element_id([values[k] for k in cfg.id_fields]), row)
                continue
            bad += 1
    return np.array(list(seen.values()), dtype=np.int64), bad


def random_queries(engine, name, rows, n, seed=7):
    """n random boxes over the expected rows (stored integers) answered as the oracle does."""
    check_random_boxes(engine, name, TABLE, TABLE.from_stored(rows),
                       ["count", "sum:wind_speed", "min:temperature", "max:pressure", "avg:humidity"], n, seed)


def snapshot(engine, name):
    return [(g.grid_id, g.box, a) for g, a in engine.leaves(name)]


def starts_from_the_tree_file(engine, name):
    """The load left the dataset's tree in the host's tree file: a new serving process
    starts from it, with no whole load."""
    later = TreeCache(engine.directory, engine.store, engine.store.board)
    assert later.tree(engine.dataset(name)).leaf_count == len(engine.leaves(name))
    assert not later._loads, "the new process loaded the tree whole"


@pytest.fixture
def embedded(settings, services, tmp_path):
    s = settings.with_(data_dir=tmp_path, store="embedded")
    engine = GridEngine(GridDirectory(s.effective_pg_url), open_store(s))
    yield s, engine
    engine.store.close()
    engine.directory.close()


def load(spark, s, engine, cfg, files, **kw):
    return run_ingest(spark, s, cfg, [str(f) for f in files], progress=Progress(quiet=True),
                      directory=engine.directory, store=engine.store, **kw)


def test_tmy3_load_rerun_append_embedded(spark, embedded, unique_name):
    s, engine = embedded
    cfg = weather_cfg(unique_name)
    try:
        first = load(spark, s, engine, cfg, FILES[:1])
        rows1, bad1 = expected_rows(cfg, FILES[:1])
        assert (first.read, first.loaded, first.duplicates, first.quarantined) == (8760, len(rows1), 0, bad1)
        starts_from_the_tree_file(engine, unique_name)
        check_tree(engine, unique_name, rows1)
        assert all(a.count <= cfg.dataset.grid.n_size for _, a in engine.leaves(unique_name))

        # Append the second station: rows land in existing leaves, full leaves split.
        second = load(spark, s, engine, cfg, FILES)
        rows, bad = expected_rows(cfg, FILES)
        assert second.loaded == len(rows) - len(rows1)
        assert second.duplicates == len(rows1)
        check_tree(engine, unique_name, rows)
        random_queries(engine, unique_name, rows, 200)

        # Rerun: nothing changes.
        before = snapshot(engine, unique_name)
        again = load(spark, s, engine, cfg, FILES)
        assert again.loaded == 0 and again.duplicates == len(rows) and again.rows_moved == 0
        assert snapshot(engine, unique_name) == before
    finally:
        engine.drop_dataset(unique_name)


def test_append_splits_full_leaves(spark, embedded, unique_name):
    """A big N_size on the first load leaves full leaves; the append must split the
    ones over N_threshold, moving stored rows."""
    s, engine = embedded
    cfg = weather_cfg(unique_name, n_size=400, n_threshold=800)
    try:
        load(spark, s, engine, cfg, FILES[:1])
        summary = load(spark, s, engine, cfg, FILES[1:])
        rows, _ = expected_rows(cfg, FILES)
        check_tree(engine, unique_name, rows)
        assert summary.leaves_split > 0 or all(a.count <= 800 for _, a in engine.leaves(unique_name))
    finally:
        engine.drop_dataset(unique_name)


@pytest.mark.parametrize("path", ["hfiles", "thrift"])
def test_tmy3_load_append_hbase(spark, settings, services, unique_name, monkeypatch, tmp_path, path):
    """Load every other hour of a station, append both stations (leaves split, stored rows
    move) and rerun, into HBase: as HFiles, as into the local HBase, and through the
    Thrift gateway, as into an external one."""
    s = settings.with_(store="hbase")
    lines = FILES[0].read_text().splitlines()
    half = tmp_path / "half" / FILES[0].name
    half.parent.mkdir()
    half.write_text("\n".join(lines[:2] + lines[2::2]) + "\n")
    engine = GridEngine(GridDirectory(s.effective_pg_url), open_store(s))
    cfg = weather_cfg(unique_name, n_threshold=450)  # doubled leaves go over it
    left = []  # HFiles still in the job's staging directory after the bulk load
    if path == "thrift":
        monkeypatch.setattr(hfiles, "available", lambda *args: False)
    else:
        assert hfiles.applies(s, spark.sparkContext.master)
        bulk_load = hfiles.BulkLoad.load

        def load_and_look(self, aggregates):
            bulk_load(self, aggregates)
            left.extend(p for p in self.dir.glob("*/*") if not p.name.startswith("."))

        monkeypatch.setattr(hfiles.BulkLoad, "load", load_and_look)
    try:
        first = load(spark, s, engine, cfg, [half])
        rows, _ = expected_rows(cfg, [half])
        assert first.loaded == len(rows)
        starts_from_the_tree_file(engine, unique_name)
        check_tree(engine, unique_name, rows)
        both = load(spark, s, engine, cfg, FILES)
        rows, _ = expected_rows(cfg, FILES)
        assert (both.loaded, both.duplicates) == (len(rows) - first.loaded, first.loaded)
        assert both.leaves_split > 0 and both.rows_moved > 0
        check_tree(engine, unique_name, rows)
        random_queries(engine, unique_name, rows, 100, seed=3)
        again = load(spark, s, engine, cfg, FILES)
        assert again.loaded == 0
        check_tree(engine, unique_name, rows)
        assert engine.check(unique_name) == []
        # The region server moved the files into its regions (LocalDiskFileSystem) rather
        # than copying them.
        assert left == []
    finally:
        engine.drop_dataset(unique_name)
        engine.directory.close()


def test_quarantine(spark, embedded, unique_name, tmp_path):
    s, engine = embedded
    lines = FILES[0].read_text().splitlines()
    header = lines[1].split(",")
    t = header.index("Dry-bulb (C)")
    h = header.index("RHum (%)")

    def edit(i, col, value):
        rec = lines[i].split(",")
        rec[col] = value
        lines[i] = ",".join(rec)

    edit(2, t, "-9900")          # missing marker
    edit(3, t, "12.34")          # more decimals than the scale
    edit(4, h, "150")            # outside the domain
    edit(5, 0, "13/45/1997")     # unparsable date
    edit(6, t, "abc")            # not a number
    lines[7] = lines[7] + ",extra"  # wrong field count
    src = tmp_path / "bad" / "703165TY.csv"
    src.parent.mkdir()
    src.write_text("\n".join(lines) + "\n")
    cfg = weather_cfg(unique_name)
    qdir = tmp_path / "quarantine"
    try:
        summary = load(spark, s, engine, cfg, [src.parent], quarantine=str(qdir))
        assert summary.read == 8760
        assert summary.quarantined == 6
        assert summary.loaded == 8760 - 6
        assert summary.read == summary.loaded + summary.duplicates + summary.quarantined
        records = [json.loads(x) for p in qdir.glob("*.json") for x in p.read_text().splitlines()]
        reasons = sorted(r["reason"] for r in records)
        assert len(records) == 6
        assert any("missing value (-9900)" in r for r in reasons)
        assert any("more decimals" in r for r in reasons)
        assert any("outside the domain" in r for r in reasons)
        assert any("unparsable date" in r for r in reasons)
        assert any("abc" in r for r in reasons)
        assert any("fields, header has" in r for r in reasons)
        rows, bad = expected_rows(cfg, [src])
        assert bad == 6
        check_tree(engine, unique_name, rows)
    finally:
        engine.drop_dataset(unique_name)


def test_generic_csv_other_schema(spark, embedded, unique_name, tmp_path):
    """A CSV with its own schema: a Spark datetime pattern in a local zone, two
    dimensions, one measure. A record with a field too many is quarantined, not cut to
    fit. Of an element's repeats the largest row is loaded."""
    s, engine = embedded
    rng = random.Random(5)
    path = tmp_path / "in" / "a.csv"
    path.parent.mkdir()
    lines = ["sensor;when;x;reading"]
    for i in range(3000):
        lines.append(f"s{i};2024-{1 + i % 12:02d}-{1 + i % 28:02d} {i % 24:02d}:{i % 60:02d}:00;"
                     f"{rng.randint(-500, 500) / 100};{rng.randint(0, 9999)}")
    lines.append("s1;not a time;1.0;5")
    lines.append("s1;2024-01-01 00:00:00;1e2;5")  # exponent: the exact path, accepted
    lines.append("s1;2024-01-01 00:00:00;1e2;5")  # the same element again: a duplicate
    # The same elements with other values: the largest row (by column) is kept.
    lines.append("s3;2024-04-04 03:03:00;-9.99;5")
    lines.append("s4;2024-05-05 04:04:00;199.99;5")
    lines.append("s2;2024-01-01 00:00:00;1.0;5;6")  # a field too many
    path.write_text("\n".join(lines) + "\n")
    data = {
        "dataset": {"name": unique_name},
        "grid": {"n_size": 200, "n_threshold": 800, "l_time": "90d"},
        "input": {"format": "csv", "delimiter": ";", "id": ["sensor", "when"]},
        "dimensions": [
            {"name": "t", "type": "time", "min": "2023-01-01T00:00:00Z", "max": "2026-01-01T00:00:00Z",
             "source": "when", "format": "yyyy-MM-dd HH:mm:ss", "timezone": "Asia/Kolkata"},
            {"name": "x", "scale": 2, "min": -10, "max": 200, "source": "x"},
        ],
        "measures": [{"name": "reading", "source": "reading"}],
    }
    cfg = parse_config(data)
    try:
        summary = load(spark, s, engine, cfg, [str(path.parent / "*.csv")], quarantine=str(tmp_path / "q"))
        assert summary.read == 3006 and summary.quarantined == 2 and summary.duplicates == 3
        # The expected rows, by the reference encoder (time via zoneinfo).
        from datetime import datetime
        from zoneinfo import ZoneInfo

        seen = {}
        for line in lines[1:-1]:
            sensor, when, x, reading = line.split(";")
            try:
                ts = datetime.strptime(when, "%Y-%m-%d %H:%M:%S").replace(tzinfo=ZoneInfo("Asia/Kolkata"))
            except ValueError:
                continue
            row = [cfg.dataset.columns[0].encode(ts), cfg.dataset.columns[1].encode(x),
                   cfg.dataset.columns[2].encode(reading)]
            seen[f"{sensor}|{when}"] = max(seen.get(f"{sensor}|{when}", row), row)
        rows = np.array(list(seen.values()), dtype=np.int64)
        assert summary.loaded == len(rows)
        check_tree(engine, unique_name, rows)
    finally:
        engine.drop_dataset(unique_name)


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_generated_archive_csv_and_parquet(spark, embedded, unique_name, tmp_path, fmt):
    """A generated archive (ingest.generate) in either format loads exactly: the rows the
    generator wrote, encoded by the reference encoder."""
    import pandas as pd
    from gridagg_ingest.generate import generate

    s, engine = embedded
    files = generate([str(WEATHER)], 30000, str(tmp_path / "in"), fmt, seed=2)
    base = load_config(ROOT / "ingest" / "examples" / "weather_generated.toml")
    cfg = replace(base, dataset=replace(base.dataset, name=unique_name, grid=GridParams(500, 2000, base.dataset.grid.l_time)),
                  format=fmt)
    frames = [pd.read_csv(p, dtype=str) if fmt == "csv" else pd.read_parquet(p).astype(str) for p in files]
    good, bad = [], 0
    for r in pd.concat(frames).to_dict("records"):
        enc = [encode_value(col, src, r[src.source]) for col, src in zip(cfg.dataset.columns, cfg.sources)]
        if any(why for _, why in enc):
            bad += 1
        else:
            good.append([v for v, _ in enc])
    rows = np.array(good, dtype=np.int64)
    try:
        summary = load(spark, s, engine, cfg, [tmp_path / "in"])
        assert (summary.read, summary.loaded, summary.quarantined) == (30000, len(rows), bad)
        check_tree(engine, unique_name, rows)
    finally:
        engine.drop_dataset(unique_name)


def test_a_load_out_of_memory_says_what_to_set_and_leaves_nothing_half_loaded(spark, embedded, unique_name,
                                                                             monkeypatch):
    """Spark failing with OutOfMemoryError after the executors stored rows: one line
    naming the memory setting and the partitions, and what was stored is given up at once
    (recovered, as the next writer would: no intent left, every aggregate exact)."""
    from gridagg.write.protocol import Write

    s, engine = embedded
    cfg = weather_cfg(unique_name)

    def out_of_memory(self):
        raise RuntimeError("An error occurred while calling o123.collectToPython.\n"
                           ": java.lang.OutOfMemoryError: Java heap space")

    try:
        with monkeypatch.context() as patch:
            patch.setattr(Write, "rows_written", out_of_memory)
            with pytest.raises(job.LoadFailed) as failed:
                load(spark, s, engine, cfg, FILES[:1])
        message = str(failed.value)
        assert "\n" not in message and "ran out of memory" in message
        assert "GRIDAGG_SPARK_DRIVER_MEMORY" in message and "--shuffle-partitions" in message
        assert engine.directory.pending_intents(unique_name) == []
        assert engine.check(unique_name) == []
        rerun = load(spark, s, engine, cfg, FILES[:1])  # loads the rest, nothing twice
        rows, _ = expected_rows(cfg, FILES[:1])
        assert rerun.loaded + rerun.duplicates == len(rows)
        check_tree(engine, unique_name, rows)
    finally:
        engine.drop_dataset(unique_name)


@pytest.mark.parametrize("point", [p for p in faults.POINTS if p.startswith("ingest.")])
def test_kill_and_rerun(spark, embedded, unique_name, tmp_path, point):
    """Kill a real `python -m gridagg_ingest` (the `gridagg ingest` command) at each step of
    the write protocol (gridagg.write.protocol, gridagg.write.faults): the next writer's recovery alone
    leaves every aggregate exact, and a rerun adds the rest: exact, no duplicate rows."""
    s, engine = embedded
    cfg_path = tmp_path / "w.toml"
    cfg_path.write_text(EXAMPLE.read_text().replace('name = "weather"', f'name = "{unique_name}"')
                        .replace("n_size = 1000", "n_size = 300").replace("n_threshold = 10000", "n_threshold = 1200"))
    env = {**s.environ(), "GRIDAGG_FAULTS": f"{point}=kill", "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "gridagg_ingest", str(cfg_path), *map(str, FILES), "--master", "local[2]",
         "--shuffle-partitions", "2"],
        cwd=tmp_path, env=env, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, start_new_session=True)
    try:
        _, err = proc.communicate(timeout=240)
        assert proc.returncode == -signal.SIGKILL, f"the job was not killed at {point}: rc {proc.returncode}\n{err[-2000:]}"
    finally:
        try:  # Spark's JVM, should it outlive its driver
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    cfg = load_config(cfg_path)
    try:
        ds = engine.dataset(unique_name)
        assert engine.directory.pending_intents(unique_name), "the job left no intent"
        with engine.writing(ds, "insert"):
            pass  # a write's first step: recover what the killed job left
        assert engine.check(unique_name) == []
        rerun = load(spark, s, engine, cfg, FILES)
        rows, _ = expected_rows(cfg, FILES)
        if point == "ingest.switched":
            assert rerun.loaded == 0 and rerun.duplicates == len(rows)
        assert rerun.loaded + rerun.duplicates == len(rows)
        check_tree(engine, unique_name, rows)
        # No duplicate rows: the store holds exactly one row per element.
        ds = engine.dataset(unique_name)
        # Split leaves keep their rows for running queries until purged: count the rows
        # under live leaves, and let check() confirm nothing else is out of place.
        stored = sum(len(k) for g in engine.directory.leaves(ds)
                     for k, _ in engine.store.scan_rows(ds, *prefix_range(grid_prefix(g.grid_id))))
        assert stored == len(rows)
        assert engine.check(ds.name) == []
    finally:
        engine.drop_dataset(unique_name)


def test_spark_encoding_equals_column_encode(spark):
    """Both encoding paths (Spark SQL and the Python fallback) give exactly what
    gridagg.model.schema.Column.encode gives, value by value."""
    from gridagg_ingest.encode import encode
    from gridagg_ingest.readers import Source

    data = {
        "dataset": {"name": "enc_check"},
        "input": {"format": "csv", "id": ["k"]},
        "dimensions": [
            {"name": "t", "type": "time", "min": "2000-01-01T00:00:00Z", "max": "2030-01-01T00:00:00Z",
             "source": "t", "format": "epoch"},
            {"name": "a", "scale": 2, "min": -1000, "max": 1000, "source": "a", "missing": ["-9999"]},
        ],
        "measures": [{"name": "b", "scale": 0, "source": "b"}],
    }
    cfg = parse_config(data)
    rng = random.Random(11)
    samples = ["1", "-1", "+2.5", ".5", "5.", "0.10", "1.234", "1.230", "-9999", "-9999.00", "1e2", "1E-2",
               " 3 ", "\t4", "abc", "", "NaN", "Infinity", "1_000", "999.99", "1000.001", "1000", "-1000.00",
               "00000000000000000000000000000000000001", "12345678901234567890123", "-0", "0.000"]
    samples += [f"{rng.uniform(-1200, 1200):.{rng.randint(0, 4)}f}" for _ in range(300)]
    epochs = ["946684800", "1893456000", "1893456001", "946684799", "1.5", "x", "", "1262304000"]
    rows = []
    for i in range(len(samples) * 2):
        rows.append((str(i), epochs[i % len(epochs)], samples[i % len(samples)], str(rng.randint(-5, 5))))
    df = spark.createDataFrame(rows, "k string, t string, a string, b string")
    from pyspark.sql import functions as F

    df = df.select("*", F.lit("f").alias("_file"), F.col("k").cast("long").alias("_line"),
                   F.lit(None).cast("string").alias("_reason"))
    out = {r["_line"]: r for r in encode(Source(df), cfg).collect()}
    assert len(out) == len(rows)
    for line, (k, t, a, b) in enumerate(rows):
        expect = []
        for col, src, v in zip(cfg.dataset.columns, cfg.sources, (t, a, b)):
            enc, why = encode_value(col, src, v)
            expect.append(enc)
            if why:
                break
        r = out[line]
        if None in expect:
            assert r["_reason"] is not None, (t, a, b)
        else:
            assert r["_reason"] is None, (t, a, b, r["_reason"])
            assert [r["c0"], r["c1"], r["c2"]] == expect
        # Where Column.encode accepts, the reference agrees (markers aside).
        if a.strip() not in ("-9999", "-9999.00") and expect[0] is not None:
            col = cfg.dataset.columns[1]
            try:
                assert col.encode(a) == expect[1]
            except Exception as exc:  # rejected by both
                assert expect[1] is None, exc


@pytest.mark.parametrize("fmt", ["tmy3", "csv"])
def test_local_paths_and_file_uris_read_alike(spark, tmp_path, fmt):
    """Local inputs are read by the executors themselves; inputs given as URIs (here
    file://, standing for hdfs:// or s3a://) come through Spark. Both give the same raw
    records, file names included, even for a name with a space and a '#'."""
    from gridagg_ingest.readers import expand_inputs, raw_schema, read_source

    if fmt == "tmy3":
        cfg, src = load_config(EXAMPLE), FILES[0]
    else:
        cfg = parse_config({"dataset": {"name": "read_check"}, "input": {"format": "csv", "id": ["k"]},
                            "dimensions": [{"name": "a", "min": 0, "max": 100, "source": "a"}]})
        src = tmp_path / "src.csv"
        src.write_text("k,a\n" + "".join(f"{i},{i % 100}\n" for i in range(500)) + "1,2,3\n")
    path = tmp_path / "in put" / f"a #1.{fmt}"
    path.parent.mkdir()
    path.write_bytes(src.read_bytes())

    def records(inputs):
        source = read_source(spark, cfg, expand_inputs(inputs))
        return sorted(source.df.mapInArrow(source.parse, raw_schema(cfg.source_fields)).collect(),
                      key=lambda r: r["_line"])

    local = records([str(path.parent)])
    assert local == records([f"file://{path}"])
    assert len(local) == (8760 if fmt == "tmy3" else 501) and local[0]["_file"] == f"file:{path}"
