"""The held-out bench (loadtest/bench/heldout.py): its own reading of a polygon agrees with
gridagg's (gridagg.query.regions: GEOS on the floats of the stored values, the boundary
inside) on the polygons its families draw; the streams are the seed's; and a tiny run end to end (a generated
archive, the embedded store, DuckDB) writes its report with every answer right. No
timing assertions."""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import chdb
import duckdb
import numpy as np
import pyarrow as pa
from gridagg_ingest.config import load_config
from gridagg_ingest.generate import generate
from gridagg_loadtest.bench import heldout
from gridagg_loadtest.bench.heldout_families import FAMILIES, Drawer, Sample, draw, on_diagonal_edge
from gridagg_loadtest.bench.heldout_sql import CLICKHOUSE, DUCKDB, Space, answers, polygon_terms, statement

from gridagg.engine import GridEngine
from gridagg.model.errors import UnknownDataset
from gridagg.query.regions import Region

ROOT = Path(__file__).resolve().parents[1]
WEATHER = ROOT.parent / "shared" / "data" / "weather"
CONFIG = ROOT / "ingest" / "examples" / "weather_generated.toml"
SPACE = Space.from_toml(CONFIG)
DATASET = load_config(CONFIG).dataset


def _sample(rng: np.random.Generator, stations: int = 40, rows: int = 2000) -> Sample:
    """A made-up sample: stations on the grid of the generator's area, rows of them."""
    lon, lat = SPACE.lonlat
    positions = np.column_stack([rng.integers(-165000, -55000, stations), rng.integers(15000, 70000, stations)])
    picks = rng.integers(stations, size=rows)
    cols = {c.name: rng.integers(max(c.lo, -400), min(c.hi, 1000) + 1, rows) for c in SPACE.columns}
    cols[SPACE.time.name] = rng.integers(1_300_000_000, 1_900_000_000, rows)
    cols[lon.name], cols[lat.name] = positions[picks, 0], positions[picks, 1]
    table = np.column_stack([cols[c.name] for c in SPACE.columns]).astype(np.int64)
    return Sample(SPACE, table, positions, {c.name: int(table[:, i].min()) for i, c in enumerate(SPACE.columns)},
                  {c.name: int(table[:, i].max()) for i, c in enumerate(SPACE.columns)})


def test_the_polygon_test_in_sql_agrees_with_gridaggs_reading_on_the_families_polygons():
    """DuckDB's crossing count and ClickHouse's own function, each with the edges apart."""
    rng = np.random.default_rng(5)
    lon, lat = SPACE.lonlat
    con = duckdb.connect()
    for seed in range(12):
        sample = _sample(rng)
        drawer = Drawer(sample, seed, lambda body: [{}])
        for convex in (True, False):
            region = drawer._shape({c.name: int(v) for c, v in zip(SPACE.columns, sample.rows[seed])}, convex)
            ring = [(round(x * lon.unit), round(y * lat.unit)) for x, y in region["coordinates"][0]]
            xs, ys = [p[0] for p in ring], [p[1] for p in ring]
            # Points all over its box, its vertices, and points on its edges along the grid lines.
            points = np.column_stack([rng.integers(min(xs) - 5, max(xs) + 6, 3000),
                                      rng.integers(min(ys) - 5, max(ys) + 6, 3000)])
            along = [(x, rng.integers(min(y1, y2), max(y1, y2) + 1)) for (x, y1), (x2, y2) in zip(ring, ring[1:])
                     if x == x2] + [(rng.integers(min(x1, x2), max(x1, x2) + 1), y) for (x1, y), (x2, y2)
                                    in zip(ring, ring[1:]) if y == y2]
            points = np.vstack([points, np.array(ring), np.array(along, dtype=np.int64).reshape(-1, 2)])
            points = points[~on_diagonal_edge(ring[:-1], points)]
            # DuckDB and chDB (Python(p)) read the local Arrow table p by its name.
            p = pa.table({"longitude": points[:, 0].astype(np.int32),  # noqa: F841
                          "latitude": points[:, 1].astype(np.int32)})
            inside = {tuple(r) for r in con.execute(
                f"SELECT longitude, latitude FROM p WHERE {' AND '.join(polygon_terms(SPACE, region))}").fetchall()}
            clickhouse = chdb.query("SELECT longitude, latitude FROM (SELECT assumeNotNull(longitude) AS longitude, "
                                    "assumeNotNull(latitude) AS latitude FROM Python(p)) WHERE "
                                    f"{' AND '.join(polygon_terms(SPACE, region, CLICKHOUSE))}", "TabSeparated")
            assert {tuple(map(int, line.split())) for line in clickhouse.bytes().decode().splitlines()} == inside
            rows = np.zeros((len(points), len(DATASET.columns)), dtype=np.int64)
            rows[:, [DATASET.column_index(lon.name), DATASET.column_index(lat.name)]] = points
            geos = Region(DATASET, region).mask(rows)
            assert {tuple(p) for p, g in zip(points.tolist(), geos) if g} == inside, region
            assert any(geos)


def test_a_series_is_read_as_buckets_of_the_window_ending_with_each():
    con = duckdb.connect()
    t = SPACE.time.name
    con.execute(f'CREATE TABLE rows ("{t}" BIGINT, wind_speed SMALLINT)')
    con.executemany("INSERT INTO rows VALUES (?, ?)", [(86400 * d + 3600 * h, d * 10 + h) for d in range(10)
                                                        for h in (0, 12)])
    body = {"aggregates": ["sum:wind_speed", "max:wind_speed", "avg:wind_speed"], "step": "1d", "window": "3d",
            "start": "1970-01-03T00:00:00Z", "end": "1970-01-05T00:00:00Z"}
    st = statement(SPACE, body, "rows", DUCKDB)
    got = answers(st, con.execute(st.sql).fetchall())
    days = {d: [d * 10, d * 10 + 12] for d in range(10)}
    for i, point in enumerate(got):  # points for days 2, 3, 4, each over its day and the two before
        values = [v for d in range(i, i + 3) for v in days[d]]
        assert point == {"sum:wind_speed": sum(values), "max:wind_speed": max(values),
                         "avg:wind_speed": Fraction(sum(values), len(values))}
    assert len(got) == 3


def test_the_streams_are_the_seeds():
    sample = _sample(np.random.default_rng(1))

    def drawn(seed):
        return [q.to_json() for q in draw(sample, seed, 3, lambda body: [{body["aggregates"][0]: 1}])]

    assert drawn(3) == drawn(3) != drawn(4)
    assert [q["family"] for q in drawn(3)] == [f for f in FAMILIES for _ in range(3)]
    assert all(json.dumps(q["body"]) for q in drawn(3))


def test_a_tiny_heldout_run_writes_its_report_and_every_answer_is_right(settings, services, tmp_path, unique_name,
                                                                      monkeypatch):
    generate([str(WEATHER)], 20000, str(tmp_path / "archive"), "parquet", seed=3, stations=12)
    # Merged leaves split anew 10 s after the merge, not 2 minutes (queries here take milliseconds).
    monkeypatch.setenv("GRIDAGG_MAX_QUERY_SECONDS", "5")
    docs = tmp_path / "docs"
    try:
        code = heldout.main(["--archive", str(tmp_path / "archive"), "--peers", "duckdb", "--questions", "2",
                             "--repeat", "1", "--http-repeat", "1", "--clients", "2", "--seconds", "0.5",
                             "--rounds", "1", "--shapes", "1x1", "--trial-seconds", "0.5", "--train-minutes", "0.3",
                             "--tune-every", "1", "--prefix", unique_name, "--out", str(tmp_path / "out"),
                             "--docs", str(docs)])
    finally:
        with GridEngine.open(settings) as engine:
            try:
                engine.drop_dataset(f"{unique_name}_em")
            except UnknownDataset:
                pass
    result = json.loads((tmp_path / "out" / "heldout.json").read_text())
    assert code == 0 and result["wrong"]["counts"] == {}
    phases = result["stores"]["embedded"]["phases"]
    assert list(phases) == ["as loaded", "after tuning"]
    for phase in phases.values():
        assert all(r["gridagg"]["right"] for r in phase["in_process"])
        assert all(r.get("right") or "refused" in r for r in phase["http"])
        assert set(phase["served"]) == set(FAMILIES)
    assert all(r["DuckDB"]["right"] for r in result["peers"]["in_process"])
    assert set(result["peers"]["served"]["DuckDB"]) == set(FAMILIES)
    assert result["stores"]["embedded"]["tuning"]["asked"] >= 2 * 2 * len(FAMILIES)
    text = (docs / "README.md").read_text()
    assert "Every answer of every system equalled the reference's" in text and "Machine: " in text
    assert "## gridagg (embedded), after tuning" in text and "## Targets (issue 93)" in text
    assert "| polygon |" in text and (docs / "p50.png").exists()
