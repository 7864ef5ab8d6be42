"""The catalog of datasets (gridagg_datasets): their definitions and leaf counts."""

from __future__ import annotations

import json

import psycopg

from gridagg.directory.database import Database
from gridagg.model.errors import DatasetExists, UnknownDataset
from gridagg.model.schema import Dataset


class Catalog:
    def __init__(self, db: Database):
        self.db = db

    def add(self, conn, ds: Dataset, leaf_count: int) -> int:
        """In the caller's transaction: record the definition (DatasetExists when the name
        is taken); returns the dataset's first version."""
        try:
            return conn.execute(
                "INSERT INTO gridagg_datasets (name, definition, leaf_count) VALUES (%s, %s, %s) RETURNING version",
                (ds.name, json.dumps(ds.to_json()), leaf_count)).fetchone()[0]
        except psycopg.errors.UniqueViolation:
            raise DatasetExists(ds.name) from None

    @staticmethod
    def drop(conn, name: str) -> None:
        conn.execute("DELETE FROM gridagg_datasets WHERE name = %s", (name,))

    @staticmethod
    def count_leaves(conn, name: str, added: int) -> None:
        """In the caller's transaction: the dataset gained `added` leaves (may be negative)."""
        conn.execute("UPDATE gridagg_datasets SET leaf_count = leaf_count + %s WHERE name = %s", (added, name))

    def dataset(self, name: str) -> Dataset:
        rows = self.db.execute("SELECT definition FROM gridagg_datasets WHERE name = %s", (name,))
        if not rows:
            raise UnknownDataset(name)
        return Dataset.from_json(rows[0][0])

    def datasets(self) -> list[Dataset]:
        return [Dataset.from_json(r[0]) for r in self.db.execute("SELECT definition FROM gridagg_datasets ORDER BY name")]

    def retain(self, name: str) -> str | None:
        """How long dataset `name` keeps its rows (a duration such as '10y'), None: for ever."""
        rows = self.db.execute("SELECT retain FROM gridagg_datasets WHERE name = %s", (name,))
        if not rows:
            raise UnknownDataset(name)
        return rows[0][0]

    def set_retain(self, name: str, retain: str | None) -> None:
        rows = self.db.execute("UPDATE gridagg_datasets SET retain = %s WHERE name = %s RETURNING name", (retain, name))
        if not rows:
            raise UnknownDataset(name)

    def retaining(self) -> list[tuple[str, str]]:
        """(name, retain) of every dataset that keeps its rows for a while only."""
        return [tuple(r) for r in self.db.execute(
            "SELECT name, retain FROM gridagg_datasets WHERE retain IS NOT NULL ORDER BY name")]

    def leaf_count(self, name: str) -> int:
        rows = self.db.execute("SELECT leaf_count FROM gridagg_datasets WHERE name = %s", (name,))
        if not rows:
            raise UnknownDataset(name)
        return rows[0][0]
