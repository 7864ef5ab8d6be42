"""Leaves projected onto two dimensions: what a map draws of a dataset without reading
a single row.

Each leaf comes with its box on the two axes and its row count (the grid itself), and
with the extent its rows actually occupy there, from the leaf's stored minimum and
maximum (a density of the data: the leaves' counts over small boxes or points).
"""

from __future__ import annotations

from flask import Blueprint, jsonify

from gridagg.model.errors import InvalidInput, WorkLimitExceeded
from gridagg.model.schema import Column, Dataset
from gridagg.query.spec import QuerySpec

from ..contract import operation
from ..models.leaves import LeavesRequest, LeavesResponse
from ..state import config, engine
from .datasets import DATASET, READ_PROBLEMS, _dataset

bp = Blueprint("leaves", __name__, url_prefix="/v1/datasets")


def _axes(ds: Dataset, value: list[str]) -> tuple[int, int]:
    """The positions of the two named dimensions (two names, as LeavesRequest checked)."""
    names = [c.name for c in ds.dimensions]
    if value[0] == value[1]:
        raise InvalidInput("axes must name two different dimensions, e.g. [\"lon\", \"lat\"]", field="axes")
    for v in value:
        if v not in names:
            raise InvalidInput(f"axes: {v!r} is not a dimension of {ds.name}; use one of {names}", field="axes")
    return names.index(value[0]), names.index(value[1])


def _decoder(col: Column):
    """col.decode for stored integers. A number's float is int / 10**scale, which Python
    rounds correctly, as decode's Fraction does: the same float, without a Fraction per
    value, which made up much of a large leaves answer's time."""
    if col.kind == "time":
        return col.decode
    if col.scale == 0:
        return int
    unit = 10**col.scale
    return lambda v: v / unit


@bp.post("/<name>/leaves")
@operation(summary="leaves touching a box, projected onto two dimensions: the grid and the data's density",
           description="Every leaf that touches the box of where, with its box on the two axes, its row count "
                       "and the extent of its rows there (from its stored aggregate; no row is read). At most "
                       "GRIDAGG_MAX_GRIDS leaves per answer (422 beyond).",
           path=DATASET, body=LeavesRequest, answers={200: LeavesResponse},
           problems={**READ_PROBLEMS, 422: "more leaves touch the box than the configured limit"})
def post_leaves(name: str, body: LeavesRequest):
    """{"axes": [x, y], "where": {...}} -> every leaf touching the box of where, with its
    box and its rows' extent on x and y (user units) and its row count."""
    ds = _dataset(name)
    x, y = _axes(ds, body.axes)
    box = QuerySpec.parse(ds, body.where, ["count"]).box
    leaves = engine().leaves(ds.name)
    touching = [(g, agg) for g, agg in leaves if g.intersects(box)]
    limit = config().max_grids
    if len(touching) > limit:
        raise WorkLimitExceeded(f"{len(touching)} grids touch the box, more than the limit of {limit} "
                                "per answer; narrow it")
    cx, cy = ds.dimensions[x], ds.dimensions[y]
    dx, dy = _decoder(cx), _decoder(cy)
    grids = []
    for g, agg in touching:
        occupied = None
        if agg.count:
            occupied = [[dx(agg.mins[x]), dx(agg.maxs[x])], [dy(agg.mins[y]), dy(agg.maxs[y])]]
        grids.append({
            "id": g.grid_id,
            "count": agg.count,
            "box": [[dx(g.box[x][0]), dx(g.box[x][1])], [dy(g.box[y][0]), dy(g.box[y][1])]],
            "data": occupied,
        })
    return jsonify({"dataset": ds.name, "axes": [cx.name, cy.name], "total_grids": len(leaves),
                    "grid_count": len(grids), "rows": sum(g["count"] for g in grids), "grids": grids})
