"""The bench's own HTTP app: gridagg's API (gridagg_api.create_app, the same Flask app,
JSON writer and problem answers as `gridagg serve`) plus the peers, under
/bench/peers/<kind>/<name>/query. Only the bench serves it (granian on
gridagg_loadtest.peers.wsgi:app, see servers.py); `gridagg serve` has no such route.

A peer is opened lazily, once per process and kind (each server worker its own), with
the knob values of the environment variable KNOBS_ENV: JSON {kind: {knob: value}}.
"""

from __future__ import annotations

import json
import os
import threading

from flask import Blueprint, Flask, current_app, jsonify
from gridagg_api import create_app
from gridagg_api.contract import operation
from gridagg_api.models.queries import QueryRequest, QueryResponse

from gridagg.config import Settings
from gridagg.model.errors import InvalidInput, UnknownDataset
from gridagg.query.spec import QuerySpec

from . import KINDS, open_peer
from .registry import PeerRegistry

KNOBS_ENV = "GRIDAGG_BENCH_PEER_KNOBS"
_KEY = "gridagg_peers"

bp = Blueprint("peers", __name__, url_prefix="/bench/peers")


class PeerHolder:
    """The registry and one open peer per kind, made on first use."""

    def __init__(self, settings: Settings, knobs: dict[str, dict]):
        self.settings = settings
        self.knobs = knobs
        self._lock = threading.Lock()
        self._registry: PeerRegistry | None = None
        self._peers: dict = {}

    def dataset(self, kind: str, name: str):
        if kind not in KINDS:
            raise UnknownDataset(f"{kind}/{name}")
        with self._lock:
            if self._registry is None:
                self._registry = PeerRegistry(self.settings.effective_pg_url)
        ds = self._registry.lookup(kind, name)
        if ds is None:
            raise UnknownDataset(f"{kind}/{name}")
        return ds

    def peer(self, kind: str):
        p = self._peers.get(kind)
        if p is None:
            with self._lock:
                p = self._peers.get(kind)
                if p is None:
                    p = self._peers[kind] = open_peer(kind, self.settings, **self.knobs.get(kind, {}))
        return p


@bp.post("/<kind>/<name>/query")
@operation(summary="a peer's answer to a box query (the bench's app only)",
           path={"kind": f"the peer: {', '.join(KINDS)}", "name": "the peer dataset's name"},
           body=QueryRequest, answers={200: QueryResponse},
           problems={404: "no such peer dataset", 503: "the peer is unreachable"})
def query(kind: str, name: str, body: QueryRequest):
    holder: PeerHolder = current_app.extensions[_KEY]
    ds = holder.dataset(kind, name)
    if body.region is not None:
        raise InvalidInput(f"peer dataset {kind}/{name}: polygon regions are answered by gridagg datasets only",
                           field="region")
    spec = QuerySpec.parse(ds, body.where, body.aggregates)
    return jsonify(holder.peer(kind).run(ds, spec).to_json(ds))


def create_peer_app(settings: Settings | None = None, knobs: dict[str, dict] | None = None) -> Flask:
    """gridagg's API app with the peers' route. knobs: {kind: {knob: value}} the peers
    open with (default: KNOBS_ENV's, else each peer's defaults)."""
    settings = settings or Settings.from_env()
    if knobs is None:
        knobs = json.loads(os.environ.get(KNOBS_ENV) or "{}")
    app = create_app(settings)
    app.extensions[_KEY] = PeerHolder(settings, knobs)
    app.register_blueprint(bp)
    return app
