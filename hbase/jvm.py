"""Java for the local HBase and its tools: the JDK, HBase's jars (resolved once by Maven
from hbase/pom.xml), the Java helpers of hbase/*.java compiled once, the configuration
every JVM reads, and the java command of each role.

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

Roles (JVMs): "master", "thrift"; distributed also "zookeeper" and "rs1".."rsN"; "admin"
is a short-lived client (gridagg_hbase.admin). Errors are LauncherError, one line each.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from datetime import datetime
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

# The region servers' scan observer: the package of hbase/observer, compiled into
# tools/classes, loaded for user tables.
OBSERVER_CLASS = "gridagg.observer.GridScanObserver"

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

# Heap per JVM but the region servers' (region_server_heap, also the standalone master's:
# it holds the region server): modest, this runs next to PostgreSQL and Spark on a small
# machine.
HEAPS = {"thrift": "-Xmx512m", "admin": "-Xmx256m", "master": "-Xmx512m", "zookeeper": "-Xmx256m"}
# A region server's heap by default (settings.hbase_heap "auto"): this share of the
# machine's memory, shared by the region servers, each within these bounds (MB). The rest
# is the page cache's, which holds the table files the block cache does not.
HEAP_SHARE, HEAP_MB = 0.25, (1024, 31 * 1024)
# The Vector API's module, in which the scan observer folds 16-bit columns
# (hbase/observer/Lanes.java); a JVM without it folds them a row at a time. The JVM prints
# one warning that it uses an incubator module.
VECTOR_API = ["--add-modules", "jdk.incubator.vector"]
# The block cache of a region server keeps the tables' data blocks off the heap (HBase's
# BucketCache, "offheap"), as large as this share of the heap: memory beside the heap, not
# in it. On the heap, a cache turned over by large scans filled the old generation with
# blocks the collector then had to copy and free (a 100M-row table on its default heap ran
# to full collections, every one at the heap's maximum). The heap keeps the memstores and
# the first level of the cache, which holds the files' index and bloom blocks; the rest
# (70%) is for requests. A table larger than the cache is read through the page cache,
# slower.
DATA_CACHE_SHARE, INDEX_CACHE_SHARE, MEMSTORE_SHARE = 0.5, 0.1, 0.2
# Direct memory beyond the cache: HBase's pooled RPC buffers and netty's.
DIRECT_MB_BEYOND_CACHE = 512
# The cache's bucket sizes (KB, each holds blocks up to its size): HBase's own up to 513 KB
# and larger ones, since a block of the rows' family is a segment of up to a megabyte
# (gridagg.store.hbase.rows) after what its block held before it; HBase leaves out of the
# cache a block larger than its largest bucket.
BUCKET_KB = (5, 9, 17, 33, 41, 49, 57, 65, 97, 129, 193, 257, 385, 513, 769, 1025, 1153, 2049)
# The region servers' G1 regions: an object of half a region or more takes regions of
# its own, which the collector frees only late; blocks of a table (a segment is about a
# megabyte at most, gridagg.store.hbase.rows) stay far below half of these, whatever the
# heap (G1's default region of a 4 GB heap is 2 MB, and then each block of a megabyte
# took a region of two).
REGION_SERVER_FLAGS = ["-XX:G1HeapRegionSize=16m", *VECTOR_API]
# Short-lived admin JVMs: the C1 compiler only (starts faster).
ADMIN_FLAGS = ["-XX:TieredStopAtLevel=1"]
# The collectors' logs kept per role: its JVM's last lives (gc_log_file).
GC_LOG_LIVES = 16
# The long-lived JVMs (every role but admin) back their heaps with transparent huge pages.
# Linux gives them only to memory that asks for them (THP mode "madvise", the common
# default). A sum's scan steps to grids scattered over a block cache of gigabytes: with 4 KB
# pages nearly every step also misses the TLB. Where the kernel has THP off, the JVM logs
# a warning and runs on small pages.
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
        """The key of the scan observer a JVM serving regions started with (tool_key)."""
        return self.run / f"{role}.observer"

    def log_file(self, role: str) -> Path:
        return self.logs / f"{role}.log"

    def out_file(self, role: str) -> Path:
        return self.logs / f"{role}.out"

    def gc_log_file(self, role: str) -> Path:
        """The collector's log of a JVM that holds regions, one per life of the JVM (the
        JVM puts its pid for %p), so that a restart keeps what the lives before it logged
        (heap_after_gc reads them all; prune_gc_logs keeps the last GC_LOG_LIVES)."""
        return self.logs / f"{role}-gc-%p.log"

    def gc_logs(self, role: str) -> list[Path]:
        """The collector's logs of `role`'s lives (and their rotated parts), oldest first."""
        return sorted(self.logs.glob(f"{role}-gc-*.log*"), key=lambda f: f.stat().st_mtime)


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
        # The block cache, off the heap but its index level, and the memstores
        # (DATA_CACHE_SHARE says why).
        "hfile.block.cache.size": str(INDEX_CACHE_SHARE),
        "hbase.bucketcache.ioengine": "offheap",
        "hbase.bucketcache.size": str(data_cache_mb(settings)),
        "hbase.bucketcache.bucket.sizes": ",".join(str(kb << 10) for kb in BUCKET_KB),
        "hbase.regionserver.global.memstore.size": str(MEMSTORE_SHARE),
        # Rolled WALs are kept for replication, which a local HBase does not do: drop them
        # after a minute, not HBase's ten (tuning a large tree writes gigabytes of WAL a
        # minute).
        "hbase.master.logcleaner.ttl": "60000",
        # Files a compaction replaced, and a dropped table's, wait in the archive for HBase's
        # cleaner, which runs every ten minutes and keeps them five: tuning a large tree
        # compacts the whole table, so the disk would hold it twice for that long, enough to
        # fill a disk and abort a region server, and a drop would give its disk back minutes
        # later. A local HBase keeps no snapshots or replicas that need them: both cleaners
        # run every 15 s here, and archived files go at the first round after 15 s.
        "hbase.master.cleaner.interval": "15000",
        "hbase.master.hfilecleaner.ttl": "15000",
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
        **(_distributed_properties(settings) if servers else STANDALONE_PROPERTIES),
    }


# Standalone, the master's JVM holds ZooKeeper, the master and the region server, and
# its ZooKeeper session lapses after 10 s by default: a JVM or machine that stalls that
# long (a busy shared host, a disk flush) has the master abort, and with it the whole
# HBase. No other server would take over, so a long session costs nothing; a JVM killed
# with -9 holds no restart up, since each start has a ZooKeeper of its own
# (launcher.start).
STANDALONE_SESSION_MS = 60000
STANDALONE_PROPERTIES = {
    "zookeeper.session.timeout.localHBaseCluster": str(STANDALONE_SESSION_MS),
    "hbase.zookeeper.property.maxSessionTimeout": str(STANDALONE_SESSION_MS),
}
# ZooKeeper's log, fresh at each standalone start, need not reach the disk: unsynced, a
# slow disk never stalls its answers.
STANDALONE_ZOOKEEPER_FLAGS = ["-Dzookeeper.forceSync=no"]


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


def java_cmd(settings, role: str, cp: str, main: list[str]) -> list[str]:
    """The java command of a JVM with HBase's classpath `cp` and our hbase-site.xml, whose
    fs.file.impl and region observer are compiled here (hbase/LocalDiskFileSystem.java,
    hbase/observer, into tools/classes). role: a role of `roles`, or "admin"
    (a short-lived client)."""
    p = paths(settings)
    classes = compile_tool(settings, "LocalDiskFileSystem", cp)
    compile_tool(settings, OBSERVER_CLASS, cp)
    region_server = serves_regions(settings, role)
    heap = f"-Xmx{region_server_heap(settings)}" if region_server else HEAPS[role]
    if role == "admin":
        extra = ADMIN_FLAGS
    elif region_server:
        # Each collection's heap before and after, with the wall time: what is live after
        # GC is what the heap must hold (heap_after_gc). Two files of 8 MB at most.
        gc_log = f"-Xlog:gc:file={p.gc_log_file(role)}:time:filecount=2,filesize=8m"
        direct = f"-XX:MaxDirectMemorySize={data_cache_mb(settings) + DIRECT_MB_BEYOND_CACHE}m"
        extra = [*SERVER_FLAGS, *REGION_SERVER_FLAGS, gc_log, direct,
                 *(STANDALONE_ZOOKEEPER_FLAGS if role == "master" else [])]
    else:
        extra = SERVER_FLAGS
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


def region_server_heap(settings) -> str:
    """A region server's heap as -Xmx takes it: settings.hbase_heap, or for "auto" a
    share of the machine's memory (HEAP_SHARE among the layout's region servers)."""
    if settings.hbase_heap != "auto":
        return settings.hbase_heap
    total_mb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // (1 << 20)
    share = int(total_mb * HEAP_SHARE / max(1, layout(settings)))
    return f"{min(max(share, HEAP_MB[0]), HEAP_MB[1])}m"


# A collection's line of -Xlog:gc: "[<time>] GC(7) Pause Young (Normal) ... 812M->301M(2048M) 4.2ms":
# young, mixed and full pauses free memory; a remark's or cleanup's "after" is what
# marking found, not what a collection left. A young pause leaves the old generation as
# it is, garbage and all, until a marking cycle's mixed pauses collect it: after a young
# pause the heap may stand near its maximum while a third of it is live. What the heap
# must keep room for is what mixed and full pauses leave; a full pause is the collector
# falling behind.
_GC_LINE = re.compile(r"^\[([^\]]+)\] GC\(\d+\) Pause (Young \([^)]*\)|Full) .* (\d+)M->(\d+)M\((\d+)M\)")


@dataclass(frozen=True)
class HeapAfterGC:
    """What a region server's heap held after its collections (MB): after the last; at
    most after a mixed or full one (after any, when the log has none); of how many
    collections, how many full; against the heap's maximum."""

    last_mb: int
    peak_mb: int
    collections: int
    full: int
    max_mb: int

    @property
    def peak_share(self) -> float:
        return self.peak_mb / self.max_mb


def heap_after_gc(settings, role: str, since: float = 0.0) -> HeapAfterGC | None:
    """The heap after the collections of `role` (a JVM that holds regions) logged at or
    after `since` (time.time()), or None when none is logged."""
    after, reclaimed, full = [], [], 0
    for f in paths(settings).gc_logs(role):
        if f.stat().st_mtime < since:
            continue
        for line in f.read_text(errors="replace").splitlines():
            m = _GC_LINE.match(line)
            if m and datetime.fromisoformat(m.group(1)).timestamp() >= since:
                after.append(int(m.group(4)))
                if m.group(2) == "Full" or m.group(2) == "Young (Mixed)":
                    reclaimed.append(after[-1])
                full += m.group(2) == "Full"
    if not after:
        return None
    return HeapAfterGC(after[-1], max(reclaimed or after), len(after), full, megabytes(region_server_heap(settings)))


def prune_gc_logs(settings, role: str) -> None:
    """Keep the collector's logs of `role`'s last GC_LOG_LIVES lives (a soak restarts a
    JVM every few minutes; each life logs 16 MB at most)."""
    lives: dict[str, list[Path]] = {}  # oldest first, as gc_logs gives the files
    for f in paths(settings).gc_logs(role):
        lives.setdefault(f.name.split(".log")[0], []).append(f)
    for files in sorted(lives.values(), key=lambda files: files[-1].stat().st_mtime)[:-GC_LOG_LIVES]:
        for f in files:
            f.unlink(missing_ok=True)


def megabytes(heap: str) -> int:
    units = {"k": 1 / 1024, "m": 1, "g": 1024, "t": 1 << 20}
    return int(int(heap[:-1]) * units[heap[-1].lower()]) if heap[-1].isalpha() else int(heap) >> 20


def data_cache_mb(settings) -> int:
    """The data blocks' cache of one region server (off its heap), in MB."""
    return int(megabytes(region_server_heap(settings)) * DATA_CACHE_SHARE)


def block_cache_bytes(settings) -> int:
    """The data blocks' cache of one region server, in bytes."""
    return data_cache_mb(settings) << 20


def table_bytes(settings, table: str) -> int:
    """The bytes of a table's files in the local HBase (its store files, all regions)."""
    root = paths(settings).data / "data" / "default" / table
    return sum(f.stat().st_size for f in root.rglob("*") if f.is_file()) if root.is_dir() else 0


def serves_regions(settings, role: str) -> bool:
    """Whether `role` is a JVM that holds regions (and so loads the scan observer)."""
    return role.startswith("rs") or (role == "master" and not layout(settings))


def jvm_env() -> dict[str, str]:
    env = dict(os.environ)
    # Hadoop's local filesystem shells out to chmod & co.
    parts = [d for d in env.get("PATH", "").split(os.pathsep) if d]
    env["PATH"] = os.pathsep.join(parts + [d for d in ("/usr/bin", "/bin") if d not in parts])
    return env


def tool_sources(class_name: str) -> list[Path]:
    """The Java sources of a tool: the observer's package (hbase/observer), else
    hbase/<class_name>.java."""
    if class_name == OBSERVER_CLASS:
        return sorted((HERE / "observer").glob("*.java"))
    return [HERE / f"{class_name}.java"]


def tool_options(class_name: str) -> list[str]:
    """javac's options for a tool's sources: the observer is compiled for Java 17, with
    the Vector API's module."""
    return ["--release", "17", *VECTOR_API] if class_name == OBSERVER_CLASS else []


def tool_key(class_name: str, cp: str) -> str:
    """What the classes of a tool are compiled from: its sources, the classpath and
    javac's options, hashed."""
    src = "\0".join(path.read_text() for path in tool_sources(class_name))
    return hashlib.sha256((src + "\0" + cp + "\0" + " ".join(tool_options(class_name))).encode()).hexdigest()


def compile_tool(settings, class_name: str, cp: str) -> Path:
    """Compile a tool's sources (tool_sources) once (javac) into tools/classes; return
    that dir."""
    p = paths(settings)
    classes = p.tools / "classes"
    sources = tool_sources(class_name)
    stamp = p.tools / f"{class_name}.key"
    options = tool_options(class_name)
    key = tool_key(class_name, cp)
    compiled = classes / (class_name.replace(".", "/") + ".class")
    if compiled.exists() and stamp.exists() and stamp.read_text() == key:
        return classes
    javac = Path(java_bin()).resolve().parent / "javac"
    if not javac.exists():
        found = shutil.which("javac")
        if not found:
            raise LauncherError("javac not found: a full JDK 17 is needed "
                                "(Debian: apt-get install -y openjdk-17-jdk-headless)")
        javac = Path(found)
    classes.mkdir(parents=True, exist_ok=True)
    res = subprocess.run([str(javac), "-nowarn", *options, "-cp", cp, "-d", str(classes), *map(str, sources)],
                         capture_output=True, stdin=subprocess.DEVNULL, timeout=300)
    if res.returncode != 0:
        err = (res.stderr or res.stdout).decode(errors="replace").strip().splitlines()
        raise LauncherError(f"compiling {class_name} failed: {err[0] if err else res.returncode}")
    stamp.write_text(key)
    return classes
