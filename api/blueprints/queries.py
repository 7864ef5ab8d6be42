"""Queries: box and polygon aggregates (POST and GET forms) and time series. The engine
plans and answers (gridagg.query.planner); this layer only reads requests and writes answers."""

from __future__ import annotations

import time

from flask import (
    Blueprint,
    Response,
    current_app,
    jsonify,
    request,
    stream_with_context,
)

from gridagg.query.spec import Limits

from .. import metrics
from ..contract import Media, operation
from ..models.queries import (
    QueryRequest,
    QueryResponse,
    QueryString,
    SeriesRequest,
    SeriesResponse,
)
from ..state import config, engine, state
from .datasets import DATASET, READ_PROBLEMS, _dataset, dataset_of

bp = Blueprint("queries", __name__, url_prefix="/v1/datasets")

QUERY_PROBLEMS = {**READ_PROBLEMS, 422: "the query is beyond a configured limit, which the detail names: it "
                                        "would cost more work than GRIDAGG_MAX_QUERY_MS (the detail gives the "
                                        "estimate; deadline_ms answers it within bounds), its region has more "
                                        "vertices (GRIDAGG_MAX_VERTICES) or the series more points "
                                        "(GRIDAGG_MAX_POINTS)"}


NDJSON = "application/x-ndjson"
STREAM = Media(NDJSON, "one answer a line as it improves: at once the tree's (exact where it can be, bounds "
                       "elsewhere), then one each time a part of the scan is read, the last exact unless "
                       "deadline_ms passed first.", {"type": "string"})


def _streams() -> bool:
    """Whether the client asked for the answer as it improves (Accept: NDJSON)."""
    return request.accept_mimetypes.best_match(["application/json", NDJSON]) == NDJSON


def _lines(first, rest, ds, began: float) -> Response:
    """An NDJSON answer: `first` (computed before answering, so a bad request is still a
    problem), then each result `rest` yields. Its Server-Timing header says how long the
    first line took from `began` (time.perf_counter() as the view began), so that a
    browser's Resource Timing tells the server's part of the wait for it from the rest."""
    encode = current_app.json.encode
    head = encode(first) + b"\n"
    took = (time.perf_counter() - began) * 1000

    def lines():
        yield head
        for result in rest:
            yield encode(result.to_json(ds)) + b"\n"

    resp = Response(stream_with_context(lines()), mimetype=NDJSON)
    resp.headers["Server-Timing"] = f'first;dur={took:.2f};desc="first line"'
    return resp


def _seconds(deadline_ms: int | None) -> float | None:
    return None if deadline_ms is None else deadline_ms / 1000


def _limits(cfg) -> Limits:
    return Limits(cfg.max_query_ms, cfg.max_points, cfg.max_vertices)


def answer_query(holder, name: str, body: QueryRequest | QueryString) -> dict:
    """The answer to a question of dataset `name` (its JSON), by the engine of `holder`
    (the app's EngineHolder): what the route answers, and api.fastpath."""
    engine = holder.get()
    ds = dataset_of(engine, name)
    result = engine.query(ds.name, body.where, body.aggregates, body.region, body.explain,
                          limits=_limits(holder.config), deadline=_seconds(body.deadline_ms))
    out = result.to_json(ds)
    metrics.ROWS_SCANNED.labels("query").inc(out["plan"]["rows_in_scanned_grids"])
    return out


def answer_series(holder, name: str, body: SeriesRequest) -> dict:
    """The answer to a series of dataset `name` (its JSON), as answer_query."""
    engine = holder.get()
    ds = dataset_of(engine, name)
    result = engine.series(ds.name, body.where, body.aggregates, body.step, body.window, body.start, body.end,
                           body.region, body.explain, limits=_limits(holder.config),
                           deadline=_seconds(body.deadline_ms))
    out = result.to_json(ds)
    metrics.ROWS_SCANNED.labels("series").inc(out["plan"]["rows_in_scanned_grids"])
    return out


def _answer(name: str, body: QueryRequest | QueryString):
    began = time.perf_counter()
    if _streams():
        ds = _dataset(name)
        steps = engine().query_steps(ds.name, body.where, body.aggregates, body.region, body.explain,
                                     _limits(config()), _seconds(body.deadline_ms))
        return _lines(next(steps).to_json(ds), steps, ds, began)
    return jsonify(answer_query(state(), name, body))


@bp.post("/<name>/query")
@operation(summary="aggregates over a box and an optional polygon region", path=DATASET, body=QueryRequest,
           answers={200: QueryResponse}, stream=STREAM, problems=QUERY_PROBLEMS)
def post_query(name: str, body: QueryRequest):
    return _answer(name, body)


@bp.get("/<name>/query")
@operation(summary="the same query as query parameters",
           description="?aggregates=min:wind_speed,count&where.temperature=15,35 and optionally "
                       "region=<GeoJSON text> and explain=true.",
           path=DATASET, query=QueryString, answers={200: QueryResponse}, stream=STREAM, problems=QUERY_PROBLEMS)
def get_query(name: str, query: QueryString):
    return _answer(name, query)


@bp.post("/<name>/series")
@operation(summary="bucketed or moving-window aggregates over the time dimension",
           description="Point i stands for the bucket [start + i*step, start + (i+1)*step) and aggregates "
                       "the window of `window` seconds ending with it. Buckets are aggregated once and "
                       "combined across windows. At most GRIDAGG_MAX_POINTS points (422 beyond).",
           path=DATASET, body=SeriesRequest, answers={200: SeriesResponse}, stream=STREAM,
           problems=QUERY_PROBLEMS)
def post_series(name: str, body: SeriesRequest):
    began = time.perf_counter()
    if _streams():
        ds = _dataset(name)
        steps = engine().series_steps(ds.name, body.where, body.aggregates, body.step, body.window, body.start,
                                      body.end, body.region, body.explain, limits=_limits(config()),
                                      deadline=_seconds(body.deadline_ms))
        return _lines(next(steps).to_json(ds), steps, ds, began)
    return jsonify(answer_series(state(), name, body))
