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

from gridagg.model.errors import InvalidInput
from gridagg.model.schema import DURATION, REFUSE, ROUNDINGS
from gridagg.write.retain import RETAIN

from .common import NAME, NAME_TEXT, Answer, Request, Value

ColumnBound = Union[int, float, str]
Retain = Annotated[str, Field(pattern=RETAIN.pattern,
                              description="a whole number and a unit, d (days), w (weeks) or y (years), such as '10y' "
                                          "or '90d': how long the dataset keeps its rows (older ones go at each "
                                          "retention round; left out or null: for ever); it needs a time dimension")]
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
    retain: Retain | None = None


Row = Annotated[Any, WithJsonSchema({
    "type": "object",
    "description": "column -> value in user units for every column (a nullable one's may be left out, "
                   "null or empty), and optionally an element 'id' (a row whose id is stored already is a "
                   "duplicate and not written again)",
    "additionalProperties": {"type": ["number", "string", "null"]},
})]


ON_CONFLICT = ("'skip' (the default: a row whose id is stored is a duplicate, not written again) or 'replace' (it "
               "replaces the stored row: a correction)")


class RowList(Request):
    """Rows wrapped in an object, and what a row whose element ID is stored does."""

    rows: list[Row] = Field(description="a list of row objects")
    # Text checked by Rows.replace, not a Literal: a wrong value would fail the body's
    # union as a whole, and the 400 would name the body instead of this field.
    on_conflict: str = Field("skip", description=ON_CONFLICT, json_schema_extra={"enum": ["skip", "replace"]})


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
    def replace(self) -> bool:
        """Whether a row whose element ID is stored replaces the stored row (InvalidInput
        for an on_conflict that is neither)."""
        given = self.root.on_conflict if isinstance(self.root, RowList) else "skip"
        if given not in ("skip", "replace"):
            raise InvalidInput(f"on_conflict must be {ON_CONFLICT}, not {given!r}", field="on_conflict")
        return given == "replace"

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
    """A dataset's definition, row count and leaf count, and how long it keeps its rows."""

    row_count: int
    grid_count: int = Field(description="leaves of the grid tree")
    retain: str | None = Field(description="how long the dataset keeps its rows, such as '10y'; null: for ever")


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
    stored: int = Field(description="rows added")
    replaced: int = Field(None, description="with on_conflict 'replace' only: rows that replaced the stored row of "
                                            "their id")
    duplicates: int = Field(description="rows whose id was stored already (with on_conflict 'replace': with the "
                                        "same values), not written again")
    splits: int = Field(description="leaves split to hold the new rows")
    rounded: dict[str, int] = Field(description="column -> values rounded, per column with a rounding policy")
    rejected: list[Rejection]
