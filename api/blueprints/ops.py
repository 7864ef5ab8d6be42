"""Operations: health, Prometheus metrics, the OpenAPI document."""

from __future__ import annotations

from flask import Blueprint, current_app, jsonify

from .. import metrics
from ..contract import Media, operation
from ..models.ops import Health, Unhealthy
from ..openapi import document
from ..problems import RETRY_AFTER_SECONDS, TRANSPORT_ERRORS
from ..state import state
from ..warming import RETRY_AFTER_SECONDS as WARMING_RETRY_SECONDS
from ..warming import warming

bp = Blueprint("ops", __name__)


def _check_store(store) -> None:
    """A real round trip to the cell store where it has a server (HBase)."""
    if getattr(store, "kind", None) == "hbase":
        from gridagg.model.errors import StoreUnavailable

        try:
            with store.pool.connection() as conn:
                conn.tables()
        except TRANSPORT_ERRORS + (OSError,) as exc:
            raise StoreUnavailable(f"HBase Thrift gateway at {store.address} failed: {exc}") from exc


@bp.get("/healthz")
@operation(summary="PostgreSQL and the cell store are reachable, and this worker is warm",
           description="503 with Retry-After while a store is unreachable (status \"unavailable\") or while "
                       "the worker that answers is still warming up: compiling or loading its query kernels "
                       "(status \"warming\"); no query should be sent to it before a 200.",
           access="open", answers={200: Health, 503: Unhealthy})
def healthz():
    from gridagg.model.errors import StoreUnavailable

    checks = {"postgresql": "ok", "store": "ok"}
    status = 200
    try:
        eng = state().get()
    except StoreUnavailable as exc:
        failed = getattr(exc, "component", None)
        checks = {"postgresql": "unknown", "store": "unknown"}
        if failed in checks:
            checks[failed] = "unreachable"
        checks["store_kind"] = state().config.settings.store
        return _down(checks, exc.detail)
    try:
        with eng.directory.connection() as conn:
            conn.execute("SELECT 1")
    except (StoreUnavailable, *TRANSPORT_ERRORS) as exc:
        checks["postgresql"] = "unreachable"
        status, detail = 503, str(getattr(exc, "detail", exc))
    try:
        _check_store(eng.store)
    except StoreUnavailable as exc:
        checks["store"] = "unreachable"
        status, detail = 503, exc.detail
    checks["store_kind"] = eng.store.kind
    if status != 200:
        return _down(checks, detail)
    if not warming().done:
        return _down(checks, "this worker is warming up (compiling or loading its query kernels); retry shortly",
                     "warming", WARMING_RETRY_SECONDS)
    return jsonify({"status": "ok", "checks": checks})


def _down(checks: dict, detail: str, status: str = "unavailable", retry_after: int = RETRY_AFTER_SECONDS):
    resp = jsonify({"status": status, "checks": checks, "detail": detail})
    resp.status_code = 503
    resp.headers["Retry-After"] = str(retry_after)
    return resp


@bp.get("/metrics")
@operation(summary="Prometheus metrics (text format)", access="open",
           answers={200: Media("text/plain", "the metrics of every worker")})
def prometheus():
    return metrics.exposition()


@bp.get("/openapi.json")
@operation(summary="this document", access="open",
           answers={200: Media("application/json", "the OpenAPI 3.1 document of this API", {"type": "object"})})
def openapi():
    return jsonify(document(current_app))
