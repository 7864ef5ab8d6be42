"""Benchmark archives that look like a real network of weather stations, made from the
real TMY3 station-years. Deterministic: the same seed, size and sources give the same bytes.

    python -m gridagg_ingest.generate --rows 10000000 --out /tmp/weather-10m --format parquet

The network: --stations stations (default: one per about three years of hourly rows) at
distinct positions spread over --area (default most of North America), each made from
one real station-year (drawn by the seed) with a climate of its own: its temperatures
offset by how far north of the source it stands (LAPSE degrees C a degree of latitude)
plus an offset of its own, its own offsets of humidity and pressure, its own scales of
wind speed and illuminance, and a small temperature anomaly per year on top. A station
reports hourly over one stretch of the span --years (the rows are shared between the
stations; where a stretch starts is drawn), in the local time of its longitude's zone:
each hour is the source's hour of the same local month, day and hour, moved into the
station's year (TMY3 months come from different real years; the move makes them one).

Output: parts of --part-rows rows (the last one shorter), part-00000.parquet (or .csv)
and on, written as the rows are made: memory holds one part, whatever --rows is. Rows go
station by station, each station's in time order. Columns: station ("<source>-<n>"),
timestamp (UTC epoch seconds), latitude, longitude, temperature, humidity, illuminance,
wind_speed, pressure: what ingest/examples/weather_generated.toml reads. Parquet is typed
(TYPES); CSV holds the same values as text. A missing value of the source (-9900, -9999)
stays missing.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import numpy as np

from .readers import expand_inputs, parse_tmy3

SOURCE = {"temperature": "Dry-bulb (C)", "humidity": "RHum (%)", "illuminance": "GH illum (lx)",
          "wind_speed": "Wspd (m/s)", "pressure": "Pressure (mbar)"}
FIELDS = ["station", "utc_offset", "timestamp", "latitude", "longitude", *SOURCE.values()]
# Parquet column types (TMY3 writes temperature and wind speed with one decimal, the rest whole).
TYPES = {"station": "string", "timestamp": "int64", "latitude": "float64", "longitude": "float64",
         "temperature": "float64", "humidity": "int64", "illuminance": "int64", "wind_speed": "float64",
         "pressure": "int64"}
YEARS = (2011, 2031)
AREA = (-165.0, -55.0, 15.0, 70.0)  # lon min, lon max, lat min, lat max: most of North America
HOURS = 8760  # rows of a TMY3 station-year
STATION_HOURS = 3 * HOURS  # a station's stretch by default
PART_ROWS = 1_000_000
LAPSE = -0.5  # degrees C a degree of latitude north of the source (a yearly mean's gradient)
MISSING = -9900  # TMY3 codes missing values as -9900 or -9999
# Each value's bounds, inside every data space that reads generated archives.
BOUNDS = {"temperature": (-55.0, 55.0), "humidity": (0, 100), "illuminance": (0, 150_000),
          "wind_speed": (0.0, 99.9), "pressure": (300, 1200)}


def load_station_years(paths: list[str]) -> list[dict]:
    """The TMY3 station-years of these files or directories, by station: station,
    utc_offset, latitude, longitude, timestamp (int64) and SOURCE's values (float64)."""
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
            **{name: np.array(d[src], dtype=np.float64) for name, src in SOURCE.items()},
        })
    out.sort(key=lambda s: s["station"])
    return out


def into_year(ts: np.ndarray, utc_offset_hours: float, year: int, to_offset_hours: float | None = None) -> np.ndarray:
    """UTC epoch seconds of hour-ending local times (of zone utc_offset_hours), moved to
    the same local month, day and hour of `year` in zone to_offset_hours (default the
    same zone); an hour ending at 24:00 on Dec 31 ends in the next year."""
    offset = int(round(utc_offset_hours * 3600))
    to = offset if to_offset_hours is None else int(round(to_offset_hours * 3600))
    start = (ts + offset - 3600).astype("datetime64[s]")  # local start of the hour
    day = start.astype("datetime64[D]")
    month = day.astype("datetime64[M]")
    moved_month = np.datetime64(f"{year}-01", "M") + month.astype(np.int64) % 12
    moved = moved_month.astype("datetime64[D]") + (day - month.astype("datetime64[D]"))
    return (moved.astype("datetime64[s]") + (start - day)).astype(np.int64) + 3600 - to


@dataclass(frozen=True)
class Station:
    """One station of the network: where it stands, the station-year it is made from,
    its climate, and its stretch of hours (from first_hour of the span, `hours` long)."""

    number: int
    name: str
    source: int
    longitude: float
    latitude: float
    utc_offset: int
    temperature: float  # added, degrees C
    humidity: float  # added, %
    pressure: float  # added, mbar
    wind_speed: float  # times
    illuminance: float  # times
    first_hour: int
    hours: int


def network(sources: list[dict], rows: int, stations: int | None, seed: int, span_years: int,
            area: tuple[float, float, float, float] = AREA) -> list[Station]:
    """The stations of an archive of `rows` rows over span_years years (deterministic)."""
    span = span_years * HOURS
    n = max(len(sources), round(rows / STATION_HOURS)) if stations is None else stations
    if not 0 < n <= rows:
        raise ValueError(f"--stations must be between 1 and the rows ({rows}), not {n}")
    if -(-rows // n) > span:
        raise ValueError(f"{n} stations cannot hold {rows} rows in {span_years} years of hours: "
                         f"give at least {-(-rows // span)} stations")
    rng = np.random.default_rng([seed, 0])
    lon0, lon1, lat0, lat1 = area
    places: dict[tuple[float, float], None] = {}
    while len(places) < n:  # distinct positions, in the order drawn
        for lon, lat in zip(rng.uniform(lon0, lon1, n).round(3), rng.uniform(lat0, lat1, n).round(3)):
            if len(places) < n:
                places.setdefault((float(lon), float(lat)), None)
    out = []
    for i, (lon, lat) in enumerate(places):
        src = int(rng.integers(len(sources)))
        hours = rows // n + (i < rows % n)
        out.append(Station(
            number=i, name=f"{sources[src]['station']}-{i}", source=src, longitude=lon, latitude=lat,
            utc_offset=int(round(lon / 15)),
            temperature=LAPSE * (lat - sources[src]["latitude"]) + rng.normal(0, 2),
            humidity=rng.normal(0, 5), pressure=rng.normal(0, 8), wind_speed=rng.uniform(0.6, 1.4),
            illuminance=rng.uniform(0.85, 1.15), first_hour=int(rng.integers(0, span - hours + 1)), hours=hours))
    return out


def _shift(values: np.ndarray, bounds: tuple, add: float = 0.0, times: float = 1.0, decimals: int = 0) -> np.ndarray:
    """values * times + add, rounded to `decimals` and kept within bounds; missing
    values kept."""
    out = np.clip(np.round(values * times + add, decimals), *bounds)
    return np.where(values <= MISSING, values, out)


def station_rows(st: Station, src: dict, seed: int, first_year: int) -> Iterator[dict[str, np.ndarray]]:
    """The station's rows, a year of its stretch at a time, as columns."""
    anomalies = np.random.default_rng([seed, 1, st.number])
    end = st.first_hour + st.hours
    for y in range(st.first_hour // HOURS, (end - 1) // HOURS + 1):
        r0, r1 = max(st.first_hour - y * HOURS, 0), min(end - y * HOURS, HOURS)
        n = r1 - r0
        yield {
            "station": np.full(n, st.name),
            "timestamp": into_year(src["timestamp"][r0:r1], src["utc_offset"], first_year + y, st.utc_offset),
            "latitude": np.full(n, st.latitude), "longitude": np.full(n, st.longitude),
            "temperature": _shift(src["temperature"][r0:r1], BOUNDS["temperature"],
                                  add=st.temperature + anomalies.normal(0, 0.8), decimals=1),
            "humidity": _shift(src["humidity"][r0:r1], BOUNDS["humidity"], add=st.humidity),
            "illuminance": _shift(src["illuminance"][r0:r1], BOUNDS["illuminance"], times=st.illuminance),
            "wind_speed": _shift(src["wind_speed"][r0:r1], BOUNDS["wind_speed"], times=st.wind_speed, decimals=1),
            "pressure": _shift(src["pressure"][r0:r1], BOUNDS["pressure"], add=st.pressure),
        }


class PartWriter:
    """Columns in, files of `part_rows` rows out (part-NNNNN.<fmt>), as they fill."""

    def __init__(self, outdir: Path, fmt: str, part_rows: int, progress):
        self.outdir, self.fmt, self.part_rows, self.progress = outdir, fmt, part_rows, progress
        self.pending: list[dict[str, np.ndarray]] = []
        self.held = self.written = 0
        self.files: list[str] = []

    def add(self, columns: dict[str, np.ndarray]) -> None:
        self.pending.append(columns)
        self.held += len(columns["timestamp"])
        while self.held >= self.part_rows:
            self._write(self.part_rows)

    def close(self) -> list[str]:
        if self.held:
            self._write(self.held)
        return self.files

    def _write(self, n: int) -> None:
        import pyarrow as pa

        table = pa.table({k: np.concatenate([c[k] for c in self.pending]) for k in TYPES})
        part, rest = table.slice(0, n).cast(pa.schema([(k, TYPES[k]) for k in TYPES])), table.slice(n)
        path = self.outdir / f"part-{len(self.files):05d}.{self.fmt}"
        if self.fmt == "csv":
            part.to_pandas().to_csv(path, index=False)
        else:
            import pyarrow.parquet as pq

            pq.write_table(part, path)
        self.pending = [{k: rest.column(k).to_numpy() for k in TYPES}] if len(rest) else []
        self.held = len(rest)
        self.written += n
        self.files.append(str(path))
        self.progress(f"{self.written} rows in {len(self.files)} parts")


def generate(sources: list[str], rows: int, out: str, fmt: str = "csv", seed: int = 1,
             years: tuple[int, int] = YEARS, stations: int | None = None, part_rows: int = PART_ROWS,
             area: tuple[float, float, float, float] = AREA, progress=lambda msg: None) -> list[str]:
    """Write an archive of `rows` rows under `out`; returns the part files in order."""
    real = load_station_years(sources)
    if not real:
        raise ValueError("no TMY3 station-years in the sources")
    if years[0] > years[1]:
        raise ValueError(f"years: {years[0]} is after {years[1]}")
    if rows < 1 or part_rows < 1:
        raise ValueError("--rows and --part-rows must be at least 1")
    net = network(real, rows, stations, seed, years[1] - years[0] + 1, area)
    outdir = Path(out)
    outdir.mkdir(parents=True, exist_ok=True)
    writer = PartWriter(outdir, "csv" if fmt == "csv" else "parquet", part_rows, progress)
    for st in net:
        for columns in station_rows(st, real[st.source], seed, years[0]):
            writer.add(columns)
    return writer.close()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m gridagg_ingest.generate", description=__doc__.split("\n\n")[0],
                                epilog=__doc__.split("\n\n", 1)[1], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", type=int, required=True)
    p.add_argument("--out", required=True, help="output directory")
    p.add_argument("--format", choices=["csv", "parquet"], default="csv")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--stations", type=int,
                   help=f"stations of the network (default: one per {STATION_HOURS:,} rows, at least one per source)")
    p.add_argument("--part-rows", type=int, default=PART_ROWS, help=f"rows per output file (default {PART_ROWS:,})")
    p.add_argument("--years", type=int, nargs=2, default=list(YEARS), metavar=("FIRST", "LAST"),
                   help=f"the span the stations report in (default {YEARS[0]} {YEARS[1]}, as the paper's)")
    p.add_argument("--area", type=float, nargs=4, default=list(AREA), metavar=("LON_MIN", "LON_MAX", "LAT_MIN", "LAT_MAX"),
                   help="where the stations stand (default %(default)s)")
    p.add_argument("--sources", nargs="+", default=[str(Path(__file__).resolve().parents[2] / "shared/data/weather")],
                   help="TMY3 files or directories (default ../shared/data/weather)")
    args = p.parse_args(argv)
    try:
        files = generate(args.sources, args.rows, args.out, args.format, args.seed, tuple(args.years), args.stations,
                         args.part_rows, tuple(args.area),
                         progress=lambda m: print(f"generate: {m}", file=sys.stderr, flush=True))
    except (ValueError, FileNotFoundError) as exc:
        p.error(str(exc))
    print(f"{args.rows} rows in {len(files)} files under {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
