"""Scans answered on the HBase region servers (GridScanObserver) against brute force and
against the in-process kernel, on the real local HBase: boxes cutting grids, empty grids,
NULLs, buckets, rows_of, polygons, skipping, grids in every region, key ranges across regions,
regions split and merged between queries, a table without the observer, bad requests."""

from __future__ import annotations

import logging
import struct
from dataclasses import replace

import numpy as np
import pytest
import shapely
from engine_support import column_aggregate
from gridagg_hbase import admin
from hypothesis import HealthCheck, assume, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from gridagg.model.aggregate import INT64_MAX, NULL, AggArrays, PartialAggregate
from gridagg.model.grid import grid_prefix, prefix_range
from gridagg.model.schema import Column, Dataset
from gridagg.query.regions import EPSILON
from gridagg.store import blocks, parts
from gridagg.store.hbase import regions as hbase_regions
from gridagg.store.hbase import rows as hbase_rows
from gridagg.store.hbase import scan as hbase_scan
from gridagg.store.hbase import store as hbase
from gridagg.store.hbase.regions import Calls
from gridagg.store.hbase.store import HBaseStore, table_name
from gridagg.store.kernels import scan_segments
from gridagg.store.scan import Buckets, PolygonTest, RangeCondition, ScanRequest, Skip

NCOLS = 4  # x, y (dimensions), m, n (measures; n nullable)
COLUMNS = [0, 2, 3]
HEALTH = [HealthCheck.function_scoped_fixture, HealthCheck.too_slow]


def dataset(name: str) -> Dataset:
    return Dataset(name, (Column("x", lo=-100, hi=100), Column("y", lo=-100, hi=100)), (Column("m"), Column("n")))


@pytest.fixture(scope="module", autouse=True)
def small_blocks():
    """Segments cut into blocks of a few rows (gridagg.store.blocks), so that the region
    servers walk block trees of many nodes."""
    saved = blocks.BLOCK_ROWS, blocks.FEWEST_ROWS
    blocks.BLOCK_ROWS, blocks.FEWEST_ROWS = 8, 2
    yield
    blocks.BLOCK_ROWS, blocks.FEWEST_ROWS = saved


@pytest.fixture(scope="module")
def store(settings, services):
    if settings.hbase:
        pytest.skip("splits and table settings need the local HBase (GRIDAGG_HBASE is set)")
    s = HBaseStore(settings.with_(store="hbase"))
    yield s
    s.close()


def servers_holding(store, ds, gids) -> int:
    """Region servers holding these grids' rows (by the store's region list): a scan
    calls each once (standalone: 1, when there are grids)."""
    with store.pool.connection() as conn:
        regions = store.regions.get(conn.client, table_name(ds.name).encode())
    keys = [grid_prefix(g) for g in gids]
    return len({r.server for r in regions for k in keys if r.start <= k and (not r.end or k < r.end)})


@pytest.fixture(scope="module")
def ds(store):
    import uuid

    d = dataset("scan_" + uuid.uuid4().hex[:8])
    store.create_dataset(d)
    store.scan(d, ScanRequest(["0"], [], [0]))  # the table's first scan probes for the observer
    yield d
    store.drop_dataset(d.name)


@pytest.fixture
def fresh_ds(store, unique_name):
    """A dataset table of its own (for tests that change its regions or settings)."""
    d = dataset(unique_name)
    store.create_dataset(d)
    store.scan(d, ScanRequest(["0"], [], [0]))  # the probe
    yield d
    store.drop_dataset(d.name)


_counter = iter(range(1, 1 << 30))


def grid_ids(salts: list[int]) -> list[str]:
    """Fresh grid IDs, one per salt byte (so in the region of that salt), never used before."""
    n = next(_counter)
    return ["0" + format(s, "08b") + format(n, "020b") + format(i, "06b") for i, s in enumerate(salts)]


@st.composite
def grid_data(draw):
    """(grid IDs, rows per grid, element IDs per grid): up to 8 grids over every region,
    some empty, written in 1-3 writes each; n is NULL now and then, and a column may
    hold one value far from the others."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    k = draw(st.integers(0, 8))
    salts = [int(rng.integers(0, 256)) for _ in range(k)]
    rows, eids = [], []
    for g in range(k):
        n = int(rng.choice([0, 1, 5, 40, 300]))
        values = rng.integers(-60, 60, (n, NCOLS)).astype(np.int64)
        values[rng.random(n) < 0.2, 3] = NULL
        for c in (0, 1, 2, 3):  # an outlier widens a column of a segment to int32 or int64 (gridagg.store.segments)
            if n and rng.random() < 0.4:
                values[int(rng.integers(0, n)), c] = rng.choice([10**6, -(10**6), 2**40, -(2**62)])
        rows.append(values)
        eids.append([b"e%d" % i for i in range(n)])
    return grid_ids(salts), rows, eids


def write(store, ds, gids, rows, eids, rng) -> None:
    """The grids' rows in a few put_grids calls (so grids hold several segments)."""
    parts = [np.array_split(np.arange(len(r)), int(rng.integers(1, 4))) for r in rows]
    for w in range(3):
        batch = [(grid_prefix(g), [e[i] for i in p[w].tolist()], r[p[w]])
                 for g, r, e, p in zip(gids, rows, eids, parts) if w < len(p) and len(p[w])]
        store.put_grids(ds, batch)


def matching(rows: np.ndarray, conds) -> np.ndarray:
    for c in conds:
        rows = rows[(rows[:, c.column] >= c.lo) & (rows[:, c.column] <= c.hi)]
    return rows


def brute(rows: np.ndarray, columns) -> PartialAggregate:
    return column_aggregate(rows, columns, NCOLS)


def sorted_rows(rows: np.ndarray) -> list:
    return sorted(map(tuple, rows.tolist()))


conditions = st.lists(st.tuples(st.sampled_from([0, 1, 3]), st.integers(-70, 70), st.integers(-70, 70)), max_size=3)


@hsettings(max_examples=60, deadline=None, suppress_health_check=HEALTH)
@given(grid_data(), conditions, st.sampled_from(["one", "grid", "bucket"]), st.data())
def test_server_side_scan_matches_brute_force_and_the_kernel(store, ds, data, box, grouping, draw):
    gids, rows, eids = data
    rng = np.random.default_rng(len(gids))
    write(store, ds, gids, rows, eids, rng)
    conds = [RangeCondition(c, min(a, b), max(a, b)) for c, a, b in box]
    rows_of = np.array(draw.draw(st.lists(st.booleans(), min_size=len(gids), max_size=len(gids))), bool)
    groups, buckets, ngroups = None, None, 1
    if grouping == "grid":
        groups, ngroups = np.arange(len(gids), dtype=np.int64), max(1, len(gids))
    elif grouping == "bucket":
        # Column 0 orders a segment's rows (runs found by search); column 1 does not.
        buckets = Buckets(draw.draw(st.sampled_from([0, 1])), draw.draw(st.integers(-70, 0)),
                          draw.draw(st.integers(1, 30)), draw.draw(st.integers(1, 6)))
        ngroups = buckets.count
    # A grid may be marked untested on a condition all its rows meet (as the planner marks
    # a grid whose box lies inside the condition's range).
    meet = np.array([[bool(len(matching(r, [c])) == len(r)) for c in conds] for r in rows], bool)
    untested = np.array(draw.draw(st.lists(st.booleans(), min_size=meet.size, max_size=meet.size)), bool)
    tested = ~(meet & untested.reshape(meet.shape)) if len(gids) else None
    request = ScanRequest(gids, conds, COLUMNS, groups, ngroups, buckets, rows_of if rows_of.any() else None,
                          tested=tested)
    trips = store.round_trips()
    answer = store.scan(ds, request)
    assert store.round_trips() - trips == servers_holding(store, ds, gids)

    expected = [PartialAggregate.empty(NCOLS) for _ in range(ngroups)]
    for i, r in enumerate(rows):
        sel = matching(r, conds)
        if rows_of[i]:
            assert sorted_rows(answer.rows[i]) == sorted_rows(sel)
            continue
        if buckets is None:
            expected[i if groups is not None else 0].merge(brute(sel, COLUMNS))
        else:
            for b in range(buckets.count):
                expected[b].merge(brute(sel[(sel[:, buckets.column] - buckets.base) // buckets.step == b], COLUMNS))
    assert set(answer.rows) == set(np.flatnonzero(rows_of).tolist())
    for g in range(ngroups):
        assert answer.aggs.aggregate(g, COLUMNS, NCOLS) == expected[g]
    # Rows are read only in blocks the box cuts; the others are passed over or answer whole.
    assert answer.rows_visited + answer.rows_in_reused_blocks <= sum(len(r) for r in rows)
    assert answer.grids_scanned == len(gids) and answer.grids_skipped == 0

    # The same request in process, over the same stored segments: the same answer.
    stored = store.grid_segments(ds, [grid_prefix(g) for g in gids])
    local = scan_segments(request, [[s for _, s in hbase_rows.live(stored.get(grid_prefix(g), []))] for g in gids],
                          NCOLS)
    # (Sums compare whole: how a sum splits into its two parts is each kernel's own.)
    for g in range(len(answer.aggs)):
        assert answer.aggs.aggregate(g) == local.aggs.aggregate(g)
    assert (answer.rows_matched, answer.rows_visited, answer.blocks_reused) == (
        local.rows_matched, local.rows_visited, local.blocks_reused)

    # Cut into parts by the rows each grid holds, asked at once: the same answer.
    held = [len(r) for r in rows]
    saved = parts.PARALLEL_ROWS, store.scan_threads
    parts.PARALLEL_ROWS, store.scan_threads = 1, 3
    try:
        trips = store.round_trips()
        split = store.scan(ds, replace(request, rows=np.array(held, np.int64)))
        assert store.round_trips() - trips == (  # one call per part and region server
            sum(servers_holding(store, ds, gids[g0:g1]) for g0, g1 in parts.cut(held, 3)) if gids else 0)
    finally:
        parts.PARALLEL_ROWS, store.scan_threads = saved
    for name in ("count", "present", "mins", "maxs", "hi", "lo"):
        assert np.array_equal(getattr(split.aggs, name), getattr(answer.aggs, name)), name
    assert sorted(split.rows) == sorted(answer.rows)
    assert all(sorted_rows(split.rows[i]) == sorted_rows(answer.rows[i]) for i in answer.rows)
    assert (split.rows_visited, split.rows_matched) == (answer.rows_visited, answer.rows_matched)


# Vertices on the rows' integer grid: edges pass through stored points, so some rows lie
# on an edge (handed back for the exact test) and some within reach of one.
vertex = st.tuples(st.integers(-70, 70), st.integers(-70, 70))


@hsettings(max_examples=60, deadline=None, suppress_health_check=HEALTH)
@given(grid_data(), conditions, st.lists(vertex, min_size=3, max_size=6), st.booleans(), st.data())
def test_edge_grids_are_tested_against_the_polygon_on_the_region_servers(store, ds, data, box, ring, bucketed,
                                                                          draw):
    """A polygon travels with the request: rows of edge grids inside it add to the
    aggregates where they are stored, rows outside stay there, and only rows within eps
    of an edge come back, as the in-process kernel decides; with the exact test of
    those, the answer is brute force's."""
    polygon = shapely.Polygon(ring)
    assume(polygon.is_valid and polygon.area > 0)
    gids, rows, eids = data
    write(store, ds, gids, rows, eids, np.random.default_rng(2))
    conds = [RangeCondition(c, min(a, b), max(a, b)) for c, a, b in box]
    rows_of = np.array(draw.draw(st.lists(st.booleans(), min_size=len(gids), max_size=len(gids))), bool)
    xy = np.asarray(polygon.exterior.coords, np.float64)
    test = PolygonTest(np.ascontiguousarray(np.hstack([xy[:-1], xy[1:]])), 0, 1, 1, 1, EPSILON)
    buckets = Buckets(0, -70, 20, 7) if bucketed else None
    ngroups = 7 if bucketed else 1
    request = ScanRequest(gids, conds, COLUMNS, None, ngroups, buckets, rows_of, polygon=test)
    answer = store.scan(ds, request)

    stored = store.grid_segments(ds, [grid_prefix(g) for g in gids])
    local = scan_segments(request, [[s for _, s in hbase_rows.live(stored.get(grid_prefix(g), []))] for g in gids],
                          NCOLS)
    for g in range(ngroups):
        assert answer.aggs.aggregate(g) == local.aggs.aggregate(g)
    back = {i: sorted_rows(r) for i, r in answer.rows.items() if len(r)}
    assert back == {i: sorted_rows(r) for i, r in local.rows.items()}
    assert answer.rows_matched == local.rows_matched

    def group_of(r: np.ndarray) -> np.ndarray:
        return np.zeros(len(r), np.int64) if buckets is None else (r[:, 0] - buckets.base) // buckets.step

    expected = [PartialAggregate.empty(NCOLS) for _ in range(ngroups)]
    got = [answer.aggs.aggregate(g, COLUMNS, NCOLS) for g in range(ngroups)]
    for i, r in enumerate(rows):
        sel = matching(r, conds)
        if rows_of[i]:
            sel = sel[shapely.intersects_xy(polygon, sel[:, 0].astype(float), sel[:, 1].astype(float))]
            kept = answer.rows.get(i, np.zeros((0, NCOLS), np.int64))
            kept = kept[shapely.intersects_xy(polygon, kept[:, 0].astype(float), kept[:, 1].astype(float))]
            for g in range(ngroups):
                got[g].merge(brute(kept[group_of(kept) == g], COLUMNS))
        for g in range(ngroups):
            expected[g].merge(brute(sel[group_of(sel) == g], COLUMNS))
    assert got == expected


def test_a_condition_a_grid_is_marked_to_meet_is_not_tested(store, ds):
    """The region servers, like the kernel, trust the planner's marks: they skip the
    test, which is what makes a grid cut on one side cheap."""
    gids = grid_ids([7, 200])
    rows = [np.array([[x, x, x, x] for x in range(-5, 5)], np.int64)] * 2
    write(store, ds, gids, rows, [[b"e%d" % i for i in range(10)]] * 2, np.random.default_rng(0))
    conds = [RangeCondition(0, -100, 100), RangeCondition(1, 0, 100), RangeCondition(3, -100, 0)]
    tested = np.array([[True, False, True], [True, True, False]])  # grid 0: not y; grid 1: not n
    request = ScanRequest(gids, conds, COLUMNS, np.arange(2), 2, tested=tested)
    for answer in (store.scan(ds, request), scan_segments(request, [[s for _, s in hbase_rows.live(
            store.grid_segments(ds, [grid_prefix(g)])[grid_prefix(g)])] for g in gids], NCOLS)):
        assert answer.aggs.count.tolist() == [6, 5]  # x <= 0 for grid 0, y >= 0 for grid 1


@hsettings(max_examples=40, deadline=None, suppress_health_check=HEALTH)
@given(grid_data(), conditions, st.sampled_from([(2, False), (3, False), (2, True), (3, True)]),
       st.one_of(st.none(), st.integers(-70, 70)), st.randoms(use_true_random=False))
def test_skipping_keeps_min_and_max_exact(store, ds, data, box, spec, best, rnd):
    gids, rows, eids = data
    write(store, ds, gids, rows, eids, np.random.default_rng(1))
    conds = [RangeCondition(c, min(a, b), max(a, b)) for c, a, b in box]
    col, is_max = spec
    stored = [brute(r, [col]) for r in rows]  # what the grids' stored aggregates say
    bounds = [(s.maxs[col] if is_max else s.mins[col]) for s in stored]
    bounds = [(-INT64_MAX - 1 if is_max else INT64_MAX) if b is None else b for b in bounds]
    order = list(range(len(gids)))
    rnd.shuffle(order)
    request = ScanRequest([gids[i] for i in order], conds, COLUMNS,
                          skip=Skip([spec], np.array([[bounds[i]] for i in order], np.int64).reshape(len(gids), 1), [best]))
    answer = store.scan(ds, request)
    got = answer.aggs.aggregate(0, COLUMNS, NCOLS)
    vals = [int(v) for r in rows for v in matching(r, conds)[:, col] if v != NULL]
    pick = max if is_max else min
    expected = pick(vals + ([best] if best is not None else [])) if vals or best is not None else None
    found = got.maxs[col] if is_max else got.mins[col]
    answered = pick([v for v in (found, best) if v is not None]) if found is not None or best is not None else None
    assert answered == expected
    assert answer.grids_scanned + answer.grids_skipped == len(gids)


def test_writes_replace_repeats_merge_segments_and_delete(store, ds):
    """put_grids appends a segment per write; a repeated element ID replaces its row;
    many writes end in one rewritten grid; deletes rewrite the grid."""
    (gid,) = grid_ids([77])
    prefix = grid_prefix(gid)
    model: dict[bytes, list[int]] = {}
    rng = np.random.default_rng(5)
    for w in range(12):
        eids = [b"e%d" % int(i) for i in rng.integers(0, 40, 6)]
        values = rng.integers(-50, 50, (6, NCOLS))
        store.put_grids(ds, [(prefix, eids, values)])
        model.update((e, v.tolist()) for e, v in zip(eids, values))
        stored = store.grid_segments(ds, [prefix])[prefix]
        assert len(hbase_rows.live(stored)) <= hbase_rows.MAX_SEGMENTS
        got = {k: v.tolist() for ks, vs in store.scan_rows(ds, *prefix_range(prefix)) for k, v in zip(ks, vs)}
        assert got == {prefix + e: v for e, v in model.items()}
        answer = store.scan(ds, ScanRequest([gid], [], COLUMNS))
        assert answer.aggs.count[0] == len(model)
    gone = list(model)[:5]
    store.delete_rows(ds, [prefix + e for e in gone] + [prefix + b"never"])
    for e in gone:
        del model[e]
    assert store.existing_keys(ds, [prefix + e for e in [*gone, *model]]) == {prefix + e for e in model}
    assert store.scan(ds, ScanRequest([gid], [], COLUMNS)).aggs.count[0] == len(model)
    store.delete_rows(ds, [prefix + e for e in model])
    assert store.grid_segments(ds, [prefix]) == {}


def test_large_grids_are_kept_in_bounded_segments(store, ds):
    (gid,) = grid_ids([200])
    prefix = grid_prefix(gid)
    n = 3 * hbase_rows.SEGMENT_BYTES // (8 * NCOLS) + 7
    values = np.random.default_rng(3).integers(-100, 100, (n, NCOLS))
    store.put_grids(ds, [(prefix, [b"%08d" % i for i in range(n)], values)])
    segs = store.grid_segments(ds, [prefix])[prefix]
    assert len(segs) >= 3 and all(len(s) <= 1.1 * hbase_rows.SEGMENT_BYTES for _, s in segs)
    answer = store.scan(ds, ScanRequest([gid], [RangeCondition(0, -10, 10)], [2]))
    sel = values[(values[:, 0] >= -10) & (values[:, 0] <= 10)]
    assert answer.aggs.aggregate(0, [2], NCOLS) == brute(sel, [2])
    # A condition on a measure, which every block cuts: each segment is read whole, in chunks.
    answer = store.scan(ds, ScanRequest([gid], [RangeCondition(2, -50, 50)], COLUMNS))
    assert answer.rows_visited > n // 2
    assert answer.aggs.aggregate(0, COLUMNS, NCOLS) == brute(matching(values, [RangeCondition(2, -50, 50)]), COLUMNS)


def test_a_region_split_and_merge_between_queries(settings, store, fresh_ds):
    """Cached anchors go stale: a merge makes one region answer twice (counted once), a
    split leaves grids unanswered (asked again with a fresh region list)."""
    rng = np.random.default_rng(9)
    gids = grid_ids([40, 61, 64, 90, 130, 131, 150])  # regions [0x20, 0x40), [0x40, 0x60), [0x80, 0xa0)
    rows = [rng.integers(-60, 60, (50, NCOLS)) for _ in gids]
    for g, r in zip(gids, rows):
        store.put_grids(fresh_ds, [(grid_prefix(g), [b"e%d" % i for i in range(50)], r)])
    request = ScanRequest(gids, [RangeCondition(1, -20, 30)], COLUMNS)
    expected = brute(np.concatenate([matching(r, request.conditions) for r in rows]), COLUMNS)

    def ask() -> tuple[PartialAggregate, int]:
        """(The answer, calls asked again.) A first round asks each region server once."""
        before, labels = store.round_trips(), store.round_trips.labelled()
        answer = store.scan(fresh_ds, request)
        assert answer.grids_scanned == len(gids)
        calls = store.round_trips.since(labels, store.round_trips.labelled())
        reasks = calls.pop(hbase_regions.REASK, 0)
        assert store.round_trips() - before == sum(calls.values())
        assert len(calls) == sum(calls.values()) - reasks  # the first round: each server once
        return answer.aggs.aggregate(0, COLUMNS, NCOLS), reasks

    assert ask() == (expected, 0)
    table = table_name(fresh_ds.name)
    admin.region_admin(settings, "merge", table, bytes([40]).hex(), bytes([64]).hex())
    assert ask() == (expected, 0)  # both anchors reached the merged region: counted once
    admin.region_admin(settings, "split", table, bytes([140]).hex())
    assert ask() == (expected, 1)  # the daughter holding the anchor answered; the rest asked again
    assert ask() == (expected, 0)


ROW_NCOLS = 3


@pytest.fixture(scope="module")
def row_cells(store):
    """A table of layout 1 (HBase alone's): 600 rows, a cell each, over every region."""
    import uuid

    from Hbase_thrift import BatchMutation, Mutation

    d = dataset("cells_" + uuid.uuid4().hex[:8])
    store.create_dataset(d)
    rng = np.random.default_rng(4)
    keys = sorted({bytes([int(a)]) + b"k%d" % int(b) for a, b in zip(rng.integers(0, 256, 600), rng.integers(0, 99, 600))})
    values = rng.integers(-1000, 1000, (len(keys), ROW_NCOLS))
    values[rng.random(len(keys)) < 0.1, 2] = NULL
    with store.pool.connection() as conn:
        conn.client.mutateRows(table_name(d.name).encode(), [
            BatchMutation(row=k, mutations=[Mutation(column=b"r:v", value=v.astype("<i8").tobytes())])
            for k, v in zip(keys, values)], {})
    yield d, keys, values
    store.drop_dataset(d.name)


key_bounds = st.one_of(st.just(b""), st.binary(min_size=1, max_size=3))


@hsettings(max_examples=60, deadline=None, suppress_health_check=HEALTH)
@given(key_bounds, key_bounds, st.lists(st.tuples(st.integers(0, 2), st.integers(-1100, 1100),
                                                  st.integers(-1100, 1100)), max_size=2),
       st.booleans(), st.booleans())
def test_row_cell_ranges_match_brute_force(settings, store, row_cells, lo, hi, box, bucketed, rows_of):
    """Layout 1 (HBase alone): key ranges, cut by region bounds, answered piece by piece."""
    d, keys, values = row_cells
    conds = [RangeCondition(c, min(a, b), max(a, b)) for c, a, b in box]
    buckets = Buckets(1, -1000, 250, 8) if bucketed else None
    request = ScanRequest(["range"], conds, [0, 2], ngroups=8 if bucketed else 1, buckets=buckets)
    item = hbase_scan.Items([lo], [hi], rows_of=np.array([rows_of]))
    with store.pool.connection() as conn:
        answer = hbase_scan.ask(Calls(conn.client), table_name(d.name).encode(), hbase_scan.ROW_CELLS, ROW_NCOLS,
                                request, item, store.regions, store.round_trips, settings.hbase_call_timeout)
    inside = np.array([lo <= k and (not hi or k < hi) for k in keys])
    sel = matching(values[inside], conds)
    assert answer.rows_visited == int(inside.sum())
    if rows_of:
        assert sorted_rows(answer.rows.get(0, np.empty((0, ROW_NCOLS), np.int64))) == sorted_rows(sel)
        return
    for g in range(request.ngroups):
        part = sel if buckets is None else sel[(sel[:, 1] + 1000) // 250 == g]
        assert answer.aggs.aggregate(g, [0, 2], ROW_NCOLS) == column_aggregate(part, [0, 2], ROW_NCOLS)


def test_compacting_rewrites_a_table_made_without_the_row_index_and_every_answer_stays(settings, store, unique_name):
    """A table of an older gridagg (family r without a data block encoding) gets
    ROW_INDEX_V1 and one file a region from compact; its grids, rewritten and thus holding
    dead cells, answer as before."""
    d = dataset(unique_name)
    old = {f: {k: v for k, v in o.items() if k != "data_block_encoding"} for f, o in hbase.FAMILIES.items()}
    admin.create_presplit_table(settings, table_name(d.name), old, hbase.SPLITS)
    try:
        rng = np.random.default_rng(12)
        gids = grid_ids([10, 40, 90, 200])
        for _ in range(2):  # the second write replaces the first: cells for the compaction to drop
            rows = [rng.integers(-60, 60, (40, NCOLS)) for _ in gids]
            for g, r in zip(gids, rows):
                store.put_grids(d, [(grid_prefix(g), [b"e%d" % i for i in range(40)], r)])
        request = ScanRequest(gids, [RangeCondition(1, -20, 30)], COLUMNS)
        expected = brute(np.concatenate([matching(r, request.conditions) for r in rows]), COLUMNS)
        assert store.scan(d, request).aggs.aggregate(0, COLUMNS, NCOLS) == expected
        assert store.compact(d) == f"{table_name(d.name)} major-compacted (a=NONE r=ROW_INDEX_V1)"
        assert store.scan(d, request).aggs.aggregate(0, COLUMNS, NCOLS) == expected
    finally:
        store.drop_dataset(d.name)


def test_a_table_without_the_observer_is_read_client_side(settings, store, fresh_ds, caplog):
    """An HBase whose regions do not load GridScanObserver (here: the table's own
    setting switches coprocessors off) gets the same answers, read through Thrift, after
    one warning; a store that probed before the observer went away notices too."""
    rng = np.random.default_rng(2)
    gids = grid_ids([3, 100, 250])
    rows = [rng.integers(-60, 60, (30, NCOLS)) for _ in gids]
    for g, r in zip(gids, rows):
        store.put_grids(fresh_ds, [(grid_prefix(g), [b"e%d" % i for i in range(30)], r)])
    request = ScanRequest(gids, [RangeCondition(0, -30, 40)], COLUMNS)
    expected = brute(np.concatenate([matching(r, request.conditions) for r in rows]), COLUMNS)
    assert store.scan(fresh_ds, request).aggs.aggregate(0, COLUMNS, NCOLS) == expected  # probed: it answers
    admin.region_admin(settings, "set", table_name(fresh_ds.name), "hbase.coprocessor.enabled", "false")
    fresh = HBaseStore(settings.with_(store="hbase"))
    try:
        with caplog.at_level(logging.WARNING, logger="gridagg.store.hbase.store"):
            for s in (fresh, fresh, store, store):
                assert s.scan(fresh_ds, request).aggs.aggregate(0, COLUMNS, NCOLS) == expected
            # Writes find stored rows without it too: a repeated element ID replaces its row.
            prefix = grid_prefix(gids[0])
            fresh.put_grids(fresh_ds, [(prefix, [b"e0", b"new"], np.full((2, NCOLS), 7))])
            assert fresh.existing_keys(fresh_ds, [prefix + b"e0", prefix + b"new", prefix + b"no"]) == {
                prefix + b"e0", prefix + b"new"}
            rows[0] = np.concatenate([np.full((1, NCOLS), 7), rows[0][1:], np.full((1, NCOLS), 7)])
            expected = brute(np.concatenate([matching(r, request.conditions) for r in rows]), COLUMNS)
            assert store.scan(fresh_ds, request).aggs.aggregate(0, COLUMNS, NCOLS) == expected
        warnings = [r for r in caplog.records if "GridScanObserver" in r.getMessage()]
        assert len(warnings) == 2  # once per store
    finally:
        fresh.close()


def test_a_bad_request_fails_clearly_and_leaves_the_region_server_up(store, ds):
    from gridagg.model.errors import StoreUnavailable

    (gid,) = grid_ids([9])
    store.put_grids(ds, [(grid_prefix(gid), [b"a"], np.ones((1, NCOLS), np.int64))])
    # A request of this version whose one item's key reaches past the request's end.
    head = struct.pack("<BBHqHHHBIBI", hbase_scan.VERSION, hbase_scan.SEGMENTS, NCOLS, 0, 0, 1, 2, 0, 1, 0, 1)
    past_end = head + struct.pack("<IIII", 0, 200, 0, 0) + grid_prefix(gid) + struct.pack("<IB", 0, 0)
    for attribute, bad in [(hbase_scan.ATTRIBUTE, b"\x01\x00garbage"), (hbase_scan.ATTRIBUTE, b"\x07"),
                           (hbase_scan.ATTRIBUTE, b"\x01\x05\x04\x00"), (hbase_scan.KEYS, b"\x01\xff\xff"),
                           (hbase_scan.ATTRIBUTE, past_end)]:
        with pytest.raises(StoreUnavailable, match=attribute.decode()):
            with store.pool.connection() as conn:
                conn.client.getRows(table_name(ds.name).encode(), [grid_prefix(gid)], {attribute: bad})
    assert store.scan(ds, ScanRequest([gid], [], [2])).aggs.count[0] == 1


def test_many_aggregates_are_read_by_a_scan_as_gets_read_them(store, fresh_ds, monkeypatch):
    """A whole tree's aggregates (SCAN_AGGREGATES_FROM and more) come from a scan of their
    family per salt range: the same arrays as gets give, in the order asked, a grid
    without one empty, and grids of every region among them."""
    rng = np.random.default_rng(5)
    ids = sorted({format(int(i), "b") for i in rng.integers(2, 1 << 20, 600)})
    stored = ids[::2]
    store.put_aggregates(fresh_ds, {g: PartialAggregate(n, [n * 7] * NCOLS, [-n] * NCOLS, [n] * NCOLS)
                                    for n, g in enumerate(stored, 1)})
    assert {grid_prefix(g)[0] // (256 // hbase.REGIONS) for g in stored} == set(range(hbase.REGIONS))
    got = store.get_aggregate_arrays(fresh_ds, ids)
    monkeypatch.setattr(hbase, "SCAN_AGGREGATES_FROM", 1)
    scanned = store.get_aggregate_arrays(fresh_ds, ids)
    for name in AggArrays.FIELDS:
        assert (getattr(scanned, name) == getattr(got, name)).all()
    assert got.count[1::2].sum() == 0 and (got.count[::2] > 0).all()


@hsettings(deadline=None)
@given(st.lists(st.binary(max_size=300), max_size=40), st.integers(0, 5))
def test_a_lookup_lists_element_ids_as_u16_length_and_bytes_each(eids, skip):
    """length_prefixed packs an Arrow binary array (a slice of one too) as the observer
    reads a lookup's element IDs."""
    import pyarrow as pa

    want = b"".join(struct.pack("<H", len(e)) + e for e in eids)
    assert hbase_scan.length_prefixed(pa.array(eids, pa.binary())) == want
    assert hbase_scan.length_prefixed(pa.array([b"x"] * skip + eids, pa.binary()).slice(skip)) == want
