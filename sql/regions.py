"""A polygon test in WHERE into the JSON API's region (GeoJSON).

Understood: ST_Contains(polygon, point), ST_Covers(polygon, point), ST_Intersects of
the two either way round, ST_Within(point, polygon) and ST_CoveredBy(point, polygon).
The polygon is ST_GeomFromText('POLYGON(...)' or 'MULTIPOLYGON(...)'[, 4326]),
ST_GeomFromGeoJSON('{...}') or 'POLYGON(...)'::geometry, optionally in ST_SetSRID(...,
4326); the point is ST_Point(lon, lat) or ST_MakePoint(lon, lat) over the dataset's
region dimensions, in that order. Each selects the rows whose point the polygon covers,
its edge counting as inside, as the JSON API's region does (PostGIS's ST_Contains and
ST_Within leave out points on the edge; docs/sql.md says so).
"""

from __future__ import annotations

import json

import shapely.wkt
from shapely.errors import ShapelyError
from shapely.geometry import mapping
from sqlglot import exp

from gridagg.model.schema import Dataset

from .errors import INVALID_PARAMETER_VALUE, SqlError, unsupported
from .names import arguments, column, function_name
from .values import sql_text

POLYGON_FIRST = ("st_contains", "st_covers", "st_intersects")
POINT_FIRST = ("st_within", "st_coveredby", "st_intersects")
POLYGON_MAKERS = ("st_geomfromtext", "st_polygonfromtext", "st_mpolyfromtext", "st_geometryfromtext")
POINT_MAKERS = ("st_point", "st_makepoint")
LONLAT = 4326


def read_region(term: exp.Expression, ds: Dataset, aliases: set[str]) -> dict | None:
    """The GeoJSON region a polygon test stands for; None if `term` is no polygon test."""
    name = function_name(term)
    if name not in POLYGON_FIRST + POINT_FIRST:
        return None
    args = arguments(term)
    if len(args) != 2:
        raise SqlError(INVALID_PARAMETER_VALUE, f"{name}() takes two geometries")
    polygon, point = args
    if name in POINT_FIRST and _is_point(polygon):
        polygon, point = point, polygon
    elif name not in POLYGON_FIRST:
        raise unsupported(f"{sql_text(term)}", f"write {name}(ST_Point(lon, lat), polygon)")
    _check_point(point, ds, aliases, term)
    return _polygon(polygon)


def _unwrap_srid(node: exp.Expression) -> exp.Expression:
    if function_name(node) == "st_setsrid":
        inner, srid = arguments(node)
        _check_srid(srid)
        return inner
    return node


def _check_srid(node: exp.Expression) -> None:
    if not (isinstance(node, exp.Literal) and str(node.this) == str(LONLAT)):
        raise unsupported(f"SRID {sql_text(node)}", f"coordinates are longitude and latitude (SRID {LONLAT})")


def _is_point(node: exp.Expression) -> bool:
    return function_name(_unwrap_srid(node)) in POINT_MAKERS


def _check_point(node: exp.Expression, ds: Dataset, aliases: set[str], term: exp.Expression) -> None:
    node = _unwrap_srid(node)
    axes = ds.lonlat_axes
    if axes is None:
        raise unsupported(f"a polygon test on {ds.name}", "it has no lon and lat dimensions")
    want = [ds.dimensions[i].name for i in axes]
    args = arguments(node) if function_name(node) in POINT_MAKERS else []
    if len(args) != 2 or not all(isinstance(a, exp.Column) for a in args) or \
            [column(ds, a, aliases).name for a in args] != want:
        raise unsupported(f"the point of {sql_text(term)}", f"write ST_Point({want[0]}, {want[1]})")


def _polygon(node: exp.Expression) -> dict:
    node = _unwrap_srid(node)
    name = function_name(node)
    args = arguments(node)
    if isinstance(node, exp.Cast) and isinstance(node.this, exp.Literal):
        return _from_wkt(str(node.this.this))
    if name in POLYGON_MAKERS and args and isinstance(args[0], exp.Literal):
        if len(args) == 2:
            _check_srid(args[1])
        return _from_wkt(str(args[0].this))
    if name == "st_geomfromgeojson" and len(args) == 1 and isinstance(args[0], exp.Literal):
        try:
            return json.loads(str(args[0].this))
        except ValueError as exc:
            raise SqlError(INVALID_PARAMETER_VALUE, f"ST_GeomFromGeoJSON: invalid JSON: {exc}") from None
    raise unsupported(f"the polygon {sql_text(node)}",
                      "write ST_GeomFromText('POLYGON((...))') or ST_GeomFromGeoJSON('{...}')")


def _from_wkt(text: str) -> dict:
    try:
        shape = shapely.wkt.loads(text)
    except (ShapelyError, ValueError) as exc:
        raise SqlError(INVALID_PARAMETER_VALUE, f"invalid WKT {text[:80]!r}: {exc}") from None
    if shape.geom_type not in ("Polygon", "MultiPolygon"):
        raise unsupported(f"a region that is a {shape.geom_type.upper()}", "use a POLYGON or MULTIPOLYGON")
    return json.loads(json.dumps(mapping(shape)))  # tuples as lists, as GeoJSON is
