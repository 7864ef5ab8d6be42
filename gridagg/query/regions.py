"""Polygon regions over a dataset's lon/lat dimensions.

Convention: a dataset takes polygon regions when two of its dimensions are numbers named
"lon" and "lat", or "longitude" and "latitude". GeoJSON coordinates are [lon, lat] in
the dimensions' user units. A point on the polygon's boundary counts as inside.

Exactness: a stored value v of a column with scale s is tested as the float nearest to
v / 10**s (the same float a client gets by parsing the decimal), and a grid's lon/lat
face is the box between the floats of its bounds. Rounding to the nearest float is
monotone, so every stored point of a grid lies inside that float box: when the polygon
covers the box, it covers each of its points; when it misses the box, it misses each of
them. The planner classifies faces with a compiled test (gridagg.query.planner) that says
"inside" or "outside" only when no polygon edge comes within EPSILON of the face, and
"edge" otherwise; rows of edge grids are tested one by one with GEOS, exact for the
given floats.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import shapely
from shapely.geometry import shape
from shapely.validation import explain_validity

from gridagg.model.errors import InvalidInput, WorkLimitExceeded
from gridagg.model.schema import Dataset
from gridagg.store.scan import PolygonTest

# Far above the rounding error of the compiled face test (coordinates are degrees, or
# at least numbers of that size; a double holds them to about 1e-14).
EPSILON = 1e-9


def _check_coordinates(coords, depth: int, where: str) -> None:
    """Positions must be [x, y] of finite numbers, nested `depth` levels deep."""
    if depth == 0:
        if (not isinstance(coords, (list, tuple)) or len(coords) < 2
                or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in coords)
                or not all(math.isfinite(v) for v in coords)):
            raise InvalidInput(f"{where}: a position must be [lon, lat] of finite numbers", field="region")
        return
    if not isinstance(coords, (list, tuple)) or not coords:
        raise InvalidInput(f"{where}: expected a non-empty list", field="region")
    for c in coords:
        _check_coordinates(c, depth - 1, where)


def _vertices(coords, depth: int) -> int:
    """The vertices of the rings in `coords` (depth 2: a Polygon's rings, 3: a
    MultiPolygon's polygons), each ring's closing position not counted; what is not a
    list counts 0 (the checks refuse it)."""
    if not isinstance(coords, (list, tuple)):
        return 0
    if depth == 2:
        return sum(max(len(ring) - 1, 0) for ring in coords if isinstance(ring, (list, tuple)))
    return sum(_vertices(polygon, depth - 1) for polygon in coords)


class Region:
    """A validated polygon bound to a dataset's lon/lat axes."""

    def __init__(self, ds: Dataset, geojson: object, max_vertices: int | None = None):
        """geojson: a Polygon or MultiPolygon (or a Feature holding one); max_vertices: the
        most vertices it may have, WorkLimitExceeded beyond (every planner step and every
        row on its edge is tested against each edge), None: no limit."""
        axes = ds.lonlat_axes
        if axes is None:
            raise InvalidInput(
                f"dataset {ds.name} has no lon/lat dimensions: a region needs two number "
                "dimensions named 'lon' and 'lat' (or 'longitude' and 'latitude')", field="region")
        self.lon_axis, self.lat_axis = axes
        self.lon_scale = 10 ** ds.dimensions[self.lon_axis].scale
        self.lat_scale = 10 ** ds.dimensions[self.lat_axis].scale
        if isinstance(geojson, dict) and geojson.get("type") == "Feature":
            geojson = geojson.get("geometry")
        if not isinstance(geojson, dict) or geojson.get("type") not in ("Polygon", "MultiPolygon"):
            raise InvalidInput("region must be a GeoJSON Polygon or MultiPolygon", field="region")
        depth = 2 if geojson["type"] == "Polygon" else 3
        if max_vertices is not None:  # counted before the checks, which take time per vertex
            vertices = _vertices(geojson.get("coordinates"), depth)
            if vertices > max_vertices:
                raise WorkLimitExceeded(f"the region has {vertices} vertices, more than the limit of {max_vertices}; "
                                        "simplify it", field="region")
        _check_coordinates(geojson.get("coordinates"), depth, "region.coordinates")
        try:
            geom = shape(geojson)
        except Exception as exc:  # shapely raises several types for malformed rings
            raise InvalidInput(f"region is not a valid polygon: {exc}", field="region") from None
        if geom.is_empty:
            raise InvalidInput("region is empty", field="region")
        if not geom.is_valid:
            raise InvalidInput(f"region is not a valid polygon: {explain_validity(geom)}", field="region")
        self.geom = geom
        self._edges: np.ndarray | None = None
        shapely.prepare(self.geom)

    @property
    def rectangle(self) -> bool:
        """Whether the polygon is a lon/lat rectangle: then it selects exactly the rows of
        a box (narrow() gives it) and needs no test of its own."""
        geom = self.geom
        if geom.geom_type != "Polygon" or geom.interiors:
            return False
        minx, miny, maxx, maxy = geom.bounds
        corners = {(minx, miny), (minx, maxy), (maxx, miny), (maxx, maxy)}
        return minx < maxx and miny < maxy and {tuple(c[:2]) for c in geom.exterior.coords} == corners

    def narrow(self, box: tuple) -> tuple:
        """The query box cut to the polygon's bounds, in stored units: the exact bounds of
        the points whose floats lie within them (for a rectangle, exactly its points)."""
        minx, miny, maxx, maxy = self.geom.bounds
        out = list(box)
        for axis, scale, lo, hi in ((self.lon_axis, self.lon_scale, minx, maxx),
                                    (self.lat_axis, self.lat_scale, miny, maxy)):
            blo, bhi = out[axis]
            out[axis] = (max(blo, _float_bound(lo, scale, upper=False)), min(bhi, _float_bound(hi, scale, upper=True)))
        return tuple(out)

    @property
    def edges(self) -> np.ndarray:
        """Every edge of every ring as rows (x1, y1, x2, y2), for the compiled face test."""
        if self._edges is None:
            parts = []
            for ring in _rings(self.geom):
                xy = np.asarray(ring.coords, dtype=np.float64)[:, :2]
                parts.append(np.hstack([xy[:-1], xy[1:]]))
            self._edges = np.ascontiguousarray(np.vstack(parts))
        return self._edges

    def test(self) -> PolygonTest:
        """The polygon as a store tests rows of edge grids with it (gridagg.store.scan)."""
        return PolygonTest(self.edges, self.lon_axis, self.lat_axis, self.lon_scale, self.lat_scale, EPSILON)

    def mask(self, rows: np.ndarray) -> np.ndarray:
        """Which stored rows lie in the polygon (boundary included)."""
        x = rows[:, self.lon_axis].astype(np.float64) / self.lon_scale
        y = rows[:, self.lat_axis].astype(np.float64) / self.lat_scale
        return shapely.intersects_xy(self.geom, x, y)


def _rings(geom):
    for poly in getattr(geom, "geoms", [geom]):
        yield poly.exterior
        yield from poly.interiors


def _float_bound(bound: float, scale: int, upper: bool) -> int:
    """The smallest stored value v with v / scale >= bound as floats (the largest with
    v / scale <= bound when upper): how mask() compares a stored value with the polygon."""
    v = math.floor(Fraction(bound) * scale)
    if upper:
        while v / scale > bound:
            v -= 1
        while (v + 1) / scale <= bound:
            v += 1
        return v
    while v / scale >= bound:
        v -= 1
    return v + 1
