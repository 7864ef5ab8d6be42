"""The embedded store: the paper's layout in LMDB, an ordered key-value store in a file.

Two LMDB sub-databases per dataset: "<name>/r" maps row keys to the row's stored integers
(packed int64) and "<name>/a" maps grid IDs to packed partial aggregates. LMDB allows one
writer and many readers across processes, so API workers and ingest processes can share
it.
"""

from __future__ import annotations

import struct
from bisect import bisect_left
from itertools import islice
from pathlib import Path
from typing import Iterator

import lmdb
import numpy as np

from ..aggregate import PartialAggregate
from ..schema import Dataset
from .base import CellStore, RangeCondition

MAP_SIZE = 1 << 40  # address space only; the file grows as data arrives


def pack_aggregate(agg: PartialAggregate) -> bytes:
    ncols = len(agg.sums)
    mins = [0 if v is None else v for v in agg.mins]
    maxs = [0 if v is None else v for v in agg.maxs]
    sums = b"".join(s.to_bytes(16, "little", signed=True) for s in agg.sums)
    return struct.pack(f"<q{ncols}q{ncols}q", agg.count, *mins, *maxs) + sums


def unpack_aggregate(data: bytes, ncols: int) -> PartialAggregate:
    head = struct.calcsize(f"<q{ncols}q{ncols}q")
    vals = struct.unpack_from(f"<q{ncols}q{ncols}q", data)
    count = vals[0]
    sums = [int.from_bytes(data[head + 16 * i : head + 16 * (i + 1)], "little", signed=True) for i in range(ncols)]
    if count == 0:
        return PartialAggregate.empty(ncols)
    return PartialAggregate(count, sums, list(vals[1 : 1 + ncols]), list(vals[1 + ncols :]))


class EmbeddedStore(CellStore):
    kind = "embedded"

    def __init__(self, path: Path):
        super().__init__()
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        self.env = lmdb.open(str(path), map_size=MAP_SIZE, max_dbs=4096, max_readers=512)
        self._dbs: dict[str, object] = {}

    def _db(self, name: str, family: str):
        key = f"{name}/{family}"
        db = self._dbs.get(key)
        if db is None:
            db = self.env.open_db(key.encode(), create=True)
            self._dbs[key] = db
        return db

    def create_dataset(self, ds: Dataset) -> None:
        self._db(ds.name, "r")
        self._db(ds.name, "a")

    def drop_dataset(self, name: str) -> None:
        # Handles first: opening a database takes a write transaction of its own.
        dbs = [self._db(name, family) for family in ("r", "a")]
        with self.env.begin(write=True) as txn:
            for db in dbs:
                txn.drop(db, delete=True)
        for family in ("r", "a"):
            self._dbs.pop(f"{name}/{family}", None)

    def put_rows(self, ds, keys, values):
        self.round_trips.add()
        db = self._db(ds.name, "r")
        values = np.ascontiguousarray(values, dtype="<i8")
        with self.env.begin(write=True, db=db) as txn:
            for key, row in zip(keys, values):
                txn.put(key, row.tobytes())

    def delete_rows(self, ds, keys):
        self.round_trips.add()
        db = self._db(ds.name, "r")
        with self.env.begin(write=True, db=db) as txn:
            for key in keys:
                txn.delete(key)

    def existing_keys(self, ds, keys):
        self.round_trips.add()
        db = self._db(ds.name, "r")
        with self.env.begin(db=db) as txn:
            return {k for k in keys if txn.get(k) is not None}

    def scan_rows(self, ds, start, stop, where: list[RangeCondition] = (), batch_rows=2000) -> Iterator:
        self.round_trips.add()
        ncols = len(ds.columns)
        db = self._db(ds.name, "r")
        with self.env.begin(db=db) as txn:
            cursor = txn.cursor()
            if not cursor.set_range(start):
                return
            items = cursor.iternext(keys=True, values=True)
            # Pull growing chunks at C speed and cut the last one at `stop`, instead of
            # testing every key in Python; small grids read only a little past their end.
            size = min(256, batch_rows)
            while True:
                chunk = list(islice(items, size))
                if not chunk:
                    return
                last = chunk[-1][0] >= stop
                if last:
                    chunk = chunk[: bisect_left(chunk, (stop,))]
                if chunk:
                    yield _filtered([k for k, _ in chunk], [v for _, v in chunk], ncols, where)
                if last:
                    return
                size = min(size * 4, batch_rows)

    def get_aggregates(self, ds, grid_ids):
        self.round_trips.add()
        ncols = len(ds.columns)
        db = self._db(ds.name, "a")
        out = {}
        with self.env.begin(db=db) as txn:
            for gid in grid_ids:
                data = txn.get(gid.encode())
                if data is not None:
                    out[gid] = unpack_aggregate(data, ncols)
        return out

    def put_aggregates(self, ds, aggregates):
        self.round_trips.add()
        db = self._db(ds.name, "a")
        with self.env.begin(write=True, db=db) as txn:
            for gid, agg in aggregates.items():
                txn.put(gid.encode(), pack_aggregate(agg))

    def close(self):
        self.env.close()


def _filtered(keys, chunks, ncols, where):
    values = np.frombuffer(b"".join(chunks), dtype="<i8").reshape(len(keys), ncols)
    if not where:
        return keys, values
    mask = np.ones(len(keys), dtype=bool)
    for cond in where:
        col = values[:, cond.column]
        mask &= (col >= cond.lo) & (col <= cond.hi)
    idx = np.flatnonzero(mask)
    return [keys[i] for i in idx], values[idx]
