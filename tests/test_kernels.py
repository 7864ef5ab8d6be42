"""The compiled scan kernel against brute force (pure logic, no servers): segments of
random rows with NULLs, random boxes, grouping by grid and by time bucket, skipping, and
segments cut into blocks (their block trees walked)."""

from __future__ import annotations

import numpy as np
from engine_support import column_aggregate
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gridagg.model.aggregate import NULL, AggArrays, PartialAggregate
from gridagg.model.schema import Column, Dataset
from gridagg.store import blocks, parts, segments
from gridagg.store.kernels import scan_segments
from gridagg.store.polygon import point_in_polygon
from gridagg.store.scan import Buckets, PolygonTest, RangeCondition, ScanRequest, Skip

NCOLS = 4  # two dimensions, two measures (the last one nullable)


@st.composite
def grids(draw):
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    out = []
    for g in range(draw(st.integers(0, 5))):
        segs = []
        for _ in range(draw(st.integers(0, 3))):
            n = int(rng.integers(0, 40))
            values = rng.integers(-50, 50, (n, NCOLS)).astype(np.int64)
            values[rng.random(n) < 0.2, 3] = NULL
            segs.append(segments.pack([b"g%d-%d" % (g, i) for i in range(n)], values))
        out.append(segs)
    return out


def _rows(segs) -> np.ndarray:
    parts = [segments.values(d) for d in segs]
    return np.concatenate(parts) if parts else np.empty((0, NCOLS), np.int64)


def _agg(rows: np.ndarray, columns) -> PartialAggregate:
    return column_aggregate(rows, columns, NCOLS)


boxes = st.lists(st.tuples(st.integers(0, 1), st.integers(-60, 60), st.integers(-60, 60)), max_size=3)


@settings(max_examples=300, deadline=None)
@given(grids(), boxes, st.booleans(), st.randoms())
def test_scan_matches_brute_force(data, box, by_grid, rnd):
    """Also with `tested`: a condition every row of a grid meets may go untested there."""
    conds = [RangeCondition(c, min(a, b), max(a, b)) for c, a, b in box]
    columns = [0, 2, 3]
    ngroups = max(1, len(data)) if by_grid else 1
    groups = np.arange(len(data), dtype=np.int64) if by_grid else None
    tested = np.array([[not (((r := _rows(segs))[:, c.column] >= c.lo) & (r[:, c.column] <= c.hi)).all()
                        or rnd.random() < 0.5 for c in conds] for segs in data], bool).reshape(len(data), len(conds))
    answer = scan_segments(ScanRequest([f"g{i}" for i in range(len(data))], conds, columns, groups, ngroups,
                                       tested=tested), data, NCOLS)
    expected = [PartialAggregate.empty(NCOLS) for _ in range(ngroups)]
    for i, segs in enumerate(data):
        rows = _rows(segs)
        for c in conds:
            rows = rows[(rows[:, c.column] >= c.lo) & (rows[:, c.column] <= c.hi)]
        expected[i if by_grid else 0].merge(_agg(rows, columns))
    for g in range(ngroups):
        assert answer.aggs.aggregate(g, columns, NCOLS) == expected[g]
    assert answer.rows_visited == sum(len(_rows(s)) for s in data)
    assert answer.rows_matched == sum(e.count for e in expected)


# Per column: values become offset + raw * spread (monotone: the same rows match), so a
# grid's columns take every width a segment stores them in (gridagg.store.segments).
transforms = st.lists(st.tuples(st.sampled_from([1, 1000, 2**33]),
                                st.sampled_from([0, 2**40, -(2**61), 2**61 - 100, 2**62, -(2**63) + 10**14])),
                      min_size=NCOLS, max_size=NCOLS)


@settings(max_examples=300, deadline=None)
@given(grids(), boxes, transforms, st.booleans(), st.booleans())
def test_columns_of_every_width_match_brute_force(raw, box, shapes, by_bucket, rows_back):
    """Narrow (int16, int32: deltas from a base) and wide columns, NULLs, values near the
    int64 ends: aggregates, buckets of column 0 and rows handed back as brute force."""
    def scaled(v, c):
        spread, offset = shapes[c]
        return np.where(v == NULL, NULL, offset + v * spread) if isinstance(v, np.ndarray) else offset + v * spread

    data = [[segments.pack(segments.eids(seg), np.stack([scaled(segments.values(seg)[:, c], c) for c in range(NCOLS)],
                                                        axis=1).reshape(-1, NCOLS)) for seg in segs] for segs in raw]
    # Bounds between two values too (+-1): a bound off by one must change some answers.
    conds = [RangeCondition(c, scaled(min(a, b), c) + a % 3 - 1, scaled(max(a, b), c) + b % 3 - 1)
             for c, a, b in box]
    buckets = Buckets(0, scaled(-50, 0), 25 * shapes[0][0], 4) if by_bucket else None
    request = ScanRequest([str(i) for i in range(len(data))], conds, [1, 3], ngroups=4 if by_bucket else 1,
                          buckets=buckets, rows_of=np.full(len(data), rows_back))
    answer = scan_segments(request, data, NCOLS)
    rows = np.concatenate([_rows(s) for s in data]) if data else np.empty((0, NCOLS), np.int64)
    for c in conds:
        rows = rows[(rows[:, c.column] >= c.lo) & (rows[:, c.column] <= c.hi)]
    if rows_back:
        back = np.concatenate(list(answer.rows.values())) if answer.rows else np.empty((0, NCOLS), np.int64)
        assert sorted(map(tuple, back.tolist())) == sorted(map(tuple, rows.tolist()))
        return
    for b in range(4 if by_bucket else 1):
        sel = rows[(rows[:, 0] - buckets.base) // buckets.step == b] if by_bucket else rows
        assert answer.aggs.aggregate(b, [1, 3], NCOLS) == _agg(sel, [1, 3])


@given(st.lists(st.tuples(st.integers(-(2**63) + 1, 2**63 - 1), st.booleans()), max_size=30),
       st.integers(0, 2**62), st.integers(-(2**62), 2**62))
def test_a_segment_gives_back_the_rows_it_was_given(cells, spread_to, offset):
    """Any int64 values and NULLs round-trip through pack, whatever width each column gets."""
    n = len(cells)
    values = np.zeros((n, NCOLS), np.int64)
    for i, (v, null) in enumerate(cells):
        values[i] = [v, NULL if null else v, min(max(offset + i * (spread_to // 30), -(2**63) + 1), 2**63 - 1), i]
    eids = [b"e%d" % i for i in range(n)]
    seg = segments.pack(eids, values)
    order = np.argsort(values[:, 0], kind="stable")
    assert segments.values(seg).tolist() == values[order].tolist()
    assert segments.eids(seg) == [eids[i] for i in order.tolist()]
    assert segments.rows(seg) == n


def test_segments_written_before_narrow_columns_read_as_they_were():
    """The format before widths: u32 n, u32 ncols, int64 columns, offsets, element IDs."""
    values = np.array([[1, 2**40, 3, NULL], [5, -(2**62), 7, 8], [9, 10, 11, 12]], np.int64)
    eids = [b"a", b"bb", b"c"]
    offsets = np.cumsum([0] + [len(e) for e in eids]).astype("<u4")
    old = (segments.HEAD.pack(3, NCOLS) + np.ascontiguousarray(values.T, "<i8").tobytes() + offsets.tobytes()
           + b"".join(eids))
    assert segments.values(old).tolist() == values.tolist() and segments.eids(old) == eids
    answer = scan_segments(ScanRequest(["0"], [RangeCondition(0, 2, 9)], [1, 3]), [[old]], NCOLS)
    assert answer.aggs.aggregate(0, [1, 3], NCOLS) == _agg(values[1:], [1, 3])


@settings(max_examples=200, deadline=None)
@given(grids(), boxes, st.integers(1, 80), st.integers(2, 4))
def test_a_scan_cut_into_parts_over_threads_gives_the_same_answer(data, box, part_rows, threads):
    """Parts of at least part_rows rows (by the planner's row counts), one per thread,
    add up to the one-pass answer; rows handed back keep their grid's index."""
    conds = [RangeCondition(c, min(a, b), max(a, b)) for c, a, b in box]
    request = ScanRequest([f"g{i}" for i in range(len(data))], conds, [0, 2, 3], np.arange(len(data)),
                          max(1, len(data)), rows_of=np.arange(len(data)) % 2 == 1,
                          rows=np.array([len(_rows(segs)) for segs in data], np.int64))
    whole = scan_segments(request, data, NCOLS)
    saved, parts.PARALLEL_ROWS = parts.PARALLEL_ROWS, part_rows
    try:
        split = scan_segments(request, data, NCOLS, threads)
    finally:
        parts.PARALLEL_ROWS = saved
    for name in ("count", "present", "mins", "maxs", "hi", "lo"):
        assert (getattr(split.aggs, name) == getattr(whole.aggs, name)).all()
    assert sorted(split.rows) == sorted(whole.rows)
    assert all((split.rows[g] == whole.rows[g]).all() for g in whole.rows)
    assert (split.rows_visited, split.rows_matched) == (whole.rows_visited, whole.rows_matched)


@settings(max_examples=200, deadline=None)
@given(grids(), st.integers(-60, 10), st.integers(1, 30), st.integers(1, 8), st.sampled_from([0, 1]), boxes)
def test_buckets_match_brute_force(data, base, step, count, column, box):
    """Buckets of column 0 (each a run of a segment's sorted rows) and of another column
    (row by row), with conditions."""
    conds = [RangeCondition(c, min(a, b), max(a, b)) for c, a, b in box]
    answer = scan_segments(ScanRequest([str(i) for i in range(len(data))], conds, [1, 3], ngroups=count,
                                       buckets=Buckets(column, base, step, count)), data, NCOLS)
    rows = np.concatenate([_rows(s) for s in data]) if data else np.empty((0, NCOLS), np.int64)
    for c in conds:
        rows = rows[(rows[:, c.column] >= c.lo) & (rows[:, c.column] <= c.hi)]
    for b in range(count):
        sel = rows[(rows[:, column] - base) // step == b]
        assert answer.aggs.aggregate(b, [1, 3], NCOLS) == _agg(sel, [1, 3])


@settings(max_examples=200, deadline=None)
@given(grids(), st.booleans(), st.one_of(st.none(), st.integers(-60, 60)))
def test_skipping_never_changes_the_answer(data, is_max, best):
    """Passing over grids by their stored bounds gives the same min (max) as reading all."""
    col = 2
    bounds = np.array([[(_rows(s)[:, col].max() if is_max else _rows(s)[:, col].min()) if len(_rows(s)) else 0]
                       for s in data], np.int64).reshape(len(data), 1)
    request = ScanRequest([str(i) for i in range(len(data))], [], [col],
                          skip=Skip([(col, is_max)], bounds, [best]))
    answer = scan_segments(request, data, NCOLS)
    rows = np.concatenate([_rows(s) for s in data]) if data else np.empty((0, NCOLS), np.int64)
    got = AggArrays.empty(1, 1)
    got.add_into(np.zeros(1, np.int64), answer.aggs)
    found = got.aggregate(0)
    values = [int(v) for v in rows[:, col]] + ([] if best is None else [best])
    want = (max(values) if is_max else min(values)) if values else None
    have = [v for v in ([found.maxs[0] if is_max else found.mins[0]] + [best]) if v is not None]
    assert ((max(have) if is_max else min(have)) if have else None) == want
    assert answer.grids_scanned + answer.grids_skipped == len(data)


def test_rows_of_gives_matching_rows_back():
    values = np.array([[1, 2, 3, 4], [5, 6, 7, 8], [9, 10, 11, NULL]], np.int64)
    data = [[segments.pack([b"a", b"b", b"c"], values)]]
    answer = scan_segments(ScanRequest(["0"], [RangeCondition(1, 5, 10)], [3], rows_of=np.array([True])),
                           data, NCOLS)
    assert answer.rows[0].tolist() == values[1:].tolist()
    assert answer.aggs.count.tolist() == [0]


@settings(max_examples=200, deadline=None)
@given(grids(), st.lists(st.tuples(st.integers(-60, 60), st.integers(-60, 60)), min_size=3, max_size=8),
       st.booleans())
def test_edge_grids_settle_rows_by_the_polygon_exactly(data, points, by_bucket):
    """Rows of edge grids: the kernel counts the ones surely inside, drops the ones
    surely outside and hands back the rest; with an exact test of those, the answer is
    brute force over the polygon (boundary included)."""
    import shapely

    from gridagg.query.regions import EPSILON
    from gridagg.store.scan import PolygonTest

    hull = shapely.convex_hull(shapely.MultiPoint(points))
    if hull.geom_type != "Polygon":
        return
    xy = np.asarray(hull.exterior.coords, np.float64)
    test = PolygonTest(np.hstack([xy[:-1], xy[1:]]), 1, 2, 1, 1, EPSILON)
    ngroups = 4 if by_bucket else 1
    buckets = Buckets(0, -50, 25, 4) if by_bucket else None
    answer = scan_segments(ScanRequest([str(i) for i in range(len(data))], [], [3], ngroups=ngroups,
                                       buckets=buckets, rows_of=np.ones(len(data), bool), polygon=test), data, NCOLS)
    got = answer.aggs
    for rows in answer.rows.values():  # the caller's exact test
        rows = rows[shapely.intersects_xy(hull, rows[:, 1].astype(float), rows[:, 2].astype(float))]
        if by_bucket:
            rows = rows[(rows[:, 0] >= -50) & (rows[:, 0] < 50)]
        for r in rows:
            g = int((r[0] + 50) // 25) if by_bucket else 0
            got.add_into(np.array([g]), AggArrays.of_rows(r[None, [3]], 1))
    everything = np.concatenate([_rows(s) for s in data]) if data else np.empty((0, NCOLS), np.int64)
    inside = everything[shapely.intersects_xy(hull, everything[:, 1].astype(float), everything[:, 2].astype(float))]
    for g in range(ngroups):
        sel = inside[(inside[:, 0] + 50) // 25 == g] if by_bucket else inside
        assert got.aggregate(g, [3], NCOLS) == _agg(sel, [3])


# Rows of a small sensor network: (time, x, y) at a few stations' positions, a value
# dimension and a nullable measure; cut into blocks of a few rows, so that a segment's
# block tree (gridagg.store.blocks) has many nodes to pass over, add up and open.
BLOCKED = Dataset("blocked", (Column("time", lo=0, hi=10**6), Column("lon", lo=-100, hi=100),
                              Column("lat", lo=-100, hi=100), Column("v", lo=-50, hi=50)),
                  (Column("m", nullable=True),))


@st.composite
def blocked_grids(draw):
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    stations = rng.integers(-90, 90, (int(rng.integers(1, 12)), 2))
    out = []
    for g in range(draw(st.integers(0, 4))):
        segs = []
        for _ in range(draw(st.integers(1, 3))):
            n = int(rng.integers(0, 300))
            at = stations[rng.integers(0, len(stations), n)]
            values = np.column_stack([rng.integers(0, 10**6, n), at, rng.integers(-50, 50, (n, 2))]).astype(np.int64)
            values[rng.random(n) < 0.2, 4] = NULL
            segs.append(segments.pack([b"g%d-%d" % (g, i) for i in range(n)], values, BLOCKED))
        out.append(segs)
    return out


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(blocked_grids(), st.lists(st.tuples(st.integers(0, 3), st.integers(-10**6, 10**6), st.integers(-10**6, 10**6)),
                                 max_size=3),
       st.sampled_from(["one", "bucket", "polygon", "rows", "min", "max"]), st.randoms())
def test_block_trees_match_brute_force(monkeypatch, data, box, kind, rnd):
    """Segments cut into blocks: nodes passed over, answered from their aggregates or
    opened, blocks read alone or in runs, give brute force's answer for boxes, time
    buckets, a polygon's edge, rows handed back and min/max skipping."""
    monkeypatch.setattr(blocks, "BLOCK_ROWS", 16)
    monkeypatch.setattr(blocks, "FEWEST_ROWS", 4)
    data = [[segments.pack(segments.eids(s), segments.values(s), BLOCKED) for s in segs] for segs in data]
    scale = lambda c: 10**4 if c == 0 else 1  # noqa: E731 - time bounds over time's span
    conds = [RangeCondition(c, min(a, b) // (100 if c else 1) // scale(c) * scale(c),
                            max(a, b) // (100 if c else 1)) for c, a, b in box]
    columns = [3, 4]
    rows = np.concatenate([_rows5(s) for s in data]) if data else np.empty((0, 5), np.int64)
    for c in conds:
        rows = rows[(rows[:, c.column] >= c.lo) & (rows[:, c.column] <= c.hi)]
    grids_ = [f"g{i}" for i in range(len(data))]
    if kind == "bucket":
        buckets = Buckets(0, 0, 125_000, 8)
        answer = scan_segments(ScanRequest(grids_, conds, columns, ngroups=8, buckets=buckets), data, 5)
        for b in range(8):
            assert answer.aggs.aggregate(b, columns, 5) == column_aggregate(rows[rows[:, 0] // 125_000 == b], columns, 5)
        return
    if kind == "polygon":
        edges = np.array([[-80.0, -70.0, 60.0, -20.0], [60.0, -20.0, 10.0, 85.0], [10.0, 85.0, -80.0, -70.0]])
        polygon = PolygonTest(edges, 1, 2, 1, 1, 1e-9)
        answer = scan_segments(ScanRequest(grids_, conds, columns, rows_of=np.ones(len(data), bool),
                                           polygon=polygon), data, 5)
        inside = np.array([point_in_polygon(float(x), float(y), edges, 1e-9) for x, y in rows[:, 1:3]], np.int64)
        back = np.concatenate(list(answer.rows.values())) if answer.rows else np.empty((0, 5), np.int64)
        assert sorted(map(tuple, back.tolist())) == sorted(map(tuple, rows[inside == 1].tolist()))
        assert answer.aggs.aggregate(0, columns, 5) == column_aggregate(rows[inside == 2], columns, 5)
        return
    if kind == "rows":
        answer = scan_segments(ScanRequest(grids_, conds, columns, rows_of=np.ones(len(data), bool)), data, 5)
        back = np.concatenate(list(answer.rows.values())) if answer.rows else np.empty((0, 5), np.int64)
        assert sorted(map(tuple, back.tolist())) == sorted(map(tuple, rows.tolist()))
        return
    if kind in ("min", "max"):
        is_max = kind == "max"
        stored = [_rows5(s) for s in data]
        bounds = np.array([[(r[:, 4][r[:, 4] != NULL].max(initial=NULL) if is_max
                             else r[:, 4][r[:, 4] != NULL].min(initial=2**63 - 1))] for r in stored], np.int64)
        answer = scan_segments(ScanRequest(grids_, conds, [4], skip=Skip([(4, is_max)], bounds.reshape(-1, 1), [None])),
                               data, 5)
        got = answer.aggs.aggregate(0, [4], 5)
        want = column_aggregate(rows, [4], 5)
        assert (got.maxs[4] if is_max else got.mins[4]) == (want.maxs[4] if is_max else want.mins[4])
        return
    answer = scan_segments(ScanRequest(grids_, conds, columns, tested=np.array(
        [[rnd.random() < 0.8 or not ((_rows5(s)[:, c.column] >= c.lo) & (_rows5(s)[:, c.column] <= c.hi)).all()
          for c in conds] for s in data], bool).reshape(len(data), len(conds))), data, 5)
    assert answer.aggs.aggregate(0, columns, 5) == column_aggregate(rows, columns, 5)
    assert answer.rows_visited + answer.rows_in_reused_blocks <= sum(len(_rows5(s)) for s in data)


def _rows5(segs) -> np.ndarray:
    parts_ = [segments.values(d) for d in segs]
    return np.concatenate(parts_) if parts_ else np.empty((0, 5), np.int64)
