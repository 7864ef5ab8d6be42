"""A standalone Spark cluster on this machine, from PySpark's own jars: a master and
workers, each a JVM of its own (`bin/spark-class`), for the bulk load to run on as on a
real cluster (`gridagg ingest --master spark://127.0.0.1:PORT ...`).

    python -m gridagg_ingest.spark_standalone up [--workers 2]   # prints the master URL
    python -m gridagg_ingest.spark_standalone status
    python -m gridagg_ingest.spark_standalone down

Ports follow from the settings, apart from other checkouts': the master's RPC port is
GRIDAGG_ZK_PORT + 15000, its web UI the next one, worker i's web UI the one after that
plus i (workers take ephemeral RPC ports); all on 127.0.0.1. Each worker offers one core
and 1 GB to executors (`--cores`, `--memory`). Logs and pid files go to <data dir>/spark/.

The workers share this machine's disk with the HBase of `gridagg services up`, so the
executors write HFiles where its region servers read them (ingest.hfiles).
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from gridagg.config import Settings

MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
PORT_OFFSET = 15000  # the master's RPC port: settings.zk_port + PORT_OFFSET
START_SECONDS = 90.0


class SparkClusterError(RuntimeError):
    """The standalone cluster could not be started or stopped."""


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def master_url(settings: Settings) -> str:
    return f"spark://127.0.0.1:{settings.zk_port + PORT_OFFSET}"


def _dir(settings: Settings) -> Path:
    return settings.data_dir / "spark"


def _pid_file(settings: Settings, role: str) -> Path:
    return _dir(settings) / f"{role}.pid"


def _running(settings: Settings, role: str) -> int | None:
    """The pid of `role` ("master", "worker<i>") if it runs."""
    try:
        pid = int(_pid_file(settings, role).read_text())
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (OSError, ValueError):
        return None
    wanted = MASTER_CLASS if role == "master" else WORKER_CLASS
    return pid if wanted.encode() in cmdline else None


def _roles(settings: Settings) -> list[str]:
    """Every role with a pid file, the master first."""
    found = sorted(p.stem for p in _dir(settings).glob("*.pid"))
    return sorted(found, key=lambda r: (r != "master", r))


def _port_open(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def _spawn(settings: Settings, role: str, args: list[str]) -> subprocess.Popen:
    home = spark_home()
    env = {**os.environ, "SPARK_HOME": str(home), "SPARK_LOCAL_IP": "127.0.0.1",
           "SPARK_LOG_DIR": str(_dir(settings)), "SPARK_NO_DAEMONIZE": "1"}
    with open(_dir(settings) / f"{role}.out", "ab") as out:
        out.write(f"\n--- {time.strftime('%Y-%m-%d %H:%M:%S')} starting {role} ---\n".encode())
        out.flush()
        proc = subprocess.Popen([str(home / "bin" / "spark-class"), *args], env=env, stdout=out,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
    _pid_file(settings, role).write_text(f"{proc.pid}\n")
    return proc


def up(settings: Settings, workers: int = 2) -> str:
    """Start the master and `workers` workers (those not running); return the master's
    URL once every worker has registered with it."""
    _dir(settings).mkdir(parents=True, exist_ok=True)
    port = settings.zk_port + PORT_OFFSET
    started: dict[str, subprocess.Popen] = {}
    if _running(settings, "master") is None:
        if _port_open(port):
            raise SparkClusterError(f"port {port} (GRIDAGG_ZK_PORT + {PORT_OFFSET}) is taken by another process")
        started["master"] = _spawn(settings, "master", [MASTER_CLASS, "--host", "127.0.0.1", "--port", str(port),
                                                        "--webui-port", str(port + 1)])
    for i in range(1, workers + 1):
        role = f"worker{i}"
        if _running(settings, role) is None:
            work = _dir(settings) / f"work-{i}"
            work.mkdir(exist_ok=True)
            started[role] = _spawn(settings, role, [
                WORKER_CLASS, master_url(settings), "--host", "127.0.0.1", "--cores", "1", "--memory", "1g",
                "--webui-port", str(port + 1 + i), "--work-dir", str(work)])
    deadline = time.time() + START_SECONDS
    while registered(settings) < workers:
        for role, proc in started.items():
            if proc.poll() is not None:
                raise SparkClusterError(f"Spark {role} exited; see {_dir(settings) / (role + '.out')}")
        if time.time() > deadline:
            raise SparkClusterError(f"Spark workers did not register within {START_SECONDS:.0f} s; "
                                    f"see {_dir(settings)}")
        time.sleep(1)
    return master_url(settings)


def registered(settings: Settings) -> int:
    """Workers the master's log says registered, less those it lost."""
    text = ""
    try:
        out = (_dir(settings) / "master.out").read_text(errors="replace")
        text = out.rsplit("\n--- ", 1)[-1]
    except OSError:
        pass
    return text.count("Registering worker") - text.count("Removing worker")


def status(settings: Settings) -> list[str]:
    """A line per role: its pid, or that it is down."""
    return [f"{role:<8} {('pid ' + str(pid)) if (pid := _running(settings, role)) else 'not running'}"
            for role in _roles(settings)] or ["not running"]


def down(settings: Settings) -> list[str]:
    """Stop the workers, then the master; returns the roles that ran."""
    stopped = []
    for role in reversed(_roles(settings)):
        pid = _running(settings, role)
        if pid is not None:
            os.killpg(pid, signal.SIGTERM)
            deadline = time.time() + 20
            while _running(settings, role) and time.time() < deadline:
                time.sleep(0.2)
            if _running(settings, role):
                os.killpg(pid, signal.SIGKILL)
            stopped.append(role)
        _pid_file(settings, role).unlink(missing_ok=True)
    return stopped


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m gridagg_ingest.spark_standalone", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="action", required=True)
    start = sub.add_parser("up", help="start the master and workers (those not running)")
    start.add_argument("--workers", type=int, default=2, help="workers (default 2)")
    sub.add_parser("status", help="what runs")
    sub.add_parser("down", help="stop every worker and the master")
    args = ap.parse_args(argv)
    settings = Settings.from_env()
    try:
        if args.action == "up":
            url = up(settings, args.workers)
            print(f"Spark master {url} with {args.workers} workers (logs in {_dir(settings)}); "
                  f"gridagg ingest --master {url} CONFIG INPUT...")
        elif args.action == "status":
            print("\n".join(status(settings)))
        else:
            print("stopped: " + (", ".join(down(settings)) or "nothing ran"))
    except SparkClusterError as exc:
        print(f"spark_standalone: error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
