"""The grid tree seen from the leaves: locate many points at once, vectorised.

The directory holds only leaves, but leaves tile their parents exactly, so every internal
grid's box is the hull of its children and its split (axis, cut) is where its two
children's boxes part. SplitTree rebuilds those splits once (on the driver, from the
leaf boxes: small) and then walks arrays of points down the tree, one compiled pass (in
the executors, after a broadcast).
"""

from __future__ import annotations

import numba
import numpy as np

from gridagg.model.grid import Grid


class SplitTree:
    def __init__(self, leaves: list[Grid], ndim: int):
        boxes: dict[str, tuple] = {g.grid_id: g.box for g in leaves}
        ids = sorted(boxes, key=len, reverse=True)
        pending = set()
        for g in ids:
            pending.update(g[:i] for i in range(1, len(g)))
        # Build internal boxes bottom-up (deepest first).
        for p in sorted(pending, key=len, reverse=True):
            b0, b1 = boxes.get(p + "0"), boxes.get(p + "1")
            if b0 is None or b1 is None:
                raise ValueError(f"leaves do not tile grid {p}: a child is missing")
            boxes[p] = tuple((min(a[0], b[0]), max(a[1], b[1])) for a, b in zip(b0, b1))
        self.ids = sorted(boxes)
        pos = {g: i for i, g in enumerate(self.ids)}
        n = len(self.ids)
        self.axis = np.full(n, -1, dtype=np.int64)
        self.cut = np.zeros(n, dtype=np.int64)
        self.left = np.full(n, -1, dtype=np.int64)
        self.right = np.full(n, -1, dtype=np.int64)
        for p in pending:
            b0, b1 = boxes[p + "0"], boxes[p + "1"]
            axes = [a for a in range(ndim) if b0[a] != b1[a]]
            if len(axes) != 1 or b0[axes[0]][1] + 1 != b1[axes[0]][0]:
                raise ValueError(f"children of grid {p} are not a split of it")
            a = axes[0]
            i = pos[p]
            self.axis[i], self.cut[i] = a, b0[a][1]
            self.left[i], self.right[i] = pos[p + "0"], pos[p + "1"]
        self.root = pos["0"]

    def locate(self, points: np.ndarray) -> np.ndarray:
        """Index into self.ids of the leaf holding each point ((m, >= ndim) int64)."""
        out = np.empty(len(points), dtype=np.int64)
        _walk(np.ascontiguousarray(points, np.int64), self.root, self.axis, self.cut, self.left, self.right, out)
        return out


@numba.njit(cache=True, nogil=True)
def _walk(points, root, axis, cut, left, right, out):
    """Each point down the tree to its leaf, in one compiled pass: numpy's level-by-level
    walk took a large share of the read pass's CPU."""
    for i in range(points.shape[0]):
        node = root
        while axis[node] >= 0:
            node = left[node] if points[i, axis[node]] <= cut[node] else right[node]
        out[i] = node
