"""HBase's admin work that Thrift1 cannot do, run as small Java clients (hbase/*.java,
compiled once): tables pre-split at given keys, regions split, merged, moved, balanced or
compacted, the scan observer's jar for an external cluster, and the classpath of the
bulk load's Spark driver. The stores call these; none of them starts or stops a server.
"""

from __future__ import annotations

import os
import re
import subprocess
import time
import zipfile
from pathlib import Path

from gridagg_hbase.jvm import (
    OBSERVER_CLASS,
    LauncherError,
    compile_tool,
    java_cmd,
    jvm_env,
    paths,
    resolve_classpath,
    write_conf,
)


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
    compile_tool(settings, "CreatePresplitTable", cp)  # into tools/classes, which java_cmd adds
    cmd = java_cmd(settings, "admin", cp,
                    ["CreatePresplitTable", name, *specs, "--", *keys])
    for attempt in (1, 2):  # one retry: a busy small machine can drop the first ZK/RPC session
        res = subprocess.run(cmd, cwd=p.root, stdin=subprocess.DEVNULL, capture_output=True,
                             timeout=300, env=jvm_env())
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
# table of gridagg's largest benchmark data is rewritten well within this at that rate.
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
    compile_tool(settings, "RegionAdmin", cp)
    try:
        res = subprocess.run(java_cmd(settings, "admin", cp, ["RegionAdmin", command, table, *args]), cwd=p.root,
                             stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout, env=jvm_env())
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
    (compiled once against HBase 2.6.1, for Java 17 and later)."""
    classes = compile_tool(settings, OBSERVER_CLASS, resolve_classpath(settings))
    package = OBSERVER_CLASS.rsplit(".", 1)[0].replace(".", "/")
    out = Path(out)
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    with zipfile.ZipFile(tmp, "w") as jar:
        for f in sorted((classes / package).glob("*.class")):
            jar.write(f, f"{package}/{f.name}")
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
    classes = compile_tool(settings, "CreatePresplitTable", cp)
    compile_tool(settings, "HFileBulkLoad", os.pathsep.join([str(classes), spark_jars, *jars]))
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
