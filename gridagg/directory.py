"""The grid directory in PostgreSQL: dataset definitions and the leaf grids' boxes.

An n-dimensional grid is stored as ceil(n/2) `box` columns, dimensions 2j and 2j+1 in
column c<j> (x and y); when n is odd the last box is degenerate in y (always [0, 0]).
Finding the leaf of each of many points, and listing the leaves a query box touches
with a flag for "fully inside", are one SQL round trip each, using && and <@ on the
composite GiST index.

Queries list leaves far more often than writes change them, so each process also keeps
the leaves of the datasets it queries in memory (LeafIndex), tagged with the directory
version they were read at. Every change of a dataset's leaves gives it a new version in
the same transaction, so one indexed lookup of the version tells a query whether the
leaves it holds are still the current ones: answers stay exact and a write is seen by
the next query of every process.

A store whose processes share one machine (the embedded LMDB store) also keeps a
directory epoch per dataset, moved on after every committed change of the leaves and
read without a round trip. While the epoch stands still a query skips the version lookup
(that lookup was a fifth of a query's time), confirming the version with PostgreSQL at
least every RECONFIRM_SECONDS all the same: a writer that dies between its commit and
moving the epoch on delays other processes by at most that long.
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


class LeafIndex:
    """The leaves of one dataset as of one directory version, held in memory.

    Leaves are sorted by their lower bound on one axis (time when there is one), and
    `reach` is the widest leaf along it: a box [lo, hi] on that axis can only touch leaves
    whose lower bound lies in [lo - reach, hi], found by binary search. The time pre-split
    keeps reach at L_time, so a query looks at the leaves of a few time slices only."""

    def __init__(self, version: int, rows: list[tuple], ndim: int, axis: int):
        """rows: (grid_id, next_dim, lo_0, hi_0, ..., lo_n-1, hi_n-1) per leaf."""
        self.version = version
        bounds = np.array([r[2:2 + 2 * ndim] for r in rows], dtype=np.int64).reshape(len(rows), ndim, 2)
        order = np.argsort(bounds[:, axis, 0], kind="stable")
        self.grid_ids = [rows[i][0] for i in order.tolist()]
        self.next_dims = [rows[i][1] for i in order.tolist()]
        self.lo = bounds[order, :, 0]
        self.hi = bounds[order, :, 1]
        self.axis = axis
        self.reach = int((self.hi[:, axis] - self.lo[:, axis]).max()) if len(rows) else 0
        self.loaded_at = time.monotonic()
        self.load_seconds = 0.0
        self.epoch: int | None = None  # the store's directory epoch when last confirmed
        self.confirmed_at = self.loaded_at

    def confirm(self, epoch: int | None) -> None:
        """Record that the version was current when the store's epoch read `epoch`."""
        self.epoch, self.confirmed_at = epoch, time.monotonic()

    def current(self, epoch: int | None) -> bool:
        """Whether these leaves can answer without asking PostgreSQL: the epoch has not
        moved since the version was last confirmed, recently enough."""
        return (epoch is not None and epoch == self.epoch
                and time.monotonic() - self.confirmed_at < RECONFIRM_SECONDS)

    def __len__(self) -> int:
        return len(self.grid_ids)

    def intersecting(self, box: Box) -> list[tuple[Grid, bool]]:
        """(leaf, fully inside box) for every leaf box touches (closed intervals, as &&
        and <@ count touching)."""
        qlo = np.array([lo for lo, _ in box], dtype=np.int64)
        qhi = np.array([hi for _, hi in box], dtype=np.int64)
        starts = self.lo[:, self.axis]
        a = int(np.searchsorted(starts, qlo[self.axis] - self.reach, side="left"))
        b = int(np.searchsorted(starts, qhi[self.axis], side="right"))
        lo, hi = self.lo[a:b], self.hi[a:b]
        hits = np.flatnonzero((lo <= qhi).all(axis=1) & (hi >= qlo).all(axis=1))
        inside = ((lo[hits] >= qlo).all(axis=1) & (hi[hits] <= qhi).all(axis=1)).tolist()
        ids, next_dims = self.grid_ids, self.next_dims
        return [(Grid(ids[j], tuple(zip(l, h)), next_dims[j]), full)
                for j, l, h, full in zip((a + hits).tolist(), lo[hits].tolist(), hi[hits].tolist(), inside)]


# A stale LeafIndex is reloaded only once the time since its last load is this many times
# what that load took, so a dataset being split all the time costs at most about a tenth
# of a process's time in reloads; meanwhile the GiST query answers.
RELOAD_SPACING = 10

# Leaves held under an unmoved directory epoch are still confirmed with PostgreSQL this
# often (see the module docstring).
RECONFIRM_SECONDS = 1.0


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
        # The CellStore whose directory epochs this directory moves on and reads (set by
        # GridEngine; None: every query looks the version up).
        self.epochs = None
        self._indexes: dict[str, LeafIndex] = {}
        self._loading = threading.Lock()
        with self.connection() as conn:
            conn.execute(resources.files("sql").joinpath("catalog.sql").read_text())

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
        self.pool.close()

    # -- datasets ---------------------------------------------------------------------

    @staticmethod
    def table(name: str) -> sql.Identifier:
        return sql.Identifier(f"grids_{name}")

    def create_dataset(self, ds: Dataset, leaves: list[Grid]) -> None:
        """Record the definition and create the grid table holding these leaves."""
        cols = _box_columns(ds.ndim)
        ddl = resources.files("sql").joinpath("grid_table.sql").read_text()
        ddl = sql.SQL(ddl).format(
            table=self.table(ds.name),
            box_columns=sql.SQL(", ").join(sql.SQL("{} box NOT NULL").format(sql.Identifier(c)) for c in cols),
            index=sql.Identifier(f"grids_{ds.name}_boxes"),
            index_columns=sql.SQL(", ").join(map(sql.Identifier, cols)),
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
            self._insert_leaves(conn, ds, leaves)
        self._changed(ds.name)

    def drop_dataset(self, name: str) -> None:
        with self.connection() as conn, conn.transaction():
            conn.execute("DELETE FROM gridagg_datasets WHERE name = %s", (name,))
            conn.execute("DELETE FROM gridagg_retired WHERE dataset = %s", (name,))
            conn.execute("DELETE FROM gridagg_intents WHERE dataset = %s", (name,))
            conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(self.table(name)))
        self._changed(name)

    def _changed(self, name: str) -> None:
        """After a change of the dataset's leaves is committed: move the epoch on."""
        if self.epochs is not None:
            self.epochs.advance_directory_epoch(name)

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

    def _insert_leaves(self, conn, ds: Dataset, leaves: list[Grid]) -> None:
        cols = _box_columns(ds.ndim)
        stmt = sql.SQL("INSERT INTO {} ({}, grid_id, next_dim) VALUES ({}, %s, %s)").format(
            self.table(ds.name),
            sql.SQL(", ").join(map(sql.Identifier, cols)),
            sql.SQL(", ").join(sql.SQL("%s::box") for _ in cols),
        )
        with conn.cursor() as cur:
            cur.executemany(stmt, [(*box_literals(g.box), g.grid_id, g.next_axis) for g in leaves])

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

    def _load_index(self, conn, ds: Dataset, epoch: int | None) -> LeafIndex:
        """Read the version and every leaf of a dataset in one statement (one snapshot);
        epoch: the store's directory epoch, read before."""
        started = time.monotonic()
        stmt = sql.SQL(
            "SELECT d.version, g.grid_id, g.next_dim, {corners} FROM gridagg_datasets d "
            "LEFT JOIN {table} g ON true WHERE d.name = %s"
        ).format(corners=self._corners(ds), table=self.table(ds.name))
        rows = conn.execute(stmt, (ds.name,)).fetchall()
        if not rows:
            raise UnknownDataset(ds.name)
        leaves = [r[1:] for r in rows if r[1] is not None]
        axis = ds.time_axis if ds.time_axis is not None else 0
        index = LeafIndex(rows[0][0], leaves, ds.ndim, axis)
        index.load_seconds = time.monotonic() - started
        index.confirm(epoch)
        self._indexes[ds.name] = index
        return index

    def intersecting(self, ds: Dataset, box: Box) -> tuple[list[tuple[Grid, bool]], int]:
        """(leaf, fully inside box) for every leaf that box touches, and the total number
        of leaves of the dataset.

        No round trip while the store's directory epoch stands still (see the module
        docstring), else one (the version lookup) when this process holds the dataset's
        current leaves, which it loads on its first query. When they are stale, they are
        reloaded (see RELOAD_SPACING) or the GiST index answers: a second round trip."""
        index = self._indexes.get(ds.name)
        # Read before the version, so a change committed after it moves the epoch later.
        epoch = self.epochs.directory_epoch(ds.name) if self.epochs is not None else None
        if index is not None and index.current(epoch):
            return index.intersecting(box), len(index)
        with self.connection() as conn:
            self.round_trips.add()
            due = True
            if index is not None:
                row = conn.execute("SELECT version FROM gridagg_datasets WHERE name = %s", (ds.name,)).fetchone()
                if row is None:
                    self._indexes.pop(ds.name, None)
                    raise UnknownDataset(ds.name)
                if row[0] == index.version:
                    index.confirm(epoch)
                    return index.intersecting(box), len(index)
                self.round_trips.add()
                due = time.monotonic() - index.loaded_at >= RELOAD_SPACING * index.load_seconds
            # One thread of the process loads; the others ask the GiST index meanwhile.
            if due and self._loading.acquire(blocking=False):
                try:
                    index = self._load_index(conn, ds, epoch)
                finally:
                    self._loading.release()
                return index.intersecting(box), len(index)
            return self._gist_intersecting(conn, ds, box)

    def _gist_intersecting(self, conn, ds: Dataset, box: Box) -> tuple[list[tuple[Grid, bool]], int]:
        """intersecting() by the composite GiST index, without the leaves in memory."""
        cols = _box_columns(ds.ndim)
        q = box_literals(box)
        ident = list(map(sql.Identifier, cols))
        stmt = sql.SQL(
            "WITH d AS (SELECT leaf_count FROM gridagg_datasets WHERE name = %s) "
            "SELECT d.leaf_count, g.grid_id, g.next_dim, {inside}, {corners} FROM d LEFT JOIN {table} g ON {overlap}"
        ).format(
            inside=sql.SQL(" AND ").join(sql.SQL("g.{} <@ %s::box").format(c) for c in ident),
            corners=self._corners(ds),
            table=self.table(ds.name),
            overlap=sql.SQL(" AND ").join(sql.SQL("g.{} && %s::box").format(c) for c in ident),
        )
        rows = conn.execute(stmt, (ds.name, *q, *q)).fetchall()
        if not rows:
            raise UnknownDataset(ds.name)
        ndim = ds.ndim
        leaves = [(Grid(r[1], tuple((int(r[4 + 2 * i]), int(r[5 + 2 * i])) for i in range(ndim)), r[2]), r[3])
                  for r in rows if r[1] is not None]
        return leaves, rows[0][0]

    @contextmanager
    def writer_lock(self, name: str):
        """Hold the dataset's writer lock (a PostgreSQL advisory lock, so it spans
        processes and dies with a crashed writer's connection)."""
        with self.connection() as conn:
            conn.execute("SELECT pg_advisory_lock(hashtextextended(%s, 0))", (f"gridagg:{name}",))
            try:
                yield
            finally:
                conn.execute("SELECT pg_advisory_unlock(hashtextextended(%s, 0))", (f"gridagg:{name}",))

    def replace_leaves(self, ds: Dataset, old: list[str], new_leaves: list[Grid]) -> None:
        """Replace leaves by others in one transaction: delete the leaves `old` (each
        must still be a leaf), insert new_leaves, adjust leaf_count, and mark `old` as
        retired so their rows are purged once no reader can need them. Used by splits
        and bulk loads (the caller holds the writer lock)."""
        with self.connection() as conn, conn.transaction():
            self.round_trips.add()
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
                self._insert_leaves(conn, ds, new_leaves)
            conn.execute(
                "UPDATE gridagg_datasets SET leaf_count = leaf_count + %s, "
                "version = nextval('gridagg_directory_versions') WHERE name = %s",
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

    def end_intent(self, intent_id: int) -> None:
        with self.connection() as conn:
            self.round_trips.add()
            conn.execute("DELETE FROM gridagg_intents WHERE id = %s", (intent_id,))

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
