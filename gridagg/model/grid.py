"""Grids of the k-d tree, their IDs and their row keys.

A grid is a closed box of stored integers, one interval per dimension. The root is "0";
splitting grid x gives x+"0" (values <= cut on the split axis) and x+"1" (values > cut).
Because stored values are integers, the children [lo, cut] and [cut+1, hi] partition the
parent exactly, and PostgreSQL's && and <@ (which count touching as overlap) stay exact.

Row keys follow the paper: one salt byte (the 8 bits after the leading "0" of the grid
ID, right-padded with zeros) + grid ID + "-" + element ID. Key order is grid-ID order, and
every grid and every subtree is one contiguous key range.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from fractions import Fraction

Box = tuple[tuple[int, int], ...]

ROOT = "0"


def salt(grid_id: str) -> int:
    """The salt byte of a grid: grid "00111" -> bits "0111" -> "01110000" -> 112."""
    bits = grid_id[1:9]
    return int(bits.ljust(8, "0"), 2)


@functools.lru_cache(maxsize=1 << 20)
def grid_prefix(grid_id: str) -> bytes:
    """Key prefix of a grid's own rows (not its descendants')."""
    return bytes([salt(grid_id)]) + grid_id.encode() + b"-"


def row_key(grid_id: str, element_id: bytes) -> bytes:
    return grid_prefix(grid_id) + element_id


def element_of(key: bytes) -> bytes:
    """The element ID of a row key."""
    return key[key.index(b"-", 1) + 1 :]


def split_key(key: bytes) -> tuple[bytes, bytes]:
    """(grid prefix, element ID) of a row key."""
    cut = key.index(b"-", 1) + 1
    return key[:cut], key[cut:]


def grid_of(key: bytes) -> str:
    """The grid ID of a row key or a grid prefix."""
    return key[1 : key.index(b"-", 1)].decode()


def grid_start(key: bytes) -> bytes:
    """Where a grid's rows begin for a key range starting at `key`: its grid prefix when
    the key lies inside a grid's rows (prefix + element ID), else the key itself."""
    cut = key.find(b"-", 1)
    return key if cut == -1 else key[: cut + 1]


def parent(grid_id: str) -> str:
    return grid_id[:-1]


def sibling(grid_id: str) -> str:
    return grid_id[:-1] + ("1" if grid_id[-1] == "0" else "0")


def ancestors(grid_id: str) -> list[str]:
    """Proper ancestors, root first: "0110" -> ["0", "01", "011"]."""
    return [grid_id[:i] for i in range(1, len(grid_id))]


@dataclass(frozen=True)
class Grid:
    """A leaf of the grid directory: its ID, box and the axis it will be split on next."""

    grid_id: str
    box: Box
    next_axis: int

    def contains_box(self, q: Box) -> bool:
        """True when this grid lies entirely inside q."""
        return all(ql <= lo and hi <= qh for (lo, hi), (ql, qh) in zip(self.box, q))

    def intersects(self, q: Box) -> bool:
        return all(lo <= qh and ql <= hi for (lo, hi), (ql, qh) in zip(self.box, q))


def presplit(domain: Box, time_axis: int | None, l_time: int | None) -> list[Grid]:
    """The initial leaves: the root, halved along time until each is <= l_time wide."""
    ndim = len(domain)
    first_axis = time_axis if time_axis is not None else 0
    grids = [Grid(ROOT, domain, first_axis)]
    if time_axis is None or l_time is None:
        return grids
    after_time = (time_axis + 1) % ndim
    while True:
        lo, hi = grids[0].box[time_axis]
        if hi - lo + 1 <= l_time or lo == hi:
            return grids
        halves = []
        for g in grids:
            lo, hi = g.box[time_axis]
            cut = (lo + hi) // 2
            halves.append(Grid(g.grid_id + "0", _with(g.box, time_axis, (lo, cut)), after_time))
            halves.append(Grid(g.grid_id + "1", _with(g.box, time_axis, (cut + 1, hi)), after_time))
        grids = halves


def _with(box: Box, axis: int, interval: tuple[int, int]) -> Box:
    return box[:axis] + (interval,) + box[axis + 1 :]


def choose_cut(next_axis: int, count: int, sums, mins, maxs, ndim: int) -> tuple[int, int] | None:
    """The (axis, cut) of a mean split, or None when no axis can be split.

    Starts at next_axis; an axis whose values are all equal would leave one child empty,
    so it moves on to the next axis. cut = floor(mean): since values are integers and
    min < max on the chosen axis, min <= cut < max, so both children get rows."""
    for step in range(ndim):
        axis = (next_axis + step) % ndim
        if mins[axis] < maxs[axis]:
            return axis, math.floor(Fraction(sums[axis], count))
    return None


def children(g: Grid, axis: int, cut: int, ndim: int) -> tuple[Grid, Grid]:
    lo, hi = g.box[axis]
    nxt = (axis + 1) % ndim
    return (
        Grid(g.grid_id + "0", _with(g.box, axis, (lo, cut)), nxt),
        Grid(g.grid_id + "1", _with(g.box, axis, (cut + 1, hi)), nxt),
    )


def prefix_range(prefix: bytes) -> tuple[bytes, bytes]:
    """[start, stop) of the keys that start with prefix (prefix never ends in 0xff here)."""
    return prefix, prefix[:-1] + bytes([prefix[-1] + 1])


def subtree_range(grid_id: str) -> tuple[bytes, bytes]:
    """[start, stop) holding the rows of grid_id and of all its descendants, and no other
    grid's rows. Above depth 8 a subtree spans whole salt values after its own first
    keys; from depth 8 on (9 bits) it shares one salt and is a plain prefix range."""
    v0 = salt(grid_id)
    start = bytes([v0]) + grid_id.encode()
    if len(grid_id) >= 9:
        return prefix_range(start)
    v_end = v0 + 2 ** (9 - len(grid_id))
    return start, (bytes([v_end]) if v_end < 256 else b"\xff" * 2)
