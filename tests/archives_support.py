"""Oracles for archives as they come (rounded values, nullable measures): the decimal
module's rounding, and brute-force answers that skip absent values."""

from __future__ import annotations

from decimal import ROUND_CEILING, ROUND_FLOOR, ROUND_HALF_EVEN, ROUND_HALF_UP, Context, Decimal
from fractions import Fraction

import numpy as np

from gridagg.aggregate import NULL
from gridagg.errors import InvalidInput
from gridagg.query import Aggregate

MODES = {"half_even": ROUND_HALF_EVEN, "half_up": ROUND_HALF_UP, "floor": ROUND_FLOOR, "ceil": ROUND_CEILING}
WIDE = Context(prec=1000)  # no intermediate rounding of any test value


def decimal_rounded(text: str, scale: int, mode: str) -> tuple[int, bool]:
    """value * 10**scale rounded to an integer by the decimal module, and whether that
    changed it."""
    shifted = Decimal(text.strip()).scaleb(scale, WIDE)
    whole = shifted.to_integral_value(rounding=MODES[mode], context=WIDE)
    return int(whole), whole != shifted


def null_aware_queries(ds) -> bool:
    """Whether gridagg.query has `count:col` (and with it avg over the values present)."""
    try:
        Aggregate.parse(ds, f"count:{ds.columns[0].name}")
        return True
    except InvalidInput:
        return False


def brute(rows: np.ndarray, spec) -> tuple[dict, int]:
    """Brute-force answers (stored integers, Fraction for avg) of a QuerySpec over an
    (m, ncols) array in which NULL marks an absent value: count counts rows, count:col
    the values present, sum/min/max/avg skip absent values (avg of none is None)."""
    mask = np.ones(len(rows), dtype=bool)
    for axis, (lo, hi) in enumerate(spec.box):
        mask &= (rows[:, axis] >= lo) & (rows[:, axis] <= hi)
    sel = rows[mask]
    out = {}
    for a in spec.aggregates:
        if a.func == "count" and a.col is None:
            out[a.label] = len(sel)
            continue
        col = [int(v) for v in sel[:, a.col] if v != NULL]
        if a.func == "count":
            out[a.label] = len(col)
        elif a.func == "sum":
            out[a.label] = sum(col)
        elif not col:
            out[a.label] = None
        elif a.func == "min":
            out[a.label] = min(col)
        elif a.func == "max":
            out[a.label] = max(col)
        else:
            out[a.label] = Fraction(sum(col), len(col))
    return out, len(sel)
