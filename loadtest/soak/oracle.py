"""The soak's oracle: the answers a user expects, computed from the rows the soak wrote
and the requests as its clients write them, by this module's own reading of the
documented query API (docs/api.md), as tests/oracle.py does for the tests. It uses
none of gridagg's parsers (QuerySpec and the rest), so a wrong reading of a bound in
gridagg cannot also be the expectation it is checked against. It is built for the soak's
volumes: rows are numpy arrays, one column per column of the dataset in its definition's
order (dimensions, then measures), and a run checks tens of thousands of answers.

The reading:
- the dataset is as its definition (the JSON a user posts to /v1/datasets) describes it;
  this oracle reads whole-number columns only (no scale, no time), whose values as
  written are the values of the rows;
- where: {dimension: [lo, hi]}, both ends inclusive, null for an open end, each bound
  the decimal it writes (a JSON number as the shortest decimal that reads back as it);
  a dimension left out spans its whole domain;
- aggregates: "count" counts the selected rows; "sum:c", "min:c", "max:c" go over
  column c of them (no row selected: sum 0, min and max None).

An answer given while rows were being written, deleted or corrected must lie within
`bounds`: every row surely in counted, no row counted that is not perhaps in, each
counted row's values between the least and the greatest it may have had meanwhile
(columns that are never negative: a sum only grows as rows come in). `holds` says
whether an answer's value does.
"""

from __future__ import annotations

import math
from decimal import Decimal
from fractions import Fraction

import numpy as np


class Columns:
    """The columns of a dataset definition, in its rows' order."""

    def __init__(self, definition: dict):
        columns = [*definition["dimensions"], *definition.get("measures", [])]
        for col in columns:
            if col.get("type", "number") != "number" or col.get("scale", 0):
                raise ValueError(f"column {col['name']}: the soak's oracle reads whole-number columns only")
        self.names = [col["name"] for col in columns]

    def index(self, name: str) -> int:
        return self.names.index(name)


def bound(value: object) -> Fraction:
    """A bound of a range as the decimal it writes."""
    if isinstance(value, bool):
        raise TypeError(f"{value!r} is no number")
    if isinstance(value, float):
        return Fraction(Decimal(repr(value)))
    return Fraction(Decimal(str(value).strip()) if isinstance(value, str) else value)


def selected(columns: Columns, rows: np.ndarray, where: dict | None) -> np.ndarray:
    """Which rows `where` selects (a boolean mask)."""
    mask = np.ones(len(rows), dtype=bool)
    for name, (lo, hi) in (where or {}).items():
        values = rows[:, columns.index(name)]
        if lo is not None:  # a whole number is at least lo when it is at least lo rounded up
            mask &= values >= math.ceil(bound(lo))
        if hi is not None:
            mask &= values <= math.floor(bound(hi))
    return mask


def answer(columns: Columns, rows: np.ndarray, where: dict | None, aggregates: list[str]) -> dict:
    """label -> the aggregate over the rows `where` selects: ints, None for a min or max
    of no row."""
    chosen = rows[selected(columns, rows, where)]
    out = {}
    for label in aggregates:
        func, _, name = label.partition(":")
        if not name:
            out[label] = len(chosen)
            continue
        values = chosen[:, columns.index(name)]
        if func == "sum":
            out[label] = int(values.sum())
        elif func in ("min", "max"):
            out[label] = int(getattr(values, func)()) if len(values) else None
        else:
            raise ValueError(f"{label}: the soak's oracle reads count, sum, min and max")
    return out


def bounds(columns: Columns, low: np.ndarray, high: np.ndarray, surely: np.ndarray, perhaps: np.ndarray,
           labels: list[str]) -> dict:
    """label -> (least, greatest, whether it may be None) of an answer over rows that may
    count: each row of `perhaps` (a boolean mask) may, each of `surely` (within perhaps)
    must; a counted row's values lie between its row of `low` and its row of `high`
    ((m, ncols) arrays; columns never negative). A None end is open."""
    out = {}
    none = not surely.any()
    for label in labels:
        func, _, name = label.partition(":")
        if not name:
            out[label] = (int(surely.sum()), int(perhaps.sum()), False)
            continue
        c = columns.index(name)
        lo, hi = low[:, c], high[:, c]
        if func == "sum":
            out[label] = (int(lo[surely].sum()), int(hi[perhaps].sum()), False)
        elif not perhaps.any():  # no row may count: nothing but None
            out[label] = (1, 0, True)
        elif func == "min":  # more rows, a smaller min
            out[label] = (int(lo[perhaps].min()), None if none else int(hi[surely].min()), none)
        elif func == "max":
            out[label] = (None if none else int(lo[surely].max()), int(hi[perhaps].max()), none)
        else:
            raise ValueError(f"{label}: the soak's oracle reads count, sum, min and max")
    return out


def holds(value: object, bound: tuple) -> bool:
    """Whether an answer's value lies within `bound` (one of `bounds`)."""
    least, greatest, may_be_none = bound
    if value is None:
        return may_be_none
    return (least is None or least <= value) and (greatest is None or value <= greatest)
