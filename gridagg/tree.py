"""The k-d tree of a dataset held in memory by every serving process (TreeState), and the
cache that keeps it current (TreeCache).

The grid directory in PostgreSQL holds only the leaves; leaves tile their parents
exactly, so every ancestor's box is the hull of its two children. A TreeState holds
every grid (leaves and ancestors) as rows of numpy arrays: its box, children, parent,
the number of leaves below it, and its partial aggregate, read once from the store.
The aggregate also gives the grid's data bounds, the smallest box holding its rows (the
min and max of each dimension): on real archives, where stations sit at fixed places,
far tighter than the box the splits made. The planner (gridagg.query.planner) walks the tree
top down over the data bounds.

Keeping it current. Every committed change of a dataset (rows inserted, grids split, a
bulk load, a repair) gives it a new directory version and logs which leaves changed
(gridagg.directory). A process holding the tree at version v asks PostgreSQL, in one
round trip, what changed after v: new leaves join the tree (a split leaf becomes the
parent of its children; a merged grid, gridagg.tune.merge, becomes a leaf and the grids below
it go), and the aggregates of changed leaves and of their ancestors are read again from
the store, in one call. So a partial aggregate is read at most once per change by each
process. Only a merged leaf split again under IDs the tree held needs a whole load.

When to ask: writers also move the dataset's epoch on a board every local process
shares (gridagg.store.epochs, a file in the data dir), after committing and before they
answer, so a local reader never misses an acknowledged write. Writers on other machines
move boards of their own; their changes reach this process through PostgreSQL's NOTIFY
within milliseconds (gridagg.directory.listen). While the epoch stands still and nothing
was announced, queries ask PostgreSQL nothing, except to confirm the version at least
every RECONFIRM_SECONDS: that bounds how long a change can go unseen when a
notification is lost or a writer dies between committing and moving the epoch.

Concurrency: a TreeState is never changed once made; a refresh makes a new one. A query
takes the current state once and uses it throughout.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import zipfile
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import NamedTuple

import numpy as np

from gridagg.directory import CHANGE_LOG_SECONDS
from gridagg.model.aggregate import INT64_MAX, NULL, AggArrays
from gridagg.model.grid import grid_prefix
from gridagg.model.schema import Dataset

log = logging.getLogger(__name__)

# A tree whose epoch has not moved is still confirmed with PostgreSQL this often.
RECONFIRM_SECONDS = 1.0
# Refreshes a TreeState remembers (TreeState.history).
HISTORY = 16
# A refresh appends the grids it adds, out of the walk's order (TreeState.in_preorder): a
# process puts its tree back in preorder once they are more than this share of it.
OUT_OF_ORDER_SHARE = 1 / 8
# A tree file older than this is written again at the next change: a process can catch up
# from it only while the change log reaches back to its version.
TREE_FILE_SECONDS = CHANGE_LOG_SECONDS / 2
_LINKS = ("left", "right", "parent", "leaves_below")


class WalkTree(NamedTuple):
    """The tree as the planner's compiled walk reads it (gridagg.query.walk): per grid
    its data bounds lo/hi (lo > hi: no rows), its split box split_lo/split_hi, children
    left/right (-1 for a leaf), leaves_below and row count; and the root's index."""

    lo: np.ndarray
    hi: np.ndarray
    split_lo: np.ndarray
    split_hi: np.ndarray
    left: np.ndarray
    right: np.ndarray
    leaves_below: np.ndarray
    count: np.ndarray
    root: int


@dataclass(frozen=True)
class TreeState:
    """Every grid of one dataset as of `version`. Node i: ids[i] (grid ID), lo[i], hi[i]
    (the box the splits made), dlo[i], dhi[i] (its data bounds; lo > hi when it holds no
    rows), left[i], right[i] (children, -1 for a leaf), parent[i] (-1 for the root),
    leaves_below[i] (1 for a leaf) and aggs row i (its partial aggregate, all columns)."""

    version: int
    incarnation: object
    ids: list[str]
    index: dict[str, int]
    keys: list[bytes] | None  # keys[i]: grid_prefix(ids[i]), made once for a store that reads by key, else None
    lo: np.ndarray
    hi: np.ndarray
    dlo: np.ndarray
    dhi: np.ndarray
    left: np.ndarray
    right: np.ndarray
    parent: np.ndarray
    leaves_below: np.ndarray
    aggs: AggArrays
    # The last few refreshes that led here: (version before, leaves touched or None for
    # possibly all), oldest first; what caches derived from rows (gridagg.query.rollups) follow.
    history: tuple = ()

    @property
    def n(self) -> int:
        return len(self.ids)

    @property
    def root(self) -> int:
        return self.index["0"]

    @property
    def leaf_count(self) -> int:
        return int(self.leaves_below[self.root])

    @cached_property
    def walk(self) -> WalkTree:
        """This tree for the planner's walk (made once: a state never changes)."""
        return WalkTree(self.dlo, self.dhi, self.lo, self.hi, self.left, self.right, self.leaves_below,
                        self.aggs.count, self.root)

    def touched_since(self, version: int) -> set[str] | None:
        """Leaves whose rows changed after `version` (None: possibly any, or too long ago
        to tell)."""
        if version == self.version:
            return set()
        out: set[str] = set()
        for since, touched in reversed(self.history):
            if touched is None:
                return None
            out.update(touched)
            if since == version:
                return out
        return None

    @classmethod
    def build(cls, ds: Dataset, version: int, incarnation, leaves: list[tuple], store) -> "TreeState":
        """The tree of these leaves (grid_id, next_dim, lo_0, hi_0, ..., lo_n-1, hi_n-1),
        with every grid's aggregate read from `store`.

        Built a level at a time on arrays (a 100M-row dataset has hundreds of thousands of
        grids): a grid ID is the path from the root, "0" and then a bit per level, so as
        the heap index 2**depth + bits its parent is index // 2 and its children 2i and
        2i + 1."""
        ndim = ds.ndim
        n_leaves = len(leaves)
        if not n_leaves:
            return _empty(ds, 0)
        ids_in = [leaf[0] for leaf in leaves]
        depth = np.fromiter(map(len, ids_in), np.int64, n_leaves) - 1
        if depth.max() > 62:  # deeper than a heap index holds: grow it the general way
            return _empty(ds, 0).grown(ds, version, incarnation, leaves, None, store)
        heap = np.fromiter((int("1" + g[1:], 2) for g in ids_in), np.int64, n_leaves)
        nodes = np.unique(np.concatenate([heap, _inner_nodes(heap, depth)]))
        n = len(nodes)
        at = lambda keys: np.searchsorted(nodes, keys)  # noqa: E731 - position of present keys
        leaf_at = at(heap)
        boxes = np.array([leaf[2:2 + 2 * ndim] for leaf in leaves], np.int64).reshape(n_leaves, ndim, 2)
        lo, hi = np.zeros((n, ndim), np.int64), np.zeros((n, ndim), np.int64)
        lo[leaf_at], hi[leaf_at] = boxes[:, :, 0], boxes[:, :, 1]
        left, right = np.full(n, -1, np.int64), np.full(n, -1, np.int64)
        kids = np.minimum(at(2 * nodes), n - 1)
        inner = nodes[kids] == 2 * nodes
        left[inner] = kids[inner]
        right[inner] = kids[inner] + 1
        parent = np.where(nodes > 1, at(nodes >> 1), -1)
        leaves_below = np.zeros(n, np.int64)
        leaves_below[leaf_at] = 1
        # Deepest level first: a grid's box is its children's hull, its leaves theirs.
        level = _top_bit(nodes)
        for d in range(int(level.max()), -1, -1):
            i = np.flatnonzero((level == d) & inner)
            lo[i] = np.minimum(lo[left[i]], lo[right[i]])
            hi[i] = np.maximum(hi[left[i]], hi[right[i]])
            leaves_below[i] = leaves_below[left[i]] + leaves_below[right[i]]
        # Kept in preorder (a grid, its left subtree, its right): the walk, depth first, then
        # reads the arrays nearly in order. In heap order it was slower on a large tree,
        # mostly waiting on memory.
        order = np.lexsort((level, nodes << (int(level.max()) - level)))
        new_at = np.empty(n + 1, np.int64)  # old position -> new; slot n stands for -1
        new_at[order], new_at[n] = np.arange(n), -1
        nodes, lo, hi, leaves_below = nodes[order], lo[order], hi[order], leaves_below[order]
        left, right, parent = (new_at[a[order]] for a in (left, right, parent))
        ids = ["0" + format(int(k), "b")[1:] for k in nodes.tolist()]
        aggs = store.get_aggregate_arrays(ds, ids)
        dlo, dhi = aggs.mins[:, :ndim].copy(), aggs.maxs[:, :ndim].copy()
        return TreeState(version, incarnation, ids, dict(zip(ids, range(n))), _prefixes(ids, store), lo, hi, dlo, dhi, left,
                         right, parent, leaves_below, aggs, ((0, None),))

    def write(self, path: Path) -> None:
        """Keep this state in file `path` (see TreeCache): written beside it, then renamed
        over it, so a reader finds the old file or the new one, never part of one."""
        part = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}")
        try:
            with open(part, "wb") as f:
                np.savez(f, version=self.version, incarnation=self.incarnation,
                         ids=np.frombuffer("\n".join(self.ids).encode(), np.uint8), lo=self.lo, hi=self.hi,
                         **{k: getattr(self, k) for k in _LINKS},
                         **{f"aggs_{k}": getattr(self.aggs, k) for k in AggArrays.FIELDS})
            os.replace(part, path)
        finally:
            part.unlink(missing_ok=True)

    @classmethod
    def read(cls, path: Path, ds: Dataset, store) -> "TreeState | None":
        """The state kept in file `path` by `write` for `store`'s CellStore, or None when
        there is none or it does not hold a tree of `ds`'s shape (damaged, or written for
        another definition)."""
        try:
            with np.load(path, allow_pickle=False) as f:
                a = {k: f[k] for k in f.files}
            ids = bytes(a["ids"]).decode().split("\n")
        except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile):
            return None
        n, ndim, ncols = len(ids), ds.ndim, len(ds.columns)
        shapes = {"version": (), "incarnation": (), "lo": (n, ndim), "hi": (n, ndim),
                  **{k: (n,) for k in _LINKS + ("aggs_count",)},
                  **{f"aggs_{k}": (n, ncols) for k in AggArrays.FIELDS[1:]}}
        if any(k not in a or a[k].shape != shape or a[k].dtype != np.int64 for k, shape in shapes.items()):
            return None
        aggs = AggArrays(*(a[f"aggs_{k}"] for k in AggArrays.FIELDS))
        return TreeState(int(a["version"]), int(a["incarnation"]), ids, dict(zip(ids, range(n))), _prefixes(ids, store),
                         a["lo"], a["hi"],
                         aggs.mins[:, :ndim].copy(), aggs.maxs[:, :ndim].copy(), *(a[k] for k in _LINKS), aggs,
                         ((0, None),))

    def in_preorder(self) -> "TreeState":
        """This tree with its grids in preorder, as a whole load keeps them (see build),
        or itself when they are. A refresh appends the grids it adds, out of the walk's
        order: on a large tree tuned in place a broad polygon question walked it slower in
        that order than in preorder."""
        n = self.n
        # A grid's place: its parent's, plus one, plus (a right child) its left sibling's
        # subtree, 2 * leaves - 1 grids in a tree where every inner grid has two children.
        depth = np.fromiter(map(len, self.ids), np.int64, n)
        place = np.zeros(n, np.int64)
        for d in range(2, int(depth.max(initial=0)) + 1):
            i = np.flatnonzero(depth == d)
            p = self.parent[i]
            right = self.right[p] == i
            place[i] = place[p] + 1 + right * (2 * self.leaves_below[self.left[p]] - 1)
        if (place == np.arange(n)).all():
            return self
        order = np.empty(n, np.int64)
        order[place] = np.arange(n)
        at = np.append(place, -1)  # old position -> new; slot n stands for -1
        ids, keys = _taken(self.ids, order), _taken(self.keys, order)
        return TreeState(self.version, self.incarnation, ids, dict(zip(ids, range(n))), keys, self.lo[order],
                         self.hi[order], self.dlo[order], self.dhi[order], at[self.left[order]], at[self.right[order]],
                         at[self.parent[order]], self.leaves_below[order], self.aggs.take(order), self.history)

    def merged(self, grid_ids: list[str]) -> "TreeState":
        """This tree with each inner grid of `grid_ids` made a leaf holding the rows below
        it (gridagg.tune.merge), the grids below gone; aggregates and boxes are a merge's
        own. The rows moved, so caches derived from them start over (history: None)."""
        gone = np.zeros(self.n, bool)
        leaves_below = self.leaves_below.copy()
        left, right = self.left.copy(), self.right.copy()
        for g in grid_ids:
            i = self.index[g]
            stack = [int(left[i]), int(right[i])]
            while stack:
                k = stack.pop()
                gone[k] = True
                if left[k] >= 0:
                    stack += [int(left[k]), int(right[k])]
            fewer = int(leaves_below[i]) - 1
            j = i
            while j >= 0:
                leaves_below[j] -= fewer
                j = int(self.parent[j])
            left[i] = right[i] = -1
        keep = np.flatnonzero(~gone)
        at = np.full(self.n + 1, -1, np.int64)  # old position -> new; slot n stands for -1
        at[keep] = np.arange(len(keep))
        ids, keys = _taken(self.ids, keep), _taken(self.keys, keep)
        return TreeState(self.version, self.incarnation, ids, dict(zip(ids, range(len(ids)))), keys, self.lo[keep],
                         self.hi[keep], self.dlo[keep], self.dhi[keep], at[left[keep]], at[right[keep]],
                         at[self.parent[keep]], leaves_below[keep], self.aggs.take(keep),
                         (self.history + ((self.version, None),))[-HISTORY:])

    def grown(self, ds: Dataset, version: int, incarnation, leaves: list[tuple], touched: list[str] | None,
              store) -> "TreeState":
        """A new state: these leaves added (each replacing a leaf of this tree, with any
        grids between them), and the aggregates of the `touched` leaves, their ancestors
        and every new grid read again (touched None: every aggregate)."""
        new: dict[str, tuple | None] = {}
        for leaf in leaves:
            new[leaf[0]] = leaf
            g = leaf[0][:-1]
            while g and g not in self.index and g not in new:
                new[g] = None
                g = g[:-1]
        n0, n = self.n, self.n + len(new)
        ndim = ds.ndim

        def grow(a, fill):
            # The tree's shape changes only when it grows: until then, the states share it
            # (a state never changes), and a write's refresh copies only the aggregates.
            return np.concatenate([a, np.full((n - n0,) + a.shape[1:], fill, a.dtype)]) if new else a

        ids, index, keys = self.ids, self.index, self.keys
        if new:
            ids, index, keys = list(ids), dict(index), None if keys is None else list(keys)
        lo, hi = grow(self.lo, 0), grow(self.hi, 0)
        left, right, parent = grow(self.left, -1), grow(self.right, -1), grow(self.parent, -1)
        leaves_below = grow(self.leaves_below, 0)
        # Deepest first: a node's children exist (and have boxes) before it does.
        for g in sorted(new, key=len, reverse=True):
            i = len(ids)
            ids.append(g)
            index[g] = i
            if keys is not None:
                keys.append(grid_prefix(g))
            leaf = new[g]
            if leaf is not None:
                b = np.asarray(leaf[2:2 + 2 * ndim], dtype=np.int64).reshape(ndim, 2)
                lo[i], hi[i] = b[:, 0], b[:, 1]
                leaves_below[i] = 1
            else:
                a, b = index[g + "0"], index[g + "1"]
                lo[i], hi[i] = np.minimum(lo[a], lo[b]), np.maximum(hi[a], hi[b])
                left[i], right[i] = a, b
                leaves_below[i] = leaves_below[a] + leaves_below[b]
        for g in new:
            if len(g) > 1:
                parent[index[g]] = index[g[:-1]]
        # Former leaves that split now have children: count their leaves up to the root.
        for g in new:
            p = g[:-1]
            j = index.get(p, n)
            if j < n0 and left[j] < 0:
                left[j], right[j] = index[p + "0"], index[p + "1"]
                grown_by = int(leaves_below[left[j]] + leaves_below[right[j]]) - 1
                while j >= 0:
                    leaves_below[j] += grown_by
                    j = int(parent[j])
        if touched is None:
            stale = np.arange(n)
        else:
            marks = np.zeros(n, bool)
            marks[n0:] = True
            for g in touched:
                j = index.get(g, -1)
                while j >= 0:
                    marks[j] = True
                    j = int(parent[j])
            stale = np.flatnonzero(marks)
        aggs = _grown_aggs(self.aggs, n, ds) if new else self.aggs.copy()
        dlo, dhi = (grow(self.dlo, INT64_MAX), grow(self.dhi, NULL)) if new else (self.dlo.copy(), self.dhi.copy())
        if len(stale):
            fresh = store.get_aggregate_arrays(ds, [ids[i] for i in stale.tolist()])
            for name in AggArrays.FIELDS:
                getattr(aggs, name)[stale] = getattr(fresh, name)
            dlo[stale], dhi[stale] = fresh.mins[:, :ndim], fresh.maxs[:, :ndim]
        step = (self.version, None if touched is None else tuple(touched) + tuple(new))
        return TreeState(version, incarnation, ids, index, keys, lo, hi, dlo, dhi, left, right, parent, leaves_below,
                         aggs, (self.history + (step,))[-HISTORY:])


def _follows(state: TreeState, leaves: list[tuple], merged: list[str], ndim: int) -> bool:
    """Whether `state` becomes the directory's tree by merging the grids `merged` (known
    IDs among the new `leaves`) and growing the other new leaves below its leaves
    (TreeState.merged, TreeState.grown), or only a build from the directory shows it.

    Splits only add grids below leaves, under IDs never seen before, and tile the leaf
    they split; a merge makes a leaf of an inner grid, in its box. A leaf added under
    any other known ID, below a merged one, or in a box other than the grid's it
    replaces is a merged grid cut again elsewhere (a change cuts where the rows left
    after it lie: gridagg.write.change): the boxes held would be wrong."""
    box = {leaf[0]: np.asarray(leaf[2:2 + 2 * ndim], np.int64).reshape(ndim, 2) for leaf in leaves}

    def held_box(i: int, b: np.ndarray) -> bool:
        return bool((state.lo[i] == b[:, 0]).all() and (state.hi[i] == b[:, 1]).all())

    for g in merged:
        i = state.index[g]
        if state.left[i] < 0 or not held_box(i, box[g]):
            return False
    merged_ids = set(merged)
    if any(g[:k] in merged_ids for g in box for k in range(1, len(g))):
        return False
    hulls: dict[int, np.ndarray] = {}  # held leaf -> hull of the new leaves below it
    for g, b in box.items():
        if g in state.index:
            continue
        above = next((g[:k] for k in range(len(g) - 1, 0, -1) if g[:k] in state.index), None)
        i = -1 if above is None else state.index[above]
        if i < 0 or state.left[i] >= 0:
            return False
        hull = hulls.get(i)
        hulls[i] = b.copy() if hull is None else np.stack([np.minimum(hull[:, 0], b[:, 0]),
                                                          np.maximum(hull[:, 1], b[:, 1])], 1)
    return all(held_box(i, h) for i, h in hulls.items())


def _inner_nodes(heap: np.ndarray, depth: np.ndarray) -> np.ndarray:
    """The inner grids of a tree whose leaves are `heap` (heap indices at `depth`), every
    inner grid having two children: in the leaves' left-to-right order, the grid between
    two neighbours is their lowest common ancestor, the longest common prefix of their
    paths. (The ancestors of each leaf, one level at a time, were slow to sort out for a
    large tree; this is one sort of the leaves.)"""
    order = np.argsort(heap << (int(depth.max()) - depth))  # left-aligned paths sort as the leaves lie
    a, b = heap[order[:-1]], heap[order[1:]]
    da, db = depth[order[:-1]], depth[order[1:]]
    d = np.minimum(da, db)
    a, b = a >> (da - d), b >> (db - d)
    return a >> (_top_bit(a ^ b) + 1)  # a ^ b > 0: no leaf is another's ancestor


def _top_bit(x: np.ndarray) -> np.ndarray:
    """The position of the highest set bit of each x > 0 (a heap index's depth), in
    integers: exact at every depth a heap index holds, where a double's log2 is not."""
    top = np.zeros(len(x), np.int64)
    for step in (32, 16, 8, 4, 2, 1):
        top += step * ((x >> (top + step)) != 0)
    return top


def _prefixes(ids: list[str], store) -> list[bytes] | None:
    """grid_prefix of every grid of a tree, made past grid_prefix's cache (each tree
    holds its own), for a `store` that reads by key; None for one that does not (time
    and memory in every process, for nothing)."""
    return list(map(grid_prefix.__wrapped__, ids)) if store.reads_by_key else None


def _taken(items: list | None, at: np.ndarray) -> list | None:
    """items[k] for each k in `at`, in that order (None stays None)."""
    return None if items is None else list(map(items.__getitem__, at.tolist()))


def _empty(ds: Dataset, n: int) -> TreeState:
    ndim = ds.ndim
    z = lambda shape, fill: np.full(shape, fill, np.int64)  # noqa: E731
    return TreeState(0, None, [], {}, [], z((n, ndim), 0), z((n, ndim), 0), z((n, ndim), INT64_MAX), z((n, ndim), NULL),
                     z(n, -1), z(n, -1), z(n, -1), z(n, 0), AggArrays.empty(n, len(ds.columns)))


def _grown_aggs(aggs: AggArrays, n: int, ds: Dataset) -> AggArrays:
    out = AggArrays.empty(n, len(ds.columns))
    m = len(aggs)
    for name in AggArrays.FIELDS:
        getattr(out, name)[:m] = getattr(aggs, name)
    return out


class DatasetReplaced(Exception):
    """The dataset was dropped and made again, with another definition, since the
    caller read its definition (GridEngine reads it again and asks once more)."""


class _Held:
    """A dataset's current TreeState and when its version was last confirmed: at which
    board epoch and after how many announced changes (TreeCache._heard)."""

    def __init__(self, state: TreeState, mark: tuple):
        self.state = state
        self.appended = 0  # grids refreshes appended since the state held was in preorder
        self.confirm(mark)

    def current(self, mark: tuple) -> bool:
        """Whether the tree can answer without asking PostgreSQL: the board's epoch has
        not moved and no change was announced since the version was last confirmed,
        recently enough."""
        return (mark[0] is not None and mark == self.mark
                and time.monotonic() - self.confirmed_at < RECONFIRM_SECONDS)

    def confirm(self, mark: tuple) -> None:
        self.mark, self.confirmed_at = mark, time.monotonic()


class TreeCache:
    """The current TreeState of every dataset a process queries.

    directory: the GridDirectory (the source of truth); store: the CellStore aggregates
    are read from; board: an EpochBoard, or None (then every query confirms the version
    with PostgreSQL, and no tree file is kept).

    Tree files. Beside the board, in its "trees" folder, each dataset's tree is kept as a
    file, for every process of the host: a new process starts from it and catches up
    through the change log like any holder of the tree, instead of a whole load (every
    leaf from PostgreSQL, every aggregate from the store: several times slower than from
    the file). A process writes it after a whole load
    (a bulk load ends with one, for this), at the end of a tuning (keep), and again at a
    change once it is TREE_FILE_SECONDS old, while the change log still reaches back to
    it; always with the grids in preorder, the walk's order (a process also puts the
    tree it holds back in that order once a share of OUT_OF_ORDER_SHARE was appended by
    refreshes). The file is
    only ever a cache: one the log no longer reaches back to, a damaged one, or one of a
    dataset dropped and made again is passed over; one that cannot be written is logged.

    One thread of a process refreshes a dataset's tree at a time; the others wait for
    that refresh and take its outcome (a failure too: while PostgreSQL is down they all
    fail at once, not one after another), then check the tree against their own mark."""

    def __init__(self, directory, store, board=None):
        self.directory = directory
        self.store = store
        self.board = board
        self._held: dict[str, _Held] = {}
        self._refreshing: dict[str, _Refresh] = {}
        self._guard = threading.Lock()
        self._announced: dict[str | None, int] = {}
        self._loads: dict[str, tuple[float, int]] = {}  # name -> seconds and leaves of its last whole load
        self.files = board.path / "trees" if board is not None else None
        self._load_whole: set[str] = set()  # datasets whose next refresh skips the tree file

    def _heard(self, announcement: str | None) -> None:
        """A change was announced (gridagg.directory.listen): the next query of that
        dataset (of every one, for None) confirms its version with PostgreSQL. A writer
        on this board moved its epoch already: nothing to do."""
        name, board = announcement.split(" ", 1) if announcement is not None else (None, None)
        if board and self.board is not None and board == self.board.id:
            return
        self._announced[name] = self._announced.get(name, 0) + 1

    def _mark(self, name: str) -> tuple:
        """What a tree's confirmation is checked against: the board's epoch (read before
        PostgreSQL, so a change committed after it moves the epoch later) and the
        announcements heard so far."""
        epoch = self.board.epoch(name) if self.board is not None else None
        return epoch, self._announced.get(name, 0), self._announced.get(None, 0)

    def tree(self, ds: Dataset) -> TreeState:
        """The dataset's tree, current as of now (see the module docstring)."""
        self.directory.listen(self._heard)  # from a process's first query on
        while True:
            mark = self._mark(ds.name)
            held = self._held.get(ds.name)
            if held is not None and held.current(mark):
                return held.state
            with self._guard:
                refresh = self._refreshing.get(ds.name)
                leader = refresh is None
                if leader:
                    refresh = self._refreshing[ds.name] = _Refresh()
            if not leader:
                refresh.wait()  # raises what the refresh raised
                continue  # then check the tree against this thread's own mark
            try:
                state = self._refresh(ds, held, mark)
                refresh.finish(None)
                return state
            except BaseException as exc:
                refresh.finish(exc)
                raise
            finally:
                with self._guard:
                    self._refreshing.pop(ds.name, None)

    def _refresh(self, ds: Dataset, held: _Held | None, mark: tuple) -> TreeState:
        if held is None and self.files is not None and ds.name not in self._load_whole:
            kept = TreeState.read(self._file(ds.name), ds, self.store)
            # In preorder, as a held tree starts (a file of an older gridagg may not be).
            held = _Held(kept.in_preorder(), mark) if kept is not None else None
        if held is not None:
            state = held.state
            changes = self.directory.changes_since(ds, state.version)
            merged = [leaf[0] for leaf in changes.leaves if leaf[0] in state.index]
            if changes.incarnation == state.incarnation and changes.complete and \
                    _follows(state, changes.leaves, merged, ds.ndim):
                if changes.version != state.version:
                    base = state.merged(merged) if merged else state
                    state = base.grown(ds, changes.version, state.incarnation,
                                       [leaf for leaf in changes.leaves if leaf[0] not in base.index],
                                       changes.touched, self.store)
                    held.appended += state.n - base.n  # a merge keeps the order of what it leaves
                    due = self._due(ds.name, TREE_FILE_SECONDS)
                    if due or held.appended > OUT_OF_ORDER_SHARE * state.n:
                        state, held.appended = state.in_preorder(), 0
                    held.state = state
                    if due:
                        self._write(ds.name, state)
                held.confirm(mark)
                self._held[ds.name] = held
                return held.state
        started = time.perf_counter()
        version, incarnation, leaves = self.directory.load_tree(ds)
        if held is not None and incarnation != held.state.incarnation and self.directory.dataset(ds.name) != ds:
            self._held.pop(ds.name, None)
            raise DatasetReplaced(ds.name)
        state = TreeState.build(ds, version, incarnation, leaves, self.store)
        self._held[ds.name] = _Held(state, mark)
        self._loads[ds.name] = (time.perf_counter() - started, len(leaves))
        self._load_whole.discard(ds.name)
        if self._due(ds.name, 0.0):
            self._write(ds.name, state)
        return state

    def keep(self, ds: Dataset) -> None:
        """Keep the dataset's tree as it now is, in preorder, in this host's tree file, and
        hold it so. For the end of a tuning: its refreshes appended the grids they added,
        and a process starting from an older file would append them again as it caught
        up."""
        state = self.tree(ds).in_preorder()
        held = self._held.get(ds.name)
        if held is not None and held.state.version == state.version:
            held.state, held.appended = state, 0
        if self._due(ds.name, 0.0):
            self._write(ds.name, state)

    def _file(self, name: str) -> Path:
        """The tree file of dataset `name` (self.files is not None)."""
        return self.files / f"{name}.npz"

    def _due(self, name: str, age: float) -> bool:
        """Whether the dataset's tree file is to be written: this process keeps one, and it
        is missing or at least `age` seconds old."""
        if self.files is None:
            return False
        try:
            return not age or time.time() - self._file(name).stat().st_mtime >= age
        except FileNotFoundError:
            return True

    def _write(self, name: str, state: TreeState) -> None:
        """The dataset's tree file from `state` (held in preorder: see TreeState.in_preorder)."""
        if not state.n:
            return
        try:
            self.files.mkdir(exist_ok=True)
            state.write(self._file(name))
        except OSError as exc:  # only a cache: the tree in memory is current all the same
            log.warning("the tree file of %s was not written (%s): new processes load the tree whole", name, exc)

    def leaves_loadable(self, ds: Dataset, seconds: float) -> int | None:
        """How many leaves a whole load of dataset `ds`'s tree could hold and take at most
        `seconds`, at the rate of its last whole load in this process (a load's time grows
        with the grids, at a rate that differs by store and machine). A process that has not loaded the tree whole (it started from the tree
        file), or whose tree has more than doubled since, loads it now. None when `seconds`
        is 0 (no limit), when the dataset has no leaves, or when the load took under a
        tenth of `seconds`: so short a load is mostly its fixed costs (the calls to the
        stores), and taken as a rate it would bound a tree of a few leaves to a few dozen
        (the next ask, once the tree has doubled, times a load again)."""
        if not seconds:
            return None
        held = self._held.get(ds.name)
        measured = self._loads.get(ds.name)
        if measured is None or (held is not None and held.state.leaf_count > 2 * measured[1]):
            self.start_over(ds.name)
            self.tree(ds)
        took, leaves = self._loads.get(ds.name, (0.0, 0))
        if not leaves or took < seconds / 10:
            return None
        return int(leaves * seconds / took)

    def forget(self, name: str) -> None:
        """Let go of the dataset's tree in this process (the next query starts it anew)."""
        self._held.pop(name, None)
        self._loads.pop(name, None)

    def start_over(self, name: str) -> None:
        """Let go of the dataset's tree in this process; its next use loads it whole from
        the directory (not from the tree file)."""
        self.forget(name)
        self._load_whole.add(name)

    def drop(self, name: str) -> None:
        """The dataset was dropped: let go of its tree, and of its tree file."""
        self.forget(name)
        if self.files is not None:
            self._file(name).unlink(missing_ok=True)


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

