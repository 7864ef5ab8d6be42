"""Changes of stored rows (deletes, corrections, retention), each one write of
gridagg.write.protocol (kind "delete", "correct" or "retain") that keeps every answer
exact: before the change, while it happens and after it. gridagg.write.delete, correct
and retain say which leaves a change touches and what each holds after it (a Content);
this module writes that.

No leaf's rows are rewritten where they lie. Each leaf the change touches is cut, and its
rows after the change are written under the keys of the grids the cut makes; then the
directory switches from the old leaves to the new ones in one transaction, the change's
commit. A query holding the tree from before reads the old leaves' rows, which stay
(retired, as a split leaf's) until no query can still need them; one holding the tree
from after reads the new grids'. Each uses its own tree's aggregates, so its answer is
exact for the rows before the change or for the rows after it, never a mix. A writer
that dies before the switch leaves nothing of the change (recovery clears the new grids
and rebuilds the old leaves' aggregates from their rows), one that dies after it the
whole change (recovery rebuilds the new leaves' aggregates).

The cut: where the leaf's rows after the change leave part of its box empty, they all go
to one side of it (the other child is empty); where they fill the box, it is cut at the
mean of its next axis as a split is (gridagg.model.grid.choose_cut); a leaf left without
rows is halved. A child that is retired (its rows still kept for old queries: a leaf
merged not long ago) is cut again, so that no new leaf takes a key that holds rows. A
child past N_threshold (a correction that added rows) splits as an insert's would.

Folding. A change also folds up what changes leave behind above the leaves it touches
(a retention round, everywhere): the highest grids that hold rows in at most one leaf
(at most N_threshold of them, no wider in time than L_time, none retired) become one
leaf, as a merge in place does (gridagg.tune.merge): emptied subtrees, a leaf and its
emptied sibling. Folding empty leaves reads no row.

One case cannot be cut: a leaf whose box is a single point. A change touching one is
applied in place instead: its intent holds the rows every touched leaf holds after it
(recovery writes them again, so the change ends whole once its intent is recorded), and
each leaf's rows are replaced in one store call (CellStore.rewrite_grids). A box query
never reads such a leaf's rows (it lies wholly inside the box or outside), but a query
running across the change may count part of it in the change's other leaves.

Trees and rollups follow the change log (gridagg.tree, gridagg.query.rollups): readers
read again the aggregates of the grids it names and of their ancestors, and a rollup
makes again the days, positions and months those grids' rows span after the change. So
for the rows that left each leaf the change also names the lowest grid above it whose
rows after the change still span them; where even the root's do not (rows at an edge of
the data left), it logs that any grid may have changed, and readers start over.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from gridagg.model.aggregate import PartialAggregate
from gridagg.model.grid import Grid, children, choose_cut, grid_prefix, parent, row_key
from gridagg.model.schema import Dataset
from gridagg.store import segments
from gridagg.tree import TreeState
from gridagg.write.split import split_rows


@dataclass
class Content:
    """What a touched leaf holds after a change: its rows (element IDs, an Arrow binary
    array, and their (m, ncols) int64 values), and the least and greatest value per
    dimension of the rows that left it or changed (None: none did)."""

    eids: pa.Array
    values: np.ndarray
    gone: tuple[np.ndarray, np.ndarray] | None

    @classmethod
    def emptied(cls, tree: TreeState, leaf: str) -> "Content":
        """A leaf of `tree` that keeps none of its rows (nothing of them read)."""
        i = tree.index[leaf]
        return cls(pa.array([], pa.binary()), np.empty((0, tree.aggs.mins.shape[1]), np.int64),
                   (tree.dlo[i].copy(), tree.dhi[i].copy()))


    @classmethod
    def without(cls, eids, values: np.ndarray, gone: np.ndarray, ndim: int) -> "Content":
        """A leaf holding these rows (element IDs, an Arrow binary array; values) once
        the rows `gone` (a boolean mask) leave it; ndim: its dataset's dimensions."""
        keep = ~gone
        left = values[gone, :ndim]
        return cls(eids.filter(pa.array(keep)), values[keep], (left.min(axis=0), left.max(axis=0)))


@dataclass
class Changed:
    """What a change did: the rows its touched leaves held before it and hold after it,
    the dataset's leaves before and after, whether it was applied in place."""

    rows_before: int = 0
    rows_after: int = 0
    leaves_before: int = 0
    leaves_after: int = 0
    in_place: bool = False


def apply(write, tree: TreeState, contents: dict[str, Content], fold_all: bool = False) -> Changed:
    """Write a change of dataset write.ds as the steps of `write` (a protocol.Write of
    kind "delete", "correct" or "retain", whose lock makes `tree` current): each leaf of
    `contents` (leaf ID -> Content) holds its Content after it (see the module
    docstring). The grids that fold are those above a touched leaf, or every one with
    `fold_all` (a retention round tidies the whole tree). Ends the write; nothing is
    written when nothing changes."""
    ds = write.ds
    done = Changed(leaves_before=tree.leaf_count, leaves_after=tree.leaf_count)
    if not contents and not fold_all:
        return done
    done.rows_before = int(sum(tree.aggs.count[tree.index[g]] for g in contents))
    done.rows_after = sum(len(c.values) for c in contents.values())
    retired = set(write.directory.retired_before(ds.name, 0))
    counts = tree.aggs.count.copy()
    for g, c in contents.items():
        counts[tree.index[g]] = len(c.values)
    folds = fold_roots(tree, counts, retired, ds, None if fold_all else [tree.index[g] for g in contents])
    if not contents and not folds:
        return done
    folded = {leaf: tree.ids[r] for r in folds for leaf in leaves_below(tree, r)}
    grids = write.directory.grids(ds, [g for g in contents if g not in folded])
    cuts = {g: fresh_leaves(grid, contents[g].values, retired, ds) for g, grid in grids.items()}
    if any(cut is None for cut in cuts.values()):
        return _in_place(write, tree, contents, done)

    new: list[tuple[Grid, object, np.ndarray]] = []  # new leaves with their rows
    aggs: dict[str, PartialAggregate] = {}
    for g, (leaves, inner) in cuts.items():
        content = contents[g]
        made = {leaf.grid_id: PartialAggregate.of_rows(content.values[idx], len(ds.columns)) for leaf, idx in leaves}
        aggs.update(made)
        aggs.update(_inner(made, inner, len(ds.columns)))
        new += [(leaf, content.eids.take(pa.array(idx)), content.values[idx]) for leaf, idx in leaves]
    for r in folds:
        leaf = Grid(tree.ids[r], tuple(zip(tree.lo[r].tolist(), tree.hi[r].tolist())), cut_axis(tree, r))
        eids, values = _fold_rows(write, tree, r, contents)
        aggs[leaf.grid_id] = PartialAggregate.of_rows(values, len(ds.columns))
        new.append((leaf, eids, values))
    made = set(aggs)
    aggs.update(_ancestors(tree, aggs, len(ds.columns)))
    logged = _logged(tree, contents, folded, aggs, ds)
    old = sorted(set(grids) | set(folded))
    write.intend(sorted(set(contents) | set(old) | made))
    rows = [(grid_prefix(leaf.grid_id), eids, values) for leaf, eids, values in new if len(values)]
    if rows:
        write.put_grids(rows)
    else:
        write.rows_written()
    write.put_aggregates(aggs)
    write.switch(old, sorted((leaf for leaf, _, _ in new), key=lambda g: g.grid_id), logged)
    write.end(logged if logged is None else [leaf.grid_id for leaf, _, _ in new] + logged)
    done.leaves_after = tree.leaf_count - len(old) + len(new)
    return done


def _in_place(write, tree: TreeState, contents: dict[str, Content], done: Changed) -> Changed:
    """The change applied in place (see the module docstring)."""
    ds = write.ds
    ncols = len(ds.columns)
    aggs = {g: PartialAggregate.of_rows(c.values, ncols) for g, c in contents.items()}
    aggs.update(_ancestors(tree, aggs, ncols))
    keys = [row_key(g, e) for g, c in contents.items() for e in c.eids.to_pylist()]
    values = np.concatenate([c.values for c in contents.values()]).reshape(-1, ncols)
    write.intend(sorted(contents), contents=(keys, values))
    write.rewrite_grids([(grid_prefix(g), c.eids, c.values) for g, c in sorted(contents.items())])
    write.put_aggregates(aggs)
    write.switch([], [])
    logged = _logged(tree, contents, {}, aggs, ds)
    write.end(logged if logged is None else sorted(contents) + logged)
    done.in_place = True
    return done


def fresh_leaves(grid: Grid, values: np.ndarray, retired: set[str],
                 ds: Dataset) -> tuple[list[tuple[Grid, np.ndarray]], list[str]] | None:
    """New leaves for the rows `values` that leaf `grid` holds after a change, each with
    the indexes of its rows, and the grids made inner on the way (`grid` first): `grid`
    cut once, a retired child again, a child past N_threshold split as an insert's
    split would (see the module docstring). None when a grid to cut is a single point."""
    leaves, inner = [], []
    stack = [(grid, np.arange(len(values)))]
    while stack:
        g, idx = stack.pop()
        if g is not grid and g.grid_id not in retired:
            leaves.append((g, idx))
            continue
        cut = _cut(g, values[idx], ds)
        if cut is None:
            return None
        low_kid, high_kid = children(g, *cut, ds.ndim)
        low = values[idx, cut[0]] <= cut[1]
        inner.append(g.grid_id)
        stack += [(high_kid, idx[~low]), (low_kid, idx[low])]
    out = []
    for leaf, idx in leaves:
        if len(idx) <= ds.grid.n_threshold or any(r.startswith(leaf.grid_id) for r in retired):
            out.append((leaf, idx))
            continue
        done = split_rows(leaf, values[idx], PartialAggregate.of_rows(values[idx], len(ds.columns)),
                          ds.grid.n_threshold, ds.grid.n_size, ds.ndim, aggregates=False)
        out += [(g, idx[ix]) for g, ix, _ in done.leaves]
        inner += [g.grid_id[:k] for g, _, _ in done.leaves for k in range(len(leaf.grid_id), len(g.grid_id))]
    return out, sorted(set(inner))


def _cut(g: Grid, rows: np.ndarray, ds: Dataset) -> tuple[int, int] | None:
    """(axis, at) of the cut of grid g holding `rows` after a change (the module
    docstring), or None when its box is a single point."""
    axes = [(g.next_axis + k) % ds.ndim for k in range(ds.ndim)]
    axes = [a for a in axes if g.box[a][0] < g.box[a][1]]
    if not axes:
        return None
    if not len(rows):
        lo, hi = g.box[axes[0]]
        return axes[0], (lo + hi) // 2
    for a in axes:
        lo, hi = g.box[a]
        least, most = int(rows[:, a].min()), int(rows[:, a].max())
        if most < hi:
            return a, most
        if least > lo:
            return a, least - 1
    agg = PartialAggregate.of_rows(rows[:, : ds.ndim], ds.ndim)
    return choose_cut(g.next_axis, agg.count, agg.sums, agg.mins, agg.maxs, ds.ndim)


def _inner(leaves: dict[str, PartialAggregate], inner: list[str], ncols: int) -> dict[str, PartialAggregate]:
    """The aggregates of the grids `inner`, each the merge of the leaves below it."""
    out = {}
    for g in inner:
        agg = PartialAggregate.empty(ncols)
        for leaf, a in leaves.items():
            if leaf.startswith(g):
                agg.merge(a)
        out[g] = agg
    return out


def _ancestors(tree: TreeState, aggs: dict[str, PartialAggregate], ncols: int) -> dict[str, PartialAggregate]:
    """The aggregates of every grid of `tree` above the grids of `aggs` (their
    aggregates after the change), deepest first, each the merge of its two children:
    from `aggs`, else as the tree holds them."""
    out: dict[str, PartialAggregate] = {}
    for g in sorted(_above(tree, aggs), key=len, reverse=True):
        agg = PartialAggregate.empty(ncols)
        for kid in (g + "0", g + "1"):
            have = out.get(kid) or aggs.get(kid)
            agg.merge(have if have is not None else tree.aggs.aggregate(tree.index[kid]))
        out[g] = agg
    return out


def _above(tree: TreeState, aggs: dict[str, PartialAggregate]) -> set[str]:
    """The grids of `tree` above those of `aggs`, but those of `aggs`."""
    return {g[:k] for g in aggs for k in range(1, len(g)) if g[:k] in tree.index} - set(aggs)


def _fold_rows(write, tree: TreeState, r: int, contents: dict[str, Content]):
    """(element IDs, values) of the rows below grid r of `tree` after the change: those
    of its one leaf that holds any (read from the store unless the change gives them)."""
    ncols = tree.aggs.mins.shape[1]
    for leaf in leaves_below(tree, r):
        if leaf in contents:
            if len(contents[leaf].values):
                return contents[leaf].eids, contents[leaf].values
        elif tree.aggs.count[tree.index[leaf]]:
            return write.store.read_grid(write.ds, leaf)
    return pa.array([], pa.binary()), np.empty((0, ncols), np.int64)


def _logged(tree: TreeState, contents: dict[str, Content], folded: dict[str, str],
            aggs: dict[str, PartialAggregate], ds: Dataset) -> list[str] | None:
    """The grids the change log names besides the new leaves: for each touched leaf, the
    lowest grid at or above it (or above the grid it folds into) whose rows after the
    change span the rows that left it; None when no grid's do (see the module docstring)."""
    out = set()
    for g, c in contents.items():
        if c.gone is None:
            continue
        lo, hi = c.gone
        at = folded.get(g, g)
        while True:
            agg = aggs.get(at)
            if agg is None:
                i = tree.index[at]
                agg = tree.aggs.aggregate(i)
            if agg.count and all(agg.mins[d] <= lo[d] and hi[d] <= agg.maxs[d] for d in range(ds.ndim)):
                out.add(at)
                break
            if len(at) == 1:
                return None
            at = parent(at)
    return sorted(out)


def fold_roots(tree: TreeState, counts: np.ndarray, retired: set[str], ds: Dataset,
               touched: list[int] | None = None) -> list[int]:
    """The highest inner grids of `tree` that fold into one leaf (the module docstring),
    given each leaf's row count after the change (`counts`, per grid of the tree; those
    of inner grids are not read); only those above one of the `touched` grids unless
    that is None."""
    inner = tree.left >= 0
    depth = np.fromiter(map(len, tree.ids), np.int64, tree.n)
    rows = np.where(inner, 0, counts)
    filled = ((rows > 0) & ~inner).astype(np.int64)
    for d in range(int(depth.max()), 0, -1):
        i = np.flatnonzero((depth == d) & inner)
        rows[i] = rows[tree.left[i]] + rows[tree.right[i]]
        filled[i] = filled[tree.left[i]] + filled[tree.right[i]]
    fits = inner & (filled <= 1) & (rows <= ds.grid.n_threshold)
    if ds.grid.l_time is not None:
        t = ds.time_axis
        fits &= tree.hi[:, t] - tree.lo[:, t] + 1 <= ds.grid.l_time
    gone = [tree.index[g] for g in retired if g in tree.index]
    fits[gone] = False
    if touched is not None:
        above = np.zeros(tree.n, bool)
        for i in touched:
            while i >= 0 and not above[i]:
                above[i] = True
                i = int(tree.parent[i])
        fits &= above
    # The highest: no grid above it folds.
    under = np.zeros(tree.n, bool)
    for d in range(2, int(depth.max()) + 1):
        i = np.flatnonzero(depth == d)
        p = tree.parent[i]
        under[i] = under[p] | fits[p]
    return np.flatnonzero(fits & ~under).tolist()


def leaves_below(tree: TreeState, i: int) -> list[str]:
    """The IDs of the leaves below (or at) grid i of `tree`, sorted."""
    out, stack = [], [i]
    while stack:
        j = stack.pop()
        if tree.left[j] < 0:
            out.append(tree.ids[j])
        else:
            stack += [int(tree.left[j]), int(tree.right[j])]
    return sorted(out)


def cut_axis(tree: TreeState, i: int) -> int:
    """The axis inner grid i of `tree` was cut on (where its children's boxes part): the
    axis its next split takes, as before."""
    a, b = int(tree.left[i]), int(tree.right[i])
    return int(np.flatnonzero(tree.hi[a] < tree.lo[b])[0])
