"""The paper's data space and the query workloads, shared by the locust file,
`gridagg bench` and the tests.

- paper: the paper's experiment: a 4-D box over (time, temperature, humidity,
  illuminance), a 360-day window starting uniformly at random in 2011-2031, fixed ranges
  on the other three; aggregate min or sum of wind speed. The fixed ranges (temperature
  10..35 C, humidity 20..90 %, illuminance 100..100,000 lx) select about 1% of the rows
  of a generated archive (ingest/generate.py), as in the paper.
- dashboard: what a dashboard sends: monthly series over a 360-day window, small boxes
  (a week, narrow value ranges), and polygon regions when the dataset has lon/lat.
"""

from __future__ import annotations

import itertools
import math
import random
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Iterator

import numpy as np

from gridagg.schema import Dataset, GridParams
from gridagg_ingest.config import IngestConfig, load_config

PAPER_CONFIG = Path(__file__).with_name("paper.toml")
START = datetime(2011, 1, 1, tzinfo=timezone.utc)
END = datetime(2032, 1, 1, tzinfo=timezone.utc)
WINDOW = timedelta(days=360)
RANGES = {"temperature": [10, 35], "humidity": [20, 90], "illuminance": [100, 100000]}
AGGREGATES = {"min": ["min:wind_speed"], "sum": ["sum:wind_speed", "count"]}


def paper_config(name: str, n_size: int) -> IngestConfig:
    """The ingest config of the paper's data space (loadtest/paper.toml) for a dataset
    `name` with N_size = n_size, N_threshold = 10 x n_size, L_time = 360 days."""
    cfg = load_config(PAPER_CONFIG)
    grid = GridParams(n_size, 10 * n_size, cfg.dataset.grid.l_time)
    return replace(cfg, dataset=replace(cfg.dataset, name=name, grid=grid))


def definition(name: str, n_size: int) -> Dataset:
    """The dataset of paper_config(name, n_size)."""
    return paper_config(name, n_size).dataset


def _random_start(rng: random.Random) -> datetime:
    return START + timedelta(seconds=rng.uniform(0, (END - START - WINDOW).total_seconds()))


def paper_boxes(seed: int) -> Iterator[dict]:
    """The paper's query boxes as `where` objects, drawn one at a time, without end."""
    rng = random.Random(seed)
    while True:
        start = _random_start(rng)
        yield {"time": [start.isoformat(), (start + WINDOW).isoformat()], **{k: list(v) for k, v in RANGES.items()}}


def paper_queries(n: int, seed: int) -> list[dict]:
    """The first n boxes of paper_boxes(seed)."""
    return list(itertools.islice(paper_boxes(seed), n))


def paper_request(where: dict, agg: str) -> tuple[str, dict]:
    return "query", {"where": where, "aggregates": AGGREGATES[agg]}


def dashboard_request(rng: random.Random, lonlat: tuple[str, str] | None = None,
                      lon_range=(-180.0, 180.0), lat_range=(-90.0, 90.0)) -> tuple[str, dict]:
    """One dashboard request: (endpoint, body), endpoint "query" or "series"."""
    start = _random_start(rng).replace(microsecond=0)
    kinds = ["series", "box"] + (["region"] if lonlat else [])
    kind = rng.choice(kinds)
    if kind == "series":
        return "series", {"where": {"temperature": [10, 35]}, "aggregates": ["avg:temperature", "max:wind_speed"],
                          "start": start.isoformat(), "end": (start + timedelta(days=359)).isoformat(),
                          "step": "30d"}
    if kind == "box":
        t = rng.uniform(-10, 30)
        return "query", {"where": {"time": [start.isoformat(), (start + timedelta(days=7)).isoformat()],
                                   "temperature": [round(t, 1), round(t + 5, 1)]},
                         "aggregates": ["count", "avg:wind_speed", "max:wind_speed"]}
    x = rng.uniform(*lon_range)
    y = rng.uniform(*lat_range)
    r = 0.1 * (lon_range[1] - lon_range[0])
    ring = [[x + r * math.cos(a), y + r * math.sin(a)] for a in np.linspace(0, 2 * math.pi, 7)[:-1]]
    ring.append(ring[0])
    return "query", {"where": {"time": [start.isoformat(), (start + timedelta(days=30)).isoformat()]},
                     "region": {"type": "Polygon", "coordinates": [ring]}, "aggregates": ["count", "sum:wind_speed"]}
