"""Queries: box and polygon aggregates (POST and GET forms) and time series. The engine
plans and answers (gridagg.planner); this layer only reads requests and writes answers."""

from __future__ import annotations

from flask import Blueprint, jsonify

from gridagg.errors import InvalidInput
from gridagg.query import Limits, QuerySpec

from .. import metrics
from ..auth import read_required
from ..baselines import answer as baseline_answer, baseline_for
from ..bodies import json_object, query_args
from ..state import config, engine
from .datasets import _dataset

bp = Blueprint("queries", __name__, url_prefix="/v1/datasets")

QUERY_KEYS = {"where", "aggregates", "region", "explain"}
SERIES_KEYS = QUERY_KEYS | {"step", "window", "start", "end"}


def _check_keys(body: dict, allowed: set[str]) -> None:
    unknown = sorted(set(body) - allowed)
    if unknown:
        raise InvalidInput(f"unknown keys {unknown}: use {', '.join(sorted(allowed))}", field=unknown[0])


def _explain(body: dict) -> bool:
    value = body.get("explain", False)
    if not isinstance(value, bool):
        raise InvalidInput("explain must be true or false", field="explain")
    return value


def _limits() -> Limits:
    cfg = config()
    return Limits(cfg.max_scan_rows, cfg.max_grids)


def _answer(name: str, body: dict):
    served = baseline_for(name)
    if served is not None:  # a baseline view ("X__pg", "X__hbase"): same shapes, another backend
        backend, ds = served
        spec = QuerySpec.parse(ds, body.get("where"), body.get("aggregates"))
        return jsonify(baseline_answer(backend, ds, spec, body))
    ds = _dataset(name)
    result = engine().query(ds.name, body.get("where"), body.get("aggregates"), body.get("region"), _explain(body),
                            limits=_limits())
    out = result.to_json(ds)
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
    result = engine().series(ds.name, body.get("where"), body.get("aggregates"), body.get("step"),
                             body.get("window"), body.get("start"), body.get("end"), body.get("region"),
                             _explain(body), max_points=config().max_points, limits=_limits())
    out = result.to_json(ds)
    metrics.ROWS_SCANNED.labels("series").inc(out["plan"]["rows_in_scanned_grids"])
    return jsonify(out)
