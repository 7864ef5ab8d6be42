"""The query workloads, shared by the locust file, `gridagg bench` and the tests.

- paper: the paper's experiment (loadtest/table3.py's workload): a 4-D box over (time,
  temperature, humidity, illuminance), a 360-day window starting uniformly at random in
  the domain, fixed ranges on the other three; aggregate min or sum of wind speed.
- dashboard: what a dashboard sends: monthly series over a 360-day window, small boxes
  (a week, narrow value ranges), and polygon regions when the dataset has lon/lat.
"""

from __future__ import annotations

import math
import random
from datetime import datetime, timedelta, timezone
from typing import Iterator

import numpy as np

from . import table3

AGGREGATES = {"min": ["min:wind_speed"], "sum": ["sum:wind_speed", "count"]}


def paper_queries(n: int, seed: int) -> list[dict]:
    """n boxes of the paper's workload (table3.workload), as `where` objects."""
    return list(table3.workload(n, seed))


def paper_boxes(seed: int) -> Iterator[dict]:
    """The same boxes as paper_queries(n, seed), drawn one at a time, without end."""
    return table3.workload(None, seed)


def paper_request(where: dict, agg: str) -> tuple[str, dict]:
    return "query", {"where": where, "aggregates": AGGREGATES[agg]}


def dashboard_request(rng: random.Random, lonlat: tuple[str, str] | None = None,
                      lon_range=(-180.0, 180.0), lat_range=(-90.0, 90.0)) -> tuple[str, dict]:
    """One dashboard request: (endpoint, body), endpoint "query" or "series"."""
    span = (datetime(2032, 1, 1, tzinfo=timezone.utc) - table3.START).total_seconds() - 360 * 86400
    start = table3.START + timedelta(seconds=int(rng.uniform(0, span)))
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
