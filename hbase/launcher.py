"""Run a real Apache HBase plus its Thrift1 gateway from Maven jars, on this machine.

Two layouts, chosen by `gridagg services up [--region-servers N]` (settings
hbase_region_servers; unset: the layout last started in the data dir, see `layout`):

- standalone (N = 0, the default): one JVM `HMaster start` with an in-process ZooKeeper,
  the master and one region server;
- distributed (N >= 1): ZooKeeper (ZooKeeperServerMain), an HMaster and N region servers
  (HRegionServer), each a JVM of its own on ports derived from settings.zk_port (`ports`),
  sharing the root dir on this machine's disk, as a cluster of several machines would
  share HDFS.

Either way every region server loads gridagg's scan observer (hbase/GridScanObserver.java)
for every user table, and the Thrift1 gateway is a JVM of its own (threadpool server,
buffered transport, binary protocol: what happybase speaks by default), told to give up
within seconds when HBase is down (THRIFT_CLIENT_OPTIONS).

Layout under ``<data_dir>/hbase``::

    conf/      hbase-site.xml, log4j2.properties (first on the classpath), zoo.cfg; thrift/,
               the gateway's hbase-site.xml
    data/      hbase.rootdir (local filesystem)
    tmp/       hbase.tmp.dir (tmp/rs<i> for region server i)
    zk/        ZooKeeper's data
    logs/      <role>.log (log4j2) and <role>.out (stdout/stderr) per JVM
    run/       <role>.pid per JVM; layout, the region servers last started (0: standalone);
               <role>.observer, the key of the scan observer a region server loaded
    tools/     classes/ of the Java helpers hbase/*.java (compiled once), and their keys;
               gridagg-tools.jar, the same classes for Spark's driver
    cp.txt     the resolved Maven classpath, cp.key the pom hash it belongs to

Roles (JVMs): "master", "thrift"; distributed also "zookeeper" and "rs1".."rsN".

`gridagg services observer-jar OUT.jar` builds the observer's jar for an
external cluster (README: HBase, Server-side scans).

Errors are raised as :class:`LauncherError` with a one-line message.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import signal
import socket
import subprocess
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path
from xml.sax.saxutils import escape

HERE = Path(__file__).resolve().parent
POM = HERE / "pom.xml"
LOG4J2 = HERE / "log4j2.properties"

MASTER_CLASS = "org.apache.hadoop.hbase.master.HMaster"
THRIFT_CLASS = "org.apache.hadoop.hbase.thrift.ThriftServer"
REGIONSERVER_CLASS = "org.apache.hadoop.hbase.regionserver.HRegionServer"
ZOOKEEPER_CLASS = "org.apache.zookeeper.server.ZooKeeperServerMain"

# Distributed layout: the master's RPC port is settings.zk_port + RPC_PORT_OFFSET, region
# server i's the next ones (checkouts whose ZooKeeper ports differ get apart ports).
RPC_PORT_OFFSET = 14000
MAX_REGION_SERVERS = 9
# A region server's death is known when its ZooKeeper session expires: after this long
# (HBase's default is 90 s). Far above the pauses of a busy 2-core machine's JVMs.
SESSION_TIMEOUT_MS = 10000

START_TIMEOUT = 180.0

# What bin/hbase adds on JDK 11+ (HBase 2.6 on JDK 17).
JDK17_FLAGS = [
    "-XX:+UseG1GC",
    "-Dorg.apache.hbase.thirdparty.io.netty.tryReflectionSetAccessible=true",
    "--add-modules", "jdk.unsupported",
    "--add-opens", "java.base/java.io=ALL-UNNAMED",
    "--add-opens", "java.base/java.nio=ALL-UNNAMED",
    "--add-opens", "java.base/sun.nio.ch=ALL-UNNAMED",
    "--add-opens", "java.base/java.lang=ALL-UNNAMED",
    "--add-opens", "java.base/jdk.internal.ref=ALL-UNNAMED",
    "--add-opens", "java.base/java.lang.reflect=ALL-UNNAMED",
    "--add-opens", "java.base/java.util=ALL-UNNAMED",
    "--add-opens", "java.base/java.util.concurrent=ALL-UNNAMED",
    "--add-exports", "java.base/jdk.internal.misc=ALL-UNNAMED",
    "--add-exports", "java.security.jgss/sun.security.krb5=ALL-UNNAMED",
    "--add-exports", "java.base/sun.net.dns=ALL-UNNAMED",
    "--add-exports", "java.base/sun.net.util=ALL-UNNAMED",
]

# The region servers' scan observer: compiled into tools/classes, loaded for user tables.
OBSERVER_CLASS = "GridScanObserver"

# The gateway's HBase client gives up within seconds when HBase is down (ZooKeeper or the
# region server unreachable), instead of retrying for up to 20 minutes while its caller
# waits; a long scan is one RPC, bounded by hbase.rpc.timeout (60 s), not by these.
THRIFT_CLIENT_OPTIONS = {
    "hbase.client.retries.number": "2",
    "hbase.client.pause": "100",
    "hbase.client.operation.timeout": "90000",
    "hbase.client.meta.operation.timeout": "10000",
    "zookeeper.registry.async.get.timeout": "1000",
    "zookeeper.recovery.retry": "1",
    "zookeeper.recovery.retry.intervalmill": "200",
}

# Heap per JVM but the region servers' (settings.hbase_heap, also the standalone master's:
# it holds the region server): modest, this runs next to PostgreSQL and Spark on a small
# machine.
HEAPS = {"thrift": "-Xmx512m", "admin": "-Xmx256m", "master": "-Xmx512m", "zookeeper": "-Xmx256m"}
# Short-lived admin JVMs: the C1 compiler only (starts faster). Region servers (the
# standalone master's JVM holds one) run the observer's row loops on the Vector API, an
# incubator module.
OBSERVER_FLAGS = ["--add-modules", "jdk.incubator.vector"]
# The observer's row loops compiled each as a method of its own: inlined into the scan's
# larger methods, the JIT at times left a Vector API call uncompiled there (a mask's
# count became a plain call, 28% of the region server's time in a 100M-row polygon).
OBSERVER_JIT_FLAGS = [f"-XX:CompileCommand=quiet,dontinline,*Lanes::{m}" for m in ("count", "test", "fold")]
ADMIN_FLAGS = ["-XX:TieredStopAtLevel=1"]
# The long-lived JVMs (every role but admin) back their heaps with transparent huge pages.
# Linux gives them only to memory that asks for them (THP mode "madvise", the common
# default). A sum's scan steps to grids scattered over a block cache of gigabytes: with 4 KB
# pages nearly every step also misses the TLB. At 100M rows this cut HBase's CPU per served
# sum by about 15% (docs/bench/scale/README.md, session 89). Where the kernel has THP off,
# the JVM logs a warning and runs on small pages.
SERVER_FLAGS = ["-XX:+UseTransparentHugePages"]


class LauncherError(RuntimeError):
    """A local HBase could not be set up, started, stopped or reached."""


@dataclass(frozen=True)
class Paths:
    root: Path

    @property
    def conf(self) -> Path:
        return self.root / "conf"

    @property
    def data(self) -> Path:
        return self.root / "data"

    @property
    def tmp(self) -> Path:
        return self.root / "tmp"

    @property
    def zk(self) -> Path:
        return self.root / "zk"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    @property
    def run(self) -> Path:
        return self.root / "run"

    @property
    def tools(self) -> Path:
        return self.root / "tools"

    @property
    def cp_file(self) -> Path:
        return self.root / "cp.txt"

    @property
    def cp_key(self) -> Path:
        return self.root / "cp.key"

    @property
    def layout(self) -> Path:
        return self.run / "layout"

    def pid_file(self, role: str) -> Path:
        return self.run / f"{role}.pid"

    def observer_file(self, role: str) -> Path:
        """The key of the scan observer a JVM serving regions started with (_tool_key)."""
        return self.run / f"{role}.observer"

    def log_file(self, role: str) -> Path:
        return self.logs / f"{role}.log"

    def out_file(self, role: str) -> Path:
        return self.logs / f"{role}.out"


def paths(settings) -> Paths:
    return Paths(Path(settings.data_dir) / "hbase")


# --------------------------------------------------------------------------- layout


def recorded_layout(settings) -> int | None:
    """The region servers last started in this data dir (0: standalone), None if never."""
    try:
        return int(paths(settings).layout.read_text())
    except (OSError, ValueError):
        return None


def layout(settings) -> int:
    """The region servers to run: settings.hbase_region_servers when set, else as last
    started in this data dir (0, standalone, when never)."""
    if settings.hbase_region_servers is not None:
        return settings.hbase_region_servers
    return recorded_layout(settings) or 0


def roles(servers: int) -> list[str]:
    """The JVMs of a layout of `servers` region servers (0: standalone), in start order."""
    if not servers:
        return ["master", "thrift"]
    return ["zookeeper", "master", *(f"rs{i}" for i in range(1, servers + 1)), "thrift"]


def main_class(role: str) -> str:
    if role.startswith("rs"):
        return REGIONSERVER_CLASS
    return {"master": MASTER_CLASS, "thrift": THRIFT_CLASS, "zookeeper": ZOOKEEPER_CLASS}[role]


def rpc_port(settings, role: str) -> int:
    """The RPC port of the distributed layout's "master" or "rs<i>"."""
    return settings.zk_port + RPC_PORT_OFFSET + (0 if role == "master" else int(role[2:]))


# --------------------------------------------------------------------------- tools


def java_bin() -> str:
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").exists():
        return str(Path(home) / "bin" / "java")
    found = shutil.which("java")
    if not found:
        raise LauncherError(
            "java not found: install a JDK 17 (Debian: apt-get install -y openjdk-17-jdk-headless)"
        )
    return found


def _mvn_bin() -> str:
    found = shutil.which("mvn")
    if not found:
        raise LauncherError(
            "mvn not found: Maven is needed once to fetch the HBase jars "
            "(Debian: apt-get install -y maven)"
        )
    return found


def _pom_key() -> str:
    return hashlib.sha256(POM.read_bytes()).hexdigest()


def resolve_classpath(settings) -> str:
    """The runtime classpath of hbase/pom.xml, cached under the data dir.

    The cache is reused while the pom is unchanged and every jar still exists. Maven runs
    offline first (nothing to download when ~/.m2 has everything), online only if needed.
    """
    p = paths(settings)
    key = _pom_key()
    if p.cp_file.exists() and p.cp_key.exists() and p.cp_key.read_text().strip() == key:
        cp = p.cp_file.read_text().strip()
        if cp and all(Path(j).exists() for j in cp.split(os.pathsep)):
            return cp
    p.root.mkdir(parents=True, exist_ok=True)
    mvn = _mvn_bin()
    tmp = p.root / "cp.txt.tmp"
    log = p.logs / "maven.log"
    p.logs.mkdir(parents=True, exist_ok=True)
    base = [
        mvn, "-B", "-q", "-f", str(POM), "dependency:build-classpath",
        "-Dmdep.includeScope=runtime", f"-Dmdep.outputFile={tmp}",
    ]
    with open(log, "wb") as out:
        ok = subprocess.run([*base[:1], "-o", *base[1:]], stdout=out, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL).returncode == 0
        if not ok:
            out.write(b"\n--- offline resolution failed, resolving online ---\n")
            out.flush()
            ok = subprocess.run(base, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL).returncode == 0
    if not ok or not tmp.exists():
        raise LauncherError(f"Maven could not resolve the HBase classpath; see {log}")
    cp = tmp.read_text().strip()
    tmp.replace(p.cp_file)
    p.cp_key.write_text(key + "\n")
    return cp


# --------------------------------------------------------------------------- config


def site_properties(settings, servers: int = 0) -> dict[str, str]:
    """hbase-site.xml of every JVM of a layout of `servers` region servers (0: standalone)."""
    p = paths(settings)
    return {
        "hbase.cluster.distributed": "false",
        "hbase.rootdir": p.data.as_uri(),
        "hbase.tmp.dir": str(p.tmp),
        "hbase.zookeeper.quorum": "localhost",
        "hbase.zookeeper.property.clientPort": str(settings.zk_port),
        "hbase.zookeeper.property.dataDir": str(p.zk),
        # The local filesystem has no hflush/hsync; HBase refuses it unless told.
        "hbase.unsafe.stream.capability.enforce": "false",
        # Bulk-loaded HFiles are renamed into regions, not copied twice (the class says why).
        "fs.file.impl": "LocalDiskFileSystem",
        "hbase.wal.provider": "filesystem",
        "hbase.wal.meta_provider": "filesystem",
        # No web UIs (they need more JDK 17 opens and are not used).
        "hbase.master.info.port": "-1",
        "hbase.regionserver.info.port": "-1",
        "hbase.thrift.info.port": "-1",
        # Master and region server RPC on ephemeral ports: no clash with other HBases.
        "hbase.localcluster.assign.random.ports": "true",
        # gridagg's tables are read-mostly (bulk-loaded; inserts are small), and a table larger
        # than the block cache is decoded again from the page cache at every read: at 100M
        # rows a served sum box cost the region server 60 ms of CPU with 40% of a 4g heap
        # caching a 6.4 GB table, 10 ms with the table cached (docs/bench/scale). Most of
        # the heap caches blocks; HBase allows cache + memstore up to 0.8 of it.
        "hfile.block.cache.size": "0.6",
        "hbase.regionserver.global.memstore.size": "0.2",
        # Rolled WALs are kept for replication, which a local HBase does not do: drop them
        # after a minute, not HBase's ten. Tuning a 100M-row tree writes 2-4 GB of WAL a
        # minute, and a region server aborted on a full disk before (docs/bench/scale).
        "hbase.master.logcleaner.ttl": "60000",
        # Files a compaction replaced wait in the archive for HBase's cleaner, which runs
        # every ten minutes and keeps them five: tuning a 100M-row tree compacts the whole
        # table, so the disk briefly held it twice (14 GB of archive when a region server
        # aborted on a full disk, docs/bench/scale). Both cleaners run every minute here.
        "hbase.master.cleaner.interval": "60000",
        "hbase.master.hfilecleaner.ttl": "60000",
        # A 2-core machine: few handler threads.
        "hbase.regionserver.handler.count": "8",
        "hbase.master.handler.count": "8",
        "hbase.regionserver.metahandler.count": "4",
        "hbase.regionserver.executor.openregion.threads": "2",
        # Thrift1 gateway: loopback only, threadpool server, buffered transport,
        # binary protocol (happybase defaults), idle clients are not dropped.
        "hbase.regionserver.thrift.ipaddress": "127.0.0.1",
        "hbase.regionserver.thrift.port": str(settings.hbase_port),
        "hbase.regionserver.thrift.server.type": "threadpool",
        "hbase.regionserver.thrift.framed": "false",
        "hbase.regionserver.thrift.compact": "false",
        "hbase.thrift.server.socket.read.timeout": str(7 * 24 * 3600 * 1000),
        "hbase.thrift.minWorkerThreads": "4",
        "hbase.thrift.maxWorkerThreads": "64",
        # gridagg's scans answered on the region server, for user tables (not hbase:meta).
        "hbase.coprocessor.user.region.classes": OBSERVER_CLASS,
        **(_distributed_properties(settings) if servers else {}),
    }


def _distributed_properties(settings) -> dict[str, str]:
    """What the distributed layout changes: ZooKeeper and every server a JVM of its own,
    on loopback and ports of this checkout's (region servers get theirs at start)."""
    return {
        "hbase.cluster.distributed": "true",
        "hbase.localcluster.assign.random.ports": "false",
        "hbase.master.port": str(rpc_port(settings, "master")),
        "hbase.master.ipc.address": "127.0.0.1",
        "hbase.regionserver.ipc.address": "127.0.0.1",
        "hbase.master.hostname": "localhost",
        "hbase.unsafe.regionserver.hostname": "localhost",
        # A dead region server is found when its ZooKeeper session expires.
        "zookeeper.session.timeout": str(SESSION_TIMEOUT_MS),
        # Tables are made after every region server has checked in: their regions spread.
        "hbase.master.wait.on.regionservers.mintostart": "1",
    }


def zoo_cfg(settings) -> str:
    """The distributed layout's ZooKeeper: on loopback, data in zk/, no admin web server;
    session timeouts of 2-30 s allowed (SESSION_TIMEOUT_MS lies between)."""
    p = paths(settings)
    return "\n".join([
        "# written by hbase/launcher.py; edits are overwritten",
        "tickTime=1000", f"dataDir={p.zk}", f"clientPort={settings.zk_port}", "clientPortAddress=127.0.0.1",
        "maxClientCnxns=0", "minSessionTimeout=2000", "maxSessionTimeout=30000", "admin.enableServer=false",
        "autopurge.snapRetainCount=3", "autopurge.purgeInterval=1", ""])


def write_conf(settings, servers: int | None = None) -> Path:
    """Write <data_dir>/hbase/conf/{hbase-site.xml,log4j2.properties,zoo.cfg}, and the
    gateway's own hbase-site.xml (the same and THRIFT_CLIENT_OPTIONS) in conf/thrift, for
    a layout of `servers` region servers (default: `layout`); return conf."""
    p = paths(settings)
    servers = layout(settings) if servers is None else servers
    for d in (p.conf, p.conf / "thrift", p.data.parent, p.tmp, p.zk, p.logs, p.run, p.tools):
        d.mkdir(parents=True, exist_ok=True)
    site = site_properties(settings, servers)
    _write_if_changed(p.conf / "hbase-site.xml", _site_xml(site))
    _write_if_changed(p.conf / "thrift" / "hbase-site.xml", _site_xml({**site, **THRIFT_CLIENT_OPTIONS}))
    _write_if_changed(p.conf / "log4j2.properties", LOG4J2.read_text())
    _write_if_changed(p.conf / "zoo.cfg", zoo_cfg(settings))
    return p.conf


def _site_xml(properties: dict[str, str]) -> str:
    lines = ['<?xml version="1.0"?>', "<!-- written by hbase/launcher.py; edits are overwritten -->",
             "<configuration>"]
    for k, v in properties.items():
        lines.append(f"  <property><name>{escape(k)}</name><value>{escape(v)}</value></property>")
    lines.append("</configuration>")
    return "\n".join(lines) + "\n"


def _write_if_changed(path: Path, text: str) -> None:
    """Atomic replace, and only when different: JVMs may be reading the file."""
    try:
        if path.read_text() == text:
            return
    except OSError:
        pass
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    tmp.replace(path)


def _java_cmd(settings, role: str, cp: str, main: list[str]) -> list[str]:
    """The java command of a JVM with HBase's classpath `cp` and our hbase-site.xml, whose
    fs.file.impl and region observer are compiled here (hbase/LocalDiskFileSystem.java,
    hbase/GridScanObserver.java, into tools/classes). role: a role of `roles`, or "admin"
    (a short-lived client)."""
    p = paths(settings)
    classes = _compile_tool(settings, "LocalDiskFileSystem", cp)
    _compile_tool(settings, OBSERVER_CLASS, cp)
    region_server = _serves_regions(settings, role)
    heap = f"-Xmx{settings.hbase_heap}" if region_server else HEAPS[role]
    if role == "admin":
        extra = ADMIN_FLAGS
    else:
        extra = [*SERVER_FLAGS, *OBSERVER_FLAGS, *OBSERVER_JIT_FLAGS] if region_server else SERVER_FLAGS
    return [
        java_bin(), heap, *JDK17_FLAGS, *extra,
        "-Djava.net.preferIPv4Stack=true",
        f"-Dlog4j2.configurationFile={p.conf / 'log4j2.properties'}",
        f"-Dgridagg.log.dir={p.logs}",
        f"-Dgridagg.log.file={role}.log",
        f"-Dhbase.log.dir={p.logs}",
        f"-Dhbase.log.file={role}.log",
        "-cp", os.pathsep.join([str(p.conf / "thrift" if role == "thrift" else p.conf), str(classes), cp]),
        *main,
    ]


def _serves_regions(settings, role: str) -> bool:
    """Whether `role` is a JVM that holds regions (and so loads the scan observer)."""
    return role.startswith("rs") or (role == "master" and not layout(settings))


def stale_observer(settings) -> list[str]:
    """The running JVMs serving regions whose scan observer is not the one
    hbase/GridScanObserver.java compiles to now (it changed since they started, or they
    started before their observer was recorded): a JVM keeps the classes it loaded, so
    only a restart picks up a rebuilt observer."""
    key = _tool_key(OBSERVER_CLASS, resolve_classpath(settings))
    stale = []
    for role in running_roles(settings):
        if _serves_regions(settings, role):
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


def _jvm_env() -> dict[str, str]:
    env = dict(os.environ)
    # Hadoop's local filesystem shells out to chmod & co.
    parts = [d for d in env.get("PATH", "").split(os.pathsep) if d]
    env["PATH"] = os.pathsep.join(parts + [d for d in ("/usr/bin", "/bin") if d not in parts])
    return env


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
                                cwd=p.root, env=_jvm_env(), start_new_session=True, close_fds=True)
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
    return _java_cmd(settings, role, cp, main)


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
        _spawn(settings, role, _command(settings, role, cp))
        if _serves_regions(settings, role):  # what stale_observer compares with
            p.observer_file(role).write_text(_tool_key(OBSERVER_CLASS, cp))
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
    ZooKeeper before the region server has finished, which then spends ~20 s retrying
    ZooKeeper. Best effort: whatever is still running afterwards gets SIGTERM/SIGKILL
    from the caller.
    """
    servers = [(role, running_pid(settings, role)) for role in running_roles(settings) if role.startswith("rs")]
    try:
        cp = resolve_classpath(settings)
        cmd = _java_cmd(settings, "admin", cp, [MASTER_CLASS, "stop", "--shutDownCluster"])
        proc = subprocess.Popen(cmd, cwd=paths(settings).root, stdin=subprocess.DEVNULL, env=_jvm_env(),
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


# --------------------------------------------------------------------------- admin


def _tool_options(class_name: str) -> list[str]:
    """javac's options for hbase/<class_name>.java."""
    return ["--release", "17", *OBSERVER_FLAGS] if class_name == OBSERVER_CLASS else []


def _tool_key(class_name: str, cp: str) -> str:
    """What the classes of hbase/<class_name>.java are compiled from: its source, the
    classpath and javac's options, hashed."""
    src = (HERE / f"{class_name}.java").read_text()
    return hashlib.sha256((src + "\0" + cp + "\0" + " ".join(_tool_options(class_name))).encode()).hexdigest()


def _compile_tool(settings, class_name: str, cp: str) -> Path:
    """Compile hbase/<class_name>.java once (javac) into tools/classes; return that dir.
    The observer is compiled for Java 17 with the Vector API (OBSERVER_FLAGS)."""
    p = paths(settings)
    classes = p.tools / "classes"
    src = HERE / f"{class_name}.java"
    stamp = p.tools / f"{class_name}.key"
    options = _tool_options(class_name)
    key = _tool_key(class_name, cp)
    if (classes / f"{class_name}.class").exists() and stamp.exists() and stamp.read_text() == key:
        return classes
    javac = Path(java_bin()).resolve().parent / "javac"
    if not javac.exists():
        found = shutil.which("javac")
        if not found:
            raise LauncherError("javac not found: a full JDK 17 is needed "
                                "(Debian: apt-get install -y openjdk-17-jdk-headless)")
        javac = Path(found)
    classes.mkdir(parents=True, exist_ok=True)
    res = subprocess.run([str(javac), "-nowarn", *options, "-cp", cp, "-d", str(classes), str(src)],
                         capture_output=True, stdin=subprocess.DEVNULL, timeout=300)
    if res.returncode != 0:
        err = (res.stderr or res.stdout).decode(errors="replace").strip().splitlines()
        raise LauncherError(f"compiling {src} failed: {err[0] if err else res.returncode}")
    stamp.write_text(key)
    return classes


def family_specs(families) -> list[str]:
    """Column families as CreatePresplitTable takes them: "name:maxVersions", then
    ":blockBytes" (0: HBase's default) and ":encoding" for a family that sets "block_size"
    or "data_block_encoding". `families`: iterable of names, or a dict name ->
    {"max_versions": n, "block_size": bytes, "data_block_encoding": name} (happybase
    style, all optional)."""
    if not isinstance(families, dict):
        return [f"{fam}:1" for fam in families]
    specs = []
    for fam, opts in families.items():
        opts = opts or {}
        spec = f"{fam}:{int(opts.get('max_versions', 1))}"
        if "block_size" in opts or "data_block_encoding" in opts:
            spec += f":{int(opts.get('block_size', 0))}"
        if "data_block_encoding" in opts:
            spec += f":{opts['data_block_encoding']}"
        specs.append(spec)
    return specs


def create_presplit_table(settings, name: str, families, split_keys) -> None:
    """Create table `name` pre-split at `split_keys` in the local HBase.

    Thrift1's createTable has no split keys, so this runs a tiny Java Admin client
    (compiled once with javac into tools/classes) against the local HBase's ZooKeeper.
    `families`: as family_specs takes them.
    `split_keys`: iterable of bytes (or str), the start keys of the 2nd..nth regions.
    """
    if settings.hbase:
        raise LauncherError("create_presplit_table works only with the local HBase "
                            "(GRIDAGG_HBASE points to an external gateway)")
    if running_pid(settings, "master") is None:
        raise LauncherError("the local HBase is not running (gridagg services up)")
    specs = family_specs(families)
    if not specs:
        raise LauncherError("at least one column family is needed")
    keys = []
    for k in split_keys:
        kb = k.encode() if isinstance(k, str) else bytes(k)
        if not kb:
            raise LauncherError("split keys must not be empty")
        keys.append(kb.hex())
    p = paths(settings)
    write_conf(settings)
    cp = resolve_classpath(settings)
    _compile_tool(settings, "CreatePresplitTable", cp)  # into tools/classes, which _java_cmd adds
    cmd = _java_cmd(settings, "admin", cp,
                    ["CreatePresplitTable", name, *specs, "--", *keys])
    for attempt in (1, 2):  # one retry: a busy small machine can drop the first ZK/RPC session
        res = subprocess.run(cmd, cwd=p.root, stdin=subprocess.DEVNULL, capture_output=True,
                             timeout=300, env=_jvm_env())
        if res.returncode == 0:
            return
        if attempt == 2 and res.returncode == 3:
            return  # the first attempt's create went through on the server
        if res.returncode == 3:
            break
        with open(p.out_file("admin"), "a") as fh:
            fh.write(f"\n--- {time.strftime('%Y-%m-%d %H:%M:%S')} create {name} attempt {attempt}: "
                     f"exit {res.returncode}\n{(res.stderr + res.stdout).decode(errors='replace')}")
    if res.returncode != 0:
        text = (res.stderr + res.stdout).decode(errors="replace")
        if res.returncode == 3:
            raise LauncherError(f"table {name} already exists")
        lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
        cause = next((ln for ln in lines if "Exception" in ln and not ln.startswith("at ")),
                     lines[-1] if lines else f"exit code {res.returncode}")
        raise LauncherError(f"creating pre-split table {name} failed: {cause[:300]} "
                            f"(see {p.out_file('admin')} and {p.log_file('admin')})")


# Longest a major compaction is waited for: HBase throttles it to 50-100 MB/s, and a
# 100M-row table of gridagg's is about 6.4 GB.
COMPACT_SECONDS = 3600


def region_admin(settings, command: str, table: str, *args: str, timeout: float = 600) -> str:
    """Split, merge or move regions of a table of the local HBase, run the balancer, set
    a descriptor value or major-compact it, waiting until the table's regions are online
    again (hbase/RegionAdmin.java says how; keys in hex), at most `timeout` seconds.
    Returns what the tool printed."""
    if settings.hbase:
        raise LauncherError("region_admin works only with the local HBase (GRIDAGG_HBASE is set)")
    p = paths(settings)
    write_conf(settings)
    cp = resolve_classpath(settings)
    _compile_tool(settings, "RegionAdmin", cp)
    try:
        res = subprocess.run(_java_cmd(settings, "admin", cp, ["RegionAdmin", command, table, *args]), cwd=p.root,
                             stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout, env=_jvm_env())
    except subprocess.TimeoutExpired:
        raise LauncherError(f"{command} on table {table} not done after {timeout:.0f} s") from None
    if res.returncode != 0:
        lines = [ln.strip() for ln in (res.stderr + res.stdout).decode(errors="replace").splitlines() if ln.strip()]
        cause = next((ln for ln in lines if "Exception" in ln and not ln.startswith("at ")),
                     lines[-1] if lines else f"exit code {res.returncode}")
        raise LauncherError(f"{command} on table {table} failed: {cause[:300]}")
    return res.stdout.decode(errors="replace").strip()


def observer_jar(settings, out: Path) -> Path:
    """The scan observer's classes as a jar for an external cluster's region servers
    (compiled once against HBase 2.6.1, for Java 17 and later; the region servers need
    OBSERVER_FLAGS)."""
    classes = _compile_tool(settings, OBSERVER_CLASS, resolve_classpath(settings))
    out = Path(out)
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    with zipfile.ZipFile(tmp, "w") as jar:
        for f in sorted(classes.glob(f"{OBSERVER_CLASS}*.class")):
            jar.write(f, f.name)
    os.replace(tmp, out)
    return out


# HBase's jars that Spark's JVM lacks for writing HFiles and bulk-loading them: Spark
# brings Hadoop, ZooKeeper, Jackson, logging and the rest.
_SPARK_BULK_LOAD_JAR = re.compile(
    r"(hbase-(client|common|server|zookeeper|protocol|protocol-shaded|hadoop-compat|hadoop2-compat|logging"
    r"|metrics|metrics-api|procedure|replication|asyncfs|unsafe|shaded-protobuf|shaded-netty"
    r"|shaded-miscellaneous|shaded-gson)|opentelemetry-[a-z]+|protobuf-java)-[0-9][^/]*\.jar")


def spark_bulk_load_classpath(settings) -> str:
    """The classpath Spark's driver needs for hbase/HFileBulkLoad.java: its classes and
    CreatePresplitTable's (compiled once with javac, against PySpark's jars and HBase's)
    and HBase's jars."""
    import pyspark

    cp = resolve_classpath(settings)
    jars = [j for j in cp.split(os.pathsep) if _SPARK_BULK_LOAD_JAR.fullmatch(os.path.basename(j))]
    spark_jars = str(Path(pyspark.__file__).parent / "jars" / "*")
    classes = _compile_tool(settings, "CreatePresplitTable", cp)
    _compile_tool(settings, "HFileBulkLoad", os.pathsep.join([str(classes), spark_jars, *jars]))
    return os.pathsep.join([str(_tools_jar(settings, classes)), *jars])


def _tools_jar(settings, classes: Path) -> Path:
    """tools/classes as a jar, rebuilt when a class is newer. Spark's driver gets the jar:
    a JVM can share archived classes (ingest.class_archive) only from a classpath without
    non-empty directories."""
    jar = paths(settings).tools / "gridagg-tools.jar"
    files = sorted(classes.glob("*.class"))
    if jar.exists() and jar.stat().st_mtime >= max(f.stat().st_mtime for f in files):
        return jar
    tmp = jar.with_suffix(f".{os.getpid()}.tmp")
    with zipfile.ZipFile(tmp, "w") as out:
        for f in files:
            out.write(f, f.name)
    os.replace(tmp, jar)
    return jar
