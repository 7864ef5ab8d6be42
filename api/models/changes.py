"""Deletes and drops: the request body of a delete, and the answers.

Checked here: the shape (ids a non-empty list of strings or integers, where and region
as a query's). Checked by the core when the engine parses the delete
(gridagg.engine.GridEngine.delete, gridagg.query.spec.QuerySpec.parse): that where's
dimensions exist, its bounds, the region, and that the delete names rows at all.
"""

from __future__ import annotations

from typing import Annotated, Union

from pydantic import Field

from .common import Answer, Request, Where
from .geojson import Region

ElementId = Annotated[Union[Annotated[str, Field(min_length=1)], int], Field(
    description="an element ID: a non-empty string or an integer")]


class DeleteRows(Request):
    """The rows to delete: those inside where and region (the query's own box and polygon;
    where {} takes every row), or those whose element IDs ids lists (within where and
    region when given too)."""

    ids: list[ElementId] | None = Field(None, min_length=1, description="a non-empty list of element IDs, each a "
                                                                        "non-empty string or an integer")
    where: Where | None = None
    region: Region | None = None


class Deleted(Answer):
    """What a delete took."""

    dataset: str
    deleted: int = Field(description="rows deleted")


class Dropped(Answer):
    """A dataset dropped: its rows, aggregates, grids, rollups and retention are gone."""

    dropped: str = Field(description="the dataset's name")
