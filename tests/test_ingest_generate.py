"""The benchmark archive generator: deterministic by seed, exact size, readable by the
generated-archive config; a network of stations at distinct positions spread over the
map, each with its own climate, made from the real station-years; parts written as they
fill, in flat memory."""

import gc
import tracemalloc
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from gridagg_ingest.config import load_config
from gridagg_ingest.generate import (
    AREA,
    HOURS,
    generate,
    load_station_years,
    main,
    network,
)

from samples import WEATHER, weather_samples  # noqa: E402,F401 - the fixture below
ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.usefixtures("weather_samples")


def read(files: list[str]) -> pd.DataFrame:
    return pd.concat(pd.read_csv(p, dtype={"station": str}) if p.endswith(".csv") else pd.read_parquet(p)
                     for p in files)


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_generate_deterministic(tmp_path, fmt):
    a = generate([str(WEATHER)], 20000, str(tmp_path / "a"), fmt, seed=3, stations=8, part_rows=7000)
    b = generate([str(WEATHER)], 20000, str(tmp_path / "b"), fmt, seed=3, stations=8, part_rows=7000)
    c = generate([str(WEATHER)], 20000, str(tmp_path / "c"), fmt, seed=4, stations=8, part_rows=7000)
    assert [Path(p).read_bytes() for p in a] == [Path(p).read_bytes() for p in b]
    assert [Path(p).read_bytes() for p in a] != [Path(p).read_bytes() for p in c]
    assert [Path(p).name for p in a] == [f"part-0000{i}.{fmt}" for i in range(3)]
    df = read(a)
    assert len(df) == 20000 and [len(read([p])) for p in a] == [7000, 7000, 6000]
    assert not df.duplicated(["station", "timestamp"]).any()
    cfg = load_config(ROOT / "ingest" / "examples" / "weather_generated.toml")
    assert set(cfg.source_fields) <= set(df.columns)


def test_stations_stand_apart_spread_over_the_map_each_with_its_own_climate(tmp_path):
    files = generate([str(WEATHER)], 60000, str(tmp_path), "parquet", seed=5, stations=40)
    df = read(files)
    where = df.groupby("station")[["longitude", "latitude"]]
    assert (where.nunique() == 1).all().all()  # a station stands in one place
    places = where.first()
    assert len(places) == 40 and not places.duplicated().any()  # 40 stations, 40 positions
    lon0, lon1, lat0, lat1 = AREA
    assert places.longitude.between(lon0, lon1).all() and places.latitude.between(lat0, lat1).all()
    # Spread: every quarter of the area has stations, none holds most of them.
    quarter = (places.longitude > (lon0 + lon1) / 2).astype(int) * 2 + (places.latitude > (lat0 + lat1) / 2)
    assert quarter.value_counts().reindex(range(4), fill_value=0).between(3, 25).all()
    # Each station's hours are its source station-year's, in the station's own zone, its
    # temperatures shifted by its own offset (and a yearly anomaly): colder to the north.
    sources = {s["station"]: s for s in load_station_years([str(WEATHER)])}
    offsets = {}
    for name, rows in df.groupby("station"):
        src = sources[name.rsplit("-", 1)[0]]
        zone = round(rows.longitude.iloc[0] / 15)
        local = pd.DatetimeIndex(pd.to_datetime(rows.timestamp + zone * 3600 - 3600, unit="s"))
        src_local = pd.DatetimeIndex(pd.to_datetime(src["timestamp"] + int(src["utc_offset"] * 3600) - 3600, unit="s"))
        index = dict(zip(zip(src_local.month, src_local.day, src_local.hour), range(HOURS)))
        at = [index[k] for k in zip(local.month, local.day, local.hour)]
        shift = rows.temperature.to_numpy() - src["temperature"][at]
        clipped = rows.temperature.abs() >= 55
        assert np.ptp(shift[~clipped.to_numpy()]) < 4, name  # one offset plus a small anomaly per year
        offsets[name] = (shift.mean() - (-0.5) * (rows.latitude.iloc[0] - src["latitude"]),
                         rows.latitude.iloc[0] - src["latitude"], shift.mean())
    own = np.array([o[0] for o in offsets.values()])
    assert own.std() > 0.5 and len(set(np.round(own, 1))) > 30  # each its own offset
    north, mean_shift = np.array([o[1] for o in offsets.values()]), np.array([o[2] for o in offsets.values()])
    assert np.corrcoef(north, mean_shift)[0, 1] < -0.8  # further north of its source: colder


def test_every_station_reports_one_stretch_inside_the_years(tmp_path):
    files = generate([str(WEATHER)], 50000, str(tmp_path), "parquet", seed=2, stations=7, years=(2015, 2017))
    df = read(files)
    first, last = pd.Timestamp("2015-01-01", tz="UTC"), pd.Timestamp("2018-01-02", tz="UTC")
    for name, rows in df.groupby("station", sort=False):
        ts = pd.to_datetime(rows.timestamp, unit="s", utc=True)
        assert ts.is_monotonic_increasing and (ts >= first).all() and (ts < last).all(), name
        assert (np.diff(rows.timestamp) == 3600).mean() > 0.99  # hourly, one stretch (gaps: Feb 29 absent)
    assert df.groupby("station").size().tolist() == [7143] * 6 + [7142]  # the rows shared between them


def test_the_network_is_refused_when_it_cannot_hold_the_rows():
    sources = load_station_years([str(WEATHER)])
    with pytest.raises(ValueError, match="give at least 2 stations"):
        network(sources, 2 * HOURS + 1, 1, 1, 2)
    with pytest.raises(ValueError, match="between 1 and the rows"):
        network(sources, 5, 6, 1, 2)
    assert len(network(sources, 30 * HOURS, None, 1, 21)) == 10  # default: about three years each


def test_memory_stays_flat_however_many_rows(tmp_path, monkeypatch):
    sources = load_station_years([str(WEATHER)])  # read once, outside the measure
    monkeypatch.setattr("gridagg_ingest.generate.load_station_years", lambda paths: sources)

    def peak(rows: int) -> int:
        gc.collect()  # garbage of the run before is not this run's memory
        tracemalloc.start()
        # The same stations for both sizes: only the rows grow.
        generate([str(WEATHER)], rows, str(tmp_path / str(rows)), "parquet", seed=1, stations=4, part_rows=10000)
        _, top = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        return top

    generate([str(WEATHER)], 20000, str(tmp_path / "first"), "parquet", part_rows=10000)  # imports, not measured
    small, large = peak(50000), peak(500000)
    assert large < 1.5 * small, (small, large)  # ten times the rows: about the same memory


def test_the_cli_writes_parts(tmp_path, capsys):
    assert main(["--rows", "30000", "--out", str(tmp_path), "--format", "parquet", "--part-rows", "20000",
                 "--stations", "5"]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["part-00000.parquet", "part-00001.parquet"]
    assert "30000 rows in 2 files" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["--rows", "30000", "--out", str(tmp_path), "--stations", "0"])
