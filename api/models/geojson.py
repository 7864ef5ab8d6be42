"""GeoJSON regions: a Polygon or MultiPolygon, or a Feature holding one.

Checked here: the shape (type names, nesting, positions of finite numbers, rings of at
least three positions). Checked by the core (gridagg.query.regions.Region): that the dataset
has lon/lat dimensions and that the polygon is valid (closed, not self-intersecting).
Validated as plain dicts (TypedDict), which is what the core takes; other GeoJSON
members (bbox, properties, ...) are let through.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import ConfigDict, Field, with_config
from typing_extensions import NotRequired, TypedDict

GEOJSON = ConfigDict(extra="allow", strict=True)

Coordinate = Annotated[float, Field(allow_inf_nan=False, description="a finite number")]
Position = Annotated[list[Coordinate], Field(
    min_length=2, description="a position [lon, lat] of two finite numbers in the dimensions' user units")]
Ring = Annotated[list[Position], Field(
    min_length=3, description="a ring: a list of at least three positions [lon, lat], the last one "
                              "repeating the first")]
Rings = Annotated[list[Ring], Field(
    min_length=1, description="a polygon's rings: a non-empty list, the outer ring first, then any holes")]


@with_config(GEOJSON)
class Polygon(TypedDict):
    """A GeoJSON Polygon over the dataset's lon/lat dimensions."""

    type: Literal["Polygon"]
    coordinates: Rings


@with_config(GEOJSON)
class MultiPolygon(TypedDict):
    """A GeoJSON MultiPolygon over the dataset's lon/lat dimensions."""

    type: Literal["MultiPolygon"]
    coordinates: Annotated[list[Rings], Field(min_length=1, description="a non-empty list of polygons' rings")]


Geometry = Annotated[Union[Polygon, MultiPolygon], Field(
    discriminator="type", description="a GeoJSON Polygon or MultiPolygon")]


@with_config(GEOJSON)
class Feature(TypedDict):
    """A GeoJSON Feature whose geometry is the region."""

    type: Literal["Feature"]
    geometry: Geometry
    properties: NotRequired[Annotated[Any, Field(description="any JSON value (not used)")]]


Region = Annotated[Union[Polygon, MultiPolygon, Feature], Field(
    discriminator="type",
    description="a GeoJSON Polygon or MultiPolygon, or a Feature holding one, over the dataset's lon/lat "
                "dimensions, such as {\"type\": \"Polygon\", \"coordinates\": [[[-5, 45], [5, 45], [0, 55], "
                "[-5, 45]]]}; points on its boundary count as inside",
)]
