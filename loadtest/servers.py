"""Serving a measured system as `gridagg serve` serves: granian on 127.0.0.1, a shape of
workers x threads, the system's app (gridagg's API, or the bench's own with the peers)
and, for a peer, its knob values."""

from __future__ import annotations

import json
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from gridagg.config import Settings
from gridagg_api.cli import server_argv

from .peers.app import KNOBS_ENV
from .systems import System

ROOT = Path(__file__).resolve().parents[1]


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


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """`system` served on a port of its own until stop(); knobs: the peer's settings."""

    def __init__(self, settings: Settings, system: System, shape: Shape, knobs: dict, logdir: Path):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.metrics_dir = tempfile.mkdtemp(prefix="gridagg-bench-metrics-")
        env = {**settings.with_(store=system.store or "embedded", read_token=None).environ(),
               "PROMETHEUS_MULTIPROC_DIR": self.metrics_dir, KNOBS_ENV: json.dumps({system.kind: knobs})}
        argv = server_argv("127.0.0.1", self.port, shape.workers, shape.threads, "warning", access_log=False,
                           app=system.app)
        logdir.mkdir(parents=True, exist_ok=True)
        self.log = open(logdir / f"server-{system.kind}-{system.dataset}.log", "a")
        self.proc = subprocess.Popen(argv, env=env, cwd=ROOT, stdout=self.log, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        self._wait()

    def _wait(self, timeout: float = 60) -> None:
        import requests

        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the API server exited with {self.proc.returncode}; see {self.log.name}")
            try:
                if requests.get(self.url + "/healthz", timeout=2).status_code < 500:
                    return
            except requests.RequestException:
                pass
            time.sleep(0.5)
        self.stop()
        raise RuntimeError(f"the API server did not answer within {timeout:.0f} s; see {self.log.name}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        shutil.rmtree(self.metrics_dir, ignore_errors=True)
