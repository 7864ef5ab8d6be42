"""Changes of a dataset's rows and of the dataset itself: delete rows, drop it. Both need
the write token. The engine makes the change (gridagg.engine.GridEngine.delete,
drop_dataset); this layer only reads requests and writes answers."""

from __future__ import annotations

from flask import Blueprint, jsonify

from ..contract import operation
from ..models.changes import Deleted, DeleteRows, Dropped
from ..state import engine
from .datasets import DATASET, READ_PROBLEMS, _dataset

bp = Blueprint("changes", __name__, url_prefix="/v1/datasets")


@bp.delete("/<name>/rows")
@operation(summary="delete rows: those inside a box and region, or those with given element IDs",
           description="The body names the rows: {\"where\": {...}, \"region\": {...}} as a query's (where {} "
                       "takes every row), or {\"ids\": [...]} (looked up in every leaf, or only in those of where "
                       "and region when given too). Every aggregate, rollup and tree follows at once; a question "
                       "asked meanwhile is answered for the rows before the delete or after it.",
           access="write", path=DATASET, body=DeleteRows, answers={200: Deleted}, problems=READ_PROBLEMS)
def delete_rows(name: str, body: DeleteRows):
    ds = _dataset(name)
    done = engine().delete(ds.name, body.where, body.region, body.ids)
    return jsonify({"dataset": ds.name, "deleted": done.rows_before - done.rows_after})


@bp.delete("/<name>")
@operation(summary="drop a dataset: its rows, aggregates, grids, rollups and retention",
           description="Gone at once for every question; the store frees the rows' space (the embedded store "
                       "reuses it, HBase deletes the table's files).",
           access="write", path=DATASET, answers={200: Dropped}, problems=READ_PROBLEMS)
def drop_dataset(name: str):
    ds = _dataset(name)
    engine().drop_dataset(ds.name)
    return jsonify({"dropped": ds.name})
