"""The CellStore interface every storage backend implements."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Iterator

import numpy as np

from ..aggregate import AggArrays, PartialAggregate
from ..scan import RangeCondition, ScanAnswer, ScanRequest
from ..schema import Dataset
from ..trips import TripCounter


def matching(values: np.ndarray, where) -> np.ndarray | None:
    """Which of the (m, ncols) rows satisfy every RangeCondition in `where`, as a boolean
    mask; None when there are no conditions."""
    mask = None
    for cond in where:
        col = values[:, cond.column]
        inside = (col >= cond.lo) & (col <= cond.hi)
        mask = inside if mask is None else mask & inside
    return mask


class CellStore(ABC):
    """Raw rows and partial aggregates of datasets.

    Raw rows are keyed by the paper's row key (salt + grid ID + "-" + element ID) and
    hold one stored integer per dataset column. Partial aggregates are keyed by grid ID.
    Every method is one round trip or a bounded number of them, counted per thread in
    `round_trips`, so a query can report what it cost.
    """

    kind: str
    # The machine's board of dataset epochs (gridagg.epochs), or None: then every query
    # confirms its dataset's version with PostgreSQL.
    board = None

    def __init__(self):
        self.round_trips = TripCounter()

    @abstractmethod
    def create_dataset(self, ds: Dataset) -> None:
        """Create the dataset's tables (idempotent)."""

    @abstractmethod
    def drop_dataset(self, name: str) -> None:
        """Remove the dataset's tables and everything in them (idempotent)."""

    @abstractmethod
    def put_rows(self, ds: Dataset, keys: list[bytes], values: np.ndarray) -> None:
        """Write rows: keys[i] gets values[i] (an int64 row of len(ds.columns))."""

    def put_grids(self, ds: Dataset, grids: list[tuple[bytes, list[bytes], np.ndarray]]) -> None:
        """Write rows grid by grid, each grid given as (its key prefix, element IDs,
        values): row key prefix + eids[i] gets values[i]. The same as put_rows, for a
        writer that has its rows by grid already (the ingest job)."""
        if grids:
            self.put_rows(ds, [prefix + e for prefix, eids, _ in grids for e in eids],
                          np.concatenate([values for _, _, values in grids]))

    @abstractmethod
    def delete_rows(self, ds: Dataset, keys: list[bytes]) -> None:
        """Delete rows by key; missing keys are ignored."""

    @abstractmethod
    def existing_keys(self, ds: Dataset, keys: list[bytes]) -> set[bytes]:
        """Which of these keys hold a row."""

    @abstractmethod
    def scan_rows(
        self,
        ds: Dataset,
        start: bytes,
        stop: bytes,
        where: list[RangeCondition] = (),
        batch_rows: int = 2000,
        with_keys: bool = True,
    ) -> Iterator[tuple[list[bytes] | None, np.ndarray]]:
        """Rows with start <= key < stop that satisfy every condition, grid by grid in key
        order, as (keys, (k, ncols) int64 array) batches of at most batch_rows rows. With
        with_keys=False the keys may be None (queries need only the values)."""

    @abstractmethod
    def scan(self, ds: Dataset, request: ScanRequest) -> ScanAnswer:
        """Read the rows of request.grids (each grid's own rows) as gridagg.scan says, in
        one round trip: only aggregates (and the rows of request.rows_of) come back."""

    @abstractmethod
    def get_aggregates(self, ds: Dataset, grid_ids: list[str]) -> dict[str, PartialAggregate]:
        """Stored aggregates of these grids; a grid with none stored is left out."""

    def get_aggregate_arrays(self, ds: Dataset, grid_ids: list[str]) -> AggArrays:
        """get_aggregates as arrays, row i for grid_ids[i] (empty when none is stored):
        how a process reads the aggregates of a whole tree. Stores override it to unpack
        all at once."""
        found = self.get_aggregates(ds, grid_ids)
        empty = PartialAggregate.empty(len(ds.columns))
        return AggArrays.of_aggregates([found.get(g, empty) for g in grid_ids], len(ds.columns))

    @abstractmethod
    def put_aggregates(self, ds: Dataset, aggregates: dict[str, PartialAggregate]) -> None:
        """Store (replace) the aggregates of these grids."""

    def settle(self) -> None:
        """Make every write a crashed writer committed visible to this process' reads.
        Recovery calls it (under the writer lock) before reading what a crashed writer
        left. Nothing to do unless a store can hide a commit of a dead writer."""

    def close(self) -> None:
        """Release connections or file handles."""
