"""The benchmark archive generator: deterministic by seed, exact size, readable by the
generated-archive config."""

from pathlib import Path

import pytest

from ingest.config import load_config
from ingest.generate import generate

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
