"""The paper's data space and its query workload, shared by `gridagg bench`, its load
driver's request files and the tests: a 4-D box over (time, temperature, humidity,
illuminance), a 360-day window starting uniformly at random in 2011-2031, fixed ranges
on the other three; aggregate min or sum of wind speed. The fixed ranges (temperature
10..35 C, humidity 20..90 %, illuminance 100..100,000 lx) select about 1% of the rows of
a generated archive (ingest/generate.py), as in the paper.
"""

from __future__ import annotations

import itertools
import random
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Iterator

from gridagg_ingest.config import IngestConfig, load_config

from gridagg.model.schema import Dataset, GridParams

PAPER_CONFIG = Path(__file__).with_name("paper.toml")
START = datetime(2011, 1, 1, tzinfo=timezone.utc)
END = datetime(2032, 1, 1, tzinfo=timezone.utc)
WINDOW = timedelta(days=360)
RANGES = {"temperature": [10, 35], "humidity": [20, 90], "illuminance": [100, 100000]}
AGGREGATES = {"min": ["min:wind_speed"], "sum": ["sum:wind_speed", "count"]}


def paper_config(name: str, n_size: int) -> IngestConfig:
    """The ingest config of the paper's data space (loadtest/bench/paper.toml) for a dataset
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


def paper_body(where: dict, agg: str) -> dict:
    """The query body of box `where` with aggregate `agg` ("min" or "sum")."""
    return {"where": where, "aggregates": AGGREGATES[agg]}
