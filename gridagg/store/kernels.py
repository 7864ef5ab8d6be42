"""Compiled kernels (numba): reading segments at memory speed.

scan_segments answers a ScanRequest (gridagg.store.scan) over segments held in this process's
memory (LMDB's map, or bytes fetched from a store): one compiled pass over every row of
every segment, with no Python step per row. Rows of a segment are ordered by column 0,
so a condition on column 0 narrows each segment by binary search before any row is
tested; a column of 2 or 4 bytes (gridagg.store.segments) is tested and added up as it is
stored, bounds turned into deltas from its base.

Compiled functions are cached on disk (numba's cache next to this module, or
NUMBA_CACHE_DIR), so a process compiles them once per machine, not on every start, and
before it serves (gridagg.warmup).
"""

from __future__ import annotations

from collections.abc import Sequence

import numba
import numpy as np
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from gridagg.model.aggregate import INT64_MAX, LOW, NULL, AggArrays
from gridagg.store import parts
from gridagg.store.scan import ScanAnswer, ScanRequest
from gridagg.store.segments import NARROW


@intrinsic
def _pointer(typingctx, address):
    """An integer address as a void pointer (for numba.carray)."""

    def codegen(context, builder, signature, args):
        return builder.inttoptr(args[0], cgutils.voidptr_t)

    return types.voidptr(address), codegen


@intrinsic
def _buffer_address(typingctx, buffer):
    """The address of a buffer's first byte, as an integer."""

    def codegen(context, builder, signature, args):
        view = context.make_array(signature.args[0])(context, builder, args[0])
        return builder.ptrtoint(view.data, context.get_value_type(types.intp))

    return types.intp(buffer), codegen


@numba.njit(cache=True, nogil=True)
def address_of(buffer):
    """The address of a bytes-like object's first byte (a quarter of the cost of
    numpy's .ctypes.data: a query takes one per segment)."""
    return _buffer_address(buffer)


@numba.njit(cache=True, nogil=True)
def even_odd(x, y, edges):
    """Whether (x, y) lies inside the polygon of `edges` (rows x1, y1, x2, y2 of every
    ring) by the even-odd rule: a ray from it crosses the edges an odd number of times.
    Points on an edge may go either way; callers settle those first."""
    inside = False
    for e in range(edges.shape[0]):
        x1, y1, x2, y2 = edges[e, 0], edges[e, 1], edges[e, 2], edges[e, 3]
        if (y1 > y) != (y2 > y) and x < x1 + (y - y1) * (x2 - x1) / (y2 - y1):
            inside = not inside
    return inside


@numba.njit(cache=True, nogil=True)
def point_in_polygon(x, y, edges, eps):
    """0: (x, y) lies outside the polygon of `edges` (rows x1, y1, x2, y2 of every ring),
    2: inside, 1: within eps of an edge (the exact test must say)."""
    for e in range(edges.shape[0]):
        x1, y1, x2, y2 = edges[e, 0], edges[e, 1], edges[e, 2], edges[e, 3]
        if x < min(x1, x2) - eps or x > max(x1, x2) + eps or y < min(y1, y2) - eps or y > max(y1, y2) + eps:
            continue
        dx, dy = x2 - x1, y2 - y1
        length2 = dx * dx + dy * dy
        t = 0.0 if length2 == 0 else min(1.0, max(0.0, ((x - x1) * dx + (y - y1) * dy) / length2))
        px, py = x1 + t * dx - x, y1 + t * dy - y
        if px * px + py * py <= eps * eps:
            return 1
    return 2 if even_odd(x, y, edges) else 0


NO_STOP = np.zeros(1, np.uint8)  # a scan nobody stops
I16_MIN, I16_MAX = -(2**15), 2**15 - 1
I32_MIN, I32_MAX = -(2**31), 2**31 - 1


@numba.njit(cache=True, nogil=True)
def _columns(address, ncols, at, width, base):
    """Reads a segment's header (gridagg.store.segments) at `address`: fills each column's
    address, width and base; returns its rows."""
    head = numba.carray(_pointer(address), (2,), np.uint32)
    n = np.int64(head[0])
    if head[1] & NARROW == 0:  # int64 columns one after another
        for c in range(ncols):
            at[c], width[c], base[c] = address + 8 + 8 * n * c, 8, 0
        return n
    bases = numba.carray(_pointer(address + 8), (ncols,), np.int64)
    widths = numba.carray(_pointer(address + 8 + 8 * ncols), (ncols,), np.uint8)
    p = address + 8 + 8 * ncols + (ncols + 7) // 8 * 8
    for c in range(ncols):
        at[c], width[c], base[c] = p, widths[c], bases[c]
        p += (n * widths[c] + 7) // 8 * 8
    return n


@numba.njit(cache=True, nogil=True, inline="always")
def _value(at, width, base, c, r):
    """Row r of column c, as a stored int64 (NULL as NULL)."""
    if width[c] == 8:
        return numba.carray(_pointer(at[c] + 8 * r), (1,), np.int64)[0]
    if width[c] == 4:
        v = numba.carray(_pointer(at[c] + 4 * r), (1,), np.int32)[0]
        return NULL if v == I32_MIN else np.int64(v) + base[c]
    v = numba.carray(_pointer(at[c] + 2 * r), (1,), np.int16)[0]
    return NULL if v == I16_MIN else np.int64(v) + base[c]


@numba.njit(cache=True, nogil=True, inline="always")
def _delta_range(lo, hi, base, tmin, tmax):
    """Values lo..hi of a narrow column (non-NULL deltas tmin + 1..tmax from base) as
    deltas dlo..dhi (dlo > dhi: none). Narrow columns' bases lie within +-LIMIT, so
    base + tmax and base + tmin + 1 do not overflow."""
    top, bottom = base + tmax, base + tmin + 1
    if lo > top or hi < bottom:
        return np.int64(1), np.int64(0)
    return max(lo, bottom) - base, min(hi, top) - base


@numba.njit(cache=True, nogil=True, inline="always")
def _search(at, width, base, a, m, v, right):
    """Among rows a..a+m-1 of a column sorted ascending, the offset from a of the first
    whose value is >= v (> v when `right`)."""
    if width == 8:
        col = numba.carray(_pointer(at + 8 * a), (m,), np.int64)
        return np.searchsorted(col, v, "right") if right else np.searchsorted(col, v, "left")
    tmin, tmax = (I32_MIN, I32_MAX) if width == 4 else (I16_MIN, I16_MAX)
    if v > base + tmax or (right and v == base + tmax):
        return m
    # NULLs (the type's least value) sort first and lie below every value.
    d = v - base if v >= base + tmin + 1 else (tmin if right else tmin + 1)
    if width == 4:
        col32 = numba.carray(_pointer(at + 4 * a), (m,), np.int32)
        return np.searchsorted(col32, d, "right") if right else np.searchsorted(col32, d, "left")
    col16 = numba.carray(_pointer(at + 2 * a), (m,), np.int16)
    return np.searchsorted(col16, d, "right") if right else np.searchsorted(col16, d, "left")


@numba.njit(cache=True, nogil=True, inline="always")
def _narrow_to(mask, col, lo, hi):
    """mask[i] &= lo <= col[i] <= hi (bounds of col's type: one compiled loop per type)."""
    for i in range(col.shape[0]):
        v = col[i]
        mask[i] &= np.uint8((v >= lo) & (v <= hi))


@numba.njit(cache=True, nogil=True)
def _test(mask, at, width, base, m, lo, hi):
    """mask[i] &= whether row i of the m rows of a column at `at` lies in lo..hi."""
    if width == 8:
        _narrow_to(mask, numba.carray(_pointer(at), (m,), np.int64), lo, hi)
        return
    tmin, tmax = (I32_MIN, I32_MAX) if width == 4 else (I16_MIN, I16_MAX)
    dlo, dhi = _delta_range(lo, hi, base, tmin, tmax)
    if dlo > dhi:
        mask[:m] = 0
    elif width == 4:
        _narrow_to(mask, numba.carray(_pointer(at), (m,), np.int32), np.int32(dlo), np.int32(dhi))
    else:
        _narrow_to(mask, numba.carray(_pointer(at), (m,), np.int16), np.int16(dlo), np.int16(dhi))


@numba.njit(cache=True, nogil=True, inline="always")
def _fold(col, run, null):
    """(present, min, max, high, low) of the values of col (NULL: `null`) whose run[i]
    is set: one pass the compiler vectorizes, whatever the column's type."""
    npres, vmin, vmax, shi, slo = 0, INT64_MAX, NULL, 0, 0
    for i in range(col.shape[0]):
        v = np.int64(col[i])
        keep = (run[i] != 0) & (v != null)
        npres += keep
        vmin = min(vmin, v if keep else INT64_MAX)
        vmax = max(vmax, v if keep else NULL)
        shi += (v >> 32) if keep else 0
        slo += (v & LOW) if keep else 0
    return npres, vmin, vmax, shi, slo


@numba.njit(cache=True, nogil=True)
def _add_run(at, width, base, a, start, end, mask, agg_cols, group, count, present, mins, maxs, hi, lo, stats):
    """Add rows a+start .. a+end-1 of a segment (its columns at/width/base), those whose
    mask[i - a] is set, to `group`: one pass per column."""
    m = end - start
    matched = 0
    for i in range(start, end):
        matched += mask[i]
    stats[1] += matched
    count[group] += matched
    if matched == 0:
        return
    run = mask[start:end]
    for j in range(agg_cols.shape[0]):
        c = agg_cols[j]
        w = width[c]
        # A view from the run's first row, indexed from 0: an offset in the index keeps
        # the compiler from vectorizing, three times slower.
        p = at[c] + w * (a + start)
        if w == 8:
            npres, vmin, vmax, shi, slo = _fold(numba.carray(_pointer(p), (m,), np.int64), run, NULL)
        elif w == 4:
            npres, vmin, vmax, shi, slo = _fold(numba.carray(_pointer(p), (m,), np.int32), run, I32_MIN)
        else:
            npres, vmin, vmax, shi, slo = _fold(numba.carray(_pointer(p), (m,), np.int16), run, I16_MIN)
        if npres == 0:
            continue
        # Deltas of a narrow column: value = delta + base (base 0 at width 8).
        b = base[c]
        present[group, j] += npres
        mins[group, j] = min(mins[group, j], vmin + b)
        maxs[group, j] = max(maxs[group, j], vmax + b)
        hi[group, j] += shi + npres * (b >> 32)
        lo[group, j] += slo + npres * (b & LOW)


@numba.njit(cache=True, nogil=True)
def _scan(addresses, grid_first, grid_group, grid_edge, grid_tested, ncols, cond_cols, cond_lo, cond_hi, agg_cols,
          bucket_col, bucket_base, bucket_step, nbuckets,
          skip_cols, skip_max, skip_bounds, best_has, best_val,
          edges, lon_col, lat_col, lon_scale, lat_scale, eps, stop,
          count, present, mins, maxs, hi, lo, stats):
    """Segments of grid i are addresses[grid_first[i]:grid_first[i + 1]] (each the address
    of a segment's header). Fills the output arrays (one row per group) and
    stats = [rows visited, rows matched, grids scanned, grids skipped]; returns the rows
    handed back (see gridagg.store.scan: rows of edge grids the polygon test cannot settle)
    and the grid of each.

    Column at a time: a segment's rows in the range of column 0 (binary search) get a
    mask from each other condition in one pass per column (those grid_tested[i] marks:
    others hold for every row of the grid); then each wanted column is
    added up in one pass per group (loops the compiler vectorizes; buckets of column 0
    are runs of the sorted rows), and row by row where rows go through the polygon test
    or into buckets of another column."""
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
    mask = np.empty(0, np.uint8)
    back = np.empty((16, ncols), np.int64)
    back_grid = np.empty(16, np.int64)
    nback = 0
    at = np.empty(ncols, np.int64)
    width = np.empty(ncols, np.int64)
    base = np.empty(ncols, np.int64)
    for g in range(ngrids):
        if stop[0]:
            stats[4] = 1
            break
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
        edge = grid_edge[g]
        for k in range(grid_first[g], grid_first[g + 1]):
            n = _columns(addresses[k], ncols, at, width, base)
            stats[0] += n
            a = _search(at[0], width[0], base[0], 0, n, lo0, False) if lo0 > -INT64_MAX - 1 else 0
            b = _search(at[0], width[0], base[0], 0, n, hi0, True) if hi0 < INT64_MAX else n
            m = b - a
            if m <= 0:
                continue
            if mask.shape[0] < m:
                mask = np.empty(2 * m, np.uint8)
            for i in range(m):
                mask[i] = 1
            # Rows a..b-1 of each column, indexed from 0 (see _add_run).
            for j in range(nconds):
                c = cond_cols[j]
                if c == 0 or not grid_tested[g, j]:
                    continue
                _test(mask, at[c] + width[c] * a, width[c], base[c], m, cond_lo[j], cond_hi[j])
            if edge or bucket_col > 0:  # row by row: the polygon test, or buckets of another column
                for i in range(m):
                    if mask[i] == 0:
                        continue
                    r = a + i
                    if edge:
                        where = 1
                        if edges.shape[0] > 0:
                            where = point_in_polygon(_value(at, width, base, lon_col, r) / lon_scale,
                                                     _value(at, width, base, lat_col, r) / lat_scale, edges, eps)
                        if where == 0:
                            continue
                        if where == 1:
                            if nback == back.shape[0]:
                                grown = np.empty((2 * nback, ncols), np.int64)
                                grown[:nback] = back[:nback]
                                back = grown
                                grown_grid = np.empty(2 * nback, np.int64)
                                grown_grid[:nback] = back_grid[:nback]
                                back_grid = grown_grid
                            for c in range(ncols):
                                back[nback, c] = _value(at, width, base, c, r)
                            back_grid[nback] = g
                            nback += 1
                            continue
                    grp = group
                    if bucket_col >= 0:
                        grp = (_value(at, width, base, bucket_col, r) - bucket_base) // bucket_step
                        if grp < 0 or grp >= nbuckets:
                            continue
                    stats[1] += 1
                    count[grp] += 1
                    for j in range(nagg):
                        v = _value(at, width, base, agg_cols[j], r)
                        if v == NULL:
                            continue
                        present[grp, j] += 1
                        if v < mins[grp, j]:
                            mins[grp, j] = v
                        if v > maxs[grp, j]:
                            maxs[grp, j] = v
                        hi[grp, j] += v >> 32
                        lo[grp, j] += v & LOW
                continue
            if bucket_col < 0:
                _add_run(at, width, base, a, 0, m, mask, agg_cols, group, count, present, mins, maxs, hi, lo, stats)
                continue
            # Buckets of column 0: its rows are sorted, so each bucket is one run of rows.
            start = 0
            while start < m:
                grp = (_value(at, width, base, 0, a + start) - bucket_base) // bucket_step
                edge_value = bucket_base + (grp + 1) * bucket_step
                end = start + _search(at[0], width[0], base[0], a + start, m - start, edge_value, False)
                if 0 <= grp < nbuckets:
                    _add_run(at, width, base, a, start, end, mask, agg_cols, grp, count, present, mins, maxs,
                             hi, lo, stats)
                start = end
    return back[:nback], back_grid[:nback]


def scan_segments(request: ScanRequest, grid_segments: Sequence[list], ncols: int, threads: int = 1) -> ScanAnswer:
    """Answer `request` over segments in memory: grid_segments[i] lists the segments of
    request.grids[i] (bytes-like, alive until this returns)."""
    return scan_located(request, *joined([addresses_of(segs) for segs in grid_segments]), ncols, threads)


def addresses_of(segments: Sequence) -> np.ndarray:
    """The address of each segment (bytes-like) in memory, as int64."""
    return np.array([address_of(data) for data in segments], np.int64)


def joined(per_grid: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """(addresses, first) of grids whose segments are at per_grid[i]: grid i's are at
    addresses[first[i]:first[i + 1]], as scan_located takes them."""
    first = np.zeros(len(per_grid) + 1, np.int64)
    np.cumsum(np.fromiter(map(len, per_grid), np.int64, len(per_grid)), out=first[1:])
    return (np.concatenate(per_grid) if len(per_grid) else np.zeros(0, np.int64)), first


def scan_located(request: ScanRequest, addresses: np.ndarray, first: np.ndarray, ncols: int,
                 threads: int = 1) -> ScanAnswer:
    """Answer `request` over segments in memory, those of request.grids[i] at
    addresses[first[i]:first[i + 1]] (alive until this returns). A large scan without
    skipping runs in parts on up to `threads` threads (gridagg.store.parts), cut by
    request.rows."""
    ranges = [(0, len(request.grids))] if request.rows is None else parts.cut(request.rows, threads)
    if len(ranges) == 1:
        return _scan_part(request, addresses, first, ncols)
    return parts.answer_in_parts(
        ranges, lambda g0, g1: _scan_part(request.part(g0, g1), addresses, first[g0:g1 + 1], ncols), threads)


def _scan_part(request: ScanRequest, addresses: np.ndarray, first: np.ndarray, ncols: int) -> ScanAnswer:
    """The answer to the request, whose grid i has the segments at
    addresses[first[i]:first[i + 1]]."""
    out = AggArrays.empty(request.ngroups, len(request.columns))
    answer = ScanAnswer(out)
    ngrids = len(request.grids)
    skip = request.skip
    if skip is not None:
        skip_cols = np.array([request.columns.index(c) for c, _ in skip.specs], np.int64)
        skip_max = np.array([m for _, m in skip.specs], np.bool_)
        bounds = np.ascontiguousarray(skip.bounds, np.int64)
        best_has = np.array([b is not None for b in skip.best], np.bool_)
        best_val = np.array([0 if b is None else b for b in skip.best], np.int64)
    else:
        skip_cols, skip_max = np.zeros(0, np.int64), np.zeros(0, np.bool_)
        bounds, best_has, best_val = np.zeros((ngrids, 0), np.int64), skip_max, skip_cols
    conds, buckets, polygon = request.conditions, request.buckets, request.polygon
    edge = (np.zeros(ngrids, np.bool_) if request.rows_of is None
            else np.ascontiguousarray(request.rows_of, np.bool_))
    tested = (np.ones((ngrids, len(conds)), np.bool_) if request.tested is None
              else np.ascontiguousarray(request.tested, np.bool_))
    stats = np.zeros(5, np.int64)
    rows, grids = _scan(
        addresses, first, request.group_of_grids().astype(np.int64), edge, tested,
        ncols, np.array([c.column for c in conds], np.int64), np.array([c.lo for c in conds], np.int64),
        np.array([c.hi for c in conds], np.int64), np.array(request.columns, np.int64),
        -1 if buckets is None else buckets.column, 0 if buckets is None else buckets.base,
        1 if buckets is None else buckets.step, 0 if buckets is None else buckets.count,
        skip_cols, skip_max, bounds, best_has, best_val,
        np.zeros((0, 4)) if polygon is None else polygon.edges, 0 if polygon is None else polygon.lon_column,
        0 if polygon is None else polygon.lat_column, 1.0 if polygon is None else float(polygon.lon_scale),
        1.0 if polygon is None else float(polygon.lat_scale), 0.0 if polygon is None else polygon.eps,
        NO_STOP if request.stop is None else request.stop,
        out.count, out.present, out.mins, out.maxs, out.hi, out.lo, stats)
    answer.rows_visited, answer.rows_matched, answer.grids_scanned, answer.grids_skipped = (int(v) for v in stats[:4])
    answer.stopped = bool(stats[4])
    if len(grids):
        for g in np.unique(grids).tolist():
            answer.rows[g] = rows[grids == g]
    return answer
