"""DuckDB: what a user might pick instead of gridagg. The stored integers in one table
sorted by time (DuckDB's zone maps then skip most of a time window's row groups), one
file per dataset under <data dir>/peers/duckdb, queried in-process by plain SQL: box
predicates, only the statistics the aggregates ask (sums as HUGEINT: exact).

Serving processes open the file read-only (DuckDB lets many processes read one file).
Its knob: `threads`, DuckDB's worker threads per query (the bench measures 1 and 2).
"""

from __future__ import annotations

import threading
from pathlib import Path

from gridagg.model.schema import Dataset

from .common import Batches, SqlPeer

# DuckDB's load may take this share of the memory available when it starts. DuckDB's own
# default (80% of the machine's memory) is blind to the servers beside it: at 100M rows
# its sort reached 11.9 GB while HBase's JVM held 12 GB, and the kernel killed HBase.
# Within the limit DuckDB spills the sort to disk, as its docs advise on a shared machine.
LOAD_MEMORY_SHARE = 0.5


def path_of(settings, name: str) -> Path:
    return Path(settings.data_dir) / "peers" / "duckdb" / f"{name}.duckdb"


class DuckDBPeer(SqlPeer):
    kind = "duckdb"
    label = "DuckDB"
    KNOBS = {"threads": (2, 1)}

    def __init__(self, settings, threads: int = 2):
        super().__init__()
        self.settings = settings
        self.threads = int(threads)
        self._local = threading.local()
        self._connections: dict[str, object] = {}
        self._lock = threading.Lock()

    def connection(self, name: str):
        """This thread's read-only cursor on dataset `name`'s file."""
        import duckdb

        cursors = getattr(self._local, "cursors", None)
        if cursors is None:
            cursors = self._local.cursors = {}
        cur = cursors.get(name)
        if cur is None:
            with self._lock:
                con = self._connections.get(name)
                if con is None:
                    con = self._connections[name] = duckdb.connect(
                        str(path_of(self.settings, name)), read_only=True, config={"threads": self.threads})
            cur = cursors[name] = con.cursor()
        return cur

    def set_threads(self, n: int) -> None:
        self.threads = n
        with self._lock:
            for con in self._connections.values():
                con.execute(f"SET threads = {int(n)}")

    def create(self, ds: Dataset) -> None:
        self.drop(ds.name)
        path_of(self.settings, ds.name).parent.mkdir(parents=True, exist_ok=True)

    def drop(self, name: str) -> None:
        with self._lock:
            con = self._connections.pop(name, None)
        if con is not None:
            con.close()
        path_of(self.settings, name).unlink(missing_ok=True)
        Path(str(path_of(self.settings, name)) + ".wal").unlink(missing_ok=True)

    def load(self, ds: Dataset, batches: Batches) -> int:
        """Every batch into a staging table through Arrow, then the table sorted by time
        (or the first dimension), within LOAD_MEMORY_SHARE of the memory available."""
        import duckdb
        import pyarrow as pa

        names = [c.name for c in ds.columns]
        order = ds.dimensions[ds.time_axis if ds.time_axis is not None else 0].name
        n = 0
        limit = f"{int(available_memory() * LOAD_MEMORY_SHARE) >> 20}MB"
        with duckdb.connect(str(path_of(self.settings, ds.name)), config={"memory_limit": limit}) as con:
            con.execute("CREATE TABLE staging (id VARCHAR, " + ", ".join(f'"{c}" BIGINT' for c in names) + ")")
            for ids, rows in batches:
                batch = pa.table({"id": pa.array([i.decode() for i in ids], pa.string()),
                                  **{c: pa.array(rows[:, j]) for j, c in enumerate(names)}})
                con.register("batch", batch)
                con.execute("INSERT INTO staging SELECT * FROM batch")
                con.unregister("batch")
                n += len(rows)
            con.execute(f'CREATE TABLE rows AS SELECT * FROM staging ORDER BY "{order}"')
            con.execute("DROP TABLE staging")
            con.execute("CHECKPOINT")
        return n

    def table(self, ds: Dataset) -> str:
        return "rows"

    def fetch(self, ds: Dataset, stmt: str, params: list[int]) -> list[tuple]:
        return self.connection(ds.name).execute(stmt, params).fetchall()

    def prewarm(self, ds: Dataset) -> None:
        """The file into the OS page cache."""
        with open(path_of(self.settings, ds.name), "rb") as f:
            while f.read(1 << 24):
                pass

    def close(self) -> None:
        with self._lock:
            for con in self._connections.values():
                con.close()
            self._connections.clear()


def available_memory() -> int:
    """Bytes of memory the kernel says are available now (MemAvailable)."""
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    raise OSError("/proc/meminfo has no MemAvailable line")
