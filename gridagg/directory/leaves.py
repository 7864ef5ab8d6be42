"""The leaf grids of each dataset: one table grids_<name> per dataset, a row per leaf.

An n-dimensional grid is stored as ceil(n/2) `box` columns, dimensions 2j and 2j+1 in
column c<j> (x and y); when n is odd the last box is degenerate in y (always [0, 0]).
Finding the leaf of each of many points is one SQL round trip on the composite GiST
index (&& and <@).
"""

from __future__ import annotations

from importlib import resources

import numpy as np
import psycopg
from psycopg import sql

from gridagg.directory.database import Database
from gridagg.model.errors import UnknownDataset
from gridagg.model.grid import Box, Grid
from gridagg.model.schema import Dataset


class LeavesOverlap(RuntimeError):
    """A directory switch would make leaves that overlap (Leaves.check_disjoint)."""


def box_columns(ndim: int) -> list[str]:
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


def table(name: str) -> sql.Identifier:
    """The grid table of dataset `name`."""
    return sql.Identifier(f"grids_{name}")


def corners(ds: Dataset) -> sql.Composable:
    """The leaves' (alias g) box corners as integers, lo and hi of each dimension in order
    (xlo, xhi, ylo, yhi per box column). Cast in the server (exact: stored values are
    within 2**53): a tree's leaves come back faster than as floats, and need no
    conversion after."""
    return sql.SQL(", ").join(
        sql.SQL("(g.{c}[1])[0]::bigint, (g.{c}[0])[0]::bigint, (g.{c}[1])[1]::bigint, (g.{c}[0])[1]::bigint")
        .format(c=sql.Identifier(c))
        for c in box_columns(ds.ndim))


# Which making of a dataset its directory is (a dataset dropped and made again under its
# name is another): its creation time in microseconds, a number a tree file keeps as is.
INCARNATION = sql.SQL("(extract(epoch FROM d.created_at) * 1000000)::bigint")


def _overlapping_pairs(ds: Dataset, order: str) -> sql.Composable:
    """SELECT of the (a, b) grid IDs of leaves a and b whose boxes overlap, a's ID
    `order` ("<" or "<>") b's."""
    boxes = sql.SQL(" AND ").join(sql.SQL("a.{c} && b.{c}").format(c=sql.Identifier(c)) for c in box_columns(ds.ndim))
    return sql.SQL("SELECT a.grid_id, b.grid_id FROM {t} a JOIN {t} b ON a.grid_id {order} b.grid_id AND {boxes}"
                   ).format(t=table(ds.name), order=sql.SQL(order), boxes=boxes)


def leaf_rows(ds: Dataset, rows) -> list[tuple]:
    """(grid_id, next_dim, lo_0, hi_0, ...) per leaf, from rows of grid_id, next_dim and
    the corners (the last dimension of an odd count dropped)."""
    n = 2 + 2 * ds.ndim
    return [tuple(r[:n]) for r in rows]


class Leaves:
    def __init__(self, db: Database):
        self.db = db

    @staticmethod
    def create(conn, ds: Dataset) -> None:
        """In the caller's transaction: the dataset's grid table, made anew."""
        cols = box_columns(ds.ndim)
        ddl = resources.files("gridagg.directory").joinpath("grid_table.sql").read_text()
        conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(table(ds.name)))
        conn.execute(sql.SQL(ddl).format(
            table=table(ds.name),
            box_columns=sql.SQL(", ").join(sql.SQL("{} box NOT NULL").format(sql.Identifier(c)) for c in cols),
            index=sql.Identifier(f"grids_{ds.name}_boxes"),
            index_columns=sql.SQL(", ").join(map(sql.Identifier, cols)),
            version_index=sql.Identifier(f"grids_{ds.name}_version"),
        ))

    @staticmethod
    def drop(conn, name: str) -> None:
        conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(table(name)))

    @staticmethod
    def insert(conn, ds: Dataset, leaves: list[Grid], version: int) -> None:
        """In the caller's transaction: add these leaves, made by directory `version`."""
        cols = box_columns(ds.ndim)
        stmt = sql.SQL("INSERT INTO {} ({}, grid_id, next_dim, version) VALUES ({}, %s, %s, %s)").format(
            table(ds.name),
            sql.SQL(", ").join(map(sql.Identifier, cols)),
            sql.SQL(", ").join(sql.SQL("%s::box") for _ in cols),
        )
        with conn.cursor() as cur:
            cur.executemany(stmt, [(*box_literals(g.box), g.grid_id, g.next_axis, version) for g in leaves])

    @staticmethod
    def delete(conn, ds: Dataset, grid_ids: list[str]) -> None:
        """In the caller's transaction: remove these leaves; each must still be one."""
        cur = conn.execute(sql.SQL("DELETE FROM {} WHERE grid_id = ANY(%s)").format(table(ds.name)), (list(grid_ids),))
        if cur.rowcount != len(set(grid_ids)):
            raise RuntimeError(f"some of {len(grid_ids)} grids of {ds.name} are no longer leaves")

    def _select(self, ds: Dataset, where: sql.Composable, params=()) -> list[Grid]:
        stmt = sql.SQL("SELECT grid_id, next_dim, {} FROM {} {} ORDER BY grid_id").format(
            sql.SQL(", ").join(sql.SQL("{}::text").format(sql.Identifier(c)) for c in box_columns(ds.ndim)),
            table(ds.name), where)
        return [Grid(r[0], parse_boxes(r[2:], ds.ndim), r[1]) for r in self.db.execute(stmt, params)]

    def all(self, ds: Dataset) -> list[Grid]:
        """Every leaf grid with its box, in grid-ID order."""
        return self._select(ds, sql.SQL(""))

    def grid(self, ds: Dataset, grid_id: str) -> Grid | None:
        found = self._select(ds, sql.SQL("WHERE grid_id = %s"), (grid_id,))
        return found[0] if found else None

    def among(self, ds: Dataset, grid_ids: list[str]) -> list[Grid]:
        return self._select(ds, sql.SQL("WHERE grid_id = ANY(%s)"), (grid_ids,))

    @staticmethod
    def check_disjoint(conn, ds: Dataset, grid_ids: list[str]) -> None:
        """In the caller's transaction: LeavesOverlap when a leaf of `grid_ids` overlaps
        another leaf (on the GiST index: a lookup per leaf)."""
        stmt = sql.SQL("{} WHERE a.grid_id = ANY(%s) LIMIT 1").format(_overlapping_pairs(ds, "<>"))
        found = conn.execute(stmt, (list(grid_ids),)).fetchone()
        if found:
            raise LeavesOverlap(f"leaf {found[0]} of dataset {ds.name!r} would overlap leaf {found[1]}: "
                                "the writer's tree was not the directory's; nothing of the write was switched")

    def overlapping(self, ds: Dataset) -> list[tuple[str, str]]:
        """Pairs of leaves whose boxes share a point (none in a well-formed directory: a
        grid's children part on its cut), each pair once, by grid ID."""
        stmt = sql.SQL("{} ORDER BY 1, 2").format(_overlapping_pairs(ds, "<"))
        return [(a, b) for a, b in self.db.execute(stmt)]

    def locate(self, ds: Dataset, points: np.ndarray) -> list[str]:
        """The leaf grid ID holding each point (rows of stored dimension values).

        One round trip: the points travel as arrays of degenerate boxes and are joined to
        the grid table with <@ on the GiST index."""
        cols = box_columns(ds.ndim)
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
            table=table(ds.name),
            conds=sql.SQL(" AND ").join(
                sql.SQL("p.{} <@ g.{}").format(a, sql.Identifier(c)) for a, c in zip(aliases, cols)
            ),
        )
        out: list[str | None] = [None] * n
        for i, gid in self.db.execute(stmt, (list(range(n)), *per_col)):
            out[i] = gid
        if None in out:
            raise RuntimeError(f"grid directory of {ds.name} does not cover point {points[out.index(None)]}")
        return out  # type: ignore[return-value]

    def tree(self, ds: Dataset) -> tuple[int, object, list[tuple]]:
        """(version, incarnation, leaves) of a dataset in one statement (one snapshot):
        what gridagg.tree.TreeState is built from."""
        stmt = sql.SQL(
            "SELECT d.version, {incarnation}, g.grid_id, g.next_dim, {corners} FROM gridagg_datasets d "
            "LEFT JOIN {table} g ON true WHERE d.name = %s"
        ).format(incarnation=INCARNATION, corners=corners(ds), table=table(ds.name))
        try:
            rows = self.db.execute(stmt, (ds.name,))
        except psycopg.errors.UndefinedTable:  # dropped meanwhile
            raise UnknownDataset(ds.name) from None
        if not rows:
            raise UnknownDataset(ds.name)
        return rows[0][0], rows[0][1], leaf_rows(ds, [r[2:] for r in rows if r[2] is not None])
