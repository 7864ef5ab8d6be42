"""The benchmark archive generator: deterministic by seed, exact size, readable by the
generated-archive config."""

from pathlib import Path

import pytest

from gridagg_ingest.config import load_config
from gridagg_ingest.generate import generate

WEATHER = Path("/work/shared/data/weather")
ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.skipif(not WEATHER.exists(), reason="weather samples not found")
@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_generate_deterministic(tmp_path, fmt):
    a = generate([str(WEATHER)], 20000, str(tmp_path / "a"), fmt, seed=3)
    b = generate([str(WEATHER)], 20000, str(tmp_path / "b"), fmt, seed=3)
    c = generate([str(WEATHER)], 20000, str(tmp_path / "c"), fmt, seed=4)
    assert [Path(p).read_bytes() for p in a] == [Path(p).read_bytes() for p in b]
    assert [Path(p).read_bytes() for p in a] != [Path(p).read_bytes() for p in c]
    import pandas as pd

    frames = [pd.read_csv(p, dtype=str) if fmt == "csv" else pd.read_parquet(p) for p in a]
    df = pd.concat(frames)
    assert len(df) == 20000
    assert not df.duplicated(["station", "timestamp"]).any()
    cfg = load_config(ROOT / "ingest" / "examples" / "weather_generated.toml")
    assert set(cfg.source_fields) <= set(df.columns)


@pytest.mark.skipif(not WEATHER.exists(), reason="weather samples not found")
def test_every_copy_puts_each_station_year_into_every_year(tmp_path):
    """One copy (2 stations x 21 years) and a bit: all of 2011-2031, each station-year's
    local month, day and hour kept, no repeated element ID."""
    import pandas as pd

    from gridagg_ingest.generate import load_station_years

    sources = {s["station"]: s for s in load_station_years([str(WEATHER)])}
    files = generate([str(WEATHER)], 2 * 21 * 8760 + 5000, str(tmp_path), "parquet", years=(2011, 2031))
    seen = set()
    for p in files:
        df = pd.read_parquet(p)
        station, copy = df["station"].iloc[0].rsplit("-", 1)
        src = sources[station]
        local = lambda ts: pd.to_datetime(ts + int(src["utc_offset"] * 3600) - 3600, unit="s")  # noqa: E731
        got, want = local(df["timestamp"].to_numpy()), local(src["timestamp"][: len(df)])
        assert (got.month == want.month).all() and (got.day == want.day).all() and (got.hour == want.hour).all()
        assert len(set(got.year)) == 1
        seen.add((station, copy, got.year[0]))
    assert {(s, y) for s, c, y in seen if c == "0"} == {(s, y) for s in sources for y in range(2011, 2032)}
    df = pd.concat(pd.read_parquet(p) for p in files)
    assert not df.duplicated(["station", "timestamp"]).any()
