"""Queries and series: the request bodies (and the GET form's query string) and the
answers gridagg.query.spec.QueryResult.to_json and SeriesResult.to_json write.

Checked here: the shape. Checked by the core when the engine parses the query
(gridagg.query.spec.QuerySpec.parse, SeriesSpec.parse): that where's dimensions and the
aggregates' columns exist, bounds against their columns (decimals, timestamps, lo <= hi),
step and window against each other, the number of points, and the region
(gridagg.query.regions.Region).
"""

from __future__ import annotations

from typing import Annotated, Union

from pydantic import BeforeValidator, ConfigDict, Field, Json

from gridagg.model.schema import DURATION, MAX_DURATION

from .common import (
    Aggregates,
    Answer,
    Deadline,
    Dimension,
    Explain,
    Range,
    Request,
    Value,
    Where,
)
from .geojson import Region

Duration = Annotated[Union[Annotated[int, Field(gt=0, le=MAX_DURATION)], Annotated[str, Field(pattern=DURATION)]],
                     Field(description="a duration: whole seconds above 0, or a number and a unit (s, m, h, d) "
                                       "such as '1d', '6h', '90m'; at most 10,000 years")]
Time = Annotated[Union[str, int, float], Field(
    description="a time: an ISO 8601 timestamp (UTC when it names no zone), or seconds since 1970")]


class QueryRequest(Request):
    """Aggregates over the rows inside a box (where) and, optionally, a polygon (region)."""

    where: Where | None = None
    aggregates: Aggregates
    region: Region | None = None
    explain: Explain = False
    deadline_ms: Deadline | None = None


class SeriesRequest(QueryRequest):
    """Aggregates per time bucket, optionally over a moving window: point i stands for
    the bucket [start + i*step, start + (i+1)*step) and aggregates the window ending with it."""

    step: Annotated[Duration, Field(description="the buckets' width: whole seconds above 0, or a number "
                                                "and a unit (s, m, h, d) such as '1d' or '6h'")]
    window: Annotated[Duration, Field(description="the moving window ending with each bucket, a whole number "
                                                  "of steps: seconds, or a number and a unit such as '7d' "
                                                  "(left out: one step, plain buckets)")] | None = None
    start: Annotated[Time, Field(description="the first point's time: an ISO 8601 timestamp or seconds since "
                                             "1970 (left out: the start of where's time range, else of the "
                                             "dataset's)")] | None = None
    end: Annotated[Time, Field(description="a time in the last bucket: an ISO 8601 timestamp or seconds since "
                                           "1970 (left out: the end of where's time range, else of the "
                                           "dataset's)")] | None = None


def _comma_list(value: object) -> object:
    return [part.strip() for part in value.split(",") if part.strip()] if isinstance(value, str) else value


def _lo_hi(value: object) -> object:
    """'lo,hi' -> [lo, hi], an empty side None; anything else is left for the model to refuse."""
    if isinstance(value, str) and value.count(",") == 1:
        return [part.strip() or None for part in value.split(",")]
    return value


class QueryString(Request):
    """The GET form of a query: the same fields as QueryRequest, as text
    (?aggregates=count,avg:temperature&where.lon=-5,5&region=<GeoJSON>). Values are
    read from text (explain=true), so this model is not strict."""

    model_config = ConfigDict(strict=False)

    aggregates: Annotated[Aggregates, BeforeValidator(_comma_list), Field(
        description="comma-separated aggregates such as count,avg:temperature")]
    where: Annotated[dict[Dimension, Annotated[Range, BeforeValidator(_lo_hi), Field(
        description="lo,hi in user units: two bounds separated by a comma, either one empty for an open end")]],
        Field(description="one where.<dimension>=lo,hi per dimension to narrow, in user units, either side "
                          "empty for an open end, such as where.lon=-5,5&where.time=2012-06-01T00:00:00Z,")
    ] | None = None
    region: Annotated[Json[Region], Field(
        description="a GeoJSON Polygon or MultiPolygon (or a Feature holding one) as JSON text")] | None = None
    explain: Explain = False
    deadline_ms: Deadline | None = None


# ---------------------------------------------------------------------------- answers


class RegionPlan(Answer):
    """Where the leaves lie against the polygon."""

    leaves_inside: int = Field(description="leaves inside the polygon: answered from their aggregates")
    leaves_on_edge: int = Field(description="leaves the polygon's edge crosses: their rows are tested")
    leaves_outside: int = Field(description="leaves of the box outside the polygon")
    rectangle: bool = Field(None, description="present (true) when the polygon is a lon/lat rectangle, "
                                              "answered as a box")


class ExplainedGrids(Answer):
    """With explain: the grids answered from their aggregates and those scanned."""

    reused: list[str] = Field(description="IDs of the grids answered from their aggregates")
    scanned: list[str] = Field(description="IDs of the leaves whose rows were read")
    truncated: bool = Field(description="whether either list was cut short (at 10,000 IDs)")


class BoundsPlan(Answer):
    """With a deadline: where the answer came from."""

    exact_grids: int = Field(description="grids whose part of the answer is exact: answered from their "
                                         "aggregates, or read")
    bounded_grids: int = Field(description="leaves not read, bounded from their aggregates and data bounds")
    rows_read: int = Field(description="rows in the cut leaves read")
    rows_bounded: int = Field(description="rows in the leaves not read")


class Plan(Answer):
    """What the answer cost: the paper's Table 3 quantities and round trips per store."""

    total_grids: int = Field(description="leaves of the dataset")
    reused_grids_before: int = Field(description="leaves inside the query, answered from aggregates")
    reused_grids_after: int = Field(description="grids read for them, after folding siblings into parents")
    rows_in_reused_grids: int = Field(description="rows the reused grids stand for")
    scanned_grids_before: int = Field(description="leaves the query cuts")
    scanned_grids_after: int = Field(description="of those, the leaves read after min/max skipping")
    rows_in_scanned_grids: int = Field(description="rows in the leaves read")
    rows_matched_by_scans: int = Field(description="of those, the rows the query selects")
    rows_read: int = Field(description="of the rows in the leaves read, those in the blocks read: a leaf's "
                                       "blocks outside the query are passed over, those inside it answer "
                                       "from their aggregates")
    blocks_reused: int = Field(description="blocks of the leaves read answered from their aggregates")
    rows_in_reused_blocks: int = Field(description="rows those blocks stand for")
    round_trips: dict[str, int] = Field(description="round trips per store, such as {\"postgresql\": 0, "
                                                    "\"hbase\": 2}")
    store_calls: dict[str, int] = Field(None, description="the store's calls by where they went, when it says: on "
                                                         "HBase each region server (\"host:port\": calls) and "
                                                         "\"re-asks\", calls repeated for regions that moved, split "
                                                         "or whose server failed")
    elapsed_ms: float = Field(description="time the engine took, in milliseconds")
    skip_rate: float | None = Field(description="share of cut leaves that min/max skipping left unread; "
                                                "null when the query cut none")
    reuse_rate: float | None = Field(description="share of the selected rows answered from aggregates; "
                                                 "null when no row was selected or the count is unknown")
    region: RegionPlan = Field(None, description="with a region: where the leaves lie against it")
    grids: ExplainedGrids = Field(None, description="with explain: the grids reused and scanned")
    rollup_days: int = Field(None, description="a series of time alone: days read from the day rollup")
    rollup_positions: int = Field(None, description="a question over longitude and latitude alone: positions "
                                                    "added up from the position rollup (within whole months: "
                                                    "positions of each month, from the month rollup)")
    rollup_months: int = Field(None, description="a question over longitude and latitude within whole calendar "
                                                 "months: months added up from the month rollup")
    bounds: BoundsPlan = Field(None, description="with a deadline: what the answer and its bounds came from")
    n_size_chosen: str = Field(None, description="when gridagg chose the dataset's n_size (its definition gave "
                                                 "none): what it chose and why")


class SeriesPlan(Plan):
    """A series' plan: a query's, and the buckets aggregated."""

    buckets: int = Field(description="buckets aggregated: points + window/step - 1")


Results = Annotated[dict[str, Value], Field(
    description="aggregate -> answer in user units: counts and numbers, timestamps as ISO 8601 text; null "
                "when no selected row has a value (with a deadline and exact false: the rows read so far)")]
Bounds = Annotated[dict[str, Annotated[list[Value], Field(min_length=2, max_length=2)]], Field(
    description="with a deadline, when not exact: aggregate -> [lo, hi] in user units, holding the exact "
                "answer (null: no bound on that side)")]
MayBeNull = Annotated[list[str], Field(
    description="with a deadline, when not exact: the aggregates whose exact answer may also be null (no "
                "selected row has a value)")]
Exact = Annotated[bool, Field(description="with a deadline: whether every read finished (the answer is exact)")]
ReadShare = Annotated[float, Field(ge=0, le=1, description="with a deadline: the share of the cut leaves' rows "
                                                           "read")]


class QueryResponse(Answer):
    """The query's answer."""

    results: Results
    count: int | None = Field(description="rows selected; null when min/max skipping left it unknown and "
                                          "count was not asked for, or the answer is not exact")
    plan: Plan
    exact: Exact = None
    read_share: ReadShare = None
    bounds: Bounds = None
    may_be_null: MayBeNull = None


class SeriesPoint(Answer):
    """One point of a series."""

    time: str = Field(description="the start of the point's bucket")
    window: list[str] = Field(min_length=2, max_length=2,
                              description="[first, last] second of the window aggregated")
    count: int = Field(description="rows in the window (with a deadline and exact false: of the rows read)")
    results: Results
    exact: Annotated[bool, Field(description="with a deadline, when the series is not exact: false at a point "
                                             "that is not (it has bounds); left out at a point that is")] = None
    bounds: Bounds = None
    may_be_null: MayBeNull = None


class SeriesResponse(Answer):
    """The series."""

    step: int = Field(description="bucket width in seconds")
    window: int = Field(description="window width in seconds")
    points: list[SeriesPoint]
    plan: SeriesPlan
    exact: Exact = None
    read_share: ReadShare = None
