"""The k-d tree of a dataset held in memory by every serving process (GridTree), and the
cache that keeps it current (TreeCache).

The grid directory in PostgreSQL holds only the leaves; leaves tile their parents
exactly, so every ancestor's box is the hull of its two children. GridTree holds every
grid (leaves and ancestors) as rows of numpy arrays: box, children, parent, the number
of leaves below, and its partial aggregate once read. The planner (gridagg.planner)
walks it top down in compiled code.

Keeping it current. Every committed change of a dataset (rows inserted, grids split, a
bulk load, a repair) gives it a new directory version and logs which leaves changed
(gridagg.directory). A process holding the tree at version v asks PostgreSQL, in one
round trip, what changed after v: new leaves join the tree (the tree only ever grows:
a split leaf becomes the parent of its children), and the aggregates of changed leaves
and of their ancestors are dropped, to be read again when a query needs them. So a
partial aggregate is read at most once per change by each process.

When to ask: writers also move the dataset's epoch on a board every local process
shares (gridagg.epochs, a file in the data dir). While the epoch stands still, queries
ask PostgreSQL nothing, except to confirm the version at least every RECONFIRM_SECONDS:
that bounds how long a writer on another machine (which moves its own board) or one
that died between committing and moving the epoch can go unseen.

Concurrency: queries of a process read the tree without a lock. The tree only grows,
and a new node is written whole before its parent points to it, so a query always sees
a valid tree (the one it started with, or a later one). Aggregates are read and
replaced under the tree's lock.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

import numpy as np

from .aggregate import AggArrays, PartialAggregate
from .schema import Dataset

# A tree whose epoch has not moved is still confirmed with PostgreSQL this often.
RECONFIRM_SECONDS = 1.0


@dataclass
class Changes:
    """What changed in a dataset's directory after some version (gridagg.directory)."""

    version: int
    incarnation: object  # differs when the dataset was dropped and made again
    complete: bool  # False: the log no longer reaches back that far
    leaves: list[tuple]  # (grid_id, next_dim, lo_0, hi_0, ...) of leaves added since
    touched: list[str] | None  # leaves whose rows changed since; None: possibly all


class GridTree:
    """Every grid of one dataset as of `version`.

    Node i: ids[i] (grid ID), lo[i], hi[i] (box, int64 per dimension), left[i], right[i]
    (children, -1 for a leaf), parent[i] (-1 for the root), leaves_below[i] (1 for a
    leaf), and once read, its aggregate (row i of aggs, loaded[i])."""

    def __init__(self, ds: Dataset, version: int, incarnation, leaves: list[tuple]):
        self.ds = ds
        self.ndim = ds.ndim
        self.ncols = len(ds.columns)
        self.version = version
        self.incarnation = incarnation
        self.lock = threading.Lock()
        self.ids: list[str] = []
        self.index: dict[str, int] = {}
        self.n = 0
        self._allocate(max(16, 2 * len(leaves)))
        self.add_leaves(leaves)
        self.epoch: int | None = None
        self.confirmed_at = 0.0

    # -- structure ---------------------------------------------------------------------

    def _allocate(self, capacity: int) -> None:
        """Room for `capacity` nodes: new arrays holding the current ones (queries still
        holding the old arrays keep a valid tree)."""
        d, n = self.ndim, self.n

        def grow(old, shape, fill, dtype=np.int64):
            new = np.full(shape, fill, dtype)
            if old is not None:
                new[:n] = old[:n]
            return new

        g = lambda name: getattr(self, name, None)  # noqa: E731
        self.lo = grow(g("lo"), (capacity, d), 0)
        self.hi = grow(g("hi"), (capacity, d), 0)
        self.left = grow(g("left"), capacity, -1)
        self.right = grow(g("right"), capacity, -1)
        self.parent = grow(g("parent"), capacity, -1)
        self.leaves_below = grow(g("leaves_below"), capacity, 0)
        self.loaded = grow(g("loaded"), capacity, False, np.bool_)
        old = g("aggs")
        aggs = AggArrays.empty(capacity, self.ncols)
        if old is not None:
            for name in ("count", "present", "mins", "maxs", "hi", "lo"):
                getattr(aggs, name)[:n] = getattr(old, name)[:n]
        self.aggs = aggs

    @property
    def root(self) -> int:
        return self.index["0"]

    @property
    def leaf_count(self) -> int:
        return int(self.leaves_below[self.root])

    def add_leaves(self, leaves: list[tuple]) -> None:
        """Add leaves (grid_id, next_dim, lo_0, hi_0, ..., lo_n-1, hi_n-1) that replace
        leaves of the tree (or make a new tree), with any ancestors between them."""
        new: dict[str, tuple | None] = {}
        for leaf in leaves:
            new[leaf[0]] = leaf
            g = leaf[0][:-1]
            while g and g not in self.index and g not in new:
                new[g] = None
                g = g[:-1]
        if not new:
            return
        if self.n + len(new) > len(self.left):
            self._allocate(2 * (self.n + len(new)))
        # Deepest first: a node's children exist (and have boxes) before it does.
        order = sorted(new, key=len, reverse=True)
        first = self.n
        for g in order:
            i = self.n
            self.ids.append(g)
            self.n += 1
            leaf = new[g]
            if leaf is not None:
                b = np.asarray(leaf[2:], dtype=np.int64).reshape(self.ndim, 2)
                self.lo[i], self.hi[i] = b[:, 0], b[:, 1]
                self.leaves_below[i] = 1
            else:
                a, b = self.index[g + "0"], self.index[g + "1"]
                self.lo[i] = np.minimum(self.lo[a], self.lo[b])
                self.hi[i] = np.maximum(self.hi[a], self.hi[b])
                self.left[i], self.right[i] = a, b
                self.leaves_below[i] = self.leaves_below[a] + self.leaves_below[b]
            self.index[g] = i
        for g in order:
            if len(g) > 1:
                self.parent[self.index[g]] = self.index[g[:-1]]
        # Former leaves now split: point them at their children, right child first (a
        # query reading without a lock takes a node with a left child as whole).
        for g in order:
            p = g[:-1]
            if p and p in self.index and self.index[p] < first:
                j = self.index[p]
                if self.left[j] < 0:
                    self.right[j] = self.index[p + "1"]
                    self.left[j] = self.index[p + "0"]
                    grown = int(self.leaves_below[self.left[j]] + self.leaves_below[self.right[j]]) - 1
                    while j >= 0:
                        self.leaves_below[j] += grown
                        j = int(self.parent[j])

    # -- aggregates --------------------------------------------------------------------

    def invalidate(self, grid_ids: list[str] | None) -> None:
        """Drop the aggregates of these leaves and all their ancestors (None: all)."""
        with self.lock:
            if grid_ids is None:
                self.loaded[:] = False
                return
            for g in grid_ids:
                i = self.index.get(g, -1)
                while i >= 0:
                    self.loaded[i] = False
                    i = int(self.parent[i])

    def aggregates(self, store, nodes: np.ndarray) -> AggArrays:
        """The aggregates of these nodes (rows in the order given), reading the ones not
        held yet from the store in one call."""
        with self.lock:
            missing = nodes[~self.loaded[nodes]]
            version = self.version
        if len(missing):
            missing = np.unique(missing)
            found = store.get_aggregates(self.ds, [self.ids[i] for i in missing.tolist()])
            empty = PartialAggregate.empty(self.ncols)
            fresh = AggArrays.of_aggregates([found.get(self.ids[i], empty) for i in missing.tolist()], self.ncols)
            with self.lock:
                if self.version == version:  # else a refresh came in between: use, do not keep
                    for name in ("count", "present", "mins", "maxs", "hi", "lo"):
                        getattr(self.aggs, name)[missing] = getattr(fresh, name)
                    self.loaded[missing] = True
                    return self.aggs.take(nodes)
            out = self.aggs.take(nodes)
            pos = {int(i): k for k, i in enumerate(missing.tolist())}
            for r, i in enumerate(nodes.tolist()):
                if i in pos:
                    for name in ("count", "present", "mins", "maxs", "hi", "lo"):
                        getattr(out, name)[r] = getattr(fresh, name)[pos[i]]
            return out
        with self.lock:
            return self.aggs.take(nodes)

    # -- freshness ---------------------------------------------------------------------

    def current(self, epoch: int | None) -> bool:
        """Whether the tree can answer without asking PostgreSQL: the board's epoch has
        not moved since the version was last confirmed, recently enough."""
        return (epoch is not None and epoch == self.epoch
                and time.monotonic() - self.confirmed_at < RECONFIRM_SECONDS)

    def confirm(self, epoch: int | None) -> None:
        self.epoch, self.confirmed_at = epoch, time.monotonic()

    def apply(self, changes: Changes) -> None:
        """Bring the tree to changes.version."""
        self.add_leaves(changes.leaves)
        self.invalidate(changes.touched)
        with self.lock:
            self.version = changes.version


class TreeCache:
    """The current GridTree of every dataset a process queries.

    directory: the GridDirectory (the source of truth); board: an EpochBoard, or None
    (then every query confirms the version with PostgreSQL).

    One thread of a process refreshes a dataset's tree at a time; the others wait for
    that refresh and take its outcome (a failure too: while PostgreSQL is down they all
    fail at once, not one after another), then check the tree against their own epoch."""

    def __init__(self, directory, board=None):
        self.directory = directory
        self.board = board
        self._trees: dict[str, GridTree] = {}
        self._refreshing: dict[str, _Refresh] = {}
        self._guard = threading.Lock()

    def tree(self, ds: Dataset) -> GridTree:
        """The dataset's tree, current as of now (see the module docstring)."""
        while True:
            # Read before the version, so a change committed after it moves the epoch later.
            epoch = self.board.epoch(ds.name) if self.board is not None else None
            tree = self._trees.get(ds.name)
            if tree is not None and tree.current(epoch):
                return tree
            with self._guard:
                refresh = self._refreshing.get(ds.name)
                leader = refresh is None
                if leader:
                    refresh = self._refreshing[ds.name] = _Refresh()
            if not leader:
                refresh.wait()  # raises what the refresh raised
                continue  # then check the tree against this thread's own epoch
            try:
                tree = self._refresh(ds, tree, epoch)
                refresh.finish(None)
                return tree
            except BaseException as exc:
                refresh.finish(exc)
                raise
            finally:
                with self._guard:
                    self._refreshing.pop(ds.name, None)

    def _refresh(self, ds: Dataset, tree: GridTree | None, epoch: int | None) -> GridTree:
        if tree is not None:
            changes = self.directory.changes_since(ds, tree.version)
            if changes.incarnation == tree.incarnation and changes.complete:
                if changes.version != tree.version:
                    tree.apply(changes)
                tree.confirm(epoch)
                return tree
        version, incarnation, leaves = self.directory.load_tree(ds)
        tree = GridTree(ds, version, incarnation, leaves)
        tree.confirm(epoch)
        self._trees[ds.name] = tree
        return tree

    def forget(self, name: str) -> None:
        self._trees.pop(name, None)


class _Refresh:
    """One refresh of a tree that other threads wait for."""

    def __init__(self):
        self._done = threading.Event()
        self._error: BaseException | None = None

    def finish(self, error: BaseException | None) -> None:
        self._error = error
        self._done.set()

    def wait(self) -> None:
        self._done.wait()
        if self._error is not None:
            raise self._error
