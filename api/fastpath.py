"""Questions answered without Flask's per-request machinery.

A dashboard's question (POST /v1/datasets/NAME/query or /series with a JSON body) is
the API's hot path: on a warm tree the engine answers it quickly enough that Flask's
request context, URL routing, hooks and response objects cost more than the answer. QuestionPaths, the app's WSGI middleware, answers such a request itself with the
same steps the route takes (api.blueprints.queries.answer_query, answer_series: the one
place they are written), the same authorization, body limit and metrics. Everything
else goes to Flask, and so does a question the fast path does not answer plainly: one
asking for streamed answers (NDJSON), one without a valid read token, one too large; and
one that fails, with what it raised (RAISED), which Flask raises again before its route
(`raise_carried`): every problem is written the one way, by the app's error handlers,
and nothing is asked twice.
"""

from __future__ import annotations

import hmac
import io
import re
import time

from flask import request
from pydantic import ValidationError

from . import metrics
from .blueprints.queries import answer_query, answer_series
from .models.queries import QueryRequest, SeriesRequest

# The two routes, and their names as Flask's routes (the metrics' endpoint label).
_PATH = re.compile(r"/v1/datasets/([^/]+)/(query|series)/?\Z")
_ROUTES = {"query": ("/v1/datasets/<name>/query", QueryRequest),
           "series": ("/v1/datasets/<name>/series", SeriesRequest)}
JSON_HEADERS = [("Content-Type", "application/json")]
RAISED = "gridagg.raised"  # the environ key of what a question raised on the fast path


class QuestionPaths:
    """WSGI middleware over `app` (the Flask app, whose wsgi_app it takes): answers plain
    JSON questions itself, hands everything else to Flask."""

    def __init__(self, app):
        self.app = app
        self.flask = app.wsgi_app
        self.holder = app.extensions["gridagg"]

    def __call__(self, environ, start_response):
        started = time.perf_counter()
        match = _PATH.match(environ.get("PATH_INFO", ""))
        if (match is None or environ.get("REQUEST_METHOD") != "POST"
                or "ndjson" in environ.get("HTTP_ACCEPT", "")
                or not environ.get("CONTENT_TYPE", "").startswith("application/json")
                or not self._may_read(environ)):
            return self.flask(environ, start_response)
        length = int(environ.get("CONTENT_LENGTH") or 0)
        if not 0 < length <= self.holder.config.max_body_bytes:
            return self.flask(environ, start_response)
        raw = environ["wsgi.input"].read(length)
        name, kind = match.groups()
        route, model = _ROUTES[kind]
        try:
            answer = answer_query if kind == "query" else answer_series
            out = answer(self.holder, name, model.model_validate_json(raw))
            body = self.app.json.encode(out) + b"\n"
        except Exception as exc:  # noqa: BLE001 - Flask writes its problem (raise_carried)
            environ["wsgi.input"], environ[RAISED] = io.BytesIO(raw), exc
            return self.flask(environ, start_response)
        start_response("200 OK", [*JSON_HEADERS, ("Content-Length", str(len(body)))])
        metrics.record("POST", route, 200, started)
        return [body]

    def _may_read(self, environ) -> bool:
        """Whether the request may read, as api.auth.authorize("read") would let it."""
        cfg = self.holder.config
        if not cfg.read_token:
            return True
        scheme, _, token = environ.get("HTTP_AUTHORIZATION", "").partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return False
        given = token.strip().encode()
        return any(hmac.compare_digest(given, t.encode()) for t in (cfg.read_token, cfg.write_token) if t)


def raise_carried() -> None:
    """A before_request hook: raises what the request raised on the fast path, so that
    the app's error handlers answer it (a body the fast path could not read as its
    model is read again by the route: its problem names the field)."""
    exc = request.environ.get(RAISED)
    if exc is not None and not isinstance(exc, ValidationError):
        raise exc
