"""Where points and rectangles lie against a polygon, in compiled code (numba): the tests
the planner's walk makes of grids (face), the scans make of blocks (face) and of rows
(point_in_polygon). A polygon is given as its edges, rows (x1, y1, x2, y2) of every ring,
in user units (a stored value divided by its column's scale).
"""

from __future__ import annotations

import numba

OUTSIDE, NEAR, INSIDE = 0, 1, 2


@numba.njit(cache=True, nogil=True)
def even_odd(x, y, edges):
    """Whether (x, y) lies inside the polygon of `edges` (rows x1, y1, x2, y2 of every
    ring) by the even-odd rule: a ray from it crosses the edges an odd number of times.
    Points on an edge may go either way; callers settle those first."""
    inside = False
    for e in range(edges.shape[0]):
        x1, y1, x2, y2 = edges[e, 0], edges[e, 1], edges[e, 2], edges[e, 3]
        if (y1 > y) != (y2 > y) and x < x1 + (y - y1) * (x2 - x1) / (y2 - y1):
            inside = not inside
    return inside


@numba.njit(cache=True, nogil=True)
def point_in_polygon(x, y, edges, eps):
    """0: (x, y) lies outside the polygon of `edges` (rows x1, y1, x2, y2 of every ring),
    2: inside, 1: within eps of an edge (the exact test must say)."""
    for e in range(edges.shape[0]):
        x1, y1, x2, y2 = edges[e, 0], edges[e, 1], edges[e, 2], edges[e, 3]
        if x < min(x1, x2) - eps or x > max(x1, x2) + eps or y < min(y1, y2) - eps or y > max(y1, y2) + eps:
            continue
        dx, dy = x2 - x1, y2 - y1
        length2 = dx * dx + dy * dy
        t = 0.0 if length2 == 0 else min(1.0, max(0.0, ((x - x1) * dx + (y - y1) * dy) / length2))
        px, py = x1 + t * dx - x, y1 + t * dy - y
        if px * px + py * py <= eps * eps:
            return 1
    return 2 if even_odd(x, y, edges) else 0


@numba.njit(cache=True, nogil=True)
def face(xlo, xhi, ylo, yhi, edges, eps):
    """0: the rectangle lies outside the polygon, 2: inside, 1: an edge of the polygon
    comes within eps of it (or the test cannot tell)."""
    xl, xh, yl, yh = xlo - eps, xhi + eps, ylo - eps, yhi + eps
    for e in range(edges.shape[0]):
        x1, y1, x2, y2 = edges[e, 0], edges[e, 1], edges[e, 2], edges[e, 3]
        if max(x1, x2) < xl or min(x1, x2) > xh or max(y1, y2) < yl or min(y1, y2) > yh:
            continue
        if (xl <= x1 <= xh and yl <= y1 <= yh) or (xl <= x2 <= xh and yl <= y2 <= yh):
            return 1
        # The segment's line passes through the rectangle when its corners are not all
        # strictly on one side of it.
        dx, dy = x2 - x1, y2 - y1
        c1 = dx * (yl - y1) - dy * (xl - x1)
        c2 = dx * (yl - y1) - dy * (xh - x1)
        c3 = dx * (yh - y1) - dy * (xl - x1)
        c4 = dx * (yh - y1) - dy * (xh - x1)
        if not ((c1 > 0 and c2 > 0 and c3 > 0 and c4 > 0) or (c1 < 0 and c2 < 0 and c3 < 0 and c4 < 0)):
            return 1
    # No edge near: the rectangle is all in or all out; its centre says which.
    return 2 if even_odd(0.5 * (xlo + xhi), 0.5 * (ylo + yhi), edges) else 0
