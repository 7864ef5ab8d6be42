"""The grid tree seen from the leaves: locate many points at once, vectorised.

The directory holds only leaves, but leaves tile their parents exactly, so every internal
grid's box is the hull of its children and its split (axis, cut) is where its two
children's boxes part. SplitTree rebuilds those splits once (on the driver, from the
leaf boxes: small) and then walks numpy arrays of points down the tree level by level
(in the executors, after a broadcast).
"""

from __future__ import annotations

import numpy as np

from gridagg.grid import Grid


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
        node = np.full(len(points), self.root, dtype=np.int64)
        rows = np.arange(len(points))
        while True:
            axis = self.axis[node]
            inner = axis >= 0
            if not inner.any():
                return node
            r = rows[inner]
            nd = node[inner]
            go_left = points[r, axis[inner]] <= self.cut[nd]
            node[r] = np.where(go_left, self.left[nd], self.right[nd])
