"""Datasets: list, describe, create, draw their grids, ingest rows."""

from __future__ import annotations

from flask import Blueprint, jsonify

from gridagg.model.errors import InvalidInput, UnknownDataset, WorkLimitExceeded
from gridagg.model.schema import Dataset, check_name
from gridagg.write import retain as retention

from .. import metrics
from ..contract import operation
from ..models.datasets import (
    DatasetDefinition,
    DatasetDetail,
    DatasetInfo,
    DatasetList,
    GridList,
    IngestResponse,
    Rows,
)
from ..state import config, engine

bp = Blueprint("datasets", __name__, url_prefix="/v1/datasets")

# What the endpoints of one dataset share in their contracts (api.contract.operation).
DATASET = {"name": "the dataset's name"}
STORE_DOWN = "PostgreSQL or the cell store is unreachable; retry after Retry-After seconds"
READ_PROBLEMS = {404: "no dataset of that name", 503: STORE_DOWN}


def _dataset(name: str) -> Dataset:
    return dataset_of(engine(), name)


def dataset_of(engine, name: str) -> Dataset:
    """Dataset `name` of `engine`; UnknownDataset also for a name no dataset can have."""
    try:
        check_name(name, "dataset")
    except InvalidInput:
        raise UnknownDataset(name) from None
    return engine.dataset(name)


@bp.get("")
@operation(summary="list datasets", answers={200: DatasetList}, problems={503: STORE_DOWN})
def list_datasets():
    return jsonify({"datasets": [ds.describe() for ds in engine().directory.datasets()]})


@bp.post("")
@operation(summary="create a dataset", access="write", body=DatasetDefinition, answers={201: DatasetInfo},
           problems={409: "a dataset of that name exists", 503: STORE_DOWN})
def create_dataset(body: DatasetDefinition):
    ds = Dataset.from_json(body.model_dump(exclude_unset=True, exclude={"retain"}))
    retain = retention.check(ds, body.retain)
    engine().create_dataset(ds)
    if retain is not None:
        engine().keep_for(ds.name, retain)
    resp = jsonify({**ds.describe(), "retain": retain})
    resp.status_code = 201
    resp.headers["Location"] = f"/v1/datasets/{ds.name}"
    return resp


@bp.get("/<name>")
@operation(summary="a dataset's schema, row count, grid count and grid parameters", path=DATASET,
           answers={200: DatasetDetail}, problems=READ_PROBLEMS)
def get_dataset(name: str):
    ds = _dataset(name)
    eng = engine()
    count = eng.query(ds.name, {}, ["count"]).values["count"]
    out = ds.describe()
    out["row_count"] = count
    out["grid_count"] = eng.directory.leaf_count(ds.name)
    out["retain"] = eng.directory.retain(ds.name)
    return jsonify(out)


@bp.get("/<name>/grids")
@operation(summary="leaf grids: boxes in user units with row counts", path=DATASET, answers={200: GridList},
           problems={**READ_PROBLEMS, 422: "the dataset has more leaves than the configured limit "
                                           "(GRIDAGG_MAX_GRIDS)"})
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
@operation(summary="insert rows (Algorithm 1): a JSON list of row objects or CSV with a header",
           description="Each row names every column but nullable ones (and optionally an element 'id'; rows "
                       "with a stored id are duplicates and not written again, unless the body is an object "
                       "{\"rows\": [...], \"on_conflict\": \"replace\"}: then each replaces the stored row, "
                       "its old values leaving every aggregate and its new ones entering at once). A nullable "
                       "column's value may be absent, null or empty. Invalid rows are rejected one by one (index "
                       "counts data rows from 0) and the others stored.",
           access="write", path=DATASET, body=Rows,
           csv="CSV with a header line naming the columns (and optionally id); an empty value is a "
               "missing one",
           answers={200: IngestResponse}, problems=READ_PROBLEMS)
def post_rows(name: str, body: Rows):
    ds = _dataset(name)
    rows = body.rows
    unreadable = {i for i, _, _ in body.rejected}
    keep = [i for i in range(len(rows)) if i not in unreadable]
    replace = getattr(body, "replace", False)  # CSV rows are never replaced
    result = engine().insert(ds.name, [rows[i] for i in keep], replace=replace)
    rejected = list(body.rejected) + [(keep[i], f, reason) for i, f, reason in result.rejected]
    rejected.sort(key=lambda r: r[0])
    metrics.ROWS_STORED.labels(ds.name).inc(result.stored)
    metrics.ROWS_REJECTED.labels(ds.name).inc(len(rejected))
    return jsonify({
        "received": len(rows),
        "stored": result.stored,
        **({"replaced": result.replaced} if replace else {}),
        "duplicates": result.duplicates,
        "splits": result.splits,
        "rounded": result.rounded,
        "rejected": [{"index": i, "field": f, "reason": reason} for i, f, reason in rejected],
    })
