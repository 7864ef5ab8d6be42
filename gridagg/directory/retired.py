"""Retired leaves (gridagg_retired): leaves a split replaced. Their rows stay under the old
keys until no query that may still see the old directory can be running, then are purged
(gridagg.write.protocol.purge_retired)."""

from __future__ import annotations

from gridagg.directory.database import Database


class Retired:
    def __init__(self, db: Database):
        self.db = db

    @staticmethod
    def add(conn, name: str, grid_ids: list[str]) -> None:
        """In the caller's transaction: these leaves were replaced now (a grid retired
        before, and a leaf again since, keeps its rows from now on)."""
        conn.execute("INSERT INTO gridagg_retired (dataset, grid_id) SELECT %s, unnest(%s::text[]) "
                     "ON CONFLICT (dataset, grid_id) DO UPDATE SET retired_at = now()", (name, list(grid_ids)))

    def before(self, name: str, seconds: float) -> list[str]:
        """Retired grids whose rows no query can need any more: retired more than
        `seconds` ago, by PostgreSQL's clock."""
        rows = self.db.execute("SELECT grid_id FROM gridagg_retired WHERE dataset = %s "
                               "AND retired_at < now() - make_interval(secs => %s)", (name, seconds))
        return [r[0] for r in rows]

    def forget(self, name: str, grid_ids: list[str]) -> None:
        """Forget these retired grids (their rows are purged)."""
        self.db.execute("DELETE FROM gridagg_retired WHERE dataset = %s AND grid_id = ANY(%s)", (name, grid_ids))

    @staticmethod
    def drop(conn, name: str) -> None:
        conn.execute("DELETE FROM gridagg_retired WHERE dataset = %s", (name,))
