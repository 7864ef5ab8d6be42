"""A board of per-dataset change counters shared by every process on this machine.

Writers move a dataset's epoch on after committing a change to it; readers holding a
dataset's tree in memory (gridagg.tree) read the epoch, without a round trip, to learn
whether anything may have changed since they last confirmed their version with
PostgreSQL. The board is a small LMDB environment of its own: the embedded store's in
<its LMDB dir>/epochs, the HBase store's in <data dir>/epochs. Not a database of the
embedded store's environment: LMDB zeroes a slot for every database the environment may
open (4096 there) at each read transaction, 200 KB for each query's epoch. An epoch only
ever grows (it outlives a drop of its dataset), so it never repeats a value.
"""

from __future__ import annotations

import threading
import uuid
from pathlib import Path

import lmdb

# LMDB opens an environment once per process: every store of a process shares a board.
_OPEN: dict[Path, "EpochBoard"] = {}
_OPENING = threading.Lock()


class EpochBoard:
    """env: the LMDB environment holding the board (its database "epochs"). `id` names
    the board (random, made once): changes announced by writers sharing this board need
    no announcement here (gridagg.tree)."""

    ID_KEY = b"\x00board"  # never a dataset name

    def __init__(self, env: lmdb.Environment):
        self.env = env
        self.path = Path(env.path())  # the board's directory: what this host's processes share
        self.db = env.open_db(b"epochs", create=True)
        with self.env.begin(write=True, db=self.db) as txn:
            made = txn.get(self.ID_KEY)
            if made is None:
                made = uuid.uuid4().hex.encode()
                txn.put(self.ID_KEY, made)
        self.id = made.decode()

    @classmethod
    def open(cls, path: Path) -> "EpochBoard":
        """The board in directory `path` (created if needed), opened once per process."""
        path = Path(path).resolve()
        with _OPENING:
            board = _OPEN.get(path)
            if board is None:
                path.mkdir(parents=True, exist_ok=True)
                board = _OPEN[path] = cls(lmdb.open(str(path), map_size=1 << 26, max_dbs=2, max_readers=512))
            return board

    @staticmethod
    def _read(txn, name: str) -> int:
        data = txn.get(name.encode())
        return 0 if data is None else int.from_bytes(data, "big")

    def epoch(self, name: str) -> int:
        with self.env.begin(db=self.db) as txn:
            return self._read(txn, name)

    def advance(self, name: str) -> None:
        # Write transactions are serialised across processes: no increment is lost.
        with self.env.begin(write=True, db=self.db) as txn:
            txn.put(name.encode(), (self._read(txn, name) + 1).to_bytes(8, "big"))
