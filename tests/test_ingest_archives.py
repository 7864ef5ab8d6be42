"""The bulk ingest job on archives as they come, on both stores: a CSV of floats written
in full with rounding policies and gaps in nullable measures (the Spark job and the rows
API agreeing, queries answered as the oracle of tests/oracle.py answers them), and
Parquet typed or text giving the same dataset.

One Spark session (local[2]) for the module. Expected rows come from the decimal module
and datetime, not from the encoder under test.
"""

from __future__ import annotations

import tomllib
import uuid
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from decimal import Decimal
from pathlib import Path

import numpy as np
import oracle
import pyarrow as pa
import pyarrow.csv as pcsv
import pyarrow.parquet as pq
import pytest
from archives_support import decimal_rounded
from engine_support import check_random_boxes, check_tree
from gridagg_ingest.config import load_config, parse_config
from gridagg_ingest.encode import encode_value
from gridagg_ingest.job import Progress, run_ingest, spark_session
from hypothesis import given, settings
from hypothesis import strategies as st

from gridagg.directory import GridDirectory
from gridagg.engine import GridEngine
from gridagg.model.aggregate import NULL
from gridagg.model.schema import GridParams
from gridagg.store import open_store

ROOT = Path(__file__).resolve().parents[1]
from samples import WEATHER, weather_samples  # noqa: E402,F401 - the fixture below


@pytest.fixture(scope="module")
def spark(settings, services):
    # With the HBase settings: the HBase tests bulk-load HFiles, as `gridagg ingest` does.
    s = spark_session("local[2]", shuffle_partitions=2, settings=settings.with_(store="hbase"))
    yield s
    s.stop()


@pytest.fixture(params=["embedded", "hbase"])
def engine(request, settings, services, tmp_path):
    s = settings.with_(data_dir=tmp_path, store=request.param) if request.param == "embedded" else \
        settings.with_(store="hbase")
    eng = GridEngine(GridDirectory(s.effective_pg_url), open_store(s))
    eng.settings = s
    yield eng
    eng.store.close()
    eng.directory.close()


def load(spark, engine, cfg, inputs, **kw):
    return run_ingest(spark, engine.settings, cfg, [str(p) for p in inputs], progress=Progress(quiet=True),
                      directory=engine.directory, store=engine.store, **kw)


def check_queries(engine, name, rows, n, seed):
    """Random boxes: every aggregate equals the oracle's over rows (stored integers, NULL:
    absent)."""
    table = oracle.Table.of(tomllib.loads(CONFIG))
    measures = ["wind_speed", "pressure"]
    aggs = ["count", "avg:temperature"] + [f"{f}:{m}" for m in measures for f in ("sum", "min", "max", "count", "avg")]
    check_random_boxes(engine, name, table, table.from_stored(rows), aggs, n, seed)


# --------------------------------------------------------------------------- floats and gaps

CONFIG = """
[dataset]
name = "{name}"

[grid]
n_size = 150
n_threshold = 600
l_time = "30d"

[input]
format = "csv"
id = ["station", "valid"]

[[dimensions]]
name = "time"
type = "time"
min = "2021-01-01T00:00:00Z"
max = "2022-01-01T00:00:00Z"
source = "valid"
format = "yyyy-MM-dd HH:mm"

[[dimensions]]
name = "temperature"
source = "tmpf"
scale = 1
min = -60
max = 130
rounding = "half_even"

[[dimensions]]
name = "humidity"
source = "relh"
scale = 0
min = 0
max = 100
rounding = "floor"

[[measures]]
name = "wind_speed"
source = "sknt_mph"
scale = 5
min = 0
max = 200
rounding = "half_up"
nullable = true

[[measures]]
name = "pressure"
source = "mslp"
scale = 1
min = 800
max = 1100
nullable = true
missing = ["NA", "M"]
"""


def float_archive(path: Path, n: int, seed: int):
    """A CSV as public hourly archives write it: floats in full, "NA"/"M"/empty for no
    reading, station C without a pressure sensor. Returns the stored rows expected (by
    element ID; a repeated one keeps its largest row), bad row count, values rounded
    per column and the text rows."""
    rng = np.random.default_rng(seed)
    start = datetime(2021, 1, 1, tzinfo=timezone.utc)
    lines = ["station,valid,tmpf,relh,sknt_mph,mslp"]
    text_rows = []
    for i in range(n):
        station = "ABC"[i % 3]
        when = start + timedelta(hours=int(i // 3), minutes=int(rng.integers(0, 4)) * 15)
        tmpf = repr(float(rng.integers(-200, 1000)) / 10 * 1.8 / 1.8 + float(rng.normal(0, 1e-12)))
        relh = repr(float(rng.uniform(5, 100)))
        wind = "" if rng.random() < 0.1 else repr(float(rng.integers(0, 60000)) / 1000 * 1.15078)
        mslp = "M" if rng.random() < 0.05 else "NA" if station == "C" or rng.random() < 0.1 else \
            f"{rng.integers(9500, 10500) / 10:.1f}"
        text_rows.append([station, when.strftime("%Y-%m-%d %H:%M"), tmpf, relh, wind, mslp])
    text_rows.append(list(text_rows[7]))                          # a repeated element
    text_rows.append(["A", "2021-06-01 00:00", "20.0", "50", "200.000006", "1000.0"])  # rounds past the domain
    text_rows.append(["A", "2021-06-01 01:00", "20.0", "50", "1", "1000.04"])           # pressure refuses rounding
    text_rows.append(["B", "2021-06-01 01:00", "20.0", "50", "200.000004", "M"])       # rounds onto the edge
    lines += [",".join(r) for r in text_rows]
    path.write_text("\n".join(lines) + "\n")

    rows, bad = {}, 0
    rounded = {"temperature": 0, "humidity": 0, "wind_speed": 0}
    for station, valid, tmpf, relh, wind, mslp in text_rows:
        t = int((datetime.strptime(valid, "%Y-%m-%d %H:%M").replace(tzinfo=timezone.utc) - start).total_seconds())
        temp, r_temp = decimal_rounded(tmpf, 1, "half_even")
        hum, r_hum = decimal_rounded(relh, 0, "floor")
        w, r_w = decimal_rounded(wind, 5, "half_up") if wind else (NULL, False)
        p = NULL if mslp in ("NA", "M") else Decimal(mslp).scaleb(1)
        if not (w == NULL or 0 <= w <= 200 * 10**5) or (p != NULL and p != p.to_integral_value()):
            bad += 1
            continue
        rounded["temperature"] += r_temp
        rounded["humidity"] += r_hum
        rounded["wind_speed"] += r_w
        row = [t, temp, hum, w, int(p)]
        key = f"{station}|{valid}"
        rows[key] = max(rows.get(key, row), row)
    return np.array(list(rows.values()), dtype=np.int64), bad, rounded, text_rows


def test_csv_of_floats_rounded_with_gaps(spark, engine, tmp_path):
    name = "t_arch_" + uuid.uuid4().hex[:8]
    (tmp_path / "in").mkdir()
    rows, bad, rounded, text_rows = float_archive(tmp_path / "in" / "asos.csv", 3000, seed=1)
    cfg_path = tmp_path / "asos.toml"
    cfg_path.write_text(CONFIG.format(name=name))
    cfg = load_config(cfg_path)
    by_api = name + "_api"
    try:
        summary = load(spark, engine, cfg, [tmp_path / "in"], quarantine=str(tmp_path / "q"))
        assert (summary.read, summary.quarantined, summary.duplicates) == (len(text_rows), bad, 1)
        assert summary.loaded == len(rows) and bad == 2
        assert summary.rounded == rounded and rounded["wind_speed"] > 2000
        assert any(line.startswith("  rounded      temperature") for line in summary.lines())
        check_tree(engine, name, rows)
        assert engine.check(name) == []  # gridagg check agrees, absent values and all
        leaves = engine.leaves(name)
        assert len(leaves) > 10 and any(a.count and a.present[4] < a.count for _, a in leaves)
        check_queries(engine, name, rows, 60, seed=2)

        # The rows API, given the same records, stores the same rows and counts the same.
        engine.create_dataset(replace(cfg.dataset, name=by_api))
        records = [{"id": f"{s}|{v}", "time": datetime.strptime(v, "%Y-%m-%d %H:%M").isoformat() + "Z",
                    "temperature": t, "humidity": h, "wind_speed": w, "pressure": None if p in ("NA", "M") else p}
                   for s, v, t, h, w, p in text_rows]
        result = engine.insert(by_api, records)
        assert result.rounded == rounded and len(result.rejected) == bad
        assert (result.stored, result.duplicates) == (len(rows), 1)
        check_tree(engine, by_api, rows)
        check_queries(engine, by_api, rows, 30, seed=3)
    finally:
        engine.drop_dataset(name)
        if by_api in [d.name for d in engine.directory.datasets()]:
            engine.drop_dataset(by_api)


# --------------------------------------------------------------------------- typed Parquet


@pytest.fixture
def embedded(settings, services, tmp_path):
    s = settings.with_(data_dir=tmp_path / "store", store="embedded")
    eng = GridEngine(GridDirectory(s.effective_pg_url), open_store(s))
    eng.settings = s
    yield eng
    eng.store.close()
    eng.directory.close()


def snapshot(engine, name):
    return [(g.grid_id, g.box, a) for g, a in engine.leaves(name)]


def text_parquet(csv_path: Path, out: Path) -> None:
    """The CSV as Parquet of strings, every field as written."""
    names = pcsv.open_csv(csv_path).schema.names
    table = pcsv.read_csv(csv_path, convert_options=pcsv.ConvertOptions(
        column_types={n: pa.string() for n in names}, strings_can_be_null=False))
    pq.write_table(table, out)


@pytest.mark.usefixtures("weather_samples")
def test_generated_typed_and_text_parquet_give_the_same_dataset(spark, embedded, tmp_path):
    from gridagg_ingest.generate import generate

    typed = generate([str(WEATHER)], 20000, str(tmp_path / "typed"), "parquet", seed=2)
    assert pq.read_schema(typed[0]).field("temperature").type == pa.float64()
    assert pq.read_schema(typed[0]).field("timestamp").type == pa.int64()
    (tmp_path / "text").mkdir()
    for i, p in enumerate(generate([str(WEATHER)], 20000, str(tmp_path / "csv"), "csv", seed=2)):
        text_parquet(Path(p), tmp_path / "text" / f"part-{i:06d}.parquet")
    base = load_config(ROOT / "ingest" / "examples" / "weather_generated.toml")
    names = {kind: f"t_pq_{kind}_" + uuid.uuid4().hex[:6] for kind in ("typed", "text")}
    try:
        summaries = {}
        for kind, name in names.items():
            cfg = replace(base, format="parquet",
                          dataset=replace(base.dataset, name=name, grid=GridParams(400, 1600, base.dataset.grid.l_time)))
            summaries[kind] = load(spark, embedded, cfg, [tmp_path / kind])
        assert summaries["typed"].read == summaries["text"].read == 20000
        assert summaries["typed"].loaded == summaries["text"].loaded > 19000
        assert summaries["typed"].quarantined == summaries["text"].quarantined
        assert snapshot(embedded, names["typed"]) == snapshot(embedded, names["text"])
    finally:
        for name in names.values():
            if name in [d.name for d in embedded.directory.datasets()]:
                embedded.drop_dataset(name)


@settings(max_examples=500, deadline=None)
@given(st.lists(st.floats(allow_nan=False, allow_infinity=False), min_size=1, max_size=20),
       st.lists(st.floats(width=32, allow_nan=False, allow_infinity=False), min_size=1, max_size=20))
def test_typed_floats_read_as_their_shortest_text(doubles, singles):
    """A float64 stands for the decimal Python's repr writes (what the rows API takes a
    JSON number for), a float32 for its own shortest decimal: as_text of typed_raw
    writes them so."""
    from gridagg_ingest.readers import as_text, typed_raw

    n = max(len(doubles), len(singles))
    doubles, singles = (doubles * n)[:n], (singles * n)[:n]
    batch = pa.RecordBatch.from_arrays(
        [pa.array(doubles, pa.float64()), pa.array(singles, pa.float32()), pa.array(["f"] * n),
         pa.nulls(n, pa.int64()), pa.nulls(n, pa.string())], names=["d", "s", "_file", "_line", "_reason"])
    out = as_text(typed_raw(batch, ["d", "s"], []), ["d", "s"]).to_pydict()
    assert [Decimal(t) for t in out["d"]] == [Decimal(repr(v)) for v in doubles]
    assert [Decimal(t) for t in out["s"]] == [Decimal(str(np.float32(v))) for v in singles]


MIXED = {
    "dataset": {"name": "x"},
    "grid": {"n_size": 40, "n_threshold": 160},
    "input": {"format": "parquet", "id": ["k"]},
    "dimensions": [
        {"name": "time", "type": "time", "min": "2021-01-01T00:00:00Z", "max": "2022-01-01T00:00:00Z",
         "source": "ts"},
        {"name": "level", "scale": 1, "min": -100, "max": 100, "source": "f32"},
    ],
    "measures": [
        {"name": "local", "type": "time", "min": "2021-01-01T00:00:00Z", "max": "2022-01-01T00:00:00Z",
         "source": "local", "format": "yyyy-MM-dd HH:mm:ss", "timezone": "Asia/Kolkata"},
        {"name": "day", "type": "time", "min": "2021-01-01T00:00:00Z", "max": "2022-01-01T00:00:00Z",
         "source": "day"},
        {"name": "speed", "scale": 3, "source": "f64", "rounding": "half_even", "nullable": True},
        {"name": "price", "scale": 2, "source": "dec"},
        {"name": "n", "source": "i"},
    ],
}


def mixed_table(n: int):
    """A typed table (timestamps with and without zone, date, float32, float64 in full
    with gaps, decimal, int) and the same records as text. Row 5's local time has a
    fraction of a second."""
    from decimal import Decimal as D

    rng = np.random.default_rng(8)
    start = datetime(2021, 1, 1, tzinfo=timezone.utc)
    ts = [start + timedelta(hours=int(h)) for h in rng.integers(0, 8000, n)]
    local = [datetime(2021, 3, 1) + timedelta(seconds=int(s)) for s in rng.integers(0, 10**7, n)]
    local[5] = local[5] + timedelta(milliseconds=500)
    day = [(start + timedelta(days=int(d))).date() for d in rng.integers(0, 360, n)]
    f32 = [float(v) / 10 for v in rng.integers(-999, 1000, n)]
    f64 = [None if i % 7 == 0 else float(v) for i, v in enumerate(rng.normal(0, 50, n))]
    f64[1], f64[2], f64[3] = 1.5e-05, 0.000123456789, 1234567.0001
    dec = [D(int(v)).scaleb(-2) for v in rng.integers(-10**6, 10**6, n)]
    ints = [int(v) for v in rng.integers(-10**9, 10**9, n)]
    typed = pa.table({
        "k": pa.array(range(n), pa.int32()),
        "ts": pa.array(ts, pa.timestamp("s", tz="UTC")),
        "local": pa.array(local, pa.timestamp("ms")),
        "day": pa.array(day, pa.date32()),
        "f32": pa.array(f32, pa.float32()),
        "f64": pa.array(f64, pa.float64()),
        "dec": pa.array(dec, pa.decimal128(10, 2)),
        "i": pa.array(ints, pa.int64()),
    })
    text = pa.table({
        "k": [str(i) for i in range(n)],
        "ts": [t.strftime("%Y-%m-%dT%H:%M:%SZ") for t in ts],
        "local": [t.strftime("%Y-%m-%d %H:%M:%S") + (".5" if t.microsecond else "") for t in local],
        "day": [d.isoformat() for d in day],
        "f32": [repr(v) for v in f32],
        "f64": ["" if v is None else repr(v) for v in f64],
        "dec": [str(v) for v in dec],
        "i": [str(v) for v in ints],
    })
    return typed, text


def test_parquet_typed_columns_read_as_their_text(spark, embedded, tmp_path):
    """Timestamps (with a zone, without one in the column's zone), dates, float32,
    float64 (shortest text, rounded), decimals and ints in typed Parquet load exactly
    as the same records written as text, in Parquet and in CSV; a timestamp with a
    fraction of a second is quarantined, not truncated."""
    typed, text = mixed_table(1500)
    for kind in ("typed", "text", "csv"):
        (tmp_path / kind).mkdir()
    pq.write_table(typed, tmp_path / "typed" / "a.parquet")
    pq.write_table(text, tmp_path / "text" / "a.parquet")
    pcsv.write_csv(text, tmp_path / "csv" / "a.csv")
    names = {kind: f"t_mix_{kind}_" + uuid.uuid4().hex[:6] for kind in ("typed", "text", "csv")}
    try:
        for kind, name in names.items():
            spec = {**MIXED, "dataset": {"name": name}, "input": {**MIXED["input"]}}
            if kind == "csv":
                spec["input"]["format"] = "csv"
            summary = load(spark, embedded, parse_config(spec), [tmp_path / kind], quarantine=str(tmp_path / f"q{kind}"))
            assert (summary.read, summary.loaded, summary.quarantined) == (1500, 1499, 1), kind
            assert summary.rounded == {"speed": summary.rounded["speed"]} and summary.rounded["speed"] > 1000
            assert summary.reasons == {"local: … does not match the time format …" if kind != "typed"
                                       else "local: … is not whole epoch seconds": 1}, kind
        assert snapshot(embedded, names["typed"]) == snapshot(embedded, names["text"]) == \
            snapshot(embedded, names["csv"])
        # The text rows by the reference encoder (zone-less local time in Asia/Kolkata).
        from zoneinfo import ZoneInfo

        cfg = parse_config({**MIXED, "input": {"format": "csv", "id": ["k"]}})
        rows = []
        for rec in text.to_pylist():
            if rec["local"].endswith(".5"):
                continue
            local = datetime.strptime(rec["local"], "%Y-%m-%d %H:%M:%S").replace(tzinfo=ZoneInfo("Asia/Kolkata"))
            values = [rec["ts"], rec["f32"], local, rec["day"], rec["f64"], rec["dec"], rec["i"]]
            row = []
            for col, src, v in zip(cfg.dataset.columns, cfg.sources, values):
                enc, why = encode_value(col, src, v) if col.name != "local" else (col.encode(v), None)
                assert why is None, (col.name, v, why)
                row.append(enc)
            rows.append(row)
        check_tree(embedded, names["typed"], np.array(rows, dtype=np.int64))
    finally:
        for name in names.values():
            if name in [d.name for d in embedded.directory.datasets()]:
                embedded.drop_dataset(name)


def test_local_parquet_reads_as_spark_reads(spark, tmp_path):
    """pyarrow in the executors (local files) and Spark's own reader (the same file as
    file://, as for other file systems) give the same encoded rows and the same
    quarantine reasons: timestamps with a zone and without one (read in UTC), dates,
    float32, float64 with gaps, decimals and ints, in files of one and of several row
    groups."""
    from gridagg_ingest.encode import encode
    from gridagg_ingest.readers import read_source

    typed, _ = mixed_table(1500)
    pq.write_table(typed.slice(0, 700), tmp_path / "a.parquet")
    pq.write_table(typed.slice(700), tmp_path / "b.parquet", row_group_size=300)
    utc = {**MIXED, "measures": [{**m, "timezone": "UTC"} if m["name"] == "local" else m for m in MIXED["measures"]]}
    cfg = parse_config(utc)
    files = [str(tmp_path / "a.parquet"), str(tmp_path / "b.parquet")]

    def rows(paths):
        df = encode(read_source(spark, cfg, paths), cfg)
        out = [tuple(r[c] for c in ["_eid", *[f"c{i}" for i in range(7)], "_reason"]) for r in df.collect()]
        return sorted(out, key=repr)

    local, through_spark = rows(files), rows([f"file://{p}" for p in files])
    assert len(local) == 1500 and local == through_spark
    assert sum(r[-1] is not None for r in local) == 1  # the local time with a fraction of a second
