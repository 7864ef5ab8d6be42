"""The Flask application factory."""

from __future__ import annotations

import logging
from collections.abc import Callable

import pydantic_core
from flask import Flask
from flask.json.provider import DefaultJSONProvider

from gridagg.config import Settings
from gridagg.engine import GridEngine

from . import metrics, problems
from .blueprints import changes, datasets, leaves, ops, page, queries
from .config import ApiConfig
from .fastpath import QuestionPaths, raise_carried
from .state import EngineHolder
from .warming import Warming


def create_app(settings: Settings | None = None, engine: GridEngine | None = None,
               warmup: Callable[[EngineHolder], object] | None = None, **overrides) -> Flask:
    """The gridagg HTTP API.

    settings: gridagg Settings (default: from the environment); engine: a GridEngine to
    serve (default: built lazily from settings in each process); warmup: what to run,
    given the app's EngineHolder, in the background before /healthz says ready (the
    server's workers pass api.warming.warm_worker); overrides: API knobs
    (max_body_bytes, max_query_ms, max_points, max_grids, max_vertices; see api.config)."""
    settings = settings or Settings.from_env()
    cfg = ApiConfig.from_settings(settings, **overrides)
    app = Flask("gridagg.api")
    app.config["MAX_CONTENT_LENGTH"] = cfg.max_body_bytes
    app.json = JsonProvider(app)
    app.url_map.strict_slashes = False
    engines = app.extensions["gridagg"] = EngineHolder(cfg, engine)
    problems.register(app)
    metrics.register(app)
    app.register_blueprint(datasets.bp)
    app.register_blueprint(changes.bp)
    app.register_blueprint(queries.bp)
    app.register_blueprint(ops.bp)
    app.register_blueprint(leaves.bp)
    app.register_blueprint(page.bp)
    logging.getLogger("gridagg.api").setLevel(logging.INFO)
    # Last: the warm-up thread may parse Python source (a traceback it logs does), and
    # CPython 3.11 shares the AST parser's depth count between threads, so routes are
    # compiled (ast.parse) before it starts.
    app.extensions["gridagg.warming"] = Warming.of_server(None if warmup is None else lambda: warmup(engines))
    app.before_request(raise_carried)
    app.wsgi_app = QuestionPaths(app)  # plain JSON questions without Flask's per-request steps
    return app


class JsonProvider(DefaultJSONProvider):
    """Flask's JSON answers written by pydantic-core (here for the models already): a
    query's answer in a fraction of the json module's time; keys stay in their order, and
    integers of any size stay exact."""

    def dumps(self, obj, **kwargs) -> str:
        return self.encode(obj).decode()

    def encode(self, obj) -> bytes:
        return pydantic_core.to_json(obj, fallback=self.default)

    def response(self, *args, **kwargs):
        body = self.encode(self._prepare_response_obj(args, kwargs))
        return self._app.response_class(body + b"\n", mimetype=self.mimetype)
