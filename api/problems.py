"""Errors as JSON problem details (RFC 9457): type, title, status, detail, field.

Every error a client can cause maps to a 4xx; an unreachable PostgreSQL or HBase maps to
503 with Retry-After. Anything else is a bug: it is logged and answered with a 500 that
leaks no internals.
"""

from __future__ import annotations

import logging
import socket

import psycopg
from flask import Flask, jsonify, request
from werkzeug.exceptions import HTTPException

from gridagg.model.errors import (
    DatasetExists,
    GridaggError,
    InvalidInput,
    StoreUnavailable,
    UnknownDataset,
    WorkLimitExceeded,
)

log = logging.getLogger("gridagg.api")

TYPE_BASE = "urn:gridagg:problem:"
RETRY_AFTER_SECONDS = 5


class ApiProblem(Exception):
    """An error raised by the HTTP layer itself (auth, content type, ...)."""

    def __init__(self, status: int, title: str, detail: str, field: str | None = None,
                 slug: str | None = None, headers: dict | None = None):
        super().__init__(detail)
        self.status, self.title, self.detail, self.field = status, title, detail, field
        self.slug = slug or title.lower().replace(" ", "-")
        self.headers = headers or {}


def problem(status: int, title: str, detail: str, field: str | None = None, slug: str | None = None,
            headers: dict | None = None):
    body = {
        "type": TYPE_BASE + (slug or title.lower().replace(" ", "-")),
        "title": title,
        "status": status,
        "detail": detail,
        "field": field,
    }
    resp = jsonify(body)
    resp.status_code = status
    resp.mimetype = "application/problem+json"
    for k, v in (headers or {}).items():
        resp.headers[k] = v
    return resp


def _unavailable(detail: str):
    return problem(503, "Store unavailable", detail, slug="store-unavailable",
                   headers={"Retry-After": str(RETRY_AFTER_SECONDS)})


# Transport errors that may escape the stores' own translation to StoreUnavailable.
def _transport_errors() -> tuple[type[BaseException], ...]:
    errors: list[type[BaseException]] = [psycopg.OperationalError, ConnectionError, socket.timeout]
    try:
        from psycopg_pool import PoolTimeout

        errors.append(PoolTimeout)
    except ImportError:  # pragma: no cover
        pass
    try:
        from thriftpy2.transport import TTransportException

        errors.append(TTransportException)
    except ImportError:  # pragma: no cover
        pass
    return tuple(errors)


TRANSPORT_ERRORS = _transport_errors()


# The engine's errors a client causes, with their HTTP status and problem type.
CLIENT_ERRORS = [
    (InvalidInput, 400, "invalid-input"),
    (UnknownDataset, 404, "unknown-dataset"),
    (DatasetExists, 409, "dataset-exists"),
    (WorkLimitExceeded, 422, "work-limit-exceeded"),
]


def register(app: Flask) -> None:
    @app.errorhandler(ApiProblem)
    def _api_problem(e: ApiProblem):
        return problem(e.status, e.title, e.detail, e.field, e.slug, e.headers)

    for error, status, slug in CLIENT_ERRORS:
        app.register_error_handler(
            error, lambda e, status=status, slug=slug: problem(status, e.title, e.detail, e.field, slug=slug))

    @app.errorhandler(StoreUnavailable)
    def _store_down(e: StoreUnavailable):
        log.warning("store unavailable: %s", e.detail)
        return _unavailable(e.detail)

    @app.errorhandler(GridaggError)
    def _other(e: GridaggError):
        return problem(400, e.title, e.detail, e.field, slug="invalid-input")

    @app.errorhandler(HTTPException)
    def _http(e: HTTPException):
        status = e.code or 500
        titles = {404: "Not found", 405: "Method not allowed", 413: "Request body too large"}
        title = titles.get(status, e.name)
        detail = e.description or title
        if status == 404:
            detail = f"no such resource: {request.path}"
        elif status == 405:
            allowed = e.valid_methods if hasattr(e, "valid_methods") and e.valid_methods else []
            detail = f"{request.method} is not allowed on {request.path}" + (
                f"; use {', '.join(allowed)}" if allowed else "")
        elif status == 413:
            limit = app.config.get("MAX_CONTENT_LENGTH")
            detail = f"the request body is larger than the limit of {limit} bytes"
        headers = {}
        if status == 405 and getattr(e, "valid_methods", None):
            headers["Allow"] = ", ".join(e.valid_methods)
        field = "body" if status == 413 else None
        return problem(status, title, detail, field, headers=headers)

    @app.errorhandler(Exception)
    def _unexpected(e: Exception):
        if isinstance(e, TRANSPORT_ERRORS):
            log.warning("transport error: %r", e)
            return _unavailable(f"a backing store failed: {type(e).__name__}: {e}")
        log.exception("unhandled error on %s %s", request.method, request.path)
        return problem(500, "Internal error", "the server failed unexpectedly; the error was logged",
                       slug="internal-error")
