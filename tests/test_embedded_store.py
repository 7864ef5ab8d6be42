"""The embedded store's segments against a plain dict of rows: any key range (also ones
that cut through a grid's rows, which gridagg itself never asks for), any conditions."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gridagg.model.aggregate import PartialAggregate
from gridagg.model.grid import row_key
from gridagg.model.schema import Dataset
from gridagg.store.embedded import EmbeddedStore, _Located
from gridagg.store.scan import RangeCondition, ScanRequest

DS = Dataset.from_json({"name": "seg", "dimensions": [{"name": "x", "min": 0, "max": 20}],
                        "measures": [{"name": "v", "min": 0, "max": 9}]})
GRIDS = ["0", "00", "01", "010", "1"]

rows = st.lists(st.tuples(st.sampled_from(GRIDS), st.integers(0, 30), st.integers(0, 20), st.integers(0, 9)),
                max_size=40)
bounds = st.tuples(st.integers(0, 20), st.integers(0, 20)).map(sorted)


@settings(max_examples=100, deadline=None)
@given(batches=st.lists(rows, min_size=1, max_size=4), cut=st.tuples(st.sampled_from(GRIDS), st.integers(0, 30)),
       length=st.integers(1, 40), xb=bounds, read=st.lists(st.sampled_from(GRIDS), unique=True))
def test_segments_match_a_dict_of_rows(tmp_path_factory, batches, cut, length, xb, read):
    store = EmbeddedStore(tmp_path_factory.mktemp("lmdb"))
    store.create_dataset(DS)
    expect: dict[bytes, tuple[int, int]] = {}
    for batch in batches:  # later writes of a key replace earlier ones
        keys = [row_key(g, str(e).encode()) for g, e, _, _ in batch]
        store.put_rows(DS, keys, np.array([[x, v] for _, _, x, v in batch], dtype=np.int64).reshape(-1, 2))
        expect.update({k: (x, v) for k, (_, _, x, v) in zip(keys, batch)})
        # Each write ends the read transaction the last scan used: this one sees it.
        assert store.scan(DS, ScanRequest(GRIDS, [], [1])).aggs.count[0] == len(expect)
    start = row_key(cut[0], str(cut[1]).encode())
    stop = start + b"\xff" * length
    where = [RangeCondition(0, *xb)]
    want = {k: r for k, r in expect.items() if start <= k < stop and xb[0] <= r[0] <= xb[1]}
    got = {k: tuple(r) for ks, vs in store.scan_rows(DS, start, stop, where) for k, r in zip(ks, vs.tolist())}
    assert got == want
    in_grids = {k: r for k, r in expect.items() if k[1 : k.index(b"-", 1)].decode() in read and xb[0] <= r[0] <= xb[1]}
    agg = store.scan(DS, ScanRequest(read, where, [1])).aggs.aggregate(0, [1], 2)
    assert agg.count == len(in_grids)
    assert agg.sums[1] == sum(v for _, v in in_grids.values())
    assert (agg.mins[1], agg.maxs[1]) == ((min(v for _, v in in_grids.values()), max(v for _, v in in_grids.values()))
                                          if in_grids else (None, None))
    assert store.existing_keys(DS, list(expect)) == set(expect)
    store.delete_rows(DS, list(want))
    left = {k for ks, _ in store.scan_rows(DS, b"", b"\xff\xff") for k in ks}
    assert left == set(expect) - set(want)
    store.close()


def test_grids_without_rows_give_the_empty_aggregate(tmp_path):
    store = EmbeddedStore(tmp_path)
    store.create_dataset(DS)
    answer = store.scan(DS, ScanRequest(["0", "01"], [], [1]))
    assert (answer.aggs.aggregate(0, [1], 2), answer.rows_visited) == (PartialAggregate.empty(2), 0)
    store.close()


@settings(max_examples=50, deadline=None)
@given(st.lists(st.lists(st.sampled_from(GRIDS), unique=True), min_size=1, max_size=4),
       st.lists(st.sampled_from(GRIDS)), st.data())
def test_where_segments_lie_is_kept_for_grids_found_at_any_time(batches, asked, data):
    """_Located gives each grid's addresses, in the order asked (a grid asked twice, twice),
    whichever batch found it; a grid not found yet is a KeyError."""
    located, have = _Located(), {}
    for batch in batches:
        new = [g for g in batch if g not in have]
        per_grid = [np.array(data.draw(st.lists(st.integers(1, 10**9), max_size=3)), np.int64) for _ in new]
        located.add(new, per_grid)
        have.update(zip(new, per_grid))
    if not set(asked) <= set(have):
        with pytest.raises(KeyError):
            located.of(asked)
        return
    addresses, first = located.of(asked)
    assert [addresses[a:b].tolist() for a, b in zip(first, first[1:])] == [have[g].tolist() for g in asked]


def test_loading_many_aggregates_leaves_none_of_the_file_mapped(tmp_path):
    """A tree's load reads aggregates spread over the LMDB file; the pages it maps are
    dropped from the process as it goes (the page cache keeps them), so the file adds
    nothing to a serving process's RSS after the load."""
    store = EmbeddedStore(tmp_path)
    store.create_dataset(DS)
    ids = [format(i, "b") for i in range(1, 30_000)]
    agg = PartialAggregate.empty(2)
    store.put_aggregates(DS, {g: agg for g in ids})
    got = store.get_aggregate_arrays(DS, ids)
    assert len(got.count) == len(ids)
    data = str(tmp_path.resolve() / "data.mdb")
    smaps = open("/proc/self/smaps").read().split("\n")
    at = next(i for i, line in enumerate(smaps) if line.endswith(" " + data))
    rss_kb = next(int(line.split()[1]) for line in smaps[at + 1:] if line.startswith("Rss:"))
    assert rss_kb == 0
    store.close()


WRITER = """
import sys
import numpy as np
from gridagg.model.grid import row_key
from gridagg.model.schema import Dataset
from gridagg.store.embedded import EmbeddedStore, _Located
store = EmbeddedStore(sys.argv[1])
store.put_rows(Dataset.from_json(eval(sys.argv[2])), [row_key("0", b"b")], np.array([[2, 7]]))
store.close()
"""


def test_a_scan_sees_what_another_process_wrote_since_the_last_scan(tmp_path):
    """Scans share one read transaction while nothing is written, in this process or
    another; the next scan after another process's write sees its rows."""
    import subprocess
    import sys
    from pathlib import Path

    store = EmbeddedStore(tmp_path)
    store.create_dataset(DS)
    store.put_rows(DS, [row_key("0", b"a")], np.array([[1, 5]]))
    request = ScanRequest(["0"], [], [1])
    assert [store.scan(DS, request).aggs.count[0] for _ in range(2)] == [1, 1]
    root = Path(__file__).resolve().parents[1]
    done = subprocess.run([sys.executable, "-c", WRITER, str(tmp_path), repr(DS.to_json())], cwd=root,
                          timeout=60, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    answer = store.scan(DS, request).aggs.aggregate(0, [1], 2)
    assert (answer.count, answer.sums[1]) == (2, 12)
    store.close()


OPEN_RACE = """
import sys, tempfile, threading
from gridagg.store.embedded import EmbeddedStore, _Located
path = tempfile.mkdtemp()
for round_ in range(200):
    store = EmbeddedStore(path)
    barrier = threading.Barrier(8)
    def first_query(i):
        barrier.wait()
        db = store._db(f"d{round_}", "sa"[i % 2])
        with store.env.begin(db=db) as txn:
            txn.get(b"k")
    threads = [threading.Thread(target=first_query, args=(i,)) for i in range(8)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    store.close()
"""


def test_threads_opening_a_dataset_at_once_do_not_hang(tmp_path):
    """A server worker's threads may all query a dataset for the first time at once. Two
    LMDB database opens at the same time in one process used to hang it for good (the
    GIL held), so this runs in a child process with a deadline."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    done = subprocess.run([sys.executable, "-c", OPEN_RACE], cwd=root, timeout=60, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]


@settings(max_examples=100, deadline=None)
@given(st.lists(st.sampled_from([b"a|1", b"a|2", b"b|1", b"\xc3\xa9|1", b"x" * 40]), max_size=12))
def test_rows_written_twice_in_one_call_keep_the_last(eids):
    import pyarrow as pa

    from gridagg.store import segments

    values = np.arange(len(eids), dtype=np.int64).reshape(-1, 1)
    kept_eids, kept = segments.last_of_each(pa.array(eids, pa.binary()), values)
    expected = {e: i for i, e in enumerate(eids)}
    assert dict(zip(kept_eids.to_pylist(), kept[:, 0].tolist())) == expected
    assert len(kept_eids) == len(expected)


def test_a_process_that_writes_after_its_scans_lets_the_file_reuse_what_it_freed(tmp_path):
    """A tuner asks its questions (scans), then rewrites leaves for minutes without
    scanning. Its snapshot must not outlive its own writes: while a read transaction
    holds the old pages, LMDB cannot reuse them, and every rewrite grows the file."""
    from gridagg.model.grid import grid_prefix

    store = EmbeddedStore(tmp_path)
    store.create_dataset(DS)
    eids = [b"e%06d" % i for i in range(20_000)]
    rng = np.random.default_rng(1)

    def rewrite():
        store.clear_grids(DS, ["0"])
        store.put_grids(DS, [(grid_prefix("0"), eids, rng.integers(0, 10, (len(eids), 2)))])

    rewrite()
    store.scan(DS, ScanRequest(["0"], [], [1]))
    rewrite()
    size = (tmp_path / "data.mdb").stat().st_size
    for _ in range(30):
        rewrite()
    grew = (tmp_path / "data.mdb").stat().st_size - size
    assert grew < size, f"the file grew by {grew:,} bytes over 30 rewrites of one grid (it held {size:,})"
    assert store.scan(DS, ScanRequest(["0"], [], [1])).aggs.count[0] == len(eids)
    store.close()
