"""Queries: box and polygon aggregates (POST and GET forms) and time series."""

from __future__ import annotations

from flask import Blueprint, jsonify

from gridagg.errors import InvalidInput
from gridagg.query import QuerySpec

from .. import metrics
from ..baselines import answer as baseline_answer, baseline_for
from ..auth import read_required
from ..bodies import json_object, query_args
from ..execute import decode_values, region_query, series_query
from ..regions import Region
from ..state import config, engine
from .datasets import _dataset

bp = Blueprint("queries", __name__, url_prefix="/v1/datasets")

QUERY_KEYS = {"where", "aggregates", "region"}
SERIES_KEYS = QUERY_KEYS | {"step", "window", "start", "end"}


def _check_keys(body: dict, allowed: set[str]) -> None:
    unknown = sorted(set(body) - allowed)
    if unknown:
        raise InvalidInput(f"unknown keys {unknown}: use {', '.join(sorted(allowed))}", field=unknown[0])


def _answer(name: str, body: dict):
    served = baseline_for(name)
    if served is not None:  # a baseline view ("X__pg", "X__hbase"): same shapes, another backend
        backend, ds = served
        spec = QuerySpec.parse(ds, body.get("where"), body.get("aggregates"))
        return jsonify(baseline_answer(backend, ds, spec, body))
    ds = _dataset(name)
    eng = engine()
    spec = QuerySpec.parse(ds, body.get("where"), body.get("aggregates"))
    if body.get("region") is not None:
        region = Region(ds, body["region"])
        cfg = config()
        out = region_query(eng, ds, spec, region, cfg.max_scan_rows, cfg.max_grids)
    else:
        result = eng.run(ds, spec)
        out = {"results": decode_values(ds, spec.aggregates, result.values), "count": result.count, "plan": result.plan.to_json(result.count)}
    metrics.ROWS_SCANNED.labels("query").inc(out["plan"]["rows_in_scanned_grids"])
    return jsonify(out)


@bp.post("/<name>/query")
@read_required
def post_query(name: str):
    body = json_object()
    _check_keys(body, QUERY_KEYS)
    return _answer(name, body)


@bp.get("/<name>/query")
@read_required
def get_query(name: str):
    return _answer(name, query_args())


@bp.post("/<name>/series")
@read_required
def post_series(name: str):
    body = json_object()
    _check_keys(body, SERIES_KEYS)
    ds = _dataset(name)
    region = Region(ds, body["region"]) if body.get("region") is not None else None
    cfg = config()
    out = series_query(engine(), ds, body, region, cfg.max_scan_rows, cfg.max_grids, cfg.max_points)
    metrics.ROWS_SCANNED.labels("series").inc(out["plan"]["rows_in_scanned_grids"])
    return jsonify(out)
