"""Several API servers on this machine, each as if on a host of its own: `gridagg serve`'s
server (granian) per host, sharing PostgreSQL and HBase but each with an epoch board of
its own (GRIDAGG_EPOCH_DIR), so that a write through one reaches the others only the way
it reaches other machines: PostgreSQL's NOTIFY and the change log (gridagg.tree).

    with api_hosts.started(settings, 2, workdir, write_token="...") as hosts:
        hosts[0].url, hosts[1].url
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from gridagg_api.cli import server_argv

from .processes import free_port, stop, wait_healthy

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
