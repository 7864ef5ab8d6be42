"""Which rows a delete takes: those inside a box (and a polygon region), or those with
given element IDs. Each finder gives the Content of every leaf the delete touches, for
gridagg.write.change to write (GridEngine.delete).

A leaf whose data bounds lie inside the box (and inside the region) loses every row: no
row of it is read. Of the leaves whose data bounds the box's boundary cuts, one scan of
the store (where the rows are: on HBase, the region servers) counts the rows inside the
box of each; only those that hold some are read whole, and lose some rows and keep
others.
"""

from __future__ import annotations

from typing import Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from gridagg.model.grid import Box
from gridagg.store.scan import RangeCondition, ScanRequest
from gridagg.tree import TreeState
from gridagg.write.change import Content

# (stored rows) -> which of them lie in the region.
Inside = Callable[[np.ndarray], np.ndarray]
# (least, greatest value per dimension of a leaf's rows) -> whether the region holds
# every point of that box.
Covers = Callable[[np.ndarray, np.ndarray], bool]


def in_box(write, tree: TreeState, box: Box, inside: Inside | None = None,
           covers: Covers | None = None) -> dict[str, Content]:
    """The leaves a delete of the rows inside `box` (per dimension stored (lo, hi)),
    and inside a region when `inside` and `covers` describe one, touches, each with what
    it keeps."""
    lo, hi = (np.array(side, np.int64) for side in zip(*box))
    out, cut = {}, []
    for i in _leaves_meeting(tree, lo, hi).tolist():
        g = tree.ids[i]
        dlo, dhi = tree.dlo[i], tree.dhi[i]
        if (lo <= dlo).all() and (dhi <= hi).all() and (covers is None or covers(dlo, dhi)):
            out[g] = Content.emptied(tree, g)
        else:
            cut.append(g)
    for g in _holding(write, cut, lo, hi):
        eids, values = write.store.read_grid(write.ds, g)
        gone = ((values[:, : len(lo)] >= lo) & (values[:, : len(lo)] <= hi)).all(axis=1)
        if inside is not None and gone.any():
            gone[gone] = inside(values[gone])
        if gone.any():
            out[g] = Content.without(eids, values, gone, len(lo))
    return out


def with_ids(write, tree: TreeState, element_ids: list[bytes], box: Box | None = None,
             inside: Inside | None = None) -> dict[str, Content]:
    """The leaves a delete of the rows with these element IDs touches (those inside
    `box` and the region `inside` tests, when given: None looks through every leaf),
    each with what it keeps. Every leaf looked at is read: the element IDs are kept
    with the rows, nowhere else."""
    wanted = pa.array(element_ids, pa.binary())
    if box is None:
        leaves = np.flatnonzero((tree.left < 0) & (tree.aggs.count > 0))
    else:
        lo, hi = (np.array(side, np.int64) for side in zip(*box))
        leaves = _leaves_meeting(tree, lo, hi)
    out = {}
    for i in leaves.tolist():
        g = tree.ids[i]
        eids, values = write.store.read_grid(write.ds, g)
        gone = pc.is_in(eids, value_set=wanted).to_numpy(zero_copy_only=False).copy()
        if box is not None:
            gone &= ((values[:, : len(lo)] >= lo) & (values[:, : len(lo)] <= hi)).all(axis=1)
        if inside is not None and gone.any():
            gone[gone] = inside(values[gone])
        if gone.any():
            out[g] = Content.without(eids, values, gone, tree.lo.shape[1])
    return out


def _holding(write, leaves: list[str], lo: np.ndarray, hi: np.ndarray) -> list[str]:
    """Those of `leaves` that hold rows inside the box lo..hi: one scan counts them per
    leaf."""
    if len(leaves) <= 1:
        return leaves
    request = ScanRequest(leaves, [RangeCondition(d, int(a), int(b)) for d, (a, b) in enumerate(zip(lo, hi))], [0],
                          groups=np.arange(len(leaves), dtype=np.int64), ngroups=len(leaves))
    counts = write.store.scan(write.ds, request).aggs.count
    return [g for g, n in zip(leaves, counts.tolist()) if n]


def _leaves_meeting(tree: TreeState, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """The leaves of `tree` holding rows whose data bounds meet the box lo..hi."""
    return np.flatnonzero((tree.left < 0) & (tree.aggs.count > 0) & (tree.dlo <= hi).all(axis=1)
                          & (tree.dhi >= lo).all(axis=1))
