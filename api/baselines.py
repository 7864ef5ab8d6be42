"""Serving baseline views (gridagg/baselines) through the same query endpoint.

A dataset name registered in gridagg_baselines ("X__pg", "X__hbase") is answered by
that backend instead of the grid engine, with the same request and response shape
(the plan holds what the backend reports). Built lazily, once per process, like the
engine. Only names ending in a baseline suffix are ever looked up, so gridagg datasets
pay nothing for this.
"""

from __future__ import annotations

import threading

from flask import current_app

from gridagg.baselines import BaselineRegistry, open_backend
from gridagg.baselines.common import SUFFIX
from gridagg.errors import InvalidInput

from .state import config

_KEY = "gridagg_baselines"


class BaselineHolder:
    def __init__(self, settings):
        self.settings = settings
        self._lock = threading.Lock()
        self._registry: BaselineRegistry | None = None
        self._backends: dict = {}

    def registry(self) -> BaselineRegistry:
        if self._registry is None:
            with self._lock:
                if self._registry is None:
                    self._registry = BaselineRegistry(self.settings.effective_pg_url)
        return self._registry

    def backend(self, kind: str):
        b = self._backends.get(kind)
        if b is None:
            with self._lock:
                b = self._backends.get(kind)
                if b is None:
                    b = self._backends[kind] = open_backend(kind, self.settings)
        return b


def _holder() -> BaselineHolder:
    ext = current_app.extensions
    holder = ext.get(_KEY)
    if holder is None:
        holder = ext.setdefault(_KEY, BaselineHolder(config().settings))
    return holder


def baseline_for(name: str):
    """(backend, dataset definition) when `name` is a baseline view, else None."""
    if not name.endswith(tuple(SUFFIX.values())):
        return None
    holder = _holder()
    hit = holder.registry().lookup(name)
    if hit is None:
        return None
    kind, ds = hit
    return holder.backend(kind), ds


def answer(backend, ds, spec, region) -> dict:
    """The baseline's answer to spec; region (a GeoJSON dict or None) must be None."""
    if region is not None:
        raise InvalidInput(f"dataset {ds.name} is a {backend.kind} baseline view: polygon regions are "
                           "served by gridagg datasets only", field="region")
    return backend.run(ds, spec).to_json(ds)
