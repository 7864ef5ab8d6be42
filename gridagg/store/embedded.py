"""The embedded store: the paper's layout in LMDB, an ordered key-value store in a file.

Rows keep the paper's keys (salt + grid ID + "-" + element ID), but are stored packed
per grid: a grid's rows live in a few segments (gridagg.store.segments), each one LMDB value
holding many rows as int64 columns. A query's scan reads the segments where they lie in
the map with a compiled kernel (gridagg.store.kernels): no Python step per row, nor per
segment. Scans read through a Snapshot, a read transaction kept open while no write
has committed, which remembers the addresses of each grid's segments: finding them
again for every scan took a large share of a broad dashboard question's time, and a
smaller one of a paper query's. A write appends one
segment per grid it touches; a grid with too many segments, or a write that replaces
stored rows, is rewritten as one segment.

LMDB sub-databases per dataset: "<name>/s" maps grid prefix + 4-byte sequence number to
a segment, "<name>/a" maps grid IDs to partial aggregates (PartialAggregate.pack). LMDB
allows one writer and many readers across processes, so API workers and ingest processes
can share it. Beside them, in the directory's "epochs", the board of dataset epochs
(gridagg.store.epochs): every process of the store shares it, so reading an epoch needs no
round trip.
"""

from __future__ import annotations

import ctypes
import struct
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import lmdb
import numpy as np

from gridagg.model.aggregate import AggArrays, PartialAggregate
from gridagg.model.grid import grid_prefix, grid_start, split_key
from gridagg.model.schema import Dataset
from gridagg.store import segments
from gridagg.store.base import CellStore, segment_rows
from gridagg.store.epochs import EpochBoard
from gridagg.store.kernels import addresses_of, scan_located
from gridagg.store.scan import RangeCondition, ScanAnswer, ScanRequest

MAP_SIZE = 1 << 40  # address space only; the file grows as data arrives
# Aggregates read at once when a process loads a tree (see _release).
AGGREGATES_PER_READ = 8192
MADV_NORMAL, MADV_RANDOM = 0, 1  # Linux: read ahead around a faulting page, or not
MADV_DONTNEED = 4  # Linux: the mapping's pages are dropped, a shared file's stay in the page cache
_LIBC = ctypes.CDLL(None, use_errno=True)
MAX_SEGMENTS = 8  # per grid; more are merged on the next write


class Snapshot:
    """A read transaction shared by this process's scans while it is the newest state of
    the file, and the segments of each grid found through it.

    It is as fresh as a transaction begun now while `txnid` is the last committed one
    (EmbeddedStore.scan checks before each scan); then the next scan begins a new one,
    and this one ends when its last user is done. Until then LMDB keeps the pages it
    sees, so a process idle in scans holds pages that later writes freed until its next
    scan, unless its own write ends it (EmbeddedStore._write): a tuner that asked its
    questions once and then split leaves for a long while grew a large dataset's file
    several times over, none of the pages its splits freed reused.
    """

    def __init__(self, env: lmdb.Environment, dbs: int):
        self.txn = env.begin(buffers=True)
        self.txnid = self.txn.id()
        self.dbs = dbs  # database handles open when it began: a later one is not valid in it
        self.users = 0
        self.stale = False
        self._found: dict[str, _Located] = {}  # per dataset: where its grids' segments lie
        self._lock = threading.Lock()  # one thread at a time uses the transaction

    def located(self, db, name: str, grid_ids: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """(addresses, first) of the segments of each grid of dataset `name` (its segment
        database `db`): grid i's are at addresses[first[i]:first[i + 1]] in the map,
        valid while this snapshot is (kernels.scan_located reads them)."""
        found = self._found.setdefault(name, _Located())
        try:
            return found.of(grid_ids)
        except KeyError:
            pass
        with self._lock:
            cursor = self.txn.cursor(db=db)
            new = [g for g in dict.fromkeys(grid_ids) if g not in found.slot]
            found.add(new, [addresses_of([value for _, value in EmbeddedStore._segments(cursor, grid_prefix(g))])
                            for g in new])
        return found.of(grid_ids)

    def retire(self) -> None:
        """No scan takes it any more: it ends when its last user is done (now if none)."""
        self.stale = True
        self.end_if_unused()

    def end_if_unused(self) -> None:
        if self.stale and not self.users:
            self.txn.abort()


class _Located:
    """Where the segments of a dataset's grids lie in the map, as found through one
    snapshot: grid g's are at addresses[start[slot[g]]:][:count[slot[g]]]. Held as arrays,
    not an array per grid: for the many grids of a broad question, faster than joining
    their arrays. Threads read while one adds: the arrays are replaced, never
    changed, and a grid gets its slot only after its addresses are in them."""

    def __init__(self):
        self.slot: dict[str, int] = {}
        self.start = self.count = self.addresses = np.zeros(0, np.int64)

    def add(self, grid_ids: list[str], per_grid: list[np.ndarray]) -> None:
        counts = np.fromiter(map(len, per_grid), np.int64, len(per_grid))
        self.addresses, self.start, self.count = (
            np.concatenate([self.addresses, *per_grid]),
            np.concatenate([self.start, len(self.addresses) + np.cumsum(counts) - counts]),
            np.concatenate([self.count, counts]))
        self.slot.update(zip(grid_ids, range(len(self.slot), len(self.slot) + len(grid_ids))))

    def of(self, grid_ids: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """(addresses, first) of these grids, as Snapshot.located; KeyError when one was
        not found yet."""
        slots = np.fromiter(map(self.slot.__getitem__, grid_ids), np.int64, len(grid_ids))
        counts = self.count[slots]
        first = np.zeros(len(slots) + 1, np.int64)
        np.cumsum(counts, out=first[1:])
        # Output j, of grid i, is that grid's segment j - first[i].
        at = np.repeat(self.start[slots] - first[:-1], counts) + np.arange(first[-1])
        return self.addresses[at], first


class EmbeddedStore(CellStore):
    kind = "embedded"

    def __init__(self, path: Path, scan_threads: int = 1):
        """path: the LMDB directory; scan_threads: threads one large scan may use."""
        super().__init__()
        self.scan_threads = scan_threads
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        self.env = lmdb.open(str(path), map_size=MAP_SIZE, max_dbs=4096, max_readers=512)
        # A killed process leaves its Snapshot's reader slot behind, which keeps LMDB from
        # reusing pages freed since: clear the slots of processes that are gone.
        self.env.reader_check()
        self._dbs: dict[str, object] = {}
        self._opened = 0  # database handles opened so far
        self._opening = threading.Lock()
        self.board = EpochBoard.open(path / "epochs")
        self._snapshot: Snapshot | None = None
        self._snapshot_lock = threading.Lock()

    def _db(self, name: str, family: str):
        key = f"{name}/{family}"
        db = self._dbs.get(key)
        if db is None:
            # LMDB allows one database open at a time per process; two threads opening
            # at once (a worker's first queries of a dataset) could hang the process.
            with self._opening:
                db = self._dbs.get(key)
                if db is None:
                    db = self.env.open_db(key.encode(), create=True)
                    self._dbs[key] = db
                    self._opened += 1
        return db

    def create_dataset(self, ds: Dataset) -> None:
        self._db(ds.name, "s")
        self._db(ds.name, "a")

    def drop_dataset(self, name: str) -> None:
        # Handles first: opening a database takes a write transaction of its own.
        dbs = [self._db(name, family) for family in ("s", "a")]
        with self._write() as txn:
            for db in dbs:
                txn.drop(db, delete=True)
        for family in ("s", "a"):
            self._dbs.pop(f"{name}/{family}", None)

    # -- segments of one grid prefix, inside a transaction ------------------------------

    @staticmethod
    def _segments(cursor, prefix: bytes) -> list[tuple[bytes, bytes]]:
        """(segment key, value) of every segment under this grid prefix (the cursor is
        moved there: one cursor may serve many grids)."""
        out = []
        if cursor.set_range(prefix):
            for key, value in cursor:
                if key[:-4] != prefix:
                    break
                out.append((key, value))
        return out

    @staticmethod
    def _rewrite(txn, prefix: bytes, stored, rows: dict[bytes, np.ndarray], ds: Dataset) -> None:
        """Replace a grid's segments by one holding `rows` (element ID -> row) of a dataset
        `ds`."""
        for key, _ in stored:
            txn.delete(key)
        if rows:
            eids = list(rows)
            txn.put(prefix + struct.pack(">I", 0), segments.pack(eids, np.array([rows[e] for e in eids]), ds))

    @staticmethod
    def _rows_of(stored) -> dict[bytes, np.ndarray]:
        return segments.rows_of(value for _, value in stored)

    @staticmethod
    def _in_range(cursor, start: bytes, stop: bytes):
        """(grid prefix, segment) of every segment whose grid has keys in [start, stop)."""
        # Segment keys are grid prefix + sequence number: a start inside a grid's rows
        # (prefix + element ID) must seek that grid's prefix, or its segments are skipped.
        if not cursor.set_range(grid_start(start)):
            return
        for skey, value in cursor:
            prefix = bytes(skey[:-4])
            if prefix >= stop:
                return
            yield prefix, value

    @contextmanager
    def _write(self, db=None):
        """A write transaction on db; once it has committed, this process's snapshot is
        stale, and retiring it now lets LMDB reuse the pages the write freed."""
        with self.env.begin(write=True, db=db) as txn:
            yield txn
        self._drop_snapshot()

    def _drop_snapshot(self) -> None:
        """Retire this process's Snapshot (it ends once its last scan is done); the next
        scan begins a new one."""
        with self._snapshot_lock:
            if self._snapshot is not None:
                self._snapshot.retire()
                self._snapshot = None

    # -- CellStore ----------------------------------------------------------------------

    def put_grids(self, ds, grids, stamps=None):
        self.round_trips.add()
        db = self._db(ds.name, "s")
        with self._write(db) as txn:  # one commit (and fsync) for all
            for prefix, eids, values in sorted(grids, key=lambda g: g[0]):
                self._append(txn, prefix, eids, np.ascontiguousarray(values, dtype="<i8"), ds)

    def _append(self, txn, prefix: bytes, eids, values: np.ndarray, ds: Dataset) -> None:
        """Add rows to a grid (eids: a sequence of bytes or an Arrow binary array): a
        segment of their own, unless the grid has too many segments or some element IDs
        are stored already (then one rewritten segment)."""
        eids = segments.element_ids(eids)
        present = self._segments(txn.cursor(), prefix)
        if present and (len(present) >= MAX_SEGMENTS or segments.holds_any((v for _, v in present), eids)):
            stored = self._rows_of(present)
            stored.update(zip(eids.to_pylist(), values))
            self._rewrite(txn, prefix, present, stored, ds)
            return
        eids, values = segments.last_of_each(eids, values)  # an element ID twice in one call: the last wins
        seq = struct.unpack(">I", present[-1][0][-4:])[0] + 1 if present else 0
        txn.put(prefix + struct.pack(">I", seq), segments.pack(eids, values, ds))

    def delete_rows(self, ds, keys, stamps=None):
        self.round_trips.add()
        db = self._db(ds.name, "s")
        by_prefix: dict[bytes, set[bytes]] = {}
        for k in keys:
            prefix, eid = split_key(k)
            by_prefix.setdefault(prefix, set()).add(eid)
        with self._write(db) as txn:
            for prefix, gone in by_prefix.items():
                present = self._segments(txn.cursor(), prefix)
                if present:
                    rows = self._rows_of(present)
                    self._rewrite(txn, prefix, present, {e: r for e, r in rows.items() if e not in gone}, ds)

    def rewrite_grids(self, ds, grids, stamps=None):
        self.round_trips.add()
        db = self._db(ds.name, "s")
        with self._write(db) as txn:  # one commit: readers see every grid before or after
            for prefix, eids, values in sorted(grids, key=lambda g: g[0]):
                for key, _ in self._segments(txn.cursor(), prefix):
                    txn.delete(key)
                if len(values):
                    txn.put(prefix + struct.pack(">I", 0), segments.pack(eids, np.asarray(values, np.int64), ds))

    def clear_grids(self, ds, grid_ids, stamps=None):
        self.round_trips.add()
        db = self._db(ds.name, "s")
        with self._write(db) as txn:
            for g in grid_ids:
                for key, _ in self._segments(txn.cursor(), grid_prefix(g)):
                    txn.delete(key)

    def existing_keys(self, ds, keys):
        self.round_trips.add()
        db = self._db(ds.name, "s")
        by_prefix: dict[bytes, list[bytes]] = {}
        for k in keys:
            by_prefix.setdefault(split_key(k)[0], []).append(k)
        out = set()
        with self.env.begin(db=db, buffers=True) as txn:
            for prefix, ks in by_prefix.items():
                stored = {e for _, v in self._segments(txn.cursor(), prefix) for e in segments.eids(v)}
                out.update(k for k in ks if split_key(k)[1] in stored)
        return out

    def read_grid(self, ds, grid_id):
        self.round_trips.add()
        with self.env.begin(db=self._db(ds.name, "s"), buffers=True) as txn:
            return segments.joined((v for _, v in self._segments(txn.cursor(), grid_prefix(grid_id))), len(ds.columns))

    def scan_rows(self, ds, start, stop, where: list[RangeCondition] = (), batch_rows=2000,
                  with_keys: bool = True) -> Iterator:
        self.round_trips.add()
        db = self._db(ds.name, "s")
        with self.env.begin(db=db, buffers=True) as txn:
            for prefix, value in self._in_range(txn.cursor(), start, stop):
                yield from segment_rows(prefix, value, start, stop, where, batch_rows, with_keys)

    def scan(self, ds, request: ScanRequest) -> ScanAnswer:
        self.round_trips.add()
        db = self._db(ds.name, "s")
        snapshot = self._take_snapshot()
        try:
            return scan_located(request, *snapshot.located(db, ds.name, request.grids), len(ds.columns),
                                self.scan_threads)
        finally:
            self._release(snapshot)

    def _take_snapshot(self) -> Snapshot:
        """The current Snapshot, begun anew if a write committed since the last began."""
        with self._snapshot_lock:
            held = self._snapshot
            if held is None or held.txnid != self.env.info()["last_txnid"] or held.dbs != self._opened:
                if held is not None:
                    held.retire()
                held = self._snapshot = Snapshot(self.env, self._opened)
            held.users += 1
            return held

    def _release(self, snapshot: Snapshot) -> None:
        with self._snapshot_lock:
            snapshot.users -= 1
            snapshot.end_if_unused()

    def get_aggregates(self, ds, grid_ids):
        self.round_trips.add()
        ncols = len(ds.columns)
        db = self._db(ds.name, "a")
        out = {}
        with self.env.begin(db=db) as txn:
            for gid in grid_ids:
                data = txn.get(gid.encode())
                if data is not None:
                    out[gid] = PartialAggregate.unpack(data, ncols)
        return out

    def get_aggregate_arrays(self, ds, grid_ids):
        self.round_trips.add()
        db = self._db(ds.name, "a")
        keys = [g.encode() for g in grid_ids]
        # In key order a lookup mostly finds its key on the page the last one ended on:
        # much faster than the tree's own order for a large tree.
        ordered = sorted(keys)
        found: dict[bytes, bytes] = {}
        region = _mapped_region(self.env.path())
        with self.env.begin(db=db) as txn, _without_readahead(region):
            for at in range(0, len(ordered), AGGREGATES_PER_READ):
                found.update(txn.cursor().getmulti(ordered[at : at + AGGREGATES_PER_READ]))
                _release(region)
        return AggArrays.unpack([found.get(k) for k in keys], len(ds.columns))

    def put_aggregates(self, ds, aggregates, stamps=None):
        self.round_trips.add()
        db = self._db(ds.name, "a")
        with self._write(db) as txn:
            for gid, agg in aggregates.items():
                txn.put(gid.encode(), agg.pack())

    def settle(self):
        # A writer killed while writing its commit's meta page leaves a commit that read
        # transactions do not see until the next write transaction begins: LMDB then
        # finds the dead owner of its write lock and moves to the newest meta page.
        with self.env.begin(write=True):
            pass

    def close(self):
        self._drop_snapshot()
        self.env.close()


def _release(region: tuple[int, int] | None) -> None:
    """Drop the pages of the LMDB file's mapping `region` (_mapped_region) from this
    process (the page cache keeps them: a later read maps them again). A tree's
    aggregates lie on pages spread over the file, and the kernel maps up to 16 pages
    around each one read: loading the tree of a large dataset left much of the file
    mapped, most of the process's RSS. None (not
    Linux): nothing is dropped."""
    _advise(region, MADV_DONTNEED)


@contextmanager
def _without_readahead(region: tuple[int, int] | None):
    """No readahead in the LMDB file's mapping `region` for the duration of the block.
    With the page cache cold, the kernel reads up to 32 pages around each page a fault
    needs, and a tree's aggregates lie on pages spread over the file, between segments:
    reading a large tree's aggregates cold took several times longer with readahead
    than without (the same either way with the cache warm). Scans in other threads meanwhile read their segments
    without readahead too."""
    _advise(region, MADV_RANDOM)
    try:
        yield
    finally:
        _advise(region, MADV_NORMAL)


def _advise(region: tuple[int, int] | None, advice: int) -> None:
    if region is not None:
        _LIBC.madvise(ctypes.c_void_p(region[0]), ctypes.c_size_t(region[1]), advice)


def _mapped_region(directory: str) -> tuple[int, int] | None:
    """(address, length) of this process's mapping of the LMDB file in `directory`, or
    None (no /proc/self/maps: not Linux)."""
    data = str(Path(directory).resolve() / "data.mdb")
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                if line.rstrip("\n").endswith(" " + data):
                    start, end = (int(x, 16) for x in line.split()[0].split("-"))
                    return start, end - start
    except OSError:
        return None
    return None
