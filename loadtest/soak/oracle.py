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

An answer given while rows were being written must lie between the answer over the
rows surely in (acknowledged before it began) and the answer over the rows perhaps in
(begun before it ended): `between` says whether it does, for measures that are never
negative (a sum only grows as rows come in).
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


def between(label: str, value: object, surely: dict, perhaps: dict) -> bool:
    """Whether an answer's `value` of `label` lies between the answers over the rows
    surely in and over the rows perhaps in (`answer`s with "count" among their labels;
    the rows perhaps in include those surely in)."""
    low, high = surely[label], perhaps[label]
    if label == "count" or label.startswith("sum:"):
        return low <= value <= high
    if value is None:  # no row: none surely in may be in the box
        return surely["count"] == 0
    if high is None:
        return False
    if label.startswith("min:"):  # more rows, a smaller min
        return high <= value and (low is None or value <= low)
    return value <= high and (low is None or value >= low)
