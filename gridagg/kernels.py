"""Compiled kernels (numba): reading segments at memory speed.

scan_segments answers a ScanRequest (gridagg.scan) over segments held in this process's
memory (LMDB's map, or bytes fetched from a store): one compiled pass over every row of
every segment, with no Python step per row and one per segment (taking its address).
Rows of a segment are ordered by column 0, so a condition on column 0 narrows each
segment by binary search before any row is tested.

Compiled functions are cached on disk (numba's cache next to this module, or
NUMBA_CACHE_DIR), so a process compiles them once per machine, not on every start.
"""

from __future__ import annotations

import numba
import numpy as np
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from . import segments
from .aggregate import INT64_MAX, LOW, NULL, AggArrays
from .scan import ScanAnswer, ScanRequest


@intrinsic
def _pointer(typingctx, address):
    """An integer address as a void pointer (for numba.carray)."""

    def codegen(context, builder, signature, args):
        return builder.inttoptr(args[0], cgutils.voidptr_t)

    return types.voidptr(address), codegen


@numba.njit(cache=True, nogil=True)
def _scan(addresses, grid_first, grid_group, ncols, cond_cols, cond_lo, cond_hi, agg_cols,
          bucket_col, bucket_base, bucket_step, nbuckets,
          skip_cols, skip_max, skip_bounds, best_has, best_val,
          count, present, mins, maxs, hi, lo, stats):
    """Segments of grid i are addresses[grid_first[i]:grid_first[i + 1]] (each the address
    of a segment's header). Fills the output arrays (one row per group) and
    stats = [rows visited, rows matched, grids scanned, grids skipped]."""
    ngrids = grid_first.shape[0] - 1
    nconds = cond_cols.shape[0]
    nagg = agg_cols.shape[0]
    nskip = skip_cols.shape[0]
    lo0 = -INT64_MAX - 1
    hi0 = INT64_MAX
    for j in range(nconds):
        if cond_cols[j] == 0:
            lo0 = max(lo0, cond_lo[j])
            hi0 = min(hi0, cond_hi[j])
    for g in range(ngrids):
        if nskip > 0:
            useless = True
            for s in range(nskip):
                c = skip_cols[s]
                seen = present[0, c] > 0
                if not (seen or best_has[s]):
                    useless = False
                    break
                if skip_max[s]:
                    best = maxs[0, c] if seen else best_val[s]
                    if best_has[s] and best_val[s] > best:
                        best = best_val[s]
                    if skip_bounds[g, s] > best:
                        useless = False
                        break
                else:
                    best = mins[0, c] if seen else best_val[s]
                    if best_has[s] and best_val[s] < best:
                        best = best_val[s]
                    if skip_bounds[g, s] < best:
                        useless = False
                        break
            if useless:
                stats[3] += 1
                continue
        stats[2] += 1
        group = grid_group[g]
        for k in range(grid_first[g], grid_first[g + 1]):
            head = numba.carray(_pointer(addresses[k]), (2,), np.uint32)
            n = np.int64(head[0])
            cols = numba.carray(_pointer(addresses[k] + 8), (ncols, n), np.int64)
            stats[0] += n
            a = np.searchsorted(cols[0], lo0, "left") if lo0 > -INT64_MAX - 1 else 0
            b = np.searchsorted(cols[0], hi0, "right") if hi0 < INT64_MAX else n
            for i in range(a, b):
                ok = True
                for j in range(nconds):
                    v = cols[cond_cols[j], i]
                    if v < cond_lo[j] or v > cond_hi[j]:
                        ok = False
                        break
                if not ok:
                    continue
                if bucket_col >= 0:
                    group = (cols[bucket_col, i] - bucket_base) // bucket_step
                    if group < 0 or group >= nbuckets:
                        continue
                stats[1] += 1
                count[group] += 1
                for j in range(nagg):
                    v = cols[agg_cols[j], i]
                    if v == NULL:
                        continue
                    present[group, j] += 1
                    if v < mins[group, j]:
                        mins[group, j] = v
                    if v > maxs[group, j]:
                        maxs[group, j] = v
                    hi[group, j] += v >> 32
                    lo[group, j] += v & LOW


def scan_segments(request: ScanRequest, grid_segments: list[list], ncols: int) -> ScanAnswer:
    """Answer `request` over segments in memory: grid_segments[i] holds the segments
    (bytes-like, alive during the call) of request.grids[i]."""
    k = len(request.columns)
    out = AggArrays.empty(request.ngroups, k)
    answer = ScanAnswer(out)
    rows_of = request.rows_of
    addresses: list[int] = []
    first = [0]
    groups = request.group_of_grids()
    for i, segs in enumerate(grid_segments):
        if rows_of is not None and rows_of[i]:
            segs = ()  # read below, row by row
        for data in segs:
            addresses.append(np.frombuffer(data, np.uint8).ctypes.data)
        first.append(len(addresses))
    skip = request.skip
    if skip is not None:
        skip_cols = np.array([request.columns.index(c) for c, _ in skip.specs], np.int64)
        skip_max = np.array([m for _, m in skip.specs], np.bool_)
        bounds = np.ascontiguousarray(skip.bounds, np.int64)
        best_has = np.array([b is not None for b in skip.best], np.bool_)
        best_val = np.array([0 if b is None else b for b in skip.best], np.int64)
    else:
        skip_cols, skip_max = np.zeros(0, np.int64), np.zeros(0, np.bool_)
        bounds, best_has, best_val = np.zeros((len(grid_segments), 0), np.int64), skip_max, skip_cols
    conds = request.conditions
    buckets = request.buckets
    stats = np.zeros(4, np.int64)
    _scan(np.array(addresses, np.int64), np.array(first, np.int64), groups.astype(np.int64), ncols,
          np.array([c.column for c in conds], np.int64), np.array([c.lo for c in conds], np.int64),
          np.array([c.hi for c in conds], np.int64), np.array(request.columns, np.int64),
          -1 if buckets is None else buckets.column, 0 if buckets is None else buckets.base,
          1 if buckets is None else buckets.step, 0 if buckets is None else buckets.count,
          skip_cols, skip_max, bounds, best_has, best_val,
          out.count, out.present, out.mins, out.maxs, out.hi, out.lo, stats)
    answer.rows_visited, answer.rows_matched, answer.grids_scanned, answer.grids_skipped = (int(v) for v in stats)
    if rows_of is not None:
        for i in np.flatnonzero(rows_of).tolist():
            answer.rows[i] = _matching_rows(grid_segments[i], conds, ncols)
            answer.rows_visited += sum(segments.rows(d) for d in grid_segments[i])
            answer.grids_scanned += 1
    return answer


def _matching_rows(grid_segments, conds, ncols: int) -> np.ndarray:
    parts = []
    for data in grid_segments:
        rows = segments.values(data)
        mask = np.ones(len(rows), bool)
        for c in conds:
            col = rows[:, c.column]
            mask &= (col >= c.lo) & (col <= c.hi)
        parts.append(rows[mask])
    return np.concatenate(parts) if parts else np.empty((0, ncols), np.int64)
