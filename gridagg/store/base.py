"""The CellStore interface every storage backend implements."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Iterator

import numpy as np

from gridagg.model.aggregate import AggArrays, PartialAggregate
from gridagg.model.grid import prefix_range, split_key
from gridagg.model.schema import Dataset
from gridagg.model.stamps import WriteStamps
from gridagg.model.trips import TripCounter
from gridagg.store import segments
from gridagg.store.scan import RangeCondition, ScanAnswer, ScanRequest


def matching(values: np.ndarray, where) -> np.ndarray | None:
    """Which of the (m, ncols) rows satisfy every RangeCondition in `where`, as a boolean
    mask; None when there are no conditions."""
    mask = None
    for cond in where:
        col = values[:, cond.column]
        inside = (col >= cond.lo) & (col <= cond.hi)
        mask = inside if mask is None else mask & inside
    return mask


def segment_rows(prefix: bytes, seg, start: bytes, stop: bytes, where=(), batch_rows: int = 2000,
                 with_keys: bool = True):
    """(keys, values) batches of the rows of one of grid `prefix`'s segments with
    start <= key < stop that satisfy every condition in `where`: how a store's scan_rows
    reads a segment. Values are copies (a segment's buffer may not outlive the read);
    keys are None when not with_keys."""
    values = segments.values(seg)
    whole = start <= prefix and prefix_range(prefix)[1] <= stop  # gridagg's own ranges always are
    keys = [prefix + e for e in segments.eids(seg)] if with_keys or not whole else None
    mask = matching(values, where)
    if not whole:
        in_range = np.array([start <= k < stop for k in keys], dtype=bool)
        mask = in_range if mask is None else mask & in_range
    if mask is None:
        values = values.copy()
    else:
        idx = np.flatnonzero(mask)
        values = values[idx]
        if keys is not None:
            keys = [keys[i] for i in idx.tolist()]
    if not with_keys:
        keys = None
    for s in range(0, len(values), batch_rows):
        yield (keys[s : s + batch_rows] if keys is not None else None), values[s : s + batch_rows]


class CellStore(ABC):
    """Raw rows and partial aggregates of datasets.

    Raw rows are keyed by the paper's row key (salt + grid ID + "-" + element ID) and
    hold one stored integer per dataset column. Partial aggregates are keyed by grid ID.
    Every method is one round trip or a bounded number of them, counted per thread in
    `round_trips`, so a query can report what it cost.

    Writes take `stamps`, the writer's gridagg.model.stamps.WriteStamps (None: stamps of the
    local clock). A store whose writes can land after their writer died (HBase, through
    the Thrift gateway) stamps its cells with them, so that recovery can fence such late
    writes off (seal_grids); the embedded store cannot get late writes and ignores them.
    """

    kind: str
    # The machine's board of dataset epochs (gridagg.store.epochs), or None: then every query
    # confirms its dataset's version with PostgreSQL.
    board = None
    # Parts of one query's scan read at once (settings.scan_threads).
    scan_threads = 1
    # Whether a scan stopped at its deadline names the grids it left unread (its answer
    # counts every other grid whole: gridagg.store.scan), so one scan may run to the deadline.
    names_unread = False
    # Whether a scan reads its grids by row key (grid_prefix): the planner then hands
    # them over in ScanRequest.keys from its tree, where they were made once; looked up
    # per scan they cost a cache's scattered reads, noticeable in a sum over many grids
    # under load.
    reads_by_key = False

    def __init__(self):
        self.round_trips = TripCounter()

    @abstractmethod
    def create_dataset(self, ds: Dataset) -> None:
        """Create the dataset's tables (idempotent)."""

    @abstractmethod
    def drop_dataset(self, name: str) -> None:
        """Remove the dataset's tables and everything in them (idempotent)."""

    def put_rows(self, ds: Dataset, keys: list[bytes], values: np.ndarray, stamps: WriteStamps | None = None) -> None:
        """Write rows: keys[i] gets values[i] (an int64 row of len(ds.columns)); a stored
        element ID's row is replaced. Grouped by grid, then put_grids."""
        parts = [split_key(k) for k in keys]
        by_prefix: dict[bytes, list[int]] = {}
        for i, (prefix, _) in enumerate(parts):
            by_prefix.setdefault(prefix, []).append(i)
        values = np.asarray(values)
        self.put_grids(ds, [(prefix, [parts[i][1] for i in idx], values[idx]) for prefix, idx in by_prefix.items()],
                       stamps)

    @abstractmethod
    def put_grids(self, ds: Dataset, grids: list[tuple[bytes, list[bytes], np.ndarray]],
                  stamps: WriteStamps | None = None) -> None:
        """Write rows grid by grid, each grid given as (its key prefix, element IDs (a
        sequence of bytes, or an Arrow binary array), values): row key prefix + eids[i]
        gets values[i]."""

    @abstractmethod
    def delete_rows(self, ds: Dataset, keys: list[bytes], stamps: WriteStamps | None = None) -> None:
        """Delete rows by key; missing keys are ignored."""

    @abstractmethod
    def rewrite_grids(self, ds: Dataset, grids: list[tuple[bytes, object, np.ndarray]],
                      stamps: WriteStamps | None = None) -> None:
        """Make each grid's rows exactly these, grid by grid as put_grids gives them (key
        prefix, element IDs, values; none: the grid holds no row after it). A reader sees
        a grid's rows before or after, never a mix."""

    @abstractmethod
    def clear_grids(self, ds: Dataset, grid_ids: list[str], stamps: WriteStamps | None = None) -> None:
        """Delete every row stored under these grids (their own rows, not their
        descendants'), and whatever a writer with earlier stamps lands there later."""

    def seal_grids(self, ds: Dataset, grid_ids: list[str], stamps: WriteStamps) -> None:
        """Fence off the rows of these grids from writers with earlier stamps: what such
        a writer lands here later changes nothing. Rows stored now stay. Recovery calls
        it for a dead writer's leaves before reading their rows. Nothing to do unless a
        store can get writes after their writer died."""

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
    def read_grid(self, ds: Dataset, grid_id: str):
        """The rows stored under grid `grid_id` itself (not its descendants'), read at
        once: (their element IDs, an Arrow binary array; their (m, ncols) int64 values).
        How a split or merge moves a grid's rows (with put_grids) without a Python step
        per row."""

    @abstractmethod
    def scan(self, ds: Dataset, request: ScanRequest) -> ScanAnswer:
        """Read the rows of request.grids (each grid's own rows) as gridagg.store.scan says, in
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
    def put_aggregates(self, ds: Dataset, aggregates: dict[str, PartialAggregate],
                       stamps: WriteStamps | None = None) -> None:
        """Store (replace) the aggregates of these grids (an aggregate stored with a
        later stamp is never replaced by one with an earlier stamp)."""

    def answers(self, ds: Dataset) -> bool:
        """Whether the store answers a quick probe of the dataset now (within about a
        second). A writer waiting for the writer lock asks it: a holder writing to a
        store that does not answer is failing, and so would the waiter. The embedded
        store is in this process: it always answers."""
        return True

    def compact(self, ds: Dataset) -> str | None:
        """After a tuning's splits and merges: rewrite the dataset's storage so that reads
        no longer pass through the rows those replaced. Returns what was done, None when
        there is nothing to do (the embedded store: LMDB reuses freed pages in place)."""
        return None

    def settle(self) -> None:
        """Make every write a crashed writer committed visible to this process' reads.
        Recovery calls it (under the writer lock) before reading what a crashed writer
        left. Nothing to do unless a store can hide a commit of a dead writer."""

    def close(self) -> None:
        """Release connections or file handles."""
