"""ClickHouse through chDB (ClickHouse's engine in-process, PyPI package `chdb`): the
stored integers in a MergeTree table ordered by time (its sparse primary index then
skips every granule outside a time window), each column under CODEC(T64, LZ4) (a
column's values span a small part of Int64: T64 drops the unused high bits, and a box
sum over 10M rows took 35-40% less time than under the default LZ4), merged into one
part after the load, queried
by plain SQL: box predicates, only the statistics the aggregates ask, sums widened to
Int128 (exact; ClickHouse's sum of Int64 wraps around).

Every peer dataset is a table of the database `peer` in one data directory,
<data dir>/peers/clickhouse. ClickHouse locks a data directory to one process, and chDB
opens one directory per process; so each process that reads serves from a directory of
its own whose files are hard links to the loaded ones (a part's files are never written
again: nothing is copied), made when it first queries and removed when its last peer
closes (or, after a crash, by the next reader). The ClickHousePeers of a process share
its one session (Session). Its knob: `threads`, ClickHouse's max_threads per query (the
bench measures 1 and 2).
"""

from __future__ import annotations

import os
import re
import shutil
import threading
import time
from pathlib import Path

from gridagg.model.schema import Dataset

from .common import Batches, SqlPeer

INSERT_ROWS = 1_000_000  # rows per INSERT: ClickHouse makes a part of each and merges them
MERGED_WAIT_SECONDS = 60  # how long a load waits for the parts a merge replaced to go
# min/max of no row NULL (as gridagg's), and so the columns of a LEFT JOIN's missing rows.
QUERY_SETTINGS = "aggregate_functions_null_for_empty = 1, join_use_nulls = 1"


def base_dir(settings) -> Path:
    return Path(settings.data_dir) / "peers" / "clickhouse"


def table_of(name: str) -> str:
    return f'peer."{name}"'


def serving_root(base: Path) -> Path:
    """Where the serving copies of base are, one per process."""
    return base.with_name(base.name + ".serving")


def serving_copy(base: Path) -> Path:
    """A data directory of this process's own, its files hard links to base's (the
    lock file left out); removes those of processes that are gone."""
    root = serving_root(base)
    root.mkdir(parents=True, exist_ok=True)
    for old in root.iterdir():
        if old.name.isdigit() and not Path(f"/proc/{old.name}").exists():
            shutil.rmtree(old, ignore_errors=True)
    dest = root / str(os.getpid())
    shutil.rmtree(dest, ignore_errors=True)
    shutil.copytree(base, dest, symlinks=True, copy_function=os.link, ignore=shutil.ignore_patterns("status", "tmp"))
    return dest


class Session:
    """The process's one chDB session, shared by its ClickHousePeers: on the loaded
    directory while one of them writes, else on the process's serving copy of it (made
    anew after a write, so reads see it); closed with the last peer."""

    def __init__(self):
        self.lock = threading.Lock()
        self.session = None
        self.path: Path | None = None
        self.writing = False
        self.users = 0

    def get(self, base: Path, writing: bool):
        from chdb import session

        with self.lock:
            home = base if writing else serving_root(base)  # where the wanted session's directory is
            if self.session is not None and (self.writing != writing or home not in (self.path, self.path.parent)):
                self._close()
            if self.session is None:
                base.mkdir(parents=True, exist_ok=True)
                self.path = base if writing else serving_copy(base)
                self.session = session.Session(str(self.path))
                self.writing = writing
            return self.session

    def join(self) -> None:
        with self.lock:
            self.users += 1

    def leave(self) -> None:
        with self.lock:
            self.users -= 1
            if not self.users:
                self._close()

    def _close(self) -> None:
        if self.session is not None:
            self.session.close()
            self.session = None
            if not self.writing:
                shutil.rmtree(self.path, ignore_errors=True)
            self.path = None


SESSION = Session()


def merge(s, name: str) -> None:
    """Table peer.<name>'s parts merged into one (OPTIMIZE FINAL) in chDB session s, and
    the parts the merge replaced gone (within MERGED_WAIT_SECONDS): serving copies link
    the live parts only."""
    s.query(f"OPTIMIZE TABLE {table_of(name)} FINAL")
    deadline = time.monotonic() + MERGED_WAIT_SECONDS
    while time.monotonic() < deadline and int(s.query(
            f"SELECT count() FROM system.parts WHERE database = 'peer' AND table = '{name}' AND NOT active",
            "TabSeparated").bytes()):
        time.sleep(0.5)


class ClickHousePeer(SqlPeer):
    kind = "clickhouse"
    label = "ClickHouse (chDB)"
    KNOBS = {"threads": (2, 1)}

    def __init__(self, settings, threads: int = 2):
        super().__init__()
        self.settings = settings
        self.threads = int(threads)
        self._open = True
        SESSION.join()

    def _session(self, writing: bool):
        return SESSION.get(base_dir(self.settings), writing)

    def create(self, ds: Dataset) -> None:
        s = self._session(writing=True)
        s.query("CREATE DATABASE IF NOT EXISTS peer")
        s.query(f"DROP TABLE IF EXISTS {table_of(ds.name)} SYNC")
        order = ds.dimensions[ds.time_axis if ds.time_axis is not None else 0].name
        cols = ", ".join(f'"{c.name}" Int64 CODEC(T64, LZ4)' for c in ds.columns)
        # Parts a merge replaced go within seconds, not minutes: serving copies link only live ones.
        s.query(f'CREATE TABLE {table_of(ds.name)} (id String, {cols}) ENGINE = MergeTree ORDER BY "{order}" '
                "SETTINGS old_parts_lifetime = 1, cleanup_delay_period = 1, max_cleanup_delay_period = 1")

    def drop(self, name: str) -> None:
        s = self._session(writing=True)
        s.query("CREATE DATABASE IF NOT EXISTS peer")
        s.query(f"DROP TABLE IF EXISTS {table_of(name)} SYNC")

    def load(self, ds: Dataset, batches: Batches) -> int:
        """Batches gathered into INSERTs of INSERT_ROWS rows (through Arrow), then the
        parts merged into one (OPTIMIZE FINAL) and the replaced ones gone."""
        import pyarrow as pa

        s = self._session(writing=True)
        names = [c.name for c in ds.columns]
        pending: list = []
        n = 0

        def flush():
            batch = pa.concat_tables(pending)  # noqa: F841 - chDB reads the local `batch` by name
            s.query(f"INSERT INTO {table_of(ds.name)} SELECT * FROM Python(batch)")
            pending.clear()

        for ids, rows in batches:
            pending.append(pa.table({"id": pa.array([i.decode() for i in ids], pa.string()),
                                     **{c: pa.array(rows[:, j]) for j, c in enumerate(names)}}))
            n += len(rows)
            if sum(len(t) for t in pending) >= INSERT_ROWS:
                flush()
        if pending:
            flush()
        merge(s, ds.name)
        return n

    def table(self, ds: Dataset) -> str:
        return table_of(ds.name)

    def placeholder(self, i: int) -> str:
        return f"{{p{i}}}"

    def sum_of(self, col: str) -> str:
        return f"sum(toInt128({col}))"

    def floor_div(self, expr: str, by: int) -> str:
        return f"intDiv({expr}, {by})"

    def numbers(self, n: int) -> str:
        return f"SELECT number AS b FROM numbers({n})"

    def fetch(self, ds: Dataset, stmt: str, params: list[int]) -> list[tuple]:
        """The parameters go in as integer literals: chDB's query parameters belong to
        the session, and two threads' queries would mix them up."""
        literal = re.sub(r"\{p(\d+)\}", lambda m: str(int(params[int(m.group(1))])), stmt)
        text = self._session(writing=False).query(
            f"{literal} SETTINGS max_threads = {self.threads}, {QUERY_SETTINGS}", "TabSeparated").bytes().decode()
        return [tuple(None if v == "\\N" else int(v) for v in line.split("\t")) for line in text.splitlines()]

    def prewarm(self, ds: Dataset) -> None:
        """The table's files into the OS page cache (ClickHouse reads through it)."""
        for path in sorted((base_dir(self.settings) / "data" / "peer" / ds.name).resolve().rglob("*")):
            if not path.is_file():
                continue
            with open(path, "rb") as f:
                while f.read(1 << 24):
                    pass

    def close(self) -> None:
        if self._open:
            self._open = False
            SESSION.leave()
