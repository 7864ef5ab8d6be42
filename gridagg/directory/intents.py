"""Write intents (gridagg_intents): the grids a write is about to put rows under, recorded
before it writes and cleared when it ends (gridagg.write.protocol). One left behind means its
writer died mid-write: the next writer recovers those grids."""

from __future__ import annotations

from typing import NamedTuple

from gridagg.directory.database import Database


class Intent(NamedTuple):
    """A write's intent: its ID, the grids it touches, an insert's new rows and a change's
    contents (each packed as one segment, or None; gridagg.write.protocol)."""

    id: int
    grids: list[str]
    rows: bytes | None
    contents: bytes | None


class Intents:
    def __init__(self, db: Database):
        self.db = db

    @staticmethod
    def begin(conn, name: str, grid_ids: list[str], rows: bytes | None = None, contents: bytes | None = None) -> int:
        """On the caller's connection: record that a write will touch these grids (and,
        for an insert, the rows it adds, as one segment: gridagg.store.segments.pack; for
        a change applied in place, every row its leaves hold after it, the element IDs
        being row keys); returns the intent's ID."""
        return conn.execute("INSERT INTO gridagg_intents (dataset, grids, rows, contents) VALUES (%s, %s, %s, %s) "
                            "RETURNING id", (name, grid_ids, rows, contents)).fetchone()[0]

    @staticmethod
    def extend(conn, intent_id: int, grid_ids: list[str]) -> None:
        """On the caller's connection: add grids a write is about to put rows under (a
        split's new grids)."""
        conn.execute("UPDATE gridagg_intents SET grids = grids || %s WHERE id = %s", (grid_ids, intent_id))

    @staticmethod
    def clear(conn, intent_id: int) -> None:
        """In the caller's transaction: the write of this intent is done."""
        conn.execute("DELETE FROM gridagg_intents WHERE id = %s", (intent_id,))

    @staticmethod
    def drop(conn, name: str) -> None:
        conn.execute("DELETE FROM gridagg_intents WHERE dataset = %s", (name,))

    def pending(self, name: str) -> list[Intent]:
        """The intents of writers that did not finish, oldest first (call while holding
        the writer lock)."""
        return [Intent(i, grids, _bytes(rows), _bytes(contents)) for i, grids, rows, contents in self.db.execute(
            "SELECT id, grids, rows, contents FROM gridagg_intents WHERE dataset = %s ORDER BY id", (name,))]


def _bytes(data) -> bytes | None:
    return None if data is None else bytes(data)
