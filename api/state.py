"""The engine behind the API: built lazily, once per process, from the Settings.

Lazily, so that each server worker process opens its own connection pools and LMDB
handles, and so that a server that is down at start answers 503 and recovers by itself:
the next request tries again. Once built, the pools (psycopg_pool, happybase) reconnect
on their own. An engine built here also gets its process's online tuner
(gridagg.tune.online, as GRIDAGG_TUNE_EVERY says) and retention rounds
(gridagg.write.retain, as GRIDAGG_RETAIN_EVERY says); one handed in is the caller's to
tune and keep.
"""

from __future__ import annotations

import threading

from flask import current_app

from gridagg.engine import GridEngine
from gridagg.tune import online
from gridagg.write import retain as retention

from .config import ApiConfig


class EngineHolder:
    def __init__(self, config: ApiConfig, engine: GridEngine | None = None):
        self.config = config
        self._engine = engine
        self._lock = threading.Lock()
        self.tuner: online.OnlineTuner | None = None
        self.retention: retention.Rounds | None = None

    @property
    def built(self) -> bool:
        return self._engine is not None

    def get(self) -> GridEngine:
        if self._engine is not None:
            return self._engine
        with self._lock:
            if self._engine is None:
                self._engine = GridEngine.open(self.config.settings)
                self.tuner = online.start(self._engine, self.config.settings)
                self.retention = retention.start(self._engine, self.config.settings)
        return self._engine


def state() -> EngineHolder:
    return current_app.extensions["gridagg"]


def engine() -> GridEngine:
    return state().get()


def config() -> ApiConfig:
    return state().config
