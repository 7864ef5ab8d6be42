"""Datasets: the definition a client posts, the descriptions the API answers with, the
rows a client posts and the ingest report.

Checked here: the definition's shape and names. Checked by the core
(gridagg.model.schema.Dataset.from_json, Column, GridParams): domains (min <= max, exact at the
scale, time columns' timestamps), that dimensions have min and max, unique column names,
n_size <= n_threshold, l_time needing a time dimension. Rows are checked one by one by
the core (gridagg.model.schema.Dataset.encode_row) and a bad row is reported in the answer,
so a row is any JSON value here.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import Field, RootModel, WithJsonSchema

from gridagg.model.schema import DURATION, REFUSE, ROUNDINGS

from .common import NAME, NAME_TEXT, Answer, Request, Value

ColumnBound = Union[int, float, str]
Rounding = Literal[(REFUSE, *ROUNDINGS)]


class ColumnDefinition(Request):
    """One column of a dataset."""

    name: str = Field(pattern=f"^{NAME}$", description=f"a column name: {NAME_TEXT}")
    type: Literal["number", "time"] = Field("number", description="'number' (the default) or 'time'")
    scale: int = Field(0, ge=0, le=12, description="an integer 0..12, the decimals a number keeps (left out: "
                                                   "0; a value with more decimals is refused, never rounded)")
    min: ColumnBound | None = Field(None, description="the low end of the column's domain: a number, or an "
                                                      "ISO 8601 timestamp for a time column (dimensions need one)")
    max: ColumnBound | None = Field(None, description="the high end of the column's domain: a number, or an "
                                                      "ISO 8601 timestamp for a time column (dimensions need one)")
    unit: str | None = Field(None, description="a unit for people to read, such as 'degC'")
    rounding: Rounding = Field(REFUSE, description=f"how a number with more decimals than the scale is stored: "
                                                   f"{', '.join(ROUNDINGS)}, or {REFUSE} (the default: it is an "
                                                   "error)")
    nullable: bool = Field(False, description="true or false (the default): true lets a measure's value be "
                                              "missing, stored as absent")


class GridDefinition(Request):
    """The grid parameters (the paper's N_size, N_threshold and L_time)."""

    n_size: int = Field(None, gt=0, description="a positive integer: a split recurses while a child holds more "
                                                "rows than this (left out: 1000)")
    n_threshold: int = Field(None, gt=0, description="a positive integer, at least n_size: a leaf holding more "
                                                     "rows than this is split (left out: 10 x n_size)")
    l_time: Union[Annotated[int, Field(gt=0)], Annotated[str, Field(pattern=DURATION)]] | None = \
        Field(None, description="the widest time span of a grid, to which the time axis is cut first: seconds, "
                                "or a number and a unit (s, m, h, d) such as '30d' (left out or null: no such cut)")


class DatasetDefinition(Request):
    """A new dataset: its dimensions (the grid space), measures and grid parameters."""

    name: str = Field(pattern=f"^{NAME}$", description=f"a dataset name: {NAME_TEXT}")
    dimensions: list[ColumnDefinition] = Field(
        min_length=1, description="a non-empty list of columns spanning the grid space, each with min and max")
    measures: list[ColumnDefinition] = Field(None, description="a list of further columns (left out: none)")
    grid: GridDefinition | None = Field(None, description="an object of grid parameters (left out or null: the "
                                                          "defaults)")


Row = Annotated[Any, WithJsonSchema({
    "type": "object",
    "description": "column -> value in user units for every column (a nullable one's may be left out, "
                   "null or empty), and optionally an element 'id' (a row whose id is stored already is a "
                   "duplicate and not written again)",
    "additionalProperties": {"type": ["number", "string", "null"]},
})]


class RowList(Request):
    """Rows wrapped in an object."""

    rows: list[Row] = Field(description="a list of row objects")


class Rows(RootModel):
    """a JSON list of row objects, or an object {"rows": [...]}"""

    # The docstring is the body's description in /openapi.json and in a 400 ("the request
    # body must be ..."). Each row is checked on its own by the core; a bad one is
    # reported in the answer and the others are stored.
    root: Union[list[Row], RowList]

    @property
    def rows(self) -> list:
        return self.root if isinstance(self.root, list) else self.root.rows

    @property
    def rejected(self) -> list:
        """Rows refused before the core sees them: none for JSON (a CSV line can be,
        api.reading.CsvRows)."""
        return []


# ---------------------------------------------------------------------------- answers


class ColumnInfo(Answer):
    """A column as defined."""

    name: str
    type: Literal["number", "time"]
    scale: int = Field(None, description="decimals kept (number columns)")
    min: ColumnBound = Field(None, description="low end of the domain, as defined")
    max: ColumnBound = Field(None, description="high end of the domain, as defined")
    unit: str = None
    rounding: Rounding = Field(None, description="the rounding policy, when not refuse")
    nullable: bool = Field(None, description="present (true) for a nullable measure")


class GridInfo(Answer):
    """The grid parameters in force."""

    n_size: int
    n_threshold: int
    l_time: int | None = Field(description="seconds, or null")
    chosen: str = Field(None, description="when gridagg chose n_size (the definition gave none): what it chose "
                                          "and why")


class DatasetInfo(Answer):
    """A dataset's definition, with what it offers queries."""

    name: str
    dimensions: list[ColumnInfo]
    measures: list[ColumnInfo]
    grid: GridInfo
    time_dimension: str | None = Field(description="the time dimension, which series need; null without one")
    region_dimensions: list[str] | None = Field(
        description="[lon, lat] dimensions, which regions need; null without them")


class DatasetDetail(DatasetInfo):
    """A dataset's definition, row count and leaf count."""

    row_count: int
    grid_count: int = Field(description="leaves of the grid tree")


class DatasetList(Answer):
    """Every dataset."""

    datasets: list[DatasetInfo]


class GridBox(Answer):
    """A leaf grid."""

    id: str
    count: int = Field(description="rows in the leaf")
    box: dict[str, Annotated[list[Value], Field(min_length=2, max_length=2)]] = Field(
        description="dimension -> [lo, hi] of the leaf's box in user units")


class GridList(Answer):
    """A dataset's leaf grids."""

    dataset: str
    grid_count: int
    grids: list[GridBox]


class Rejection(Answer):
    """A row that was not stored, and why."""

    index: int = Field(description="the row's position among the body's data rows, from 0")
    field: str | None = Field(description="the offending column; 'row' for a row that is not an object or "
                                          "has the wrong number of CSV values")
    reason: str


class IngestResponse(Answer):
    """What was stored of the rows sent."""

    received: int
    stored: int
    duplicates: int = Field(description="rows whose id was stored already")
    splits: int = Field(description="leaves split to hold the new rows")
    rounded: dict[str, int] = Field(description="column -> values rounded, per column with a rounding policy")
    rejected: list[Rejection]
