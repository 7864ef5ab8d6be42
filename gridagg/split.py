"""Algorithm 2 on arrays: a grid's rows split into leaves. One function for the insert
path (GridEngine) and the bulk load (ingest.tasks) alike.

A grid holding more than `limit` rows is cut at the floor of the mean on its next axis
(gridagg.grid.choose_cut: an axis where all values are equal is passed over); each child
holding more than n_size rows is cut again, and so on. The insert path splits a leaf
that grew past N_threshold (limit = N_threshold); a bulk load builds a new leaf's subtree
from nothing (limit = N_size).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .aggregate import PartialAggregate
from .grid import Grid, children, choose_cut


@dataclass
class Split:
    """leaves: (leaf, indices of its rows, its aggregate) in grid-ID order; inner: the
    aggregate of every grid made on the way that is not a leaf; splits: grids cut."""

    leaves: list[tuple[Grid, np.ndarray, PartialAggregate]] = field(default_factory=list)
    inner: dict[str, PartialAggregate] = field(default_factory=dict)
    splits: int = 0


def split_rows(grid: Grid, values: np.ndarray, agg: PartialAggregate, limit: int, n_size: int,
               ndim: int) -> Split:
    """Split `grid`, which holds the rows `values` ((m, ncols) int64) whose aggregate is
    `agg`, as the module docstring says. The grid itself stays out of the result's
    aggregates unless it is the one leaf (nothing to cut)."""
    ncols = values.shape[1]
    out = Split()
    stack = [(grid, np.arange(len(values)), agg, limit)]
    while stack:
        g, ix, a, lim = stack.pop()
        cut = choose_cut(g.next_axis, a.count, a.sums, a.mins, a.maxs, ndim) if a.count > lim else None
        if cut is None:
            out.leaves.append((g, ix, a))
            continue
        if g is not grid:
            out.inner[g.grid_id] = a
        out.splits += 1
        axis, at = cut
        low = values[ix, axis] <= at
        kids = children(g, axis, at, ndim)
        # The high child first, so that leaves come out in grid-ID order.
        for child, part in ((kids[1], ix[~low]), (kids[0], ix[low])):
            stack.append((child, part, PartialAggregate.of_rows(values[part], ncols), n_size))
    return out
