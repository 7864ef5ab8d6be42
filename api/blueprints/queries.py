"""Queries: box and polygon aggregates (POST and GET forms) and time series. The engine
plans and answers (gridagg.planner); this layer only reads requests and writes answers."""

from __future__ import annotations

from flask import Blueprint, jsonify

from gridagg.query import Limits

from .. import metrics
from ..contract import operation
from ..models.queries import QueryRequest, QueryResponse, QueryString, SeriesRequest, SeriesResponse
from ..state import config, engine
from .datasets import DATASET, READ_PROBLEMS, _dataset

bp = Blueprint("queries", __name__, url_prefix="/v1/datasets")

QUERY_PROBLEMS = {**READ_PROBLEMS, 422: "the query would use more grids or scan more rows than the configured "
                                        "limits (GRIDAGG_MAX_GRIDS, GRIDAGG_MAX_SCAN_ROWS); narrow it"}


def _limits() -> Limits:
    cfg = config()
    return Limits(cfg.max_scan_rows, cfg.max_grids)


def _answer(name: str, body: QueryRequest | QueryString):
    ds = _dataset(name)
    result = engine().query(ds.name, body.where, body.aggregates, body.region, body.explain, limits=_limits())
    out = result.to_json(ds)
    metrics.ROWS_SCANNED.labels("query").inc(out["plan"]["rows_in_scanned_grids"])
    return jsonify(out)


@bp.post("/<name>/query")
@operation(summary="aggregates over a box and an optional polygon region", path=DATASET, body=QueryRequest,
           answers={200: QueryResponse}, problems=QUERY_PROBLEMS)
def post_query(name: str, body: QueryRequest):
    return _answer(name, body)


@bp.get("/<name>/query")
@operation(summary="the same query as query parameters",
           description="?aggregates=min:wind_speed,count&where.temperature=15,35 and optionally "
                       "region=<GeoJSON text> and explain=true.",
           path=DATASET, query=QueryString, answers={200: QueryResponse}, problems=QUERY_PROBLEMS)
def get_query(name: str, query: QueryString):
    return _answer(name, query)


@bp.post("/<name>/series")
@operation(summary="bucketed or moving-window aggregates over the time dimension",
           description="Point i stands for the bucket [start + i*step, start + (i+1)*step) and aggregates "
                       "the window of `window` seconds ending with it. Buckets are aggregated once and "
                       "combined across windows. At most GRIDAGG_MAX_POINTS points (400 beyond).",
           path=DATASET, body=SeriesRequest, answers={200: SeriesResponse}, problems=QUERY_PROBLEMS)
def post_series(name: str, body: SeriesRequest):
    ds = _dataset(name)
    result = engine().series(ds.name, body.where, body.aggregates, body.step, body.window, body.start, body.end,
                             body.region, body.explain, max_points=config().max_points, limits=_limits())
    out = result.to_json(ds)
    metrics.ROWS_SCANNED.labels("series").inc(out["plan"]["rows_in_scanned_grids"])
    return jsonify(out)
