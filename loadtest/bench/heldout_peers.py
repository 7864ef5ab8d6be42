"""The held-out bench's peers at their best physical design, loaded from the archive by
the bench's own reading of it (heldout_sql.Space.select_archive), and asked its
questions as SQL (heldout_sql.statement):

- DuckDB: one table of the narrowest integer types that hold each column (time
  BIGINT), sorted by time (then position: a total order, so a seed samples the same
  rows every load), in its file under <data dir>/peers/duckdb; it is also the
  reference every answer is checked against, and what the families draw from;
- ClickHouse through chDB: the same types, each table design of CLICKHOUSE_DESIGNS
  loaded in turn and timed on a sample of the training stream; the fastest kept;
- PostgreSQL alone (optional): the same types, loaded in time order by COPY, then each
  index set of POSTGRES_DESIGNS built in turn and timed by EXPLAIN ANALYZE on the
  training sample; the fastest kept.

Each peer is asked in this process (Asker) and served by the bench's app
(heldout_app.py), which finds a peer dataset's space and tables in a small JSON file
(register, lookup).
"""

from __future__ import annotations

import json
import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from ..peers import clickhouse, duck, open_peer
from ..peers.postgres import table_name as pg_table
from .heldout_families import Question, Sample
from .heldout_sql import DIALECTS, POSTGRES, Space, answers, statement
from .log import log

DUCK_TABLE = "rows"
LABELS = {"duckdb": "DuckDB", "clickhouse": "ClickHouse (chDB)", "pg": "PostgreSQL alone"}
KNOBS = {"duckdb": {"threads": 2}, "clickhouse": {"threads": 2}, "pg": {"parallel": 2}}
CH_TYPES = {"SMALLINT": "Int16", "INTEGER": "Int32", "BIGINT": "Int64"}
# chDB's table designs: (ORDER BY, projection or ""), over the time {t} and lon/lat {x}, {y}.
CLICKHOUSE_DESIGNS = {
    "time": ("{t}", ""),
    "position, time": ("({x}, {y}, {t})", ""),
    "month, position, time": ("(intDiv({t}, 2592000), {x}, {y}, {t})", ""),
    "time, projection by position": ("{t}", "PROJECTION by_position (SELECT * ORDER BY ({x}, {y}, {t}))"),
}
# PostgreSQL's index sets: CREATE INDEX bodies over time {t}, lon/lat {x}, {y}
# and every other column {rest}.
POSTGRES_DESIGNS = {
    "brin(time)": ["USING brin ({t})"],
    "brin(time), btree(position, time) covering": ["USING brin ({t})", "({x}, {y}, {t}) INCLUDE ({rest})"],
    "btree(time) covering": ["({t}) INCLUDE ({x}, {y}, {rest})"],
}
TRIAL_RUNS = 3  # timed runs of each trial question (after one untimed), the median kept


@dataclass
class Asker:
    """A peer asked in this process: its kind and label, the table it answers from, and
    fetch(sql) -> rows."""

    kind: str
    label: str
    table: str
    fetch: Callable[[str], list[tuple]]
    close: Callable[[], None]

    def answer(self, space: Space, body: dict) -> list[dict]:
        """The stored-integer answers to a question's body (heldout_sql.answers)."""
        st = statement(space, body, self.table, DIALECTS[self.kind])
        return answers(st, self.fetch(st.sql))


def open_asker(settings, kind: str, name: str, table: str, knobs: dict | None = None) -> Asker:
    """Peer `kind`'s dataset `name` (table `table`) asked with its knobs (default KNOBS)."""
    peer = open_peer(kind, settings, **(KNOBS[kind] if knobs is None else knobs))
    if kind == "pg":
        def fetch(sql: str) -> list[tuple]:
            with peer.pool.connection() as conn:
                return conn.execute(sql).fetchall()
    else:
        ds = SimpleNamespace(name=name)

        def fetch(sql: str) -> list[tuple]:
            return peer.fetch(ds, sql, [])
    return Asker(kind, LABELS[kind], table, fetch, peer.close)


def clickhouse_table(name: str) -> str:
    return clickhouse.table_of(name)


def design_table(name: str, design: str) -> str:
    """chDB's table of one design of dataset `name`."""
    key = "".join(ch if ch.isalnum() else "_" for ch in design)
    return f"{name}__{key}"


# -- the register the served app reads ---------------------------------------------------


def register_path(settings, name: str) -> Path:
    return Path(settings.data_dir) / "peers" / "heldout" / f"{name}.json"


def register(settings, name: str, config: Path, tables_by_kind: dict[str, str]) -> None:
    """Say where peer dataset `name` is: its ingest config (the space) and each kind's table."""
    path = register_path(settings, name)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"config": str(Path(config).resolve()), "tables": tables_by_kind}))


def lookup(settings, name: str) -> tuple[Space, dict[str, str]]:
    """The space and the tables by kind of peer dataset `name` (KeyError when unknown)."""
    try:
        got = json.loads(register_path(settings, name).read_text())
    except FileNotFoundError:
        raise KeyError(name) from None
    return Space.from_toml(Path(got["config"])), got["tables"]


# -- DuckDB: the reference ----------------------------------------------------------------


def load_duckdb(settings, space: Space, archive: Path, name: str) -> dict:
    """The archive into DuckDB's table (sorted by time, then position), within
    duck.LOAD_MEMORY_SHARE of the memory available; returns the load's figures."""
    import duckdb

    path = duck.path_of(settings, name)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.unlink(missing_ok=True)
    Path(f"{path}.wal").unlink(missing_ok=True)
    lon, lat = space.lonlat
    source = f"read_parquet('{Path(archive).resolve()}/**/*.parquet')"
    limit = f"{int(duck.available_memory() * duck.LOAD_MEMORY_SHARE) >> 20}MB"
    t0 = time.perf_counter()
    with duckdb.connect(str(path), config={"memory_limit": limit}) as con:
        con.execute(f'CREATE TABLE {DUCK_TABLE} AS {space.select_archive(source)} '
                    f'ORDER BY "{space.time.name}", "{lon.name}", "{lat.name}"')
        con.execute("CHECKPOINT")
        rows = con.execute(f"SELECT count(*) FROM {DUCK_TABLE}").fetchone()[0]
        archived = con.execute(f"SELECT count(*) FROM {source}").fetchone()[0]
    seconds = time.perf_counter() - t0
    types = ", ".join(f"{c.name} {c.sql_type}" for c in space.columns)
    return {"system": LABELS["duckdb"], "kind": "duckdb", "rows": rows, "archived": archived, "seconds": seconds,
            "bytes": path.stat().st_size, "design": f"{types}; sorted by time, then position"}


def sample(settings, space: Space, name: str, seed: int, rows: int) -> Sample:
    """What the families draw from (heldout_families.Sample): `rows` rows drawn by
    `seed` (DuckDB's reservoir sample on one thread, repeatable), every position, and
    each column's extremes."""
    import duckdb

    lon, lat = space.lonlat
    with duckdb.connect(str(duck.path_of(settings, name)), read_only=True, config={"threads": 1}) as con:
        names = ", ".join(f'"{c.name}"' for c in space.columns)
        drawn = np.array(con.execute(f"SELECT {names} FROM (SELECT * FROM {DUCK_TABLE} USING SAMPLE "
                                     f"reservoir({int(rows)} ROWS) REPEATABLE ({int(seed)})) ORDER BY {names}")
                         .fetchall(), dtype=np.int64).reshape(-1, len(space.columns))
        positions = np.array(con.execute(f'SELECT DISTINCT "{lon.name}", "{lat.name}" FROM {DUCK_TABLE} ORDER BY 1, 2')
                             .fetchall(), dtype=np.int64).reshape(-1, 2)
        ends = con.execute("SELECT " + ", ".join(f'min("{c.name}"), max("{c.name}")' for c in space.columns)
                           + f" FROM {DUCK_TABLE}").fetchone()
    lows = {c.name: int(ends[2 * i]) for i, c in enumerate(space.columns)}
    highs = {c.name: int(ends[2 * i + 1]) for i, c in enumerate(space.columns)}
    return Sample(space, drawn, positions, lows, highs)


def export(settings, name: str, workdir: Path, formats: list[str]) -> dict[str, Path]:
    """DuckDB's table (stored integers, in its order) in each of `formats` ("parquet",
    "csv"), for the other peers to load."""
    import duckdb

    out = {fmt: workdir / f"{name}.{fmt}" for fmt in formats}
    with duckdb.connect(str(duck.path_of(settings, name)), read_only=True) as con:
        for fmt, path in out.items():
            con.execute(f"COPY {DUCK_TABLE} TO '{path}' (FORMAT {fmt}{', HEADER false' if fmt == 'csv' else ''})")
    return out


def trial(asker: Asker, space: Space, questions: list[Question]) -> float:
    """The geometric mean over `questions` of each one's median ms (TRIAL_RUNS runs
    after one untimed)."""
    logs = []
    for q in questions:
        asker.answer(space, q.body)
        runs = []
        for _ in range(TRIAL_RUNS):
            t0 = time.perf_counter()
            asker.answer(space, q.body)
            runs.append((time.perf_counter() - t0) * 1000)
        logs.append(math.log(max(statistics.median(runs), 1e-3)))
    return math.exp(statistics.fmean(logs)) if logs else 0.0


# -- ClickHouse through chDB --------------------------------------------------------------


def load_clickhouse(settings, space: Space, name: str, parquet: Path, questions: list[Question],
                    designs: list[str]) -> dict:
    """Each design of `designs` (CLICKHOUSE_DESIGNS) loaded from the exported Parquet and
    timed on `questions`; the fastest kept, the others dropped. Returns the kept one's
    load figures (its load only) and what was tried."""
    from .scale import disk_bytes

    t, (x, y) = f'"{space.time.name}"', (f'"{c.name}"' for c in space.lonlat)
    cols = ", ".join(f'"{c.name}" {CH_TYPES[c.sql_type]} CODEC(T64, LZ4)' for c in space.columns)
    tried = []
    for design in designs:
        order, projection = (part.format(t=t, x=x, y=y) for part in CLICKHOUSE_DESIGNS[design])
        table = design_table(name, design)
        s = clickhouse.SESSION.get(clickhouse.base_dir(settings), writing=True)
        s.query("CREATE DATABASE IF NOT EXISTS peer")
        s.query(f"DROP TABLE IF EXISTS {clickhouse_table(table)} SYNC")
        t0 = time.perf_counter()
        s.query(f"CREATE TABLE {clickhouse_table(table)} ({cols}{', ' + projection if projection else ''}) "
                f"ENGINE = MergeTree ORDER BY {order} "
                "SETTINGS old_parts_lifetime = 1, cleanup_delay_period = 1, max_cleanup_delay_period = 1")
        s.query(f"INSERT INTO {clickhouse_table(table)} SELECT * FROM file('{parquet}', Parquet)")
        clickhouse.merge(s, table)
        seconds = time.perf_counter() - t0
        rows = int(s.query(f"SELECT count() FROM {clickhouse_table(table)}", "TabSeparated").bytes())
        asker = open_asker(settings, "clickhouse", name, clickhouse_table(table))
        try:
            ms = trial(asker, space, questions)
        finally:
            asker.close()
        size = disk_bytes((clickhouse.base_dir(settings) / "data" / "peer" / table).resolve())
        tried.append({"design": design, "table": table, "rows": rows, "seconds": seconds, "bytes": size,
                      "trial_ms": ms})
        log(f"  chDB, ORDER BY {order}{' + ' + projection if projection else ''}: {seconds:.1f} s, "
            f"trial {ms:.2f} ms")
    best = min(tried, key=lambda d: d["trial_ms"])
    s = clickhouse.SESSION.get(clickhouse.base_dir(settings), writing=True)
    for d in tried:
        if d is not best:
            s.query(f"DROP TABLE IF EXISTS {clickhouse_table(d['table'])} SYNC")
    return {"system": LABELS["clickhouse"], "kind": "clickhouse", "rows": best["rows"], "seconds": best["seconds"],
            "bytes": best["bytes"], "design": best["design"], "table": clickhouse_table(best["table"]), "tried": tried}


# -- PostgreSQL alone ----------------------------------------------------------------------


def load_postgres(settings, space: Space, name: str, csv: Path, questions: list[Question],
                  designs: list[str]) -> dict:
    """The exported CSV into PostgreSQL's table (time order) by COPY, VACUUM ANALYZE,
    then each index set of `designs` (POSTGRES_DESIGNS) timed by EXPLAIN ANALYZE on
    `questions`; the fastest kept. Load seconds include building the kept indexes."""
    from psycopg import sql as pgsql

    peer = open_peer("pg", settings, **KNOBS["pg"])
    table = pg_table(name)
    ident = pgsql.Identifier(table)
    lon, lat = space.lonlat
    names = {"t": f'"{space.time.name}"', "x": f'"{lon.name}"', "y": f'"{lat.name}"',
             "rest": ", ".join(f'"{c.name}"' for c in space.columns if c not in (space.time, lon, lat))}
    try:
        with peer.pool.connection() as conn:
            conn.execute(pgsql.SQL("DROP TABLE IF EXISTS {}").format(ident))
            conn.execute(pgsql.SQL("CREATE TABLE {} ({})").format(ident, pgsql.SQL(", ".join(
                f'"{c.name}" {c.sql_type} NOT NULL' for c in space.columns))))
            t0 = time.perf_counter()
            with (conn.cursor() as cur, cur.copy(pgsql.SQL("COPY {} FROM STDIN (FORMAT csv)").format(ident)) as copy,
                  open(csv, "rb") as f):
                while chunk := f.read(1 << 22):
                    copy.write(chunk)
            conn.execute(pgsql.SQL("VACUUM ANALYZE {}").format(ident))
            loaded = time.perf_counter() - t0
            rows = conn.execute(pgsql.SQL("SELECT count(*) FROM {}").format(ident)).fetchone()[0]
        tried = []
        for design in designs:
            built = _build_indexes(peer, table, design, names)
            ms = _explained_ms(peer, space, f'"{table}"', questions)
            tried.append({"design": design, "build_seconds": built, "trial_ms": ms})
            log(f"  PostgreSQL, {design}: built in {built:.1f} s, trial {ms:.2f} ms")
        best = min(tried, key=lambda d: d["trial_ms"])
        built = best["build_seconds"] if best is tried[-1] else _build_indexes(peer, table, best["design"], names)
        with peer.pool.connection() as conn:
            size = conn.execute("SELECT pg_total_relation_size(%s)", (table,)).fetchone()[0]
    finally:
        peer.close()
    return {"system": LABELS["pg"], "kind": "pg", "rows": rows, "seconds": loaded + built, "bytes": size,
            "design": f"loaded in time order; {best['design']}", "table": f'"{table}"', "tried": tried}


def _index_names(table: str) -> list[str]:
    return [f"{table}_i{i}" for i in range(max(len(v) for v in POSTGRES_DESIGNS.values()))]


def _build_indexes(peer, table: str, design: str, names: dict) -> float:
    """The design's indexes on `table`, the others dropped; returns the seconds taken."""
    with peer.pool.connection() as conn:
        for index in _index_names(table):
            conn.execute(f'DROP INDEX IF EXISTS "{index}"')
        t0 = time.perf_counter()
        for index, body in zip(_index_names(table), POSTGRES_DESIGNS[design]):
            conn.execute(f'CREATE INDEX "{index}" ON "{table}" {body.format(**names)}')
        conn.execute(f'ANALYZE "{table}"')
        return time.perf_counter() - t0


def _explained_ms(peer, space: Space, table: str, questions: list[Question]) -> float:
    """The geometric mean of each question's execution ms by EXPLAIN ANALYZE (the last of
    TRIAL_RUNS runs: warm)."""
    logs = []
    with peer.pool.connection() as conn:
        for q in questions:
            st = statement(space, q.body, table, POSTGRES)
            for _ in range(TRIAL_RUNS):
                plan = conn.execute(f"EXPLAIN (ANALYZE, FORMAT JSON) {st.sql}").fetchone()[0][0]
            logs.append(math.log(max(plan["Execution Time"], 1e-3)))
    return math.exp(statistics.fmean(logs)) if logs else 0.0


def prewarm(settings, kind: str, name: str, table: str) -> None:
    """The peer's data into the caches it answers from."""
    peer = open_peer(kind, settings)
    try:
        if kind == "pg":
            bare = table.strip('"')
            with peer.pool.connection() as conn:
                conn.execute("CREATE EXTENSION IF NOT EXISTS pg_prewarm")
                for rel in [bare, *_index_names(bare)]:
                    if conn.execute("SELECT to_regclass(%s)", (f'"{rel}"',)).fetchone()[0]:
                        conn.execute("SELECT pg_prewarm(%s, 'buffer')", (f'"{rel}"',))
        elif kind == "duckdb":
            peer.prewarm(SimpleNamespace(name=name))
        else:
            bare = table.split(".", 1)[1].strip('"')
            peer.prewarm(SimpleNamespace(name=bare))
    finally:
        peer.close()


def drop(settings, kind: str, name: str, table: str) -> None:
    """Remove peer `kind`'s copy of dataset `name`."""
    peer = open_peer(kind, settings)
    try:
        if kind == "duckdb":
            peer.drop(name)
        elif kind == "clickhouse":
            peer.drop(table.split(".", 1)[1].strip('"'))
        else:
            peer.drop(name)
    finally:
        peer.close()
    register_path(settings, name).unlink(missing_ok=True)

