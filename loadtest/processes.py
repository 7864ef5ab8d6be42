"""API server processes that the load tools start on this machine: a free port, waiting
until one answers /healthz, and stopping one (gently first)."""

from __future__ import annotations

import signal
import socket
import subprocess
import time


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
