"""Local servers for development and tests: a PostgreSQL and an Apache HBase.

``up``/``status``/``down`` manage both; all are idempotent. Each returns one
:class:`Report` per server, which the CLI prints. For fault-injection tests,
``pg_crash``/``hbase_crash`` crash one server (no clean shutdown) and ``pg_up``/``hbase_up``
bring it back.

PostgreSQL: Debian's server binaries (``pg_config --bindir`` or the newest
/usr/lib/postgresql/*/bin) run with initdb/pg_ctl in ``<data_dir>/pg``, listening on
127.0.0.1:``settings.pg_port`` with its unix socket inside the data dir. PostgreSQL refuses
to run as root, so when we are root it runs as the unprivileged user ``nobody``.
The bootstrap superuser is the role ``gridagg`` (trust auth, loopback only) and the
database ``gridagg`` is created.

HBase: a standalone HMaster, or ZooKeeper, a master and N region servers (`up` with
settings.hbase_region_servers), and the Thrift1 gateway, from Maven jars; see
:mod:`hbase.launcher`.

With ``GRIDAGG_PG_URL`` / ``GRIDAGG_HBASE`` set, the external server is only checked.
Every failure is a :class:`ServiceError` with a one-line message.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import pwd
import re
import shutil
import stat
import subprocess
from dataclasses import dataclass
from pathlib import Path

from gridagg_hbase import jvm, launcher

from gridagg.config import Settings

PG_USER_WHEN_ROOT = "nobody"
PG_START_TIMEOUT = 60


class ServiceError(RuntimeError):
    """A local or external server could not be started, stopped or reached."""


@dataclass(frozen=True)
class Report:
    service: str  # "PostgreSQL" or "HBase"
    state: str  # e.g. "started", "already running", "stopped", "not running", "external, reachable"
    address: str  # URL or host:port clients use
    detail: str = ""  # data dir / log file / hint
    more: tuple[str, ...] = ()  # lines of their own below (e.g. an HBase's region servers)

    def line(self) -> str:
        text = f"{self.service:<11} {self.state:<22} {self.address}"
        text = f"{text}  ({self.detail})" if self.detail else text
        return "\n".join([text, *(f"  {line}" for line in self.more)])


# --------------------------------------------------------------------------- helpers


def _redact(url: str) -> str:
    return re.sub(r"(://[^:/@]+):[^@/]*@", r"\1:***@", url)


@contextlib.contextmanager
def _lock(settings: Settings):
    """Serialise up/down between processes (e.g. parallel test sessions)."""
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    with open(settings.data_dir / ".services.lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _hbase_address(settings: Settings) -> tuple[str, int]:
    if settings.hbase:
        host, _, port = settings.hbase.rpartition(":")
        if not host or not port.isdigit():
            raise ServiceError(f"GRIDAGG_HBASE must be host:port, got {settings.hbase!r}")
        return host, int(port)
    return "127.0.0.1", settings.hbase_port


# --------------------------------------------------------------------------- PostgreSQL


@dataclass(frozen=True)
class PgPaths:
    root: Path

    @property
    def data(self) -> Path:
        return self.root / "data"

    @property
    def socket_dir(self) -> Path:
        return self.root / "run"

    @property
    def log(self) -> Path:
        return self.root / "log" / "postgresql.log"


def pg_paths(settings: Settings) -> PgPaths:
    return PgPaths(settings.data_dir / "pg")


def pg_bindir() -> Path:
    """Directory with initdb and pg_ctl: `pg_config --bindir`, else newest Debian one."""
    candidates: list[Path] = []
    pg_config = shutil.which("pg_config")
    if pg_config:
        try:
            out = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True, timeout=10)
            if out.returncode == 0:
                candidates.append(Path(out.stdout.strip()))
        except (OSError, subprocess.SubprocessError):
            pass

    def version(p: Path) -> tuple[int, ...]:
        return tuple(int(x) for x in re.findall(r"\d+", p.parent.name)) or (0,)

    candidates += sorted(Path("/usr/lib/postgresql").glob("*/bin"), key=version, reverse=True)
    for d in candidates:
        if (d / "initdb").exists() and (d / "pg_ctl").exists():
            return d
    raise ServiceError("PostgreSQL server binaries (initdb, pg_ctl) not found; "
                       "Debian: apt-get install -y postgresql-15, or set GRIDAGG_PG_URL")


def _pg_user() -> tuple[int, int] | None:
    """(uid, gid) to run PostgreSQL as, or None to run as ourselves."""
    if os.geteuid() != 0:
        return None
    try:
        pw = pwd.getpwnam(PG_USER_WHEN_ROOT)
    except KeyError:
        raise ServiceError(f"running as root but there is no user {PG_USER_WHEN_ROOT!r} "
                           "to run PostgreSQL as") from None
    return pw.pw_uid, pw.pw_gid


def _pg_run(settings: Settings, args: list[str], **kw) -> subprocess.CompletedProcess:
    """Run a PostgreSQL binary, as `nobody` when we are root."""
    kw.setdefault("stdin", subprocess.DEVNULL)
    kw.setdefault("capture_output", True)
    kw.setdefault("text", True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
    env["LC_ALL"] = "C.UTF-8"
    user = _pg_user()
    if user is not None:
        kw["user"], kw["group"] = user
        kw["extra_groups"] = []
        env["HOME"] = str(pg_paths(settings).root)
    return subprocess.run(args, cwd=pg_paths(settings).root, env=env, **kw)


def _prepare_pg_dirs(settings: Settings) -> None:
    p = pg_paths(settings)
    for d in (p.root, p.socket_dir, p.log.parent):
        d.mkdir(parents=True, exist_ok=True)
    user = _pg_user()
    if user is None:
        return
    uid, gid = user
    # The server user must own its tree ...
    for dirpath, dirnames, filenames in os.walk(p.root):
        for name in [dirpath, *(os.path.join(dirpath, n) for n in dirnames + filenames)]:
            st = os.lstat(name)
            if st.st_uid != uid or st.st_gid != gid:
                os.lchown(name, uid, gid)
    # ... and be able to reach it: give "others" search (x) permission on the ancestors
    # that lack it (e.g. /root). Only traversal is granted, never listing or reading.
    for parent in p.root.parents:
        st = parent.stat()
        if not st.st_mode & stat.S_IXOTH:
            os.chmod(parent, stat.S_IMODE(st.st_mode) | stat.S_IXOTH)


def _write_pg_conf(settings: Settings) -> None:
    p = pg_paths(settings)
    conf = p.data / "gridagg.conf"
    conf.write_text(
        "# written by gridagg services up; edits are overwritten\n"
        "listen_addresses = '127.0.0.1'\n"
        f"port = {settings.pg_port}\n"
        f"unix_socket_directories = '{p.socket_dir}'\n"
        # API workers x a pool of 8 and a listener each, writers, the bench's peers
        "max_connections = 100\n"
        "shared_buffers = '128MB'\n"
        "log_min_messages = warning\n"
    )
    user = _pg_user()
    if user is not None:
        os.chown(conf, *user)


def _pg_initdb(settings: Settings, bindir: Path) -> None:
    p = pg_paths(settings)
    if (p.data / "PG_VERSION").exists():
        return
    if p.data.exists() and any(p.data.iterdir()):
        raise ServiceError(f"{p.data} exists but is no PostgreSQL data dir; remove it")
    res = _pg_run(settings, [str(bindir / "initdb"), "-D", str(p.data), "-U", "gridagg",
                             "--auth-local=trust", "--auth-host=trust", "-E", "UTF8",
                             "--no-locale"])
    if res.returncode != 0:
        init_log = p.log.parent / "initdb.log"
        init_log.write_text(res.stdout + res.stderr)
        raise ServiceError(f"initdb failed; see {init_log}")
    with open(p.data / "postgresql.conf", "a") as fh:
        fh.write("\n# gridagg: listen address, port, socket dir\ninclude_if_exists = 'gridagg.conf'\n")


def _pg_running(settings: Settings, bindir: Path) -> bool:
    p = pg_paths(settings)
    if not (p.data / "PG_VERSION").exists():
        return False
    return _pg_run(settings, [str(bindir / "pg_ctl"), "status", "-D", str(p.data)]).returncode == 0


def _pg_check(url: str, timeout: int = 5) -> str | None:
    """None when a query works at url, else the first line of the error."""
    import psycopg

    try:
        with psycopg.connect(url, connect_timeout=timeout, autocommit=True) as conn:
            conn.execute("select 1").fetchone()
        return None
    except Exception as e:  # noqa: BLE001 - report any failure as one line
        text = str(e).strip().splitlines()
        return text[0] if text else type(e).__name__


def _pg_admin_url(settings: Settings) -> str:
    return f"postgresql://gridagg@127.0.0.1:{settings.pg_port}/postgres"


def _pg_ensure_db(settings: Settings) -> None:
    import psycopg

    with psycopg.connect(_pg_admin_url(settings), connect_timeout=10, autocommit=True) as conn:
        if conn.execute("select 1 from pg_database where datname = 'gridagg'").fetchone() is None:
            conn.execute("create database gridagg")


def pg_up(settings: Settings) -> Report:
    if settings.pg_url:
        err = _pg_check(settings.pg_url)
        if err:
            raise ServiceError(f"PostgreSQL at {_redact(settings.pg_url)} is not reachable: {err}")
        return Report("PostgreSQL", "external, reachable", _redact(settings.pg_url))
    p = pg_paths(settings)
    bindir = pg_bindir()
    url = settings.local_pg_url
    if _pg_running(settings, bindir):
        _write_pg_conf(settings)
        if _pg_check(_pg_admin_url(settings)):
            raise ServiceError(f"local PostgreSQL in {p.data} runs but does not answer at {url} "
                               "(port changed? run `gridagg services down` first)")
        _pg_ensure_db(settings)
        return Report("PostgreSQL", "already running", url, f"data {p.data}")
    if launcher.port_open("127.0.0.1", settings.pg_port):
        raise ServiceError(f"port {settings.pg_port} is already taken by another process "
                           "(set GRIDAGG_PG_PORT to a free port)")
    sock = p.socket_dir / f".s.PGSQL.{settings.pg_port}"
    if len(str(sock).encode()) > 100:
        raise ServiceError(f"socket path {sock} is too long for unix sockets; "
                           "use a shorter GRIDAGG_DATA_DIR")
    _prepare_pg_dirs(settings)
    _pg_initdb(settings, bindir)
    _write_pg_conf(settings)
    res = _pg_run(settings, [str(bindir / "pg_ctl"), "start", "-D", str(p.data), "-l", str(p.log),
                             "-w", "-t", str(PG_START_TIMEOUT)], start_new_session=True)
    if res.returncode != 0 or _pg_check(_pg_admin_url(settings), timeout=10):
        raise ServiceError(f"PostgreSQL failed to start; see {p.log}")
    _pg_ensure_db(settings)
    return Report("PostgreSQL", "started", url, f"data {p.data}, log {p.log}")


def pg_status(settings: Settings) -> Report:
    if settings.pg_url:
        err = _pg_check(settings.pg_url)
        state = "external, reachable" if err is None else f"external, NOT reachable: {err}"
        return Report("PostgreSQL", state, _redact(settings.pg_url))
    url = settings.local_pg_url
    try:
        bindir = pg_bindir()
    except ServiceError:
        return Report("PostgreSQL", "not installed", url)
    if not _pg_running(settings, bindir):
        return Report("PostgreSQL", "not running", url)
    err = _pg_check(url)
    state = "running" if err is None else f"running, NOT answering: {err}"
    return Report("PostgreSQL", state, url, f"data {pg_paths(settings).data}")


def pg_down(settings: Settings) -> Report:
    if settings.pg_url:
        return Report("PostgreSQL", "external, left alone", _redact(settings.pg_url))
    url = settings.local_pg_url
    p = pg_paths(settings)
    try:
        bindir = pg_bindir()
    except ServiceError:
        return Report("PostgreSQL", "not running", url)
    if not _pg_running(settings, bindir):
        return Report("PostgreSQL", "not running", url)
    pg_ctl = str(bindir / "pg_ctl")
    res = _pg_run(settings, [pg_ctl, "stop", "-D", str(p.data), "-m", "fast", "-w", "-t", "60"])
    if res.returncode != 0:
        res = _pg_run(settings, [pg_ctl, "stop", "-D", str(p.data), "-m", "immediate", "-w", "-t", "30"])
        if res.returncode != 0:
            raise ServiceError(f"could not stop PostgreSQL in {p.data}; see {p.log}")
    return Report("PostgreSQL", "stopped", url)


def pg_crash(settings: Settings) -> Report:
    """Crash the local PostgreSQL: an immediate shutdown (every server process quits at
    once, nothing is checkpointed; the next `pg_up` runs crash recovery from the WAL).
    For fault-injection tests."""
    if settings.pg_url:
        raise ServiceError("an external PostgreSQL (GRIDAGG_PG_URL) is not ours to crash")
    url = settings.local_pg_url
    p = pg_paths(settings)
    bindir = pg_bindir()
    if not _pg_running(settings, bindir):
        return Report("PostgreSQL", "not running", url)
    res = _pg_run(settings, [str(bindir / "pg_ctl"), "stop", "-D", str(p.data), "-m", "immediate", "-w", "-t", "30"])
    if res.returncode != 0:
        raise ServiceError(f"could not crash PostgreSQL in {p.data}: {(res.stderr or res.stdout).strip()[:200]}")
    return Report("PostgreSQL", "crashed", url)


# --------------------------------------------------------------------------- HBase


def _layout_text(servers: int) -> str:
    return "standalone" if not servers else f"{servers} region server{'s' if servers > 1 else ''}"


def _memory_text(settings: Settings) -> str:
    """A region server's heap and block cache (GRIDAGG_HBASE_HEAP)."""
    how = "sized from this machine's memory" if settings.hbase_heap == "auto" else "GRIDAGG_HBASE_HEAP"
    return (f"heap {jvm.region_server_heap(settings)} per region server ({how}), "
            f"block cache {jvm.block_cache_bytes(settings) / 2**30:.1f} GiB each, off the heap")


def _heap_text(settings: Settings, role: str) -> str:
    """What the heap of a JVM holding regions kept after its last collection, and at most
    after a mixed or full one (jvm.HeapAfterGC)."""
    heap = jvm.heap_after_gc(settings, role)
    if heap is None:
        return ""
    return (f", heap after GC {heap.last_mb} MB (after mixed and full collections at most {heap.peak_mb}; "
            f"{heap.full} full) of {heap.max_mb}")


def hbase_up(settings: Settings) -> Report:
    """Start (or check) the local HBase in its layout (jvm.layout: standalone, or
    distributed with settings.hbase_region_servers region servers)."""
    host, port = _hbase_address(settings)
    address = f"thrift {host}:{port}"
    if settings.hbase:
        if not launcher.thrift_answers(host, port):
            raise ServiceError(f"HBase Thrift gateway at {host}:{port} is not reachable")
        return Report("HBase", "external, reachable", address)
    hp = jvm.paths(settings)
    servers = jvm.layout(settings)
    running = launcher.running_roles(settings)
    stale = []
    if (list(running) == jvm.roles(servers) and servers == (jvm.recorded_layout(settings) or 0)
            and launcher.thrift_answers(host, port)):
        try:
            stale = launcher.stale_observer(settings)
        except jvm.LauncherError as e:
            raise ServiceError(str(e)) from None
        if not stale:
            return Report("HBase", "already running", address,
                          f"{_layout_text(servers)}, {_memory_text(settings)}, data {hp.root}")
    try:
        jvm.java_bin()
        if stale:  # a rebuilt scan observer: its region servers load it only when they start
            launcher.stop(settings)
        launcher.start(settings)
    except jvm.LauncherError as e:
        raise ServiceError(str(e)) from None
    return Report("HBase", "restarted" if stale else "started", address,
                  f"{_layout_text(servers)}, {_memory_text(settings)}, data {hp.root}, logs {hp.logs}"
                  + (f", for the changed scan observer ({', '.join(stale)})" if stale else ""))


def hbase_status(settings: Settings) -> Report:
    """What runs; distributed, a line per region server with its regions per table."""
    host, port = _hbase_address(settings)
    address = f"thrift {host}:{port}"
    answers = launcher.thrift_answers(host, port, timeout_ms=5000)
    if settings.hbase:
        return Report("HBase", "external, reachable" if answers else "external, NOT reachable", address)
    running = launcher.running_roles(settings)
    if not running:
        return Report("HBase", "not running", address)
    servers = jvm.recorded_layout(settings) or 0
    wanted = jvm.roles(servers)
    pids = ", ".join(f"{role} {pid}" for role, pid in running.items() if not role.startswith("rs"))
    state = "running" if list(running) == wanted and answers else "partly running"
    detail = f"{_layout_text(servers)}, {_memory_text(settings)}, pids {pids}" + (
        "" if answers else ", gateway not answering") + ("" if servers else _heap_text(settings, "master"))
    if not servers:
        return Report("HBase", state, address, detail)
    regions = _regions_by_port(host, port) if answers else None
    more = []
    for role in wanted[2:-1]:  # the region servers
        rpc = jvm.rpc_port(settings, role)
        tables = (regions or {}).get(rpc, {})
        held = ", ".join(f"{t} {n}" for t, n in sorted(tables.items())) or "no regions"
        pid = running.get(role)
        more.append(f"{role:<4} {'pid ' + str(pid) if pid else 'DOWN':<11} localhost:{rpc}  "
                    + (f"regions: {held}" if regions is not None else "regions unknown (some in transition?)")
                    + _heap_text(settings, role))
    return Report("HBase", state, address, detail, tuple(more))


def _regions_by_port(host: str, port: int) -> dict[int, dict[str, int]] | None:
    """Regions of every table, counted per table by the RPC port of the region server
    holding them (as the gateway reads hbase:meta); None when the gateway cannot tell
    (a region without a server fails its listing)."""
    import happybase

    out: dict[int, dict[str, int]] = {}
    try:
        conn = happybase.Connection(host, port, timeout=10000)
        try:
            for table in conn.client.getTableNames():
                for region in conn.client.getTableRegions(table):
                    held = out.setdefault(region.port, {})
                    held[table.decode()] = held.get(table.decode(), 0) + 1
        finally:
            conn.close()
    except Exception:  # noqa: BLE001 - status reports what it can
        return None
    return out


def hbase_down(settings: Settings) -> Report:
    host, port = _hbase_address(settings)
    address = f"thrift {host}:{port}"
    if settings.hbase:
        return Report("HBase", "external, left alone", address)
    stopped = launcher.stop(settings)
    return Report("HBase", "stopped" if stopped else "not running", address,
                  ", ".join(stopped) if len(stopped) > 2 else "")


def hbase_crash(settings: Settings, role: str) -> Report:
    """Crash one JVM of the local HBase with SIGKILL: role "master" (standalone: the
    master, the region server and ZooKeeper), "thrift" (the gateway), and distributed
    also "zookeeper" or a region server "rs<i>". `hbase_up` starts it again. For
    fault-injection tests."""
    host, port = _hbase_address(settings)
    address = f"thrift {host}:{port}"
    if settings.hbase:
        raise ServiceError("an external HBase (GRIDAGG_HBASE) is not ours to crash")
    roles = jvm.roles(jvm.recorded_layout(settings) or 0)
    if role not in roles:
        raise ServiceError(f"HBase role must be one of {', '.join(roles)}, not {role!r}")
    return Report("HBase", f"{role} killed" if launcher.kill(settings, role) else f"{role} not running", address)


# --------------------------------------------------------------------------- both


def up(settings: Settings, hbase: bool = True) -> list[Report]:
    """Start (or check) PostgreSQL and, unless hbase=False, HBase."""
    with _lock(settings):
        reports = [pg_up(settings)]
        if hbase:
            reports.append(hbase_up(settings))
    return reports


def status(settings: Settings) -> list[Report]:
    return [pg_status(settings), hbase_status(settings)]


def down(settings: Settings) -> list[Report]:
    """Stop the local servers (external ones are left alone). Data is kept."""
    with _lock(settings):
        return [hbase_down(settings), pg_down(settings)]


def ensure_up(settings: Settings, hbase: bool = True) -> list[Report]:
    """For tests: start whatever is not running yet (same as up)."""
    return up(settings, hbase=hbase)
