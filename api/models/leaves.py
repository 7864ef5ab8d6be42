"""Leaves projected onto two dimensions (the page's grid and density view).

Checked here: the shape. Checked by the blueprint against the dataset
(api.blueprints.leaves: the axes are two different dimensions) and by the core (where,
gridagg.query.spec.QuerySpec.parse).
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from .common import Answer, Request, Value, Where

Extent = Annotated[list[Annotated[list[Value], Field(min_length=2, max_length=2)]], Field(min_length=2, max_length=2)]


class LeavesRequest(Request):
    """The leaves touching a box, projected onto two dimensions."""

    axes: list[Annotated[str, Field(description="a dimension's name")]] = Field(
        min_length=2, max_length=2, description="the two dimensions to project onto, such as [\"lon\", \"lat\"]")
    where: Where | None = None


class Leaf(Answer):
    """A leaf on the two axes."""

    id: str
    count: int = Field(description="the leaf's rows (all of them: where only picks the leaves)")
    box: Extent = Field(description="[[x_lo, x_hi], [y_lo, y_hi]]: the leaf's box on the axes, in user units")
    data: Extent | None = Field(description="[[x_min, x_max], [y_min, y_max]] of the leaf's rows on the axes "
                                            "(its stored minimum and maximum); null for an empty leaf")


class LeavesResponse(Answer):
    """The leaves touching the box of where."""

    dataset: str
    axes: list[str]
    total_grids: int = Field(description="leaves of the dataset")
    grid_count: int = Field(description="leaves touching the box of where")
    rows: int = Field(description="rows in those leaves")
    grids: list[Leaf]
