"""Compiled kernels (numba): reading segments at memory speed.

scan_segments answers a ScanRequest (gridagg.store.scan) over segments held in this process's
memory (LMDB's map, or bytes fetched from a store): one compiled pass over the segments,
with no Python step per row. A segment's block tree (gridagg.store.blocks) is walked as
the planner walks the grids: a node whose bounds miss the question is passed over, one
inside it (within one bucket of a series, and inside a polygon) answers from its
aggregate, a cut one is descended, and only the rows of the blocks reached are read
(blocks next to each other read as one run). Rows of a block are ordered by column 0, so a
condition on column 0 narrows it by binary search before any row is tested; a column of
2 or 4 bytes (gridagg.store.segments) is tested and added up as it is stored, bounds
turned into deltas from its base.

Compiled functions are cached on disk (numba's cache next to this module, or
NUMBA_CACHE_DIR), so a process compiles them once per machine, not on every start, and
before it serves (gridagg.warmup).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numba
import numpy as np
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from gridagg.model.aggregate import INT64_MAX, LOW, NULL, AggArrays
from gridagg.store import parts
from gridagg.store.blocks import END, FIRST, HIGH, LINKS, LOW_HALF, MAX, MIN, PRESENT, RIGHT, STATS
from gridagg.store.polygon import INSIDE, OUTSIDE, face, point_in_polygon
from gridagg.store.scan import ScanAnswer, ScanRequest
from gridagg.store.segments import BLOCKED, NARROW


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
    """The address of a bytes-like object's first byte (a fraction of the cost of
    numpy's .ctypes.data: a query takes one per segment)."""
    return _buffer_address(buffer)


NO_STOP = np.zeros(1, np.uint8)  # a scan nobody stops
I16_MIN, I16_MAX = -(2**15), 2**15 - 1
I32_MIN, I32_MAX = -(2**31), 2**31 - 1
# What a scan counts (ScanAnswer): rows of the blocks read, rows matched, grids read and
# passed over, whether it stopped, blocks answered from their aggregates and their rows,
# rows in the grids read.
VISITED, MATCHED, SCANNED, SKIPPED, STOPPED, REUSED_BLOCKS, REUSED_ROWS, GRID_ROWS = range(8)
# How rows read meet column 0's range (_read_rows): by a binary search (they are in
# column-0 order), every one (HELD), or by a test of each.
SEARCH, HELD, TEST = range(3)
# What a step of a segment's walk does (_plan): add a node's aggregate, or read rows.
ADD, READ = range(2)


class Grids(NamedTuple):
    """The grids of a scan: grid i's segments are at addresses[first[i]:first[i + 1]];
    its rows go to group[i]; edge[i]: it lies on the polygon's edge; tested[i, j]: its
    rows must be tested against condition j (else every row meets it); skip_bounds[i,
    s]: its stored bound of skip spec s."""

    addresses: np.ndarray
    first: np.ndarray
    group: np.ndarray
    edge: np.ndarray
    tested: np.ndarray
    skip_bounds: np.ndarray


class Question(NamedTuple):
    """What the scan selects and adds up (gridagg.store.scan.ScanRequest, as arrays):
    conditions cond_lo[j] <= row[cond_col[j]] <= cond_hi[j]; the columns agg_col added
    up; buckets of column bucket_col (-1: none) from bucket_base by bucket_step, nbuckets
    of them; min/max skipping over specs (skip_col: index into agg_col, skip_max), with
    the best known before (best_has, best_val); the polygon's edges (none: no polygon)
    over lon_col/lat_col divided by lon_scale/lat_scale, eps its margin; stop[0] set:
    stop at the next grid."""

    ncols: int
    cond_col: np.ndarray
    cond_lo: np.ndarray
    cond_hi: np.ndarray
    agg_col: np.ndarray
    bucket_col: int
    bucket_base: int
    bucket_step: int
    nbuckets: int
    skip_col: np.ndarray
    skip_max: np.ndarray
    best_has: np.ndarray
    best_val: np.ndarray
    edges: np.ndarray
    lon_col: int
    lat_col: int
    lon_scale: float
    lat_scale: float
    eps: float
    stop: np.ndarray


class Sums(NamedTuple):
    """Where a scan adds up (one row per group, a column per added column, as
    gridagg.model.aggregate.AggArrays), and its counts (VISITED ..)."""

    count: np.ndarray
    present: np.ndarray
    mins: np.ndarray
    maxs: np.ndarray
    hi: np.ndarray
    lo: np.ndarray
    stats: np.ndarray


@numba.njit(cache=True, nogil=True)
def _columns(address, ncols, at, width, base):
    """Reads a segment's header (gridagg.store.segments) at `address`: fills each column's
    address, width and base; returns (its rows, its blocks and tree nodes (0: none), the
    addresses of its block starts, tree links and node table)."""
    head = numba.carray(_pointer(address), (2,), np.uint32)
    n = np.int64(head[0])
    if head[1] & NARROW == 0:  # int64 columns one after another
        for c in range(ncols):
            at[c], width[c], base[c] = address + 8 + 8 * n * c, 8, 0
        return n, 0, 0, 0, 0, 0
    bases = numba.carray(_pointer(address + 8), (ncols,), np.int64)
    widths = numba.carray(_pointer(address + 8 + 8 * ncols), (ncols,), np.uint8)
    p = address + 8 + 8 * ncols + (ncols + 7) // 8 * 8
    nblocks, nnodes, starts, links, table = 0, 0, 0, 0, 0
    if head[1] & BLOCKED:
        counts = numba.carray(_pointer(p), (2,), np.uint32)
        nblocks, nnodes = np.int64(counts[0]), np.int64(counts[1])
        starts = p + 8
        links = starts + (4 * (nblocks + 1) + 7) // 8 * 8
        table = links + 4 * LINKS * nnodes
        p = table + 8 * STATS * nnodes * ncols
    for c in range(ncols):
        at[c], width[c], base[c] = p, widths[c], bases[c]
        p += (n * widths[c] + 7) // 8 * 8
    return n, nblocks, nnodes, starts, links, table


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
def _add_run(at, width, base, a, start, end, mask, agg_col, group, sums):
    """Add rows a+start .. a+end-1 of a segment (its columns at/width/base), those whose
    mask[i - a] is set, to `group` of Sums `sums`: one pass per column."""
    m = end - start
    matched = 0
    for i in range(start, end):
        matched += mask[i]
    sums.stats[MATCHED] += matched
    sums.count[group] += matched
    if matched == 0:
        return
    run = mask[start:end]
    for j in range(agg_col.shape[0]):
        c = agg_col[j]
        w = width[c]
        # A view from the run's first row, indexed from 0: an offset in the index keeps
        # the compiler from vectorizing, several times slower.
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
        sums.present[group, j] += npres
        sums.mins[group, j] = min(sums.mins[group, j], vmin + b)
        sums.maxs[group, j] = max(sums.maxs[group, j], vmax + b)
        sums.hi[group, j] += shi + npres * (b >> 32)
        sums.lo[group, j] += slo + npres * (b & LOW)


@numba.njit(cache=True, nogil=True)
def _useless(skip_col, skip_max, best_has, best_val, present, mins, maxs, bound):
    """Whether min/max skipping passes over what `bound` bounds (bound[s] for skip spec s):
    for every spec its bound cannot beat the best answer so far (group 0's in
    present/mins/maxs, or the best known before)."""
    for s in range(skip_col.shape[0]):
        j = skip_col[s]
        seen = present[0, j] > 0
        if not (seen or best_has[s]):
            return False
        if skip_max[s]:
            best = maxs[0, j] if seen else best_val[s]
            if best_has[s] and best_val[s] > best:
                best = best_val[s]
            if bound[s] > best:
                return False
        else:
            best = mins[0, j] if seen else best_val[s]
            if best_has[s] and best_val[s] < best:
                best = best_val[s]
            if bound[s] < best:
                return False
    return True


@numba.njit(cache=True, nogil=True)
def _add_node(row, agg_col, group, sums, blocks):
    """A node's aggregate (its table row), which stands for `blocks` blocks, into `group`."""
    n = row[0, PRESENT]  # dimensions are never NULL: column 0's values present are its rows
    sums.count[group] += n
    sums.stats[MATCHED] += n
    sums.stats[REUSED_BLOCKS] += blocks
    sums.stats[REUSED_ROWS] += n
    for j in range(agg_col.shape[0]):
        c = agg_col[j]
        if row[c, PRESENT] == 0:
            continue
        sums.present[group, j] += row[c, PRESENT]
        sums.mins[group, j] = min(sums.mins[group, j], row[c, MIN])
        sums.maxs[group, j] = max(sums.maxs[group, j], row[c, MAX])
        sums.hi[group, j] += row[c, HIGH]
        sums.lo[group, j] += row[c, LOW_HALF]


@numba.njit(cache=True, nogil=True, inline="always")
def _read_rows(q, tested, edge, g, group, at, width, base, s, e, column0, lo0, hi0, held, sums):
    """Rows s..e-1 of a segment (blocks, or the whole of a segment without blocks) of
    grid g, tested and added up; column 0's range lo0..hi0 is a binary search (column0
    SEARCH: the rows are in column-0 order), holds every row (HELD) or is tested (TEST).
    `held` is (mask, rows handed back, their grids, how many): returned as grown."""
    mask, back, back_grid, nback = held
    sums.stats[VISITED] += e - s
    a, z = s, e
    if column0 == SEARCH:
        a = s + (_search(at[0], width[0], base[0], s, e - s, lo0, False) if lo0 > -INT64_MAX - 1 else 0)
        z = s + (_search(at[0], width[0], base[0], s, e - s, hi0, True) if hi0 < INT64_MAX else e - s)
    m = z - a
    if m <= 0:
        return held
    if mask.shape[0] < m:
        mask = np.empty(2 * m, np.uint8)
    for i in range(m):
        mask[i] = 1
    # Rows a..z-1 of each column, indexed from 0 (see _add_run).
    for j in range(q.cond_col.shape[0]):
        c = q.cond_col[j]
        if (c == 0 and column0 != TEST) or not tested[j]:
            continue
        _test(mask, at[c] + width[c] * a, width[c], base[c], m, q.cond_lo[j], q.cond_hi[j])
    ncols = q.ncols
    if edge or q.bucket_col > 0:  # row by row: the polygon test, or buckets of another column
        for i in range(m):
            if mask[i] == 0:
                continue
            r = a + i
            if edge:
                where = 1
                if q.edges.shape[0] > 0:
                    where = point_in_polygon(_value(at, width, base, q.lon_col, r) / q.lon_scale,
                                             _value(at, width, base, q.lat_col, r) / q.lat_scale, q.edges, q.eps)
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
            if q.bucket_col >= 0:
                grp = (_value(at, width, base, q.bucket_col, r) - q.bucket_base) // q.bucket_step
                if grp < 0 or grp >= q.nbuckets:
                    continue
            sums.stats[MATCHED] += 1
            sums.count[grp] += 1
            for j in range(q.agg_col.shape[0]):
                v = _value(at, width, base, q.agg_col[j], r)
                if v == NULL:
                    continue
                sums.present[grp, j] += 1
                if v < sums.mins[grp, j]:
                    sums.mins[grp, j] = v
                if v > sums.maxs[grp, j]:
                    sums.maxs[grp, j] = v
                sums.hi[grp, j] += v >> 32
                sums.lo[grp, j] += v & LOW
        return mask, back, back_grid, nback
    if q.bucket_col < 0:
        _add_run(at, width, base, a, 0, m, mask, q.agg_col, group, sums)
        return mask, back, back_grid, nback
    # Buckets of column 0: its rows are sorted, so each bucket is one run of rows.
    start = 0
    while start < m:
        grp = (_value(at, width, base, 0, a + start) - q.bucket_base) // q.bucket_step
        edge_value = q.bucket_base + (grp + 1) * q.bucket_step
        end = start + _search(at[0], width[0], base[0], a + start, m - start, edge_value, False)
        if 0 <= grp < q.nbuckets:
            _add_run(at, width, base, a, start, end, mask, q.agg_col, grp, sums)
        start = end
    return mask, back, back_grid, nback


@numba.njit(cache=True, nogil=True, inline="always")
def _column0(blocks, held0):
    """How a run of `blocks` blocks meets column 0's range: a block alone by a binary
    search of its rows in column-0 order; blocks inside the range whole; others by a test."""
    return SEARCH if blocks == 1 else HELD if held0 else TEST


@numba.njit(cache=True, nogil=True)
def _plan(table, links, starts, cond_col, cond_lo, cond_hi, tested, lo0, hi0, grid_edge, edges, lon_col, lat_col,
          lon_scale, lat_scale, eps, bucket_col, bucket_base, bucket_step, nbuckets, group, join, steps):
    """The walk of one segment's block tree (gridagg.store.blocks), as the planner walks
    the grids: a node outside the question is passed over, one inside it (within one
    bucket, inside the polygon) answers from its aggregate, one it cuts is opened, and
    the blocks reached are read, those next to each other as one run (when `join`).
    Fills steps[k] = (kind: ADD or READ, node, group, first row, end row, how column 0 is
    met (_read_rows), on the polygon's edge) and returns how many. A step of its own for
    the walk, apart from reading: the walk's loop stays small enough to compile tight."""
    nsteps = 0
    stack = np.empty(256, np.int64)
    run_hi, run_edge, run_blocks, run_held0 = 0, False, 0, True
    polygon = edges.shape[0] > 0
    stack[0] = 0
    top = 1
    while top > 0:
        top -= 1
        i = stack[top]
        row = table[i]
        if row[0, MIN] > hi0 or row[0, MAX] < lo0:
            continue
        inside = row[0, MIN] >= lo0 and row[0, MAX] <= hi0
        outside = False
        for j in range(cond_col.shape[0]):
            c = cond_col[j]
            if c == 0 or not tested[j]:
                continue
            if row[c, MIN] > cond_hi[j] or row[c, MAX] < cond_lo[j]:
                outside = True
                break
            # (A NULL meets no condition: a node with one is not inside. Only a request
            # made by hand conditions a measure; the planner's condition dimensions.)
            if row[c, MIN] < cond_lo[j] or row[c, MAX] > cond_hi[j] or row[c, PRESENT] < row[0, PRESENT]:
                inside = False
        if outside:
            continue
        edge = grid_edge
        if edge and polygon:
            side = face(row[lon_col, MIN] / lon_scale, row[lon_col, MAX] / lon_scale,
                        row[lat_col, MIN] / lat_scale, row[lat_col, MAX] / lat_scale, edges, eps)
            if side == OUTSIDE:
                continue
            edge = side != INSIDE
        into = group
        if bucket_col >= 0 and not edge:  # an edge's rows come back whatever their bucket
            first = (row[bucket_col, MIN] - bucket_base) // bucket_step
            last = (row[bucket_col, MAX] - bucket_base) // bucket_step
            if last < 0 or first >= nbuckets:
                continue
            if first != last:
                inside = False
            into = first
        if inside and not edge:
            steps[nsteps, 0], steps[nsteps, 1], steps[nsteps, 2] = ADD, i, into
            nsteps += 1
            continue
        right = links[i, RIGHT]
        if right != 0:
            stack[top], stack[top + 1] = right, i + 1
            top += 2
            continue
        b = links[i, FIRST]
        s, e = np.int64(starts[b]), np.int64(starts[b + 1])
        held0 = row[0, MIN] >= lo0 and row[0, MAX] <= hi0  # column 0's range holds the block
        if join and run_blocks > 0 and run_hi == s and run_edge == edge:
            run_hi = e
            run_blocks += 1
            run_held0 = run_held0 and held0
            steps[nsteps - 1, 4], steps[nsteps - 1, 5] = run_hi, _column0(run_blocks, run_held0)
            continue
        run_hi, run_edge, run_blocks, run_held0 = e, edge, 1, held0
        steps[nsteps, 0], steps[nsteps, 1], steps[nsteps, 2], steps[nsteps, 3] = READ, i, group, s
        steps[nsteps, 4], steps[nsteps, 5], steps[nsteps, 6] = e, SEARCH, edge
        nsteps += 1
    return nsteps


@numba.njit(cache=True, nogil=True)
def _scan(grids, q, sums):
    """Fills `sums` (Sums) with the answer of Question q over Grids `grids`; returns the
    rows handed back (see gridagg.store.scan: rows of edge grids the polygon test cannot
    settle) and the grid of each. A grid is passed over when min/max skipping says so;
    else each of its segments' block trees is walked, as the planner walks the grids
    (gridagg.store.blocks), and the blocks reached are read, those next to each other as
    one run (not for buckets of column 0, which are runs of rows in column-0 order); a
    segment without blocks is read whole.

    The walk of a segment's tree is a function of its own over plain arrays (_plan):
    written inside this loop, over the records, it compiled to code several times slower."""
    ngrids = grids.first.shape[0] - 1
    ncols = q.ncols
    cond_col, cond_lo, cond_hi, agg_col = q.cond_col, q.cond_lo, q.cond_hi, q.agg_col
    skip_col, skip_max, best_has, best_val = q.skip_col, q.skip_max, q.best_has, q.best_val
    edges, lon_col, lat_col, lon_scale, lat_scale, eps = q.edges, q.lon_col, q.lat_col, q.lon_scale, q.lat_scale, q.eps
    bucket_col, bucket_base, bucket_step, nbuckets = q.bucket_col, q.bucket_base, q.bucket_step, q.nbuckets
    present, mins, maxs, stats = sums.present, sums.mins, sums.maxs, sums.stats
    nskip = skip_col.shape[0]
    lo0 = -INT64_MAX - 1
    hi0 = INT64_MAX
    for j in range(cond_col.shape[0]):
        if cond_col[j] == 0:
            lo0 = max(lo0, cond_lo[j])
            hi0 = min(hi0, cond_hi[j])
    # Runs of blocks but for buckets of column 0 (runs of rows in column-0 order) and min/max
    # skipping (which passes over each block by its own bounds).
    join = bucket_col != 0 and nskip == 0
    held = (np.empty(0, np.uint8), np.empty((16, ncols), np.int64), np.empty(16, np.int64), 0)
    at = np.empty(ncols, np.int64)
    width = np.empty(ncols, np.int64)
    base = np.empty(ncols, np.int64)
    bound = np.empty(max(nskip, 1), np.int64)
    steps = np.empty((64, 7), np.int64)
    for g in range(ngrids):
        if q.stop[0]:
            stats[STOPPED] = 1
            break
        if nskip > 0 and _useless(skip_col, skip_max, best_has, best_val, present, mins, maxs, grids.skip_bounds[g]):
            stats[SKIPPED] += 1
            continue
        stats[SCANNED] += 1
        group = grids.group[g]
        grid_edge = grids.edge[g]
        tested = grids.tested[g]
        for k in range(grids.first[g], grids.first[g + 1]):
            n, nblocks, nnodes, starts_at, links_at, table_at = _columns(grids.addresses[k], ncols, at, width, base)
            stats[GRID_ROWS] += n
            if nblocks == 0:
                held = _read_rows(q, tested, grid_edge, g, group, at, width, base, 0, n, SEARCH, lo0, hi0, held, sums)
                continue
            starts = numba.carray(_pointer(starts_at), (nblocks + 1,), np.uint32)
            links = numba.carray(_pointer(links_at), (nnodes, LINKS), np.uint32)
            table = numba.carray(_pointer(table_at), (nnodes, ncols, STATS), np.int64)
            if steps.shape[0] < nnodes:
                steps = np.empty((2 * nnodes, 7), np.int64)
            nsteps = _plan(table, links, starts, cond_col, cond_lo, cond_hi, tested, lo0, hi0, grid_edge, edges,
                           lon_col, lat_col, lon_scale, lat_scale, eps, bucket_col, bucket_base, bucket_step, nbuckets,
                           group, join, steps)
            for k2 in range(nsteps):
                i = steps[k2, 1]
                row = table[i]
                edge = steps[k2, 6] != 0
                if nskip > 0 and not edge:  # min/max skipping, by the node's bounds
                    for s in range(nskip):
                        c = agg_col[skip_col[s]]
                        bound[s] = row[c, MAX] if skip_max[s] else row[c, MIN]
                    if _useless(skip_col, skip_max, best_has, best_val, present, mins, maxs, bound):
                        continue
                if steps[k2, 0] == ADD:
                    _add_node(row, agg_col, steps[k2, 2], sums, np.int64(links[i, END]) - np.int64(links[i, FIRST]))
                else:
                    held = _read_rows(q, tested, edge, g, group, at, width, base, steps[k2, 3], steps[k2, 4],
                                      steps[k2, 5], lo0, hi0, held, sums)
    back, back_grid, nback = held[1], held[2], held[3]
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


def question_of(request: ScanRequest, ncols: int) -> Question:
    """The request's selection as the kernel takes it."""
    conds, buckets, polygon, skip = request.conditions, request.buckets, request.polygon, request.skip
    return Question(
        ncols, np.array([c.column for c in conds], np.int64), np.array([c.lo for c in conds], np.int64),
        np.array([c.hi for c in conds], np.int64), np.array(request.columns, np.int64),
        -1 if buckets is None else buckets.column, 0 if buckets is None else buckets.base,
        1 if buckets is None else buckets.step, 0 if buckets is None else buckets.count,
        np.zeros(0, np.int64) if skip is None else np.array([request.columns.index(c) for c, _ in skip.specs], np.int64),
        np.zeros(0, np.bool_) if skip is None else np.array([m for _, m in skip.specs], np.bool_),
        np.zeros(0, np.bool_) if skip is None else np.array([b is not None for b in skip.best], np.bool_),
        np.zeros(0, np.int64) if skip is None else np.array([0 if b is None else b for b in skip.best], np.int64),
        np.zeros((0, 4)) if polygon is None else polygon.edges, 0 if polygon is None else polygon.lon_column,
        0 if polygon is None else polygon.lat_column, 1.0 if polygon is None else float(polygon.lon_scale),
        1.0 if polygon is None else float(polygon.lat_scale), 0.0 if polygon is None else polygon.eps,
        NO_STOP if request.stop is None else request.stop)


def _scan_part(request: ScanRequest, addresses: np.ndarray, first: np.ndarray, ncols: int) -> ScanAnswer:
    """The answer to the request, whose grid i has the segments at
    addresses[first[i]:first[i + 1]]."""
    out = AggArrays.empty(request.ngroups, len(request.columns))
    ngrids = len(request.grids)
    skip = request.skip
    grids = Grids(
        addresses, first, request.group_of_grids().astype(np.int64),
        np.zeros(ngrids, np.bool_) if request.rows_of is None else np.ascontiguousarray(request.rows_of, np.bool_),
        np.ones((ngrids, len(request.conditions)), np.bool_) if request.tested is None
        else np.ascontiguousarray(request.tested, np.bool_),
        np.zeros((ngrids, 0), np.int64) if skip is None else np.ascontiguousarray(skip.bounds, np.int64))
    stats = np.zeros(GRID_ROWS + 1, np.int64)
    rows, at = _scan(grids, question_of(request, ncols), Sums(out.count, out.present, out.mins, out.maxs, out.hi,
                                                                 out.lo, stats))
    answer = ScanAnswer(out, rows_visited=int(stats[VISITED]), rows_matched=int(stats[MATCHED]),
                        grids_scanned=int(stats[SCANNED]), grids_skipped=int(stats[SKIPPED]),
                        stopped=bool(stats[STOPPED]), blocks_reused=int(stats[REUSED_BLOCKS]),
                        rows_in_reused_blocks=int(stats[REUSED_ROWS]), rows_in_grids=int(stats[GRID_ROWS]))
    if len(at):
        for g in np.unique(at).tolist():
            answer.rows[g] = rows[at == g]
    return answer
