"""Datasets: list, describe, create, draw their grids, ingest rows."""

from __future__ import annotations

from flask import Blueprint, jsonify

from gridagg.errors import InvalidInput, UnknownDataset, WorkLimitExceeded
from gridagg.schema import Dataset, check_name

from .. import metrics
from ..auth import read_required, write_required
from ..bodies import json_object, rows_body
from gridagg.regions import lonlat_axes
from ..state import config, engine

bp = Blueprint("datasets", __name__, url_prefix="/v1/datasets")


def _dataset(name: str) -> Dataset:
    try:
        check_name(name, "dataset")
    except InvalidInput:
        raise UnknownDataset(name) from None
    return engine().dataset(name)


def _describe(ds: Dataset) -> dict:
    axes = lonlat_axes(ds)
    return {
        "name": ds.name,
        "dimensions": [c.to_json() for c in ds.dimensions],
        "measures": [c.to_json() for c in ds.measures],
        "grid": ds.grid.to_json(),
        "time_dimension": None if ds.time_axis is None else ds.dimensions[ds.time_axis].name,
        "region_dimensions": None if axes is None else [ds.dimensions[i].name for i in axes],
    }


@bp.get("")
@read_required
def list_datasets():
    return jsonify({"datasets": [_describe(ds) for ds in engine().directory.datasets()]})


@bp.post("")
@write_required
def create_dataset():
    ds = Dataset.from_json(json_object())
    engine().create_dataset(ds)
    resp = jsonify(_describe(ds))
    resp.status_code = 201
    resp.headers["Location"] = f"/v1/datasets/{ds.name}"
    return resp


@bp.get("/<name>")
@read_required
def get_dataset(name: str):
    ds = _dataset(name)
    eng = engine()
    count = eng.query(ds.name, {}, ["count"]).values["count"]
    out = _describe(ds)
    out["row_count"] = count
    out["grid_count"] = eng.directory.leaf_count(ds.name)
    return jsonify(out)


@bp.get("/<name>/grids")
@read_required
def get_grids(name: str):
    ds = _dataset(name)
    eng = engine()
    limit = config().max_grids
    total = eng.directory.leaf_count(ds.name)
    if total > limit:
        raise WorkLimitExceeded(f"the dataset has {total} grids, more than the limit of {limit} per answer")
    grids = []
    for grid, agg in eng.leaves(ds.name):
        grids.append({
            "id": grid.grid_id,
            "count": agg.count,
            "box": {c.name: [c.decode(lo), c.decode(hi)] for c, (lo, hi) in zip(ds.dimensions, grid.box)},
        })
    return jsonify({"dataset": ds.name, "grid_count": len(grids), "grids": grids})


@bp.post("/<name>/rows")
@write_required
def post_rows(name: str):
    ds = _dataset(name)
    rows, rejected = rows_body()
    keep = [i for i, r in enumerate(rows) if r is not None]
    result = engine().insert(ds.name, [rows[i] for i in keep])
    rejected = rejected + [(keep[i], f, reason) for i, f, reason in result.rejected]
    rejected.sort(key=lambda r: r[0])
    metrics.ROWS_STORED.labels(ds.name).inc(result.stored)
    metrics.ROWS_REJECTED.labels(ds.name).inc(len(rejected))
    return jsonify({
        "received": len(rows),
        "stored": result.stored,
        "duplicates": result.duplicates,
        "splits": result.splits,
        "rounded": result.rounded,
        "rejected": [{"index": i, "field": f, "reason": reason} for i, f, reason in rejected],
    })
