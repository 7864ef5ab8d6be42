"""Serving a measured system as `gridagg serve` serves: granian on 127.0.0.1, a shape of
workers x threads, the system's app (gridagg's API, or the bench's own with the peers)
and, for a peer, its knob values."""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from gridagg_api.cli import server_argv

from gridagg.config import Settings

from ..hosts import free_port, stop, wait_healthy
from ..peers.app import KNOBS_ENV
from .systems import System

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Shape:
    """workers x threads: server processes, and requests each answers at once."""

    workers: int
    threads: int

    @classmethod
    def parse(cls, text: str) -> "Shape":
        """'2x4' -> Shape(2, 4); ValueError naming the text otherwise."""
        w, sep, t = text.partition("x")
        if not (sep and w.isdigit() and t.isdigit() and int(w) > 0 and int(t) > 0):
            raise ValueError(f"{text!r}: give WORKERSxTHREADS, e.g. 2x4")
        return cls(int(w), int(t))

    @property
    def concurrency(self) -> int:
        return self.workers * self.threads

    def __str__(self) -> str:
        return f"{self.workers}x{self.threads}"


class Server:
    """`system` served on a port of its own until stop(); knobs: the peer's settings."""

    def __init__(self, settings: Settings, system: System, shape: Shape, knobs: dict, logdir: Path):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.metrics_dir = tempfile.mkdtemp(prefix="gridagg-bench-metrics-")
        # The online tuner off: it rewrites leaves in place while it serves, and a 100M-row
        # HBase table then flushed and compacted under the measured load (and its tree
        # changed from the one the report describes).
        env = {**settings.with_(store=system.store or "embedded", read_token=None, tune_every=0).environ(),
               "PROMETHEUS_MULTIPROC_DIR": self.metrics_dir, KNOBS_ENV: json.dumps({system.kind: knobs})}
        argv = server_argv("127.0.0.1", self.port, shape.workers, shape.threads, "warning", access_log=False,
                           app=system.app)
        logdir.mkdir(parents=True, exist_ok=True)
        self.log = open(logdir / f"server-{system.kind}-{system.dataset}.log", "a")
        self.proc = subprocess.Popen(argv, env=env, cwd=ROOT, stdout=self.log, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        try:
            wait_healthy(self.proc, self.url, self.log.name)
        except RuntimeError:
            self.stop()
            raise

    def stop(self) -> None:
        stop(self.proc)
        self.log.close()
        shutil.rmtree(self.metrics_dir, ignore_errors=True)
