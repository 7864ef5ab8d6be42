"""The held-out bench's app for serving its peers: gridagg's API app (gridagg_api.create_app:
the same Flask app, JSON writer and problem answers as `gridagg serve`) plus the routes
/bench/heldout/<kind>/<name>/query and /series, which answer a question's JSON body from
the peer's table as heldout_sql reads it (polygons and series included), in user units
as the API's answers. Served by granian on APP (heldout_wsgi.py; servers.Server); a peer
is opened once per process and kind, with the knob values of the environment variable
peers.app.KNOBS_ENV (JSON {kind: {knob: value}}).
"""

from __future__ import annotations

import json
import os
import threading

from flask import Blueprint, Flask, current_app, jsonify, request
from gridagg_api import create_app

from gridagg.config import Settings
from gridagg.model.errors import InvalidInput, UnknownDataset

from ..peers.app import KNOBS_ENV
from .heldout_peers import Asker, lookup, open_asker
from .heldout_sql import user_answers

APP = "gridagg_loadtest.bench.heldout_wsgi:app"
_KEY = "gridagg_heldout_peers"

bp = Blueprint("heldout", __name__, url_prefix="/bench/heldout")


class Peers:
    """One Asker per peer dataset and kind in this process, opened on first use."""

    def __init__(self, settings: Settings, knobs: dict[str, dict]):
        self.settings, self.knobs = settings, knobs
        self._lock = threading.Lock()
        self._open: dict[tuple[str, str], tuple] = {}

    def get(self, kind: str, name: str) -> tuple:
        """(the space, the Asker) of peer `kind`'s dataset `name`."""
        key = (kind, name)
        got = self._open.get(key)
        if got is None:
            with self._lock:
                got = self._open.get(key)
                if got is None:
                    try:
                        space, tables = lookup(self.settings, name)
                        table = tables[kind]
                    except KeyError:
                        raise UnknownDataset(f"{kind}/{name}") from None
                    asker: Asker = open_asker(self.settings, kind, name, table, self.knobs.get(kind))
                    got = self._open[key] = (space, asker)
        return got


def _answer(kind: str, name: str, series: bool):
    body = request.get_json(silent=True)
    if not isinstance(body, dict) or "aggregates" not in body or series != ("step" in body):
        raise InvalidInput("a held-out question's JSON body: aggregates, and a step for a series")
    space, asker = current_app.extensions[_KEY].get(kind, name)
    points = user_answers(space, asker.answer(space, body))
    if series:
        return jsonify({"points": [{"results": p} for p in points]})
    return jsonify({"results": points[0]})


@bp.post("/<kind>/<name>/query")
def query(kind: str, name: str):
    return _answer(kind, name, series=False)


@bp.post("/<kind>/<name>/series")
def series(kind: str, name: str):
    return _answer(kind, name, series=True)


def create_heldout_app(settings: Settings | None = None) -> Flask:
    """gridagg's API app with the held-out peers' routes (settings and knobs from the
    environment unless given)."""
    settings = settings or Settings.from_env()
    app = create_app(settings)
    app.extensions[_KEY] = Peers(settings, json.loads(os.environ.get(KNOBS_ENV) or "{}"))
    app.register_blueprint(bp)
    return app
