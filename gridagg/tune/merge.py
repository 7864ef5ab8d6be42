"""Merging leaves in place (`gridagg tune NAME`): where the store's cost model says leaves
are too small, the leaves below an inner grid become that grid, one leaf, as a write of
gridagg.write.protocol (kind "tune") with the same steps as a split, in reverse:

1. intend the grid (it is no leaf yet: a writer that dies before the switch leaves rows
   under a grid that never became a leaf, which recovery clears);
2. rows: every row of the leaves below it written again under its key;
3. aggregates: its aggregate, from those rows;
4. switch: in one transaction the leaves below it leave the directory (retired: their
   rows stay for queries holding the tree from before, and are purged later) and it
   enters as a leaf;
5. end.

Readers stay exact throughout: one holding the tree from before reads the old leaves'
rows, which stay; one holding the new tree reads the grid's, written before the switch.

Which grids: the highest inner grids holding at most `target` rows, where target is
what a cut grid costs in rows on the store (CostModel.grid_in_rows), at most the
dataset's N_threshold (so an insert does not split them again at once): below it a cut
grid costs more than reading its sibling's rows with it would. A grid retired earlier
(split not long ago, its old rows not purged yet) is left alone: its old rows would
mix with the new ones.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from gridagg.model.aggregate import PartialAggregate
from gridagg.model.grid import Grid, grid_prefix
from gridagg.tree import TreeState
from gridagg.tune.costmodel import CostModel
from gridagg.write.change import cut_axis, leaves_below

# Merges per write: a write that fails leaves an intent naming its grids, which the next
# writer seals and rebuilds; bounded, so is that work (and a writer waiting for the lock
# waits for one batch, not the whole tune).
MERGES_PER_WRITE = 64


@dataclass
class Merge:
    """Inner grid `grid_id` to become a leaf in place of `leaves` holding `rows` rows."""

    grid_id: str
    leaves: list[str]
    rows: int


def target_rows(model: CostModel, n_threshold: int) -> int:
    """The most rows a merged leaf may hold: what a cut grid costs in rows on the store,
    at most n_threshold."""
    return int(min(model.grid_in_rows(), n_threshold))


def plan_merges(tree: TreeState, target: int, retired: set[str]) -> list[Merge]:
    """The highest inner grids of `tree` holding at most `target` rows (none of them or
    their leaves' IDs in `retired`), with the leaves below each."""
    out = []
    stack = [tree.root]
    while stack:
        i = stack.pop()
        if tree.left[i] < 0:
            continue
        g = tree.ids[i]
        if int(tree.aggs.count[i]) <= target and g not in retired:
            leaves = leaves_below(tree, i)
            if not retired.intersection(leaves):
                out.append(Merge(g, leaves, int(tree.aggs.count[i])))
                continue
        stack += [int(tree.left[i]), int(tree.right[i])]
    return sorted(out, key=lambda m: m.grid_id)


def merge(write, tree: TreeState, m: Merge) -> None:
    """Make inner grid m.grid_id of `tree` a leaf in place of m.leaves, as steps of
    `write` (a gridagg.write.protocol.Write of kind "tune"; the module docstring)."""
    ds, store = write.ds, write.store
    parts = [store.read_grid(ds, leaf) for leaf in m.leaves]
    values = np.concatenate([v for _, v in parts])
    i = tree.index[m.grid_id]
    write.intend([m.grid_id])
    write.put_grids([(grid_prefix(m.grid_id), pa.concat_arrays([e for e, _ in parts]), values)])
    write.put_aggregates({m.grid_id: PartialAggregate.of_rows(values, len(ds.columns))})
    write.switch(m.leaves, [Grid(m.grid_id, tuple(zip(tree.lo[i].tolist(), tree.hi[i].tolist())), cut_axis(tree, i))])


def tune(engine, name: str, model: CostModel, apply: bool = True) -> tuple[list[Merge], int]:
    """The merges the model asks for in dataset `name` (gridagg.engine.GridEngine
    `engine`), made in place when `apply`, at most MERGES_PER_WRITE per write of kind
    "tune" (each planned anew on the tree as it is then: other writers may have changed
    it in between); returns them and the target rows of a merged leaf."""
    ds = engine.dataset(name)
    target = target_rows(model, ds.grid.n_threshold)
    done: list[Merge] = []
    while True:
        with engine.writing(ds, "tune") as write:
            tree = engine.trees.tree(ds)
            merges = plan_merges(tree, target, set(engine.directory.retired_before(ds.name, 0)))
            if not apply:
                return merges, target
            if not merges:
                return done, target
            for m in merges[:MERGES_PER_WRITE]:
                merge(write, tree, m)
            write.end([m.grid_id for m in merges[:MERGES_PER_WRITE]])
        done += merges[:MERGES_PER_WRITE]

