"""A leaf split in place, as steps of a write (gridagg.write.protocol): the insert path's split of
a leaf past N_threshold (gridagg.engine) and the tuner's split of a leaf too large for
the questions asked (gridagg.tune.adapt) are this one function with other limits.

The steps: the children's rows (under their new keys) and aggregates first, then one
directory switch; the old leaf's rows stay for queries that still hold it, and are
purged later (gridagg.write.protocol.purge_retired). The cut is gridagg.write.split's.
"""

from __future__ import annotations

import pyarrow as pa

from gridagg.model.aggregate import PartialAggregate
from gridagg.model.grid import choose_cut, grid_prefix
from gridagg.write import protocol as writes
from gridagg.write.split import split_rows


def split_leaf(write: writes.Write, grid_id: str, agg: PartialAggregate, limit: int, n_size: int,
               cuts: tuple[tuple[int, int], ...] = ()) -> int:
    """Split leaf `grid_id` of write.ds (whose aggregate is `agg`) as part of `write`: cut
    when it holds more than `limit` rows, each child again while it holds more than
    `n_size`, or at `cuts` when given (gridagg.write.split.split_rows). Returns the number of
    grids cut (0 when every row is the same point, when no cut falls between its rows,
    or when grids below it still hold rows a merge retired)."""
    ds, store = write.ds, write.store
    grid = write.directory.grid(ds, grid_id)
    if not cuts and choose_cut(grid.next_axis, agg.count, agg.sums, agg.mins, agg.maxs, ds.ndim) is None:
        return 0
    if any(r.startswith(grid_id) for r in write.directory.retired_before(ds.name, 0)):
        # A leaf merged in place not long ago (gridagg.tune.merge): the old leaves' rows below
        # it are still read by queries holding the tree from before; it splits once
        # they are purged, at a later write.
        return 0
    # Rows a split that died earlier left under this leaf's descendants would be
    # counted twice once a child with that ID exists: clear them first.
    writes.clear_subtree(store, ds, grid_id, write.stamps)
    eids, values = store.read_grid(ds, grid_id)
    done = split_rows(grid, values, agg, limit, n_size, ds.ndim, cuts)
    if not done.splits:
        return 0
    # The leaf itself is intended too (an insert did so already): a writer dying before
    # the switch leaves it sealed and its aggregate rebuilt, and the new grids cleared.
    write.intend([grid_id, *done.inner, *(leaf.grid_id for leaf, _, _ in done.leaves)])
    write.put_grids([(grid_prefix(leaf.grid_id), eids.take(pa.array(idx)), values[idx]) for leaf, idx, _ in done.leaves])
    write.put_aggregates({**done.inner, **{leaf.grid_id: a for leaf, _, a in done.leaves}})
    write.switch([grid_id], [leaf for leaf, _, _ in done.leaves])
    return done.splits

