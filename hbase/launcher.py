"""Run a real Apache HBase plus its Thrift1 gateway from Maven jars, on this machine.

Two layouts, chosen by `gridagg services up [--region-servers N]` (settings
hbase_region_servers; unset: the layout last started in the data dir, see `layout`):

- standalone (N = 0, the default): one JVM `HMaster start` with an in-process ZooKeeper,
  the master and one region server;
- distributed (N >= 1): ZooKeeper (ZooKeeperServerMain), an HMaster and N region servers
  (HRegionServer), each a JVM of its own on ports derived from settings.zk_port (`ports`),
  sharing the root dir on this machine's disk, as a cluster of several machines would
  share HDFS.

Either way every region server loads gridagg's scan observer (hbase/observer)
for every user table, and the Thrift1 gateway is a JVM of its own (threadpool server,
buffered transport, binary protocol: what happybase speaks by default), told to give up
within seconds when HBase is down (THRIFT_CLIENT_OPTIONS).

Where its files live: gridagg_hbase.jvm.

Roles (JVMs): "master", "thrift"; distributed also "zookeeper" and "rs1".."rsN".

`gridagg services observer-jar OUT.jar` builds the observer's jar for an
external cluster (docs/hbase.md: An external cluster).

Errors are raised as :class:`LauncherError` with a one-line message.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

from gridagg_hbase.jvm import (
    MASTER_CLASS,
    MAX_REGION_SERVERS,
    OBSERVER_CLASS,
    REGIONSERVER_CLASS,
    RPC_PORT_OFFSET,
    START_TIMEOUT,
    THRIFT_CLASS,
    ZOOKEEPER_CLASS,
    LauncherError,
    java_cmd,
    jvm_env,
    layout,
    main_class,
    paths,
    prune_gc_logs,
    recorded_layout,
    resolve_classpath,
    roles,
    rpc_port,
    serves_regions,
    tool_key,
    write_conf,
)


def stale_observer(settings) -> list[str]:
    """The running JVMs serving regions whose scan observer is not the one
    hbase/observer compiles to now (it changed since they started, or they
    started before their observer was recorded): a JVM keeps the classes it loaded, so
    only a restart picks up a rebuilt observer."""
    key = tool_key(OBSERVER_CLASS, resolve_classpath(settings))
    stale = []
    for role in running_roles(settings):
        if serves_regions(settings, role):
            try:
                loaded = paths(settings).observer_file(role).read_text()
            except OSError:
                loaded = None
            if loaded != key:
                stale.append(role)
    return stale


# --------------------------------------------------------------------------- processes


def _read_pid(pid_file: Path) -> int | None:
    try:
        return int(pid_file.read_text().strip())
    except (OSError, ValueError):
        return None


def _alive(pid: int, main_class: str) -> bool:
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    if main_class.encode() not in cmdline:
        return False  # pid reused by something else
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        if stat.rsplit(")", 1)[1].split()[0] == "Z":
            return False
    except (OSError, IndexError):
        pass
    return True


def running_pid(settings, role: str) -> int | None:
    """Pid of the local JVM of `role` (see `roles`) if it runs, else None."""
    pid = _read_pid(paths(settings).pid_file(role))
    if pid is not None and _alive(pid, main_class(role)):
        return pid
    return None


def running_roles(settings) -> dict[str, int]:
    """Every local HBase JVM that runs: role -> pid, in start order."""
    found = {}
    for pid_file in paths(settings).run.glob("*.pid"):
        role = pid_file.stem
        if role in ("master", "thrift", "zookeeper") or re.fullmatch(r"rs[1-9]", role):
            pid = running_pid(settings, role)
            if pid is not None:
                found[role] = pid
    order = roles(MAX_REGION_SERVERS)
    return dict(sorted(found.items(), key=lambda kv: order.index(kv[0])))


def port_open(host: str, port: int, timeout: float = 1.0) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def thrift_answers(host: str, port: int, timeout_ms: int = 10000) -> bool:
    """True when the Thrift1 gateway at host:port answers a tables() call."""
    import happybase

    try:
        conn = happybase.Connection(host, port, timeout=timeout_ms, autoconnect=False)
        try:
            conn.open()
            conn.tables()
            return True
        finally:
            conn.close()
    except Exception:  # noqa: BLE001 - any failure means "not (yet) serving"
        return False


# Lines in a master's or region server's log that mean it will never serve.
_FATAL_MARKERS = ("***** ABORTING master", "Failed to become active master", "Master exiting",
                  "***** ABORTING region server")


def _fatal_log_line(log: Path, offset: int) -> str | None:
    try:
        with open(log, "rb") as fh:
            fh.seek(offset)
            text = fh.read().decode(errors="replace")
    except OSError:
        return None
    if not any(m in text for m in _FATAL_MARKERS):
        return None
    lines = text.splitlines()
    for i, line in enumerate(lines):  # the first exception message says most
        if " ERROR " in line and i + 1 < len(lines) and not lines[i + 1][:4].isdigit():
            return lines[i + 1].strip()
    return next((ln for ln in lines if any(m in ln for m in _FATAL_MARKERS)), None)


def _log_size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _spawn(settings, role: str, cmd: list[str]) -> int:
    p = paths(settings)
    with open(p.out_file(role), "ab") as out:
        out.write(f"\n--- {time.strftime('%Y-%m-%d %H:%M:%S')} starting {role} ---\n".encode())
        out.flush()
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                cwd=p.root, env=jvm_env(), start_new_session=True, close_fds=True)
    p.pid_file(role).write_text(f"{proc.pid}\n")
    # The java launcher may re-exec itself; wait until /proc shows the main class.
    until = time.monotonic() + 10
    while proc.poll() is None and not _alive(proc.pid, main_class(role)) and time.monotonic() < until:
        time.sleep(0.05)
    return proc.pid


def _fail(settings, role: str, what: str, started: list[str] = ()) -> LauncherError:
    """The error for a failed start; stops the JVMs this start began (`started`)."""
    p = paths(settings)
    for r in reversed(started):
        try:
            _stop_one(settings, r, grace=10)
        except Exception:  # noqa: BLE001 - the original failure matters more
            pass
    return LauncherError(f"HBase {role} {what}; see {p.log_file(role)} and {p.out_file(role)}")


def _command(settings, role: str, cp: str) -> list[str]:
    """The java command that starts `role`."""
    if role == "thrift":
        main = [THRIFT_CLASS, "-b", "127.0.0.1", "-p", str(settings.hbase_port), "-threadpool", "start"]
    elif role == "zookeeper":
        main = [ZOOKEEPER_CLASS, str(paths(settings).conf / "zoo.cfg")]
    elif role.startswith("rs"):  # its own port and temporary dir; no web UI
        main = [REGIONSERVER_CLASS, "-D", f"hbase.regionserver.port={rpc_port(settings, role)}",
                "-D", f"hbase.tmp.dir={paths(settings).tmp / role}", "start"]
    else:
        main = [MASTER_CLASS, "start"]
    if serves_regions(settings, role):
        prune_gc_logs(settings, role)
    return java_cmd(settings, role, cp, main)


def _port_of(settings, role: str) -> int | None:
    """The fixed port `role` listens on in the current layout (None: ephemeral)."""
    if role == "thrift":
        return settings.hbase_port
    if role == "zookeeper" or (role == "master" and not layout(settings)):
        return settings.zk_port  # the standalone master runs ZooKeeper in-process
    return rpc_port(settings, role)


_PORT_HINT = {"thrift": "GRIDAGG_HBASE_PORT", "zookeeper": "GRIDAGG_ZK_PORT"}
_READY = {"master": "Master has completed initialization"}  # in its log once it serves


def start(settings, timeout: float = START_TIMEOUT) -> None:
    """Start every JVM of the layout (`layout`) that is not running and wait until the
    gateway answers, every region server started serves and a master started has
    finished initializing.

    A layout other than the one running is refused. On failure nothing is left running
    and the error names the log to read.
    """
    servers = layout(settings)
    running = running_roles(settings)
    wanted = roles(servers)
    stray = [r for r in running if r not in wanted]
    if stray or (running and servers != (recorded_layout(settings) or 0)):
        now = recorded_layout(settings) or 0
        raise LauncherError(
            f"the local HBase runs {'standalone' if not now else f'with {now} region servers'}: "
            "stop it first (gridagg services down)")
    if servers and rpc_port(settings, f"rs{servers}") > 65535:
        raise LauncherError(f"GRIDAGG_ZK_PORT {settings.zk_port} leaves no room for the ports of a master and "
                            f"{servers} region servers above it (+{RPC_PORT_OFFSET}..): choose a lower one")
    cp = resolve_classpath(settings)
    write_conf(settings, servers)
    p = paths(settings)
    p.layout.write_text(f"{servers}\n")
    deadline = time.monotonic() + timeout
    if not servers and "master" not in running and "thrift" in running:
        # The gateway is a client of the ZooKeeper in the master's JVM, and a new master
        # brings a fresh one (below), which refuses the old one's sessions: the gateway
        # starts anew after the master.
        _stop_one(settings, "thrift", grace=10)
        del running["thrift"]
    offsets = {role: _log_size(p.log_file(role)) for role in wanted}
    started, expected = [], list(running)
    for role in wanted:
        if role in running:
            continue
        port = _port_of(settings, role)
        if port_open("127.0.0.1", port):
            hint = _PORT_HINT.get(role, "GRIDAGG_ZK_PORT" if not servers else
                                  "GRIDAGG_ZK_PORT: the master's and region servers' ports follow from it")
            raise _fail(settings, role, f"cannot start: port {port} is already taken by another process "
                                        f"(set {hint} to move it)", started)
        if role == "master" and not servers:
            # Its ZooKeeper holds nothing HBase 2 does not rebuild as it starts (where meta
            # lives is kept in the master's own region too): a fresh one, so the sessions
            # of a JVM killed with -9 are not waited out.
            shutil.rmtree(p.zk, ignore_errors=True)
            p.zk.mkdir()
        _spawn(settings, role, _command(settings, role, cp))
        if serves_regions(settings, role):  # what stale_observer compares with
            p.observer_file(role).write_text(tool_key(OBSERVER_CLASS, cp))
        started.append(role)
        expected.append(role)
        if role in ("zookeeper", "master"):
            # ZooKeeper first (in-process in the standalone master): the others need it.
            _wait(settings, role, lambda: port_open("127.0.0.1", settings.zk_port), deadline, offsets, started,
                  expected, f"did not open ZooKeeper port {settings.zk_port}")
    host, port = "127.0.0.1", settings.hbase_port
    _wait(settings, "thrift", lambda: thrift_answers(host, port), deadline, offsets, started, expected,
          f"did not answer on {host}:{port}")
    for role in started:  # until it serves (and a master can create and drop tables)
        ready = "Serving as " if role.startswith("rs") else _READY.get(role)
        if ready:
            _wait(settings, role, lambda r=role, text=ready: _log_has(p.log_file(r), offsets[r], text), deadline,
                  offsets, started, expected, "did not finish starting")


def _wait(settings, role: str, ready, deadline: float, offsets: dict[str, int], started: list[str],
          expected: list[str], what: str) -> None:
    """Until ready(); raises (stopping the JVMs of `started`) when a JVM of `expected`
    exits, a log says HBase will never serve, or the deadline passes."""
    p = paths(settings)
    while not ready():
        for r in expected:
            if running_pid(settings, r) is None:
                last = _last_words(p.out_file(r)) or _fatal_log_line(p.log_file(r), offsets[r])
                raise _fail(settings, r, "exited during startup" + (f" ({last[:200]})" if last else ""), started)
            fatal = _fatal_log_line(p.log_file(r), offsets[r]) if r == "master" or r.startswith("rs") else None
            if fatal:
                raise _fail(settings, r, f"failed to start ({fatal[:200]})", started)
        if time.monotonic() > deadline:
            raise _fail(settings, role, f"{what} within {START_TIMEOUT:.0f}s", started)
        time.sleep(0.5)


def _last_words(out: Path) -> str | None:
    """The last line a JVM wrote to stdout/stderr in its latest start, if any."""
    try:
        text = out.read_text(errors="replace").rsplit("\n--- ", 1)[-1]
    except OSError:
        return None
    lines = [ln.strip() for ln in text.splitlines()[1:] if ln.strip() and not ln.startswith("WARNING")]
    return lines[-1] if lines else None


def _log_has(log: Path, offset: int, text: str) -> bool:
    try:
        with open(log, "rb") as fh:
            fh.seek(offset)
            return text.encode() in fh.read()
    except OSError:
        return False


def _stop_one(settings, role: str, grace: float) -> bool:
    pid = running_pid(settings, role)
    pid_file = paths(settings).pid_file(role)
    if pid is None:
        pid_file.unlink(missing_ok=True)
        return False
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while _alive(pid, main_class(role)) and time.monotonic() < deadline:
        time.sleep(0.3)
    _kill_now(pid, main_class(role))
    pid_file.unlink(missing_ok=True)
    return True


def _kill_now(pid: int, main_class: str) -> None:
    """SIGKILL the JVM `pid` (and its process group) unless it is gone; wait until it is."""
    if not _alive(pid, main_class):
        return
    try:
        os.killpg(pid, signal.SIGKILL)  # the JVM leads its own session/group
    except OSError:
        os.kill(pid, signal.SIGKILL)
    while _alive(pid, main_class):
        time.sleep(0.05)


def kill(settings, role: str) -> bool:
    """Crash the local JVM of `role` (see `roles`; the standalone "master" holds the
    region server and ZooKeeper too): SIGKILL, no shutdown hook runs, nothing is flushed.
    Returns whether it was running. `start` brings it back (a region server's regions
    are reopened elsewhere meanwhile, from its write-ahead log)."""
    pid = running_pid(settings, role)
    if pid is None:
        return False
    _kill_now(pid, main_class(role))
    paths(settings).pid_file(role).unlink(missing_ok=True)
    return True


def stop(settings, orderly: bool = True) -> list[str]:
    """Stop every local HBase JVM: the gateway, then the master and region servers, then
    ZooKeeper (SIGTERM; SIGKILL after a grace period).

    The master is first asked for an orderly cluster shutdown: region servers close
    their regions (flushing the memstores), so the data survives a restart.
    With orderly=False (cleanup after a failed start) only signals are used.
    Returns the roles that were running.
    """
    running = list(running_roles(settings))
    _stop_one(settings, "thrift", grace=30)
    pid = running_pid(settings, "master")
    if pid is not None and orderly:
        _request_cluster_shutdown(settings, pid)
    for role in running_roles(settings):
        if role != "zookeeper":
            _stop_one(settings, role, grace=60)
    _stop_one(settings, "zookeeper", grace=10)
    return running


def _request_cluster_shutdown(settings, pid: int, timeout: float = 90) -> None:
    """Ask for an orderly cluster shutdown (`HMaster stop --shutDownCluster`, Admin.shutdown)
    and wait until the master and every region server have exited.

    Plain SIGTERM also works but, standalone, its shutdown hooks stop the in-process
    ZooKeeper before the region server has finished, which then spends a long while retrying
    ZooKeeper. Best effort: whatever is still running afterwards gets SIGTERM/SIGKILL
    from the caller.
    """
    servers = [(role, running_pid(settings, role)) for role in running_roles(settings) if role.startswith("rs")]
    try:
        cp = resolve_classpath(settings)
        cmd = java_cmd(settings, "admin", cp, [MASTER_CLASS, "stop", "--shutDownCluster"])
        proc = subprocess.Popen(cmd, cwd=paths(settings).root, stdin=subprocess.DEVNULL, env=jvm_env(),
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                start_new_session=True)
    except (LauncherError, OSError):
        return
    deadline = time.monotonic() + timeout

    def up() -> bool:
        return _alive(pid, MASTER_CLASS) or any(_alive(p, REGIONSERVER_CLASS) for _, p in servers)

    try:
        while time.monotonic() < deadline and up():
            if proc.poll() is not None and proc.returncode != 0:
                break
            time.sleep(0.3)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
