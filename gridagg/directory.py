"""The grid directory in PostgreSQL: dataset definitions, the leaf grids' boxes, and the
log of what changed.

An n-dimensional grid is stored as ceil(n/2) `box` columns, dimensions 2j and 2j+1 in
column c<j> (x and y); when n is odd the last box is degenerate in y (always [0, 0]).
Finding the leaf of each of many points is one SQL round trip on the composite GiST
index (&& and <@).

Queries do not ask PostgreSQL for leaves: each serving process holds the whole tree in
memory (gridagg.tree) and keeps it current from here. Every committed change of a
dataset takes a new version, in the same transaction logs the leaves it changed
(gridagg_changes), and then moves the dataset's epoch on the store's board
(gridagg.epochs) so local readers learn of it without a round trip; readers on other
machines hear of it through NOTIFY (`listen`). `changes_since` tells a reader, in one
round trip, everything that changed after its own version.
"""

from __future__ import annotations

import json
import threading
import time
from contextlib import contextmanager
from importlib import resources

import numpy as np
import psycopg
from psycopg import sql
from psycopg_pool import ConnectionPool

from .errors import DatasetExists, StoreUnavailable, UnknownDataset
from .grid import Box, Grid
from .schema import Dataset
from .stamps import SPAN, WriteStamps
from .trips import TripCounter


def _box_columns(ndim: int) -> list[str]:
    return [f"c{j}" for j in range((ndim + 1) // 2)]


def box_literals(box: Box) -> list[str]:
    """PostgreSQL box literals for an n-dimensional box (pairs of dimensions)."""
    out = []
    for j in range(0, len(box), 2):
        (xlo, xhi) = box[j]
        (ylo, yhi) = box[j + 1] if j + 1 < len(box) else (0, 0)
        out.append(f"({xhi},{yhi}),({xlo},{ylo})")
    return out


def _parse_box(text: str) -> tuple[tuple[int, int], tuple[int, int]]:
    # PostgreSQL prints boxes as "(xhi,yhi),(xlo,ylo)".
    nums = [int(float(v)) for v in text.replace("(", "").replace(")", "").split(",")]
    xhi, yhi, xlo, ylo = nums
    return (xlo, xhi), (ylo, yhi)


def parse_boxes(texts: list[str], ndim: int) -> Box:
    dims: list[tuple[int, int]] = []
    for t in texts:
        dims.extend(_parse_box(t))
    return tuple(dims[:ndim])


# The NOTIFY channel every change of a dataset is announced on (payload: its name).
CHANNEL = "gridagg_changes"

# How long the change log keeps an entry. A process that has not looked at a dataset for
# longer reloads its tree instead of catching up.
CHANGE_LOG_SECONDS = 600
# A writer waiting for the writer lock looks at the store's health this often.
LOCK_STEP_SECONDS = 1.0


def check_pool(pool: ConnectionPool) -> None:
    """Test a pool's idle connections and replace the broken ones (after a failure)."""
    try:
        pool.check()
    except Exception:  # best effort: the server may still be down
        pass


class GridDirectory:
    """Dataset definitions and grid boxes in PostgreSQL.

    url: a PostgreSQL connection URL. Connections are pooled; every statement runs in
    autocommit unless grouped in a transaction here.
    """

    def __init__(self, url: str, max_connections: int = 8):
        self.url = url
        # One connection first: a server that is down is reported at once, not after the
        # pool's 15 s of retries and a warning for each.
        try:
            psycopg.connect(url, connect_timeout=5).close()
        except psycopg.OperationalError as exc:
            reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise StoreUnavailable(f"PostgreSQL at {url} is unreachable: {reason}") from exc
        self.pool = ConnectionPool(
            url,
            min_size=1,
            max_size=max_connections,
            kwargs={"autocommit": True},
            open=False,
        )
        try:
            self.pool.open(wait=True, timeout=15)
        except Exception as exc:  # the pool raises its own timeout type
            raise StoreUnavailable(f"PostgreSQL at {url} is unreachable: {exc}") from exc
        self.round_trips = TripCounter()
        # The board whose epochs this directory moves on after each change (set by
        # GridEngine from its store; None: no board).
        self.board = None
        self._listener: threading.Thread | None = None
        self._stop_listening = threading.Event()
        self.listening = threading.Event()
        with self.connection() as conn:
            conn.execute(resources.files("gridagg_sql").joinpath("catalog.sql").read_text())

    @contextmanager
    def connection(self):
        try:
            # Short: while PostgreSQL is down, callers should hear so quickly.
            with self.pool.connection(timeout=5) as conn:
                yield conn
        except psycopg.OperationalError as exc:
            # Connections are not tested on every checkout (a round trip per query);
            # after a failure, the idle ones are tested and broken ones replaced.
            check_pool(self.pool)
            raise StoreUnavailable(f"PostgreSQL is unreachable: {exc}") from exc

    def close(self) -> None:
        self._stop_listening.set()
        self.pool.close()

    def listen(self, on_change) -> None:
        """Call on_change(announcement) whenever a process commits a change of a dataset
        ("<dataset> <board id of the writer>"), and on_change(None) when changes may have
        been missed (listening began, or the connection was lost): PostgreSQL's NOTIFY, on
        a connection and thread of their own, reconnecting until close(). `listening` is
        set once the first LISTEN stands. This is how a process on another machine, with
        a board of its own, learns of a change within milliseconds."""
        if self._listener is not None:
            return
        self._listener = threading.Thread(target=self._listen, args=(on_change,), name="gridagg-listen",
                                          daemon=True)
        self._listener.start()

    def _listen(self, on_change) -> None:
        while not self._stop_listening.is_set():
            try:
                with psycopg.connect(self.url, autocommit=True, connect_timeout=5) as conn:
                    conn.execute(f"LISTEN {CHANNEL}")
                    on_change(None)
                    self.listening.set()
                    while not self._stop_listening.is_set():
                        for note in conn.notifies(timeout=1.0):
                            on_change(note.payload)
            except Exception:  # noqa: BLE001 - the server went away: try again shortly
                on_change(None)
                self._stop_listening.wait(1.0)

    # -- datasets ---------------------------------------------------------------------

    @staticmethod
    def table(name: str) -> sql.Identifier:
        return sql.Identifier(f"grids_{name}")

    def create_dataset(self, ds: Dataset, leaves: list[Grid]) -> None:
        """Record the definition and create the grid table holding these leaves."""
        cols = _box_columns(ds.ndim)
        ddl = resources.files("gridagg_sql").joinpath("grid_table.sql").read_text()
        ddl = sql.SQL(ddl).format(
            table=self.table(ds.name),
            box_columns=sql.SQL(", ").join(sql.SQL("{} box NOT NULL").format(sql.Identifier(c)) for c in cols),
            index=sql.Identifier(f"grids_{ds.name}_boxes"),
            index_columns=sql.SQL(", ").join(map(sql.Identifier, cols)),
            version_index=sql.Identifier(f"grids_{ds.name}_version"),
        )
        with self.connection() as conn, conn.transaction():
            try:
                conn.execute(
                    "INSERT INTO gridagg_datasets (name, definition, leaf_count) VALUES (%s, %s, %s)",
                    (ds.name, json.dumps(ds.to_json()), len(leaves)),
                )
            except psycopg.errors.UniqueViolation:
                raise DatasetExists(ds.name) from None
            conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(self.table(ds.name)))
            conn.execute(ddl)
            version = conn.execute("SELECT version FROM gridagg_datasets WHERE name = %s", (ds.name,)).fetchone()[0]
            self._insert_leaves(conn, ds, leaves, version)
        self._changed(ds.name)

    def drop_dataset(self, name: str) -> None:
        with self.connection() as conn, conn.transaction():
            conn.execute("DELETE FROM gridagg_datasets WHERE name = %s", (name,))
            conn.execute("DELETE FROM gridagg_retired WHERE dataset = %s", (name,))
            conn.execute("DELETE FROM gridagg_intents WHERE dataset = %s", (name,))
            conn.execute("DELETE FROM gridagg_changes WHERE dataset = %s", (name,))
            conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(self.table(name)))
        self._changed(name)

    def _changed(self, name: str) -> None:
        """After a change of the dataset is committed: move its epoch on."""
        if self.board is not None:
            self.board.advance(name)

    def dataset(self, name: str) -> Dataset:
        with self.connection() as conn:
            row = conn.execute("SELECT definition FROM gridagg_datasets WHERE name = %s", (name,)).fetchone()
        if row is None:
            raise UnknownDataset(name)
        return Dataset.from_json(row[0])

    def datasets(self) -> list[Dataset]:
        with self.connection() as conn:
            rows = conn.execute("SELECT definition FROM gridagg_datasets ORDER BY name").fetchall()
        return [Dataset.from_json(r[0]) for r in rows]

    def leaf_count(self, name: str) -> int:
        with self.connection() as conn:
            row = conn.execute("SELECT leaf_count FROM gridagg_datasets WHERE name = %s", (name,)).fetchone()
        if row is None:
            raise UnknownDataset(name)
        return row[0]

    # -- grids ------------------------------------------------------------------------

    def _insert_leaves(self, conn, ds: Dataset, leaves: list[Grid], version: int) -> None:
        cols = _box_columns(ds.ndim)
        stmt = sql.SQL("INSERT INTO {} ({}, grid_id, next_dim, version) VALUES ({}, %s, %s, %s)").format(
            self.table(ds.name),
            sql.SQL(", ").join(map(sql.Identifier, cols)),
            sql.SQL(", ").join(sql.SQL("%s::box") for _ in cols),
        )
        with conn.cursor() as cur:
            cur.executemany(stmt, [(*box_literals(g.box), g.grid_id, g.next_axis, version) for g in leaves])

    def leaves(self, ds: Dataset) -> list[Grid]:
        """Every leaf grid with its box, in grid-ID order."""
        cols = _box_columns(ds.ndim)
        stmt = sql.SQL("SELECT grid_id, next_dim, {} FROM {} ORDER BY grid_id").format(
            sql.SQL(", ").join(sql.SQL("{}::text").format(sql.Identifier(c)) for c in cols),
            self.table(ds.name),
        )
        with self.connection() as conn:
            rows = conn.execute(stmt).fetchall()
        return [Grid(r[0], parse_boxes(r[2:], ds.ndim), r[1]) for r in rows]

    def grid(self, ds: Dataset, grid_id: str) -> Grid | None:
        cols = _box_columns(ds.ndim)
        stmt = sql.SQL("SELECT grid_id, next_dim, {} FROM {} WHERE grid_id = %s").format(
            sql.SQL(", ").join(sql.SQL("{}::text").format(sql.Identifier(c)) for c in cols),
            self.table(ds.name),
        )
        with self.connection() as conn:
            r = conn.execute(stmt, (grid_id,)).fetchone()
        return None if r is None else Grid(r[0], parse_boxes(r[2:], ds.ndim), r[1])

    def locate(self, ds: Dataset, points: np.ndarray) -> list[str]:
        """The leaf grid ID holding each point (rows of stored dimension values).

        One round trip: the points travel as arrays of degenerate boxes and are joined to
        the grid table with <@ on the GiST index."""
        cols = _box_columns(ds.ndim)
        n = len(points)
        per_col: list[list[str]] = [[] for _ in cols]
        for p in points.tolist():
            for j, lit in enumerate(box_literals(tuple((v, v) for v in p))):
                per_col[j].append(lit)
        aliases = [sql.Identifier(f"p{j}") for j in range(len(cols))]
        stmt = sql.SQL(
            "SELECT p.i, g.grid_id FROM unnest(%s::int[], {arrays}) AS p(i, {aliases}) "
            "JOIN {table} g ON {conds}"
        ).format(
            arrays=sql.SQL(", ").join(sql.SQL("%s::text[]::box[]") for _ in cols),
            aliases=sql.SQL(", ").join(aliases),
            table=self.table(ds.name),
            conds=sql.SQL(" AND ").join(
                sql.SQL("p.{} <@ g.{}").format(a, sql.Identifier(c)) for a, c in zip(aliases, cols)
            ),
        )
        with self.connection() as conn:
            self.round_trips.add()
            rows = conn.execute(stmt, (list(range(n)), *per_col)).fetchall()
        out: list[str | None] = [None] * n
        for i, gid in rows:
            out[i] = gid
        if None in out:
            raise RuntimeError(f"grid directory of {ds.name} does not cover point {points[out.index(None)]}")
        return out  # type: ignore[return-value]

    def _corners(self, ds: Dataset) -> sql.Composable:
        """The leaves' box corners as numbers, lo and hi of each dimension in order
        (xlo, xhi, ylo, yhi per box column): no text to parse."""
        return sql.SQL(", ").join(
            sql.SQL("(g.{c}[1])[0], (g.{c}[0])[0], (g.{c}[1])[1], (g.{c}[0])[1]").format(c=sql.Identifier(c))
            for c in _box_columns(ds.ndim))

    def _leaf_rows(self, ds: Dataset, rows) -> list[tuple]:
        """(grid_id, next_dim, lo_0, hi_0, ...) per leaf, from rows of grid_id, next_dim
        and the corners (the last dimension of an odd count dropped)."""
        n = 2 + 2 * ds.ndim
        return [tuple(r[:2]) + tuple(int(v) for v in r[2:n]) for r in rows]

    def load_tree(self, ds: Dataset) -> tuple[int, object, list[tuple]]:
        """(version, incarnation, leaves) of a dataset in one statement (one snapshot):
        what gridagg.tree.GridTree is built from."""
        stmt = sql.SQL(
            "SELECT d.version, d.created_at, g.grid_id, g.next_dim, {corners} FROM gridagg_datasets d "
            "LEFT JOIN {table} g ON true WHERE d.name = %s"
        ).format(corners=self._corners(ds), table=self.table(ds.name))
        with self.connection() as conn:
            self.round_trips.add()
            try:
                rows = conn.execute(stmt, (ds.name,)).fetchall()
            except psycopg.errors.UndefinedTable:  # dropped meanwhile
                raise UnknownDataset(ds.name) from None
        if not rows:
            raise UnknownDataset(ds.name)
        return rows[0][0], rows[0][1], self._leaf_rows(ds, [r[2:] for r in rows if r[2] is not None])

    def changes_since(self, ds: Dataset, version: int):
        """What changed in the dataset after `version` (gridagg.tree.Changes), in one
        round trip."""
        from .tree import Changes

        stmt = sql.SQL(
            "SELECT d.version, d.created_at, d.pruned <= %(v)s, "
            "(SELECT CASE WHEN bool_or(c.grids IS NULL) THEN NULL ELSE "
            "        coalesce(array_agg(DISTINCT x), '{{}}') END "
            "   FROM gridagg_changes c LEFT JOIN LATERAL unnest(c.grids) x ON true "
            "  WHERE c.dataset = d.name AND c.version > %(v)s), "
            "(SELECT json_agg(json_build_array(g.grid_id, g.next_dim, {corners})) "
            "   FROM {table} g WHERE g.version > %(v)s) "
            "FROM gridagg_datasets d WHERE d.name = %(name)s"
        ).format(corners=self._corners(ds), table=self.table(ds.name))
        with self.connection() as conn:
            self.round_trips.add()
            try:
                row = conn.execute(stmt, {"v": version, "name": ds.name}).fetchone()
            except psycopg.errors.UndefinedTable:  # dropped meanwhile
                raise UnknownDataset(ds.name) from None
        if row is None:
            raise UnknownDataset(ds.name)
        current, incarnation, complete, touched, leaves = row
        return Changes(current, incarnation, bool(complete), self._leaf_rows(ds, leaves or []),
                       None if touched is None and current != version else list(touched or []))

    def _log(self, conn, ds: Dataset, grids: list[str] | None) -> int:
        """In the caller's transaction: take a new version for the dataset and log that
        these leaves changed (None: possibly all of them); returns the version."""
        version = conn.execute(
            "UPDATE gridagg_datasets SET version = nextval('gridagg_directory_versions') WHERE name = %s "
            "RETURNING version", (ds.name,)).fetchone()
        if version is None:
            raise UnknownDataset(ds.name)
        conn.execute("INSERT INTO gridagg_changes (dataset, version, grids) VALUES (%s, %s, %s)",
                     (ds.name, version[0], grids))
        # Sent at commit: the dataset, and the board this writer moves (gridagg.tree).
        conn.execute("SELECT pg_notify(%s, %s)", (CHANNEL, f"{ds.name} {self.board.id if self.board else ''}"))
        return version[0]

    def record_change(self, ds: Dataset, grids: list[str] | None) -> None:
        """Log that the rows (and aggregates) of these leaves changed; None: any leaf
        may have (a bulk load, a repair). Readers re-read what they hold of them."""
        with self.connection() as conn, conn.transaction():
            self.round_trips.add()
            self._log(conn, ds, grids)
        self._changed(ds.name)

    def prune_changes(self, name: str) -> None:
        """Forget log entries older than CHANGE_LOG_SECONDS."""
        with self.connection() as conn:
            self.round_trips.add()
            conn.execute(
                "WITH gone AS (DELETE FROM gridagg_changes WHERE dataset = %(n)s "
                "  AND at < clock_timestamp() - make_interval(secs => %(s)s) RETURNING version) "
                "UPDATE gridagg_datasets SET pruned = greatest(pruned, (SELECT max(version) FROM gone)) "
                "WHERE name = %(n)s AND EXISTS (SELECT 1 FROM gone)",
                {"n": name, "s": CHANGE_LOG_SECONDS})

    @contextmanager
    def writer_lock(self, name: str, wait: float | None = None, healthy=None):
        """Hold the dataset's writer lock (a PostgreSQL advisory lock, so it spans
        processes and dies with a crashed writer's connection). Gives the holder's
        WriteStamps: every write of the holder is stamped later than any of earlier
        holders (gridagg.stamps).

        wait: None waits as long as another writer holds the lock (bulk loads,
        repair); else the seconds to wait before StoreUnavailable. healthy: called
        after each second of waiting; False (the store the holder writes to does not
        answer, so the holder is failing too) ends the wait at once with
        StoreUnavailable instead of queueing behind a failing writer."""
        key = f"gridagg:{name}"
        with self.connection() as conn:
            if not conn.execute("SELECT pg_try_advisory_lock(hashtextextended(%s, 0))", (key,)).fetchone()[0]:
                self._wait_for_lock(conn, name, key, wait, healthy)
            try:
                yield WriteStamps(lambda: self._reserve_stamps(name))
            finally:
                conn.execute("SELECT pg_advisory_unlock(hashtextextended(%s, 0))", (key,))

    @staticmethod
    def _wait_for_lock(conn, name: str, key: str, wait: float | None, healthy) -> None:
        started = time.monotonic()
        while True:
            try:
                # A session lock taken in a transaction outlives it; the timeout does not.
                with conn.transaction():
                    conn.execute("SELECT set_config('lock_timeout', %s, true)",
                                 (f"{LOCK_STEP_SECONDS * 1000:.0f}ms",))
                    conn.execute("SELECT pg_advisory_lock(hashtextextended(%s, 0))", (key,))
                return
            except psycopg.errors.LockNotAvailable:
                waited = time.monotonic() - started
                if healthy is not None and not healthy():
                    raise StoreUnavailable(
                        f"another writer holds the writer lock of dataset {name!r} and the store does not "
                        f"answer (waited {waited:.1f} s); retry later") from None
                if wait is not None and waited >= wait:
                    raise StoreUnavailable(
                        f"another writer has held the writer lock of dataset {name!r} for the {wait:g} s "
                        "this write may wait; retry later") from None

    def _reserve_stamps(self, name: str) -> tuple[int, int]:
        with self.connection() as conn:
            self.round_trips.add()
            end = conn.execute(
                "WITH now AS (SELECT (extract(epoch FROM clock_timestamp()) * 1e9)::bigint AS ns) "
                "INSERT INTO gridagg_stamps AS s (dataset, reserved) SELECT %(n)s, ns + %(span)s FROM now "
                "ON CONFLICT (dataset) DO UPDATE SET reserved = greatest(s.reserved, excluded.reserved - %(span)s) "
                "+ %(span)s RETURNING reserved",
                {"n": name, "span": SPAN},
            ).fetchone()[0]
        return end - SPAN, end

    def replace_leaves(self, ds: Dataset, old: list[str], new_leaves: list[Grid]) -> None:
        """Replace leaves by others in one transaction: delete the leaves `old` (each
        must still be a leaf), insert new_leaves, adjust leaf_count, mark `old` as
        retired so their rows are purged once no reader can need them, and log the
        change. Used by splits and bulk loads (the caller holds the writer lock)."""
        with self.connection() as conn, conn.transaction():
            self.round_trips.add()
            version = self._log(conn, ds, [g.grid_id for g in new_leaves])
            if old:
                cur = conn.execute(
                    sql.SQL("DELETE FROM {} WHERE grid_id = ANY(%s)").format(self.table(ds.name)), (list(old),)
                )
                if cur.rowcount != len(set(old)):
                    raise RuntimeError(f"some of {len(old)} grids of {ds.name} are no longer leaves")
                conn.execute(
                    "INSERT INTO gridagg_retired (dataset, grid_id) SELECT %s, unnest(%s::text[]) "
                    "ON CONFLICT DO NOTHING",
                    (ds.name, list(old)),
                )
            if new_leaves:
                self._insert_leaves(conn, ds, new_leaves, version)
            conn.execute(
                "UPDATE gridagg_datasets SET leaf_count = leaf_count + %s WHERE name = %s",
                (len(new_leaves) - len(set(old)), ds.name),
            )
        self._changed(ds.name)

    # -- crash safety -----------------------------------------------------------------

    def begin_intent(self, name: str, grid_ids: list[str]) -> int:
        """Record that a write will touch these leaves; returns the intent's ID."""
        with self.connection() as conn:
            self.round_trips.add()
            return conn.execute(
                "INSERT INTO gridagg_intents (dataset, grids) VALUES (%s, %s) RETURNING id", (name, grid_ids)
            ).fetchone()[0]

    def extend_intent(self, intent_id: int, grid_ids: list[str]) -> None:
        """Add grids a write is about to put rows under (a split's new grids) to its
        intent, so that recovery fences them off too."""
        with self.connection() as conn:
            self.round_trips.add()
            conn.execute("UPDATE gridagg_intents SET grids = grids || %s WHERE id = %s", (grid_ids, intent_id))

    def end_intent(self, intent_id: int, ds: Dataset | None = None, changed: list[str] | None = None) -> None:
        """Clear an intent; with `ds`, log in the same transaction that the leaves
        `changed` changed (None: possibly all) and move the epoch on."""
        with self.connection() as conn, conn.transaction():
            self.round_trips.add()
            conn.execute("DELETE FROM gridagg_intents WHERE id = %s", (intent_id,))
            if ds is not None:
                self._log(conn, ds, changed)
        if ds is not None:
            self._changed(ds.name)

    def pending_intents(self, name: str) -> list[tuple[int, list[str]]]:
        """Intents of writers that did not finish (call while holding the writer lock)."""
        with self.connection() as conn:
            self.round_trips.add()
            return conn.execute(
                "SELECT id, grids FROM gridagg_intents WHERE dataset = %s ORDER BY id", (name,)
            ).fetchall()

    def retired_before(self, name: str, seconds: float) -> list[str]:
        """Retired grids whose rows no query can need any more: retired more than
        `seconds` ago, by PostgreSQL's clock."""
        with self.connection() as conn:
            self.round_trips.add()
            rows = conn.execute(
                "SELECT grid_id FROM gridagg_retired WHERE dataset = %s "
                "AND retired_at < now() - make_interval(secs => %s)",
                (name, seconds),
            ).fetchall()
        return [r[0] for r in rows]

    def forget_retired(self, name: str, grid_ids: list[str]) -> None:
        with self.connection() as conn:
            self.round_trips.add()
            conn.execute(
                "DELETE FROM gridagg_retired WHERE dataset = %s AND grid_id = ANY(%s)", (name, grid_ids)
            )
