"""API server processes the load tools start on this machine: a free port, waiting until
one answers /healthz, stopping one (gently first); and several at once, each as if on a
host of its own: `gridagg serve`'s server (granian) per host, sharing PostgreSQL and HBase
but each with an epoch board of its own (GRIDAGG_EPOCH_DIR), so that a write through one
reaches the others only the way it reaches other machines: PostgreSQL's NOTIFY and the
change log (gridagg.tree).

    with hosts.started(settings, 2, workdir, write_token="...") as servers:
        servers[0].url, servers[1].url

Used by the benches (bench/servers.py, bench/scaleout.py) and the soak
(soak/visibility.py).
"""

from __future__ import annotations

import contextlib
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from gridagg_api.cli import server_argv

START_SECONDS = 60.0


@dataclass
class Host:
    """One API server: its URL, process, board directory and log."""

    url: str
    proc: subprocess.Popen
    board: Path
    log: Path

    def stop(self) -> None:
        stop(self.proc)


def start(settings, name: str, workdir: Path, workers: int = 1, threads: int = 4) -> Host:
    """An API server on a free port whose board is workdir/<name>-board (its log:
    workdir/<name>.log), answering /healthz."""
    port = free_port()
    board = workdir / f"{name}-board"
    metrics = Path(tempfile.mkdtemp(prefix="gridagg-metrics-", dir=workdir))
    env = {**settings.with_(epoch_dir=board).environ(), "PROMETHEUS_MULTIPROC_DIR": str(metrics)}
    log = workdir / f"{name}.log"
    with open(log, "ab") as out:
        proc = subprocess.Popen(server_argv("127.0.0.1", port, workers, threads, "warning", access_log=False),
                                env=env, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)
    host = Host(f"http://127.0.0.1:{port}", proc, board, log)
    wait_healthy(proc, host.url, log, START_SECONDS)
    return host


@contextlib.contextmanager
def started(settings, n: int, workdir: Path | None = None, **kw):
    """n API servers, "host0".."host<n-1>", each with a board of its own (see start);
    stopped on leaving. workdir: where boards and logs go (default: a temporary
    directory, removed afterwards)."""
    own = workdir is None
    workdir = Path(tempfile.mkdtemp(prefix="gridagg-hosts-")) if own else Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    hosts: list[Host] = []
    try:
        for i in range(n):
            hosts.append(start(settings, f"host{i}", workdir, **kw))
        yield hosts
    finally:
        for host in hosts:
            host.stop()
        if own:
            shutil.rmtree(workdir, ignore_errors=True)


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_healthy(proc: subprocess.Popen, url: str, log, timeout: float = 60.0) -> None:
    """Return once the server at url answers /healthz with less than a 500; stop it and
    raise RuntimeError (naming log, its output) when it exits or does not answer within
    timeout seconds."""
    import requests

    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the API server at {url} exited with {proc.returncode}; see {log}")
        try:
            if requests.get(url + "/healthz", timeout=2).status_code < 500:
                return
        except requests.RequestException:
            pass
        time.sleep(0.3)
    stop(proc)
    raise RuntimeError(f"the API server at {url} did not answer within {timeout:.0f} s; see {log}")


def stop(proc: subprocess.Popen, grace: float = 30.0) -> None:
    """SIGTERM, then SIGKILL if it is still running after grace seconds."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
