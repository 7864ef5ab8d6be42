"""How the ingest job's Python passes hand rows on (ingest.buckets), and how rows are
packed for the HFile writer (ingest.hfiles): pure, no Spark."""

import struct

import numpy as np
import pyarrow as pa
import pytest

from gridagg.model.schema import Column, Dataset
from gridagg_ingest import buckets
from gridagg_ingest.hfiles import region_bounds
from hypothesis import given, settings
from hypothesis import strategies as st

from gridagg.store import segments
from gridagg.store.hbase.bulk import HBaseBulkFormat

pack_cells = HBaseBulkFormat().pack_cells

eids = st.text(alphabet="ab|0123456789é", min_size=1, max_size=12)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(eids, st.integers(-2**63, 2**63 - 1)), max_size=60),
       st.integers(1, 7), st.integers(0, 5))
def test_split_then_unpack_gives_every_row_once_in_its_bucket(rows, n_buckets, bad):
    table = pa.table({"_eid": pa.array([e for e, _ in rows], pa.string()),
                      "c0": pa.array([v for _, v in rows], pa.int64())})
    keys = segments.id_hashes(table.column("_eid")) % np.uint64(n_buckets)
    out = buckets.split(table, keys, bad=bad)

    assert out.column("bad").to_pylist().count(bad) >= (1 if bad else 0)
    assert sum(out.column("bad").to_pylist()) == bad
    seen = []
    for bucket, blob in zip(out.column("bucket").to_pylist(), out.column("blob")):
        if bucket == -1:
            assert not blob.is_valid
            continue
        part = buckets.unpack(pa.chunked_array([pa.array([blob.as_py()], pa.binary())]))
        part_keys = segments.id_hashes(part.column("_eid")) % np.uint64(n_buckets)
        assert set(part_keys.tolist()) == {bucket}
        seen += list(zip(part.column("_eid").to_pylist(), part.column("c0").to_pylist()))
    assert sorted(seen) == sorted(rows)
    assert len(set(out.column("bucket").to_pylist())) == out.num_rows  # one value per bucket


small = st.one_of(st.none(), st.integers(-2**7, 2**7 - 1), st.integers(-2**15, 2**15 - 1),
                  st.integers(-2**31, 2**31 - 1), st.integers(-2**63, 2**63 - 1))


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2**64 - 1), small, small), min_size=1, max_size=40), st.integers(1, 4))
def test_integers_travel_narrow_and_come_back_as_int64(rows, n_buckets):
    # Columns of small integers travel as int8/16/32 (fewer bytes through Spark's JVM);
    # unpack gives back the values and the types it was given, whatever each stream chose.
    table = pa.table({"_h": pa.array([h for h, _, _ in rows], pa.uint64()),
                      "c0": pa.array([a for _, a, _ in rows], pa.int64()),
                      "c1": pa.array([b for _, _, b in rows], pa.int64())})
    keys = table.column("_h").to_numpy() % np.uint64(n_buckets)
    half = len(rows) // 2  # two passes' streams in one bucket, maybe of different widths
    blobs = pa.concat_arrays([buckets.split(table.slice(0, half), keys[:half]).column("blob").combine_chunks(),
                              buckets.split(table.slice(half), keys[half:]).column("blob").combine_chunks()])
    back = buckets.unpack(pa.chunked_array([blobs]))
    assert back.schema == table.schema
    assert sorted(zip(*back.to_pydict().values()), key=repr) == sorted(rows, key=repr)


def test_small_integers_travel_in_fewer_bytes():
    table = pa.table({"c0": pa.array(np.arange(10_000) % 100, pa.int64()),
                      "c1": pa.array(np.arange(10_000) * 1000, pa.int64())})
    packed = buckets.split(table, np.zeros(10_000, np.uint64)).column("blob")[0].as_buffer().size
    assert packed < 10_000 * (1 + 4) + 2_000  # int8 and int32, not 2 x 8 bytes a row


def test_hash_is_a_function_of_the_text_alone():
    # The same IDs in different arrays (and slices, which start inside a buffer) hash alike.
    a = pa.array(["x|1", "station 7|2024-01-01", "x|1", "é|2"])
    b = pa.array(["pad", "é|2", "x|1", "station 7|2024-01-01"]).slice(1)
    ha, hb = segments.id_hashes(a), segments.id_hashes(b)
    assert ha[0] == ha[2] == hb[1]
    assert ha[1] == hb[2] and ha[3] == hb[0]
    assert len({int(h) for h in ha}) == 3
    assert segments.id_hashes(pa.chunked_array([a[:2], a[2:]])).tolist() == ha.tolist()


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.integers(0, 5), st.integers(0, 2**64 - 1)), max_size=50), st.booleans())
def test_repeats_tells_whether_a_hash_is_given_twice(hashes, again):
    if again and hashes:
        hashes = hashes + [hashes[len(hashes) // 2]]
    assert segments.repeats(np.array(hashes, np.uint64)) == (len(set(hashes)) < len(hashes))


def test_unpack_of_nothing_is_none():
    assert buckets.unpack(pa.chunked_array([pa.array([None], pa.binary())])) is None


@pytest.mark.parametrize("n", [0, 1, 7, 40000])
def test_segments_packed_from_arrow_hold_the_rows(n):
    from gridagg.store import segments
    from gridagg.store.hbase import rows as hbase_rows

    rng = np.random.default_rng(n)
    eids = [b"e%d" % i for i in rng.choice(10**9, n, replace=False)]
    values = rng.integers(-9, 9, (n, 5))
    # A slice, as a task packs them: its offsets do not start at 0.
    sliced = pa.array([b"skipped", *eids], pa.binary()).slice(1)
    ds = Dataset("packed", (Column("x", lo=-9, hi=9), Column("y", lo=-9, hi=9)),
                 (Column("m"), Column("n"), Column("o")))
    packed = hbase_rows.pack(sliced, values, ds)
    assert packed == hbase_rows.pack(eids, values, ds)
    got = segments.rows_of(packed)
    assert sorted(got) == sorted(eids)
    assert all(got[e].tolist() == v.tolist() for e, v in zip(eids, values))


def test_packed_cells_layout():
    cells = [(b"\x10a-", 1, b"", b""), (b"\x10a-", 0, b"\0" * 8, b"seg"), (b"\x90b-", 0, b"q", b"")]
    packed, at, got = pack_cells(cells), 0, []
    while at < len(packed):
        kind, n = struct.unpack_from("<BH", packed, at)
        row = packed[at + 3 : at + 3 + n]
        at += 3 + n
        (n,) = struct.unpack_from("<H", packed, at)
        qualifier = packed[at + 2 : at + 2 + n]
        at += 2 + n
        (n,) = struct.unpack_from("<i", packed, at)
        got.append((row, kind, qualifier, packed[at + 4 : at + 4 + n]))
        at += 4 + n
    assert got == cells


def test_region_bounds_cut_sorted_keys_at_region_starts():
    keys = pa.array([b"\x01a", b"\x01b", b"\x20", b"\x40z", b"\xf0"], pa.binary())
    assert region_bounds(keys, [b"", b"\x20", b"\x80"]) == [(0, 2), (2, 4), (4, 5)]
    assert region_bounds(pa.array([], pa.binary()), [b"", b"\x20"]) == [(0, 0), (0, 0)]
