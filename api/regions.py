"""Polygon regions over a dataset's lon/lat dimensions.

Convention: a dataset takes polygon regions when two of its dimensions are numbers named
"lon" and "lat", or "longitude" and "latitude". GeoJSON coordinates are [lon, lat] in
the dimensions' user units. A point on the polygon's boundary counts as inside.

Exactness: a stored value v of a column with scale s is tested as the float nearest to
v / 10**s (the same float a client gets by parsing the decimal), and a leaf's lon/lat
face is the box between the floats of its bounds. Rounding to the nearest float is
monotone, so every stored point of a leaf lies inside that float box: when the polygon
covers the box, it covers each of its points; when the polygon misses the box, it misses
each of them; GEOS predicates are exact for the given floats.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import shapely
from shapely.geometry import LineString, Point, box as shapely_box, shape
from shapely.validation import explain_validity

from gridagg.errors import InvalidInput
from gridagg.schema import Dataset

AXIS_NAMES = (("lon", "lat"), ("longitude", "latitude"))

INSIDE, EDGE, OUTSIDE = "inside", "edge", "outside"


def lonlat_axes(ds: Dataset) -> tuple[int, int] | None:
    names = {c.name: i for i, c in enumerate(ds.dimensions)}
    for lon, lat in AXIS_NAMES:
        if lon in names and lat in names:
            i, j = names[lon], names[lat]
            if ds.dimensions[i].kind == "number" and ds.dimensions[j].kind == "number":
                return i, j
    return None


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


class Region:
    """A validated polygon bound to a dataset's lon/lat axes."""

    def __init__(self, ds: Dataset, geojson: object):
        axes = lonlat_axes(ds)
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
        shapely.prepare(self.geom)

    def narrow(self, box: tuple) -> tuple:
        """The query box cut to the polygon's bounds (stored units, with a margin of one
        stored unit so float rounding can never drop a boundary point)."""
        minx, miny, maxx, maxy = self.geom.bounds
        out = list(box)
        for axis, scale, lo, hi in ((self.lon_axis, self.lon_scale, minx, maxx),
                                    (self.lat_axis, self.lat_scale, miny, maxy)):
            elo = math.floor(Fraction(lo) * scale) - 1
            ehi = math.ceil(Fraction(hi) * scale) + 1
            blo, bhi = out[axis]
            out[axis] = (max(blo, elo), min(bhi, ehi))
        return tuple(out)

    def _face(self, leaf_box) -> object:
        xlo, xhi = (v / self.lon_scale for v in leaf_box[self.lon_axis])
        ylo, yhi = (v / self.lat_scale for v in leaf_box[self.lat_axis])
        if xlo == xhi and ylo == yhi:
            return Point(xlo, ylo)
        if xlo == xhi or ylo == yhi:
            return LineString([(xlo, ylo), (xhi, yhi)])
        return shapely_box(xlo, ylo, xhi, yhi)

    def classify(self, leaf_box) -> str:
        face = self._face(leaf_box)
        if self.geom.covers(face):
            return INSIDE
        if self.geom.intersects(face):
            return EDGE
        return OUTSIDE

    def mask(self, rows: np.ndarray) -> np.ndarray:
        """Which stored rows lie in the polygon (boundary included)."""
        x = rows[:, self.lon_axis].astype(np.float64) / self.lon_scale
        y = rows[:, self.lat_axis].astype(np.float64) / self.lat_scale
        return shapely.intersects_xy(self.geom, x, y)
