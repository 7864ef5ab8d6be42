"""Brute-force answers of a series (the oracle of the series tests)."""

from __future__ import annotations

import numpy as np

from engine_support import oracle


def brute_series(ds, encoded: np.ndarray, result) -> list[dict]:
    """Per point of a SeriesResult, the brute-force stored-integer answers over the rows
    of its window (and the series' box)."""
    s = result.spec
    t = ds.time_axis
    out = []
    for i in range(s.points):
        box = list(s.query.box)
        lo, hi = s.base + i * s.step, s.start + (i + 1) * s.step - 1
        box[t] = (max(box[t][0], lo), min(box[t][1], hi))
        spec = type(s.query)(tuple(box), s.query.aggregates, None)
        out.append(oracle(encoded, spec)[0])
    return out
