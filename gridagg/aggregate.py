"""Partial aggregates: count, and per column sum, min and max of stored integers.

Kept for every leaf and every ancestor grid. Sums are Python ints (exact, unbounded);
the stores keep them in 16 bytes (pack), far beyond any realistic sum of int64 values.
"""

from __future__ import annotations

import functools
import struct
from dataclasses import dataclass

import numpy as np

from .grid import parent


@dataclass
class PartialAggregate:
    count: int
    sums: list[int]
    mins: list[int | None]
    maxs: list[int | None]

    @classmethod
    def empty(cls, ncols: int) -> "PartialAggregate":
        return cls(0, [0] * ncols, [None] * ncols, [None] * ncols)

    @classmethod
    def of_rows(cls, values: np.ndarray, ncols: int, columns: list[int] | None = None) -> "PartialAggregate":
        """The aggregate of an (m, ncols) int64 array of stored rows. With `columns`,
        values holds only those columns (in that order) and only their statistics are
        filled in, the others left empty: enough for a query that reads only them."""
        if len(values) == 0:
            return cls.empty(ncols)
        # Reduced column by column over a contiguous copy of each: three times as fast as
        # reducing the row-major array along its first axis.
        by_column = np.ascontiguousarray(values.T)
        sums, mins, maxs = _exact_sums(by_column), by_column.min(axis=1), by_column.max(axis=1)
        if columns is None:
            return cls(len(values), sums, [int(v) for v in mins], [int(v) for v in maxs])
        agg = cls.empty(ncols)
        agg.count = len(values)
        for c, s, lo, hi in zip(columns, sums, mins, maxs):
            agg.sums[c], agg.mins[c], agg.maxs[c] = s, int(lo), int(hi)
        return agg

    def merge(self, other: "PartialAggregate") -> "PartialAggregate":
        """The aggregate of the union of both row sets (in place; returns self)."""
        if other.count == 0:
            return self
        if self.count == 0:
            self.count, self.sums = other.count, list(other.sums)
            self.mins, self.maxs = list(other.mins), list(other.maxs)
            return self
        self.count += other.count
        self.sums = [a + b for a, b in zip(self.sums, other.sums)]
        # None: a column left out of a partial aggregate (see of_rows' `columns`).
        self.mins = [b if a is None else a if b is None else min(a, b) for a, b in zip(self.mins, other.mins)]
        self.maxs = [b if a is None else a if b is None else max(a, b) for a, b in zip(self.maxs, other.maxs)]
        return self

    def pack(self) -> bytes:
        """The aggregate as the stores keep it (one value per grid): count, mins and maxs
        as little-endian int64, then each sum as 16 bytes, low 8 unsigned, high 8 signed.
        An empty aggregate's mins and maxs are stored as 0."""
        mins = [0 if v is None else v for v in self.mins]
        maxs = [0 if v is None else v for v in self.maxs]
        sums = [part for s in self.sums for part in (s & 0xFFFFFFFFFFFFFFFF, s >> 64)]
        return _layout(len(self.sums)).pack(self.count, *mins, *maxs, *sums)

    @classmethod
    def unpack(cls, data: bytes, ncols: int) -> "PartialAggregate":
        """The aggregate of `ncols` columns that pack() made `data` from."""
        vals = _layout(ncols).unpack_from(data)
        count = vals[0]
        if count == 0:
            return cls.empty(ncols)
        parts = vals[1 + 2 * ncols :]
        sums = [low + (high << 64) for low, high in zip(parts[::2], parts[1::2])]
        return cls(count, sums, list(vals[1 : 1 + ncols]), list(vals[1 + ncols : 1 + 2 * ncols]))

    def copy(self) -> "PartialAggregate":
        return PartialAggregate(self.count, list(self.sums), list(self.mins), list(self.maxs))


def ancestor_aggregates(leaves: dict[str, PartialAggregate], ncols: int) -> dict[str, PartialAggregate]:
    """Every proper ancestor's aggregate, given every leaf's (grid ID -> aggregate) of a
    tree or subtree: each the merge of its children's, deepest first, so one merge per
    grid. Merging each leaf into each of its ancestors took 1.6 s for the 15,600 leaves
    of 10M rows."""
    depth: dict[int, list[tuple[str, PartialAggregate]]] = {}
    for g, agg in leaves.items():
        depth.setdefault(len(g), []).append((g, agg))
    out: dict[str, PartialAggregate] = {}
    for d in range(max(depth, default=1), 1, -1):
        for g, agg in depth.get(d, []):
            up = out.get(parent(g))
            if up is None:
                up = out[parent(g)] = PartialAggregate.empty(ncols)
                depth.setdefault(d - 1, []).append((parent(g), up))
            up.merge(agg)
    return out


@functools.lru_cache(maxsize=None)
def _layout(ncols: int) -> struct.Struct:
    return struct.Struct("<" + "q" * (1 + 2 * ncols) + "Qq" * ncols)


def exact_column_sums(values: np.ndarray) -> list[int]:
    """Exact per-column sums of an (m, ncols) int64 array, fast."""
    return _exact_sums(np.ascontiguousarray(values.T))


def _exact_sums(by_column: np.ndarray) -> list[int]:
    """Exact per-row sums of an (ncols, m) int64 array (one column of values per row).

    A plain int64 sum could overflow silently; splitting each value into its high and low
    32 bits keeps both partial sums far inside int64 for any realistic row count."""
    high = (by_column >> 32).sum(axis=1)
    low = (by_column & 0xFFFFFFFF).sum(axis=1)
    return [(int(h) << 32) + int(l) for h, l in zip(high, low)]
