"""Benchmark archives built from the real TMY3 files, the way the paper extended its data:
real station-years replicated and shifted in time, and more stations made by replicating
real stations at shifted coordinates. Deterministic: the same seed and size give the
same bytes.

    python -m ingest.generate --rows 10000000 --out /tmp/weather-10m --format parquet

Output: files of one replicated station-year each (8,760 rows, the last one cut to the
requested size), columns station, timestamp (UTC epoch seconds), latitude, longitude,
temperature, humidity, illuminance, wind_speed, pressure: what
ingest/examples/weather_generated.toml reads.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from .readers import expand_inputs, parse_tmy3

SOURCE = {"temperature": "Dry-bulb (C)", "humidity": "RHum (%)", "illuminance": "GH illum (lx)",
          "wind_speed": "Wspd (m/s)", "pressure": "Pressure (mbar)"}
FIELDS = ["station", "timestamp", "latitude", "longitude", *SOURCE.values()]
YEAR = 365 * 86400
MAX_SHIFT_YEARS = 40  # sources span 1980..2005; shifted copies stay inside 1970..2049


def load_station_years(paths: list[str]) -> list[dict]:
    out = []
    for p in expand_inputs(paths):
        recs = [r for r in parse_tmy3(p, Path(p).read_text(), FIELDS) if r[-1] is None]
        cols = list(zip(*recs))
        d = {f: cols[i] for i, f in enumerate(FIELDS)}
        out.append({
            "station": d["station"][0],
            "timestamp": np.array(d["timestamp"], dtype=np.int64),
            "latitude": float(d["latitude"][0]),
            "longitude": float(d["longitude"][0]),
            **{name: list(d[src]) for name, src in SOURCE.items()},
        })
    out.sort(key=lambda s: s["station"])
    return out


def generate(sources: list[str], rows: int, out: str, fmt: str = "csv", seed: int = 1,
             progress=lambda msg: None) -> list[str]:
    import pandas as pd

    years = load_station_years(sources)
    if not years:
        raise ValueError("no TMY3 station-years in the sources")
    rng = np.random.default_rng(seed)
    outdir = Path(out)
    outdir.mkdir(parents=True, exist_ok=True)
    written, files, r = 0, [], 0
    while written < rows:
        src = years[r % len(years)]
        replica = r // len(years)
        shift = int(rng.integers(0, MAX_SHIFT_YEARS)) * YEAR
        dlat = round(float(rng.uniform(-2, 2)), 3) if replica else 0.0
        dlon = round(float(rng.uniform(-2, 2)), 3) if replica else 0.0
        n = min(len(src["timestamp"]), rows - written)
        df = pd.DataFrame({
            "station": f"{src['station']}-{replica}",
            "timestamp": src["timestamp"][:n] + shift,
            "latitude": f"{min(90.0, max(-90.0, src['latitude'] + dlat)):.3f}",
            "longitude": f"{min(180.0, max(-180.0, src['longitude'] + dlon)):.3f}",
            **{name: src[name][:n] for name in SOURCE},
        })
        path = outdir / f"part-{r:06d}.{'csv' if fmt == 'csv' else 'parquet'}"
        if fmt == "csv":
            df.to_csv(path, index=False)
        else:
            df.to_parquet(path, index=False)
        files.append(str(path))
        written += n
        r += 1
        if r % 50 == 0:
            progress(f"{written} rows in {r} files")
    return files


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m ingest.generate", description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, required=True)
    p.add_argument("--out", required=True, help="output directory")
    p.add_argument("--format", choices=["csv", "parquet"], default="csv")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--sources", nargs="+", default=[str(Path(__file__).resolve().parents[2] / "shared/data/weather")],
                   help="TMY3 files or directories (default ../shared/data/weather)")
    args = p.parse_args(argv)
    files = generate(args.sources, args.rows, args.out, args.format, args.seed,
                     progress=lambda m: print(f"generate: {m}", file=sys.stderr, flush=True))
    print(f"{args.rows} rows in {len(files)} files under {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
