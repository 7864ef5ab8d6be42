"""What a query costs on a store, as measured on this machine (`gridagg tune --calibrate`,
gridagg.tune.calibrate): a query's time is modelled as

    per_query + per_grid x cut grids + per_row x rows in the cut grids + per_reused x reused grids

where cut grids are the leaves a query scans (the store reads their rows: on HBase one
call per region server, each cut grid a row of the region's scan), and reused grids
those it answers from their partial aggregates (in memory). The coefficients are fitted
to timed queries, never written in the code; each store has its own.

Models are kept as JSON in the data dir (cost-model.json: {store: model}), so every
process on the machine reads the same one.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

FILE = "cost-model.json"
TERMS = ("per_query", "per_grid", "per_row", "per_reused")  # the regressors' order in `fit`


@dataclass(frozen=True)
class CostModel:
    """A store's costs in milliseconds: per query (fixed: the call, the walk's start),
    per cut grid, per row in cut grids, per reused aggregate. `measured` says when
    (ISO UTC) and `queries` on how many timed queries the fit rests; `spread` is the
    median factor between a fitted and a measured time of those queries (>= 1)."""

    store: str
    per_query: float
    per_grid: float
    per_row: float
    per_reused: float
    measured: str = ""
    queries: int = 0
    spread: float = 1.0

    def predict(self, grids: float, rows: float, reused: float) -> float:
        """Predicted milliseconds of a query cutting `grids` leaves holding `rows` rows
        and reusing `reused` aggregates."""
        return self.per_query + self.per_grid * grids + self.per_row * rows + self.per_reused * reused

    def grid_in_rows(self) -> float:
        """What a cut grid costs, in rows read (inf when rows cost nothing)."""
        return self.per_grid / self.per_row if self.per_row > 0 else float("inf")

    def describe(self) -> str:
        """One line for people: the coefficients in readable units."""
        return (f"{self.store}: per query {self.per_query:.3f} ms, per cut grid {self.per_grid * 1000:.2f} us, "
                f"per row {self.per_row * 1e6:.1f} ns, per reused aggregate {self.per_reused * 1000:.2f} us "
                f"(a cut grid costs as much as {self.grid_in_rows():,.0f} rows; fitted to {self.queries} queries, "
                f"median misfit x{self.spread:.2f}, measured {self.measured})")


def fit(samples: np.ndarray, store: str, measured: str) -> CostModel:
    """The model of (n, 4) samples, each (cut grids, rows in them, reused grids, ms) of a
    timed query: least squares of relative errors with every coefficient >= 0 (a term
    fitted negative is dropped and the rest fitted again: noise must not make a cost a
    gain)."""
    x = np.column_stack([np.ones(len(samples)), samples[:, 0], samples[:, 1], samples[:, 2]])
    y = samples[:, 3]
    # Relative errors count alike for cheap and dear queries: each row weighed by 1 / y.
    w = 1 / np.maximum(y, 1e-6)
    active = list(range(x.shape[1]))
    coef = np.zeros(x.shape[1])
    while active:
        sol, *_ = np.linalg.lstsq(x[:, active] * w[:, None], y * w, rcond=None)
        if (sol >= 0).all():
            coef[active] = sol
            break
        del active[int(np.argmin(sol))]  # the most negative term goes; the rest is fitted again
    if not active:  # nothing fits with a cost >= 0: a constant
        coef[0] = float(np.median(y))
    fitted = x @ coef
    ratio = np.maximum(fitted, 1e-9) / np.maximum(y, 1e-9)
    spread = float(np.median(np.maximum(ratio, 1 / ratio)))
    return CostModel(store, *map(float, coef), measured=measured, queries=len(samples), spread=spread)


def path(data_dir: Path) -> Path:
    return Path(data_dir) / FILE


def load(data_dir: Path, store: str) -> CostModel | None:
    """The stored model of `store`, or None when none was measured (or the file is unreadable)."""
    try:
        found = json.loads(path(data_dir).read_text()).get(store)
    except (OSError, ValueError, AttributeError):
        return None
    try:
        return CostModel(**found) if found else None
    except TypeError:  # written by another version: measure again
        return None


def save(data_dir: Path, model: CostModel) -> Path:
    """Store `model` beside the other stores' models (written whole, then renamed)."""
    p = path(data_dir)
    p.parent.mkdir(parents=True, exist_ok=True)
    try:
        models = json.loads(p.read_text())
    except (OSError, ValueError):
        models = {}
    models[model.store] = asdict(model)
    tmp = p.with_name(f".{p.name}.{os.getpid()}")
    tmp.write_text(json.dumps(models, indent=2) + "\n")
    os.replace(tmp, p)
    return p
