"""Write intents (gridagg_intents): the grids a write is about to put rows under, recorded
before it writes and cleared when it ends (gridagg.write.protocol). One left behind means its
writer died mid-write: the next writer recovers those grids."""

from __future__ import annotations

from gridagg.directory.database import Database


class Intents:
    def __init__(self, db: Database):
        self.db = db

    def begin(self, name: str, grid_ids: list[str], rows: bytes | None = None) -> int:
        """Record that a write will touch these grids (and, for an insert, the rows it
        adds, as one segment: gridagg.store.segments.pack); returns the intent's ID."""
        return self.db.execute("INSERT INTO gridagg_intents (dataset, grids, rows) VALUES (%s, %s, %s) RETURNING id",
                               (name, grid_ids, rows))[0][0]

    def extend(self, intent_id: int, grid_ids: list[str]) -> None:
        """Add grids a write is about to put rows under (a split's new grids)."""
        self.db.execute("UPDATE gridagg_intents SET grids = grids || %s WHERE id = %s", (grid_ids, intent_id))

    @staticmethod
    def clear(conn, intent_id: int) -> None:
        """In the caller's transaction: the write of this intent is done."""
        conn.execute("DELETE FROM gridagg_intents WHERE id = %s", (intent_id,))

    @staticmethod
    def drop(conn, name: str) -> None:
        conn.execute("DELETE FROM gridagg_intents WHERE dataset = %s", (name,))

    def pending(self, name: str) -> list[tuple[int, list[str], bytes | None]]:
        """(id, grids, rows) of the intents of writers that did not finish, oldest first
        (call while holding the writer lock)."""
        return [(i, grids, None if rows is None else bytes(rows)) for i, grids, rows in self.db.execute(
            "SELECT id, grids, rows FROM gridagg_intents WHERE dataset = %s ORDER BY id", (name,))]
