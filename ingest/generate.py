"""Benchmark archives built from the real TMY3 files, the way the paper extended its data:
every real station-year replicated into each year of a span (the paper: 2011-2031), and
more stations made by replicating the real ones at shifted coordinates. Deterministic:
the same seed and size give the same bytes.

    python -m gridagg_ingest.generate --rows 10000000 --out /tmp/weather-10m --format parquet

A copy puts each source station-year into every year of --years, keeping each row's
local month, day and hour (TMY3 months come from different real years; a copy makes
them one year). Copy 0 keeps the real coordinates; copy k > 0 is a new station
("<id>-k") shifted up to 2 degrees. Years are visited in a seeded order, so an archive
cut to --rows still spans the whole time range.

Output: files of one station-year each (8,760 rows, the last one cut to the requested
size), columns station, timestamp (UTC epoch seconds), latitude, longitude, temperature,
humidity, illuminance, wind_speed, pressure: what ingest/examples/weather_generated.toml
reads. CSV holds the values as the TMY3 files write them; Parquet is typed: timestamp
int64, coordinates, temperature and wind speed float64, the rest int64 (TYPES).
"""

from __future__ import annotations

import argparse
import itertools
import sys
from pathlib import Path

import numpy as np

from .readers import expand_inputs, parse_tmy3

SOURCE = {"temperature": "Dry-bulb (C)", "humidity": "RHum (%)", "illuminance": "GH illum (lx)",
          "wind_speed": "Wspd (m/s)", "pressure": "Pressure (mbar)"}
FIELDS = ["station", "utc_offset", "timestamp", "latitude", "longitude", *SOURCE.values()]
# Parquet column types of the values TMY3 writes as text (with one decimal, or whole).
TYPES = {"latitude": "float64", "longitude": "float64", "temperature": "float64", "humidity": "int64",
         "illuminance": "int64", "wind_speed": "float64", "pressure": "int64"}
YEARS = (2011, 2031)


def load_station_years(paths: list[str]) -> list[dict]:
    out = []
    for p in expand_inputs(paths):
        recs = [r for r in parse_tmy3(p, Path(p).read_text(), FIELDS) if r[-1] is None]
        cols = list(zip(*recs))
        d = {f: cols[i] for i, f in enumerate(FIELDS)}
        out.append({
            "station": d["station"][0],
            "utc_offset": float(d["utc_offset"][0]),
            "timestamp": np.array(d["timestamp"], dtype=np.int64),
            "latitude": float(d["latitude"][0]),
            "longitude": float(d["longitude"][0]),
            **{name: list(d[src]) for name, src in SOURCE.items()},
        })
    out.sort(key=lambda s: s["station"])
    return out


def into_year(ts: np.ndarray, utc_offset_hours: float, year: int) -> np.ndarray:
    """UTC epoch seconds of hour-ending local times, moved to the same local month, day
    and hour of `year` (an hour ending at 24:00 on Dec 31 ends in the next year)."""
    offset = int(round(utc_offset_hours * 3600))
    start = (ts + offset - 3600).astype("datetime64[s]")  # local start of the hour
    day = start.astype("datetime64[D]")
    month = day.astype("datetime64[M]")
    moved_month = np.datetime64(f"{year}-01", "M") + month.astype(np.int64) % 12
    moved = moved_month.astype("datetime64[D]") + (day - month.astype("datetime64[D]"))
    return (moved.astype("datetime64[s]") + (start - day)).astype(np.int64) + 3600 - offset


def generate(sources: list[str], rows: int, out: str, fmt: str = "csv", seed: int = 1,
             years: tuple[int, int] = YEARS, progress=lambda msg: None) -> list[str]:
    """Write an archive of `rows` rows under `out`; returns the file paths in order."""
    import pandas as pd

    stations = load_station_years(sources)
    if not stations:
        raise ValueError("no TMY3 station-years in the sources")
    if years[0] > years[1]:
        raise ValueError(f"years: {years[0]} is after {years[1]}")
    rng = np.random.default_rng(seed)
    span = list(range(years[0], years[1] + 1))
    outdir = Path(out)
    outdir.mkdir(parents=True, exist_ok=True)
    written, files = 0, []
    plan = ((copy, year, i) for copy in itertools.count()
            for year in rng.permutation(span).tolist() for i in range(len(stations)))
    for r, (copy, year, i) in enumerate(plan):
        if written >= rows:
            break
        src = stations[i]
        # A copy's coordinates are the same in every year: seeded by (seed, copy, station).
        shift = np.random.default_rng([seed, copy, i]).uniform(-2, 2, 2).round(3) if copy else (0.0, 0.0)
        n = min(len(src["timestamp"]), rows - written)
        df = pd.DataFrame({
            "station": f"{src['station']}-{copy}",
            "timestamp": into_year(src["timestamp"][:n], src["utc_offset"], year),
            "latitude": f"{min(90.0, max(-90.0, src['latitude'] + shift[0])):.3f}",
            "longitude": f"{min(180.0, max(-180.0, src['longitude'] + shift[1])):.3f}",
            **{name: src[name][:n] for name in SOURCE},
        })
        path = outdir / f"part-{r:06d}.{'csv' if fmt == 'csv' else 'parquet'}"
        if fmt == "csv":
            df.to_csv(path, index=False)
        else:
            df.astype(TYPES).to_parquet(path, index=False)
        files.append(str(path))
        written += n
        if len(files) % 50 == 0:
            progress(f"{written} rows in {len(files)} files")
    return files


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m gridagg_ingest.generate", description=__doc__.split("\n\n")[0],
                                epilog=__doc__.split("\n\n", 1)[1], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", type=int, required=True)
    p.add_argument("--out", required=True, help="output directory")
    p.add_argument("--format", choices=["csv", "parquet"], default="csv")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--years", type=int, nargs=2, default=list(YEARS), metavar=("FIRST", "LAST"),
                   help=f"the years each copy fills (default {YEARS[0]} {YEARS[1]}, as in the paper)")
    p.add_argument("--sources", nargs="+", default=[str(Path(__file__).resolve().parents[2] / "shared/data/weather")],
                   help="TMY3 files or directories (default ../shared/data/weather)")
    args = p.parse_args(argv)
    try:
        files = generate(args.sources, args.rows, args.out, args.format, args.seed, tuple(args.years),
                         progress=lambda m: print(f"generate: {m}", file=sys.stderr, flush=True))
    except (ValueError, FileNotFoundError) as exc:
        p.error(str(exc))
    print(f"{args.rows} rows in {len(files)} files under {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
