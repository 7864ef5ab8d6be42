"""Partial aggregates: a row count, and per column the number of values present, their
sum, min and max (stored integers).

Kept for every leaf and every ancestor grid. A nullable measure stores an absent value
as NULL (the smallest int64, never a stored value: values stay within +-2**53); every
statistic skips it, and `present` counts the values that are there.

Two forms of the same thing:
- PartialAggregate: one aggregate with Python ints (exact sums of any size), what the
  stores keep (pack) and what answers are made of;
- AggArrays: many aggregates as numpy arrays (a row per group or node), what kernels
  fill and the planner adds up without a Python step per grid. A sum is kept exactly as
  two int64 parts, hi * 2**32 + lo with 0 <= lo: adding either part stays far inside
  int64 for any realistic number of rows and grids.
"""

from __future__ import annotations

import functools
import struct
from dataclasses import dataclass, field
from typing import ClassVar

import numba
import numpy as np

from gridagg.model.grid import parent

NULL = -(2**63)  # an absent value of a nullable measure
INT64_MAX = 2**63 - 1
LOW = 0xFFFFFFFF


@dataclass
class PartialAggregate:
    count: int
    sums: list[int]
    mins: list[int | None]
    maxs: list[int | None]
    present: list[int] = field(default=None)  # type: ignore[assignment]

    def __post_init__(self):
        if self.present is None:  # no column has absent values
            self.present = [self.count] * len(self.sums)

    @classmethod
    def empty(cls, ncols: int) -> "PartialAggregate":
        return cls(0, [0] * ncols, [None] * ncols, [None] * ncols, [0] * ncols)

    @classmethod
    def of_rows(cls, values: np.ndarray, ncols: int, columns: list[int] | None = None) -> "PartialAggregate":
        """The aggregate of an (m, ncols) int64 array of stored rows. With `columns`,
        values holds only those columns (in that order)
        and only their statistics are filled in, the others left empty: enough for a
        query that reads only them."""
        if len(values) == 0:
            return cls.empty(ncols)
        columns = list(range(ncols)) if columns is None else columns
        arrays = AggArrays.of_rows(np.asarray(values), len(columns))
        part = arrays.aggregate(0)
        agg = cls.empty(ncols)
        agg.count = part.count
        for i, c in enumerate(columns):
            agg.sums[c], agg.mins[c], agg.maxs[c], agg.present[c] = (
                part.sums[i], part.mins[i], part.maxs[i], part.present[i])
        return agg

    def merge(self, other: "PartialAggregate") -> "PartialAggregate":
        """The aggregate of the union of both row sets (in place; returns self)."""
        if other.count == 0:
            return self
        self.count += other.count
        self.sums = [a + b for a, b in zip(self.sums, other.sums)]
        self.present = [a + b for a, b in zip(self.present, other.present)]
        # None: no value seen (an empty column, or one left out of a partial aggregate).
        self.mins = [b if a is None else a if b is None else min(a, b) for a, b in zip(self.mins, other.mins)]
        self.maxs = [b if a is None else a if b is None else max(a, b) for a, b in zip(self.maxs, other.maxs)]
        return self

    def pack(self) -> bytes:
        """The aggregate as the stores keep it (one value per grid): count, then per
        column the values present, mins and maxs as little-endian int64, then each sum as
        16 bytes, low 8 unsigned, high 8 signed. A min or max of no values is stored as 0."""
        mins = [0 if v is None else v for v in self.mins]
        maxs = [0 if v is None else v for v in self.maxs]
        sums = [part for s in self.sums for part in (s & 0xFFFFFFFFFFFFFFFF, s >> 64)]
        return _layout(len(self.sums)).pack(self.count, *self.present, *mins, *maxs, *sums)

    @classmethod
    def unpack(cls, data: bytes, ncols: int) -> "PartialAggregate":
        """The aggregate of `ncols` columns that pack() made `data` from."""
        vals = _layout(ncols).unpack_from(data)
        count = vals[0]
        if count == 0:
            return cls.empty(ncols)
        present = list(vals[1 : 1 + ncols])
        mins = [v if n else None for v, n in zip(vals[1 + ncols : 1 + 2 * ncols], present)]
        maxs = [v if n else None for v, n in zip(vals[1 + 2 * ncols : 1 + 3 * ncols], present)]
        parts = vals[1 + 3 * ncols :]
        sums = [low + (high << 64) for low, high in zip(parts[::2], parts[1::2])]
        return cls(count, sums, mins, maxs, present)

    def copy(self) -> "PartialAggregate":
        return PartialAggregate(self.count, list(self.sums), list(self.mins), list(self.maxs), list(self.present))


def packed_size(ncols: int) -> int:
    """Bytes of one packed aggregate of ncols columns."""
    return _layout(ncols).size


@functools.lru_cache(maxsize=None)
def _layout(ncols: int) -> struct.Struct:
    return struct.Struct("<" + "q" * (1 + 3 * ncols) + "Qq" * ncols)


@functools.lru_cache(maxsize=None)
def _record(ncols: int) -> np.dtype:
    """pack()'s layout as a numpy record."""
    return np.dtype([("count", "<i8"), ("present", "<i8", (ncols,)), ("mins", "<i8", (ncols,)),
                     ("maxs", "<i8", (ncols,)), ("sums", [("low", "<u8"), ("high", "<i8")], (ncols,))])


def ancestor_aggregates(leaves: dict[str, PartialAggregate], ncols: int) -> dict[str, PartialAggregate]:
    """Every proper ancestor's aggregate, given every leaf's (grid ID -> aggregate) of a
    tree or subtree: each the merge of its children's, deepest first, so one merge per
    grid. Merging each leaf into each of its ancestors instead, a merge per leaf and level,
    was slow for a tree of many leaves."""
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


def exact_column_sums(values: np.ndarray) -> list[int]:
    """Exact per-column sums of an (m, ncols) int64 array without NULLs."""
    return AggArrays.of_rows(np.asarray(values), values.shape[1]).aggregate(0).sums


@dataclass
class AggArrays:
    """Aggregates of g groups over k columns as arrays: count (g,), and (g, k) arrays of
    values present, mins, maxs and the sums' two parts (sum = hi * 2**32 + lo). A group
    or column with no values has present 0 (its min is INT64_MAX, its max NULL)."""

    count: np.ndarray
    present: np.ndarray
    mins: np.ndarray
    maxs: np.ndarray
    hi: np.ndarray
    lo: np.ndarray

    FIELDS: ClassVar[tuple[str, ...]] = ("count", "present", "mins", "maxs", "hi", "lo")

    @classmethod
    def empty(cls, groups: int, ncols: int) -> "AggArrays":
        # One block for the five (groups, ncols) arrays: a query makes several of these.
        block = np.zeros((5, groups, ncols), np.int64)
        block[1], block[2] = INT64_MAX, NULL
        return cls(np.zeros(groups, np.int64), block[0], block[1], block[2], block[3], block[4])

    @classmethod
    def of_rows(cls, values: np.ndarray, ncols: int) -> "AggArrays":
        """One group: the aggregate of an (m, ncols) int64 array of rows."""
        out = cls.empty(1, ncols)
        values = np.ascontiguousarray(values, np.int64)
        out.count[0] = len(values)
        if out.count[0]:
            _fold_rows(values, out.present[0], out.mins[0], out.maxs[0], out.hi[0], out.lo[0])
        return out

    @classmethod
    def of_aggregates(cls, aggs: list[PartialAggregate], ncols: int) -> "AggArrays":
        out = cls.empty(len(aggs), ncols)
        for i, a in enumerate(aggs):
            out.set(i, a)
        return out

    @classmethod
    def unpack(cls, blobs: list, ncols: int) -> "AggArrays":
        """Row i: the aggregate PartialAggregate.pack() made blobs[i] from (None: empty),
        all at once."""
        out = cls.empty(len(blobs), ncols)
        have = [i for i, b in enumerate(blobs) if b is not None]
        if not have:
            return out
        whole = len(have) == len(blobs)  # a tree's grids all have one: no gather, no scatter
        rec = np.frombuffer(b"".join(blobs if whole else [blobs[i] for i in have]), dtype=_record(ncols))
        high, low = rec["sums"]["high"], rec["sums"]["low"]
        if (np.abs(high) >= 2**31).any():  # sums beyond 2**95: the exact, slow way
            return cls.of_aggregates([PartialAggregate.empty(ncols) if b is None else PartialAggregate.unpack(b, ncols)
                                      for b in blobs], ncols)
        idx = slice(None) if whole else np.array(have)
        present = rec["present"]
        out.count[idx] = rec["count"]
        out.present[idx] = present
        out.mins[idx] = np.where(present > 0, rec["mins"], INT64_MAX)
        out.maxs[idx] = np.where(present > 0, rec["maxs"], NULL)
        out.hi[idx] = high * 2**32 + (low >> np.uint64(32)).astype(np.int64)
        out.lo[idx] = (low & np.uint64(LOW)).astype(np.int64)
        return out

    def set(self, i: int, a: PartialAggregate) -> None:
        """Row i becomes aggregate a."""
        self.count[i] = a.count
        self.present[i] = a.present
        self.mins[i] = [INT64_MAX if v is None else v for v in a.mins]
        self.maxs[i] = [NULL if v is None else v for v in a.maxs]
        self.hi[i] = [s >> 32 for s in a.sums]
        self.lo[i] = [s & LOW for s in a.sums]

    def __len__(self) -> int:
        return len(self.count)

    def copy(self) -> "AggArrays":
        return AggArrays(*(a.copy() for a in (self.count, self.present, self.mins, self.maxs, self.hi, self.lo)))

    def take(self, idx) -> "AggArrays":
        return AggArrays(self.count[idx], self.present[idx], self.mins[idx], self.maxs[idx], self.hi[idx], self.lo[idx])

    @classmethod
    def concat(cls, parts: list["AggArrays"]) -> "AggArrays":
        """The rows of every part, in order (at least one part)."""
        return cls(*(np.concatenate([getattr(p, f) for p in parts]) for f in cls.FIELDS))

    def add_into(self, groups: np.ndarray, other: "AggArrays", rows: np.ndarray | None = None,
                 columns: np.ndarray | list[int] | None = None) -> int:
        """Merge row rows[j] of other into row groups[j] of self, for every j (a group may
        receive many rows); rows defaults to all of other's in order. With columns, self's
        column i is other's column columns[i] (default: the same columns). Returns the
        rows merged in (the sum of their counts). The indexes must lie inside both
        (compiled code does not check them)."""
        groups = np.asarray(groups, np.int64)
        rows = np.arange(len(groups)) if rows is None else np.asarray(rows, np.int64)
        columns = np.arange(self.present.shape[1]) if columns is None else np.asarray(columns, np.int64)
        return int(_merge(other.count, other.present, other.mins, other.maxs, other.hi, other.lo, rows, columns,
                          groups, self.count, self.present, self.mins, self.maxs, self.hi, self.lo))

    def total(self) -> "AggArrays":
        """All rows merged into one."""
        return AggArrays(self.count.sum(keepdims=True), self.present.sum(axis=0, keepdims=True),
                         self.mins.min(axis=0, keepdims=True, initial=INT64_MAX),
                         self.maxs.max(axis=0, keepdims=True, initial=NULL),
                         self.hi.sum(axis=0, keepdims=True), self.lo.sum(axis=0, keepdims=True))

    def aggregate(self, i: int, columns: list[int] | None = None, ncols: int | None = None) -> PartialAggregate:
        """Row i as a PartialAggregate (see aggregates)."""
        return self.take(slice(i, i + 1)).aggregates(columns, ncols)[0]

    def aggregates(self, columns: list[int] | None = None, ncols: int | None = None) -> list[PartialAggregate]:
        """Every row as a PartialAggregate. With `columns` (this object's columns are those
        columns of an ncols-column dataset), the others are left empty. The arrays become
        Python ints once, not a conversion per value (a series has thousands of them)."""
        k = self.present.shape[1]
        width = k if columns is None else (ncols if ncols is not None else k)
        at = list(range(k)) if columns is None else list(columns)
        out = []
        for count, present, mins, maxs, his, los in zip(self.count.tolist(), self.present.tolist(), self.mins.tolist(),
                                                        self.maxs.tolist(), self.hi.tolist(), self.lo.tolist()):
            agg = PartialAggregate(count, [0] * width, [None] * width, [None] * width, [0] * width)
            for j, c in enumerate(at):
                n = present[j]
                agg.present[c], agg.sums[c] = n, (his[j] << 32) + los[j]
                if n:
                    agg.mins[c], agg.maxs[c] = mins[j], maxs[j]
            out.append(agg)
        return out


@numba.njit(cache=True, nogil=True)
def _fold_rows(values, present, mins, maxs, hi, lo):
    """AggArrays.of_rows in one compiled pass over the rows: numpy's took a transposed
    copy and a temporary per statistic, a noticeable share of a bulk load's build step."""
    for r in range(values.shape[0]):
        for c in range(values.shape[1]):
            v = values[r, c]
            if v != NULL:
                present[c] += 1
                mins[c] = min(mins[c], v)
                maxs[c] = max(maxs[c], v)
                hi[c] += v >> 32
                lo[c] += v & LOW


@numba.njit(cache=True, nogil=True)
def _merge(count, present, mins, maxs, hi, lo, rows, columns, groups,
           to_count, to_present, to_mins, to_maxs, to_hi, to_lo):
    """AggArrays.add_into in one compiled pass (numpy's ufunc.at costs microseconds per call)."""
    merged = 0
    for j in range(groups.shape[0]):
        g, r = groups[j], rows[j]
        to_count[g] += count[r]
        merged += count[r]
        for i in range(columns.shape[0]):
            k = columns[i]
            to_present[g, i] += present[r, k]
            to_mins[g, i] = min(to_mins[g, i], mins[r, k])
            to_maxs[g, i] = max(to_maxs[g, i], maxs[r, k])
            to_hi[g, i] += hi[r, k]
            to_lo[g, i] += lo[r, k]
    return merged
