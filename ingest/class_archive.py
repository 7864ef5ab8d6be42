"""A class-data-sharing archive for Spark's driver JVM.

Most of a Spark session's start, and a good part of its first job, is the JVM loading,
parsing and verifying classes: Spark's, Arrow's and, for a bulk load, HBase's. A CDS
archive holds them ready to be mapped from disk. The first session for a given JVM and
classpath has its JVM write the archive as it exits (-XX:ArchiveClassesAtExit); later
sessions map it (-XX:SharedArchiveFile).

Archives live in <data dir>/jvm, one per JVM and driver classpath (about 200 MB each).
Deleting that directory is always safe: the next session makes a new one. The JVM checks
an archive against its classpath itself and runs without it when they differ.
"""

from __future__ import annotations

import atexit
import hashlib
import os
import sys
from pathlib import Path

# The JVM warns about every class it cannot archive (signed jars, old class files).
QUIET = "-Xlog:cds=off,cds+dynamic=off"


def java_options(settings, extra_classpath: str | None) -> str:
    """The driver JVM's options for its archive: map the archive of this JVM and
    classpath, or, when there is none, write it at exit, unless another process is
    writing it already (then none). `extra_classpath` is spark.driver.extraClassPath."""
    folder = settings.data_dir / "jvm"
    folder.mkdir(parents=True, exist_ok=True)
    key = _key(extra_classpath)
    archive = folder / f"spark-driver-{key}.jsa"
    if archive.exists():
        return f"-XX:SharedArchiveFile={archive} {QUIET}"
    lock = folder / f"spark-driver-{key}.lock"
    if not _take(lock):
        return ""
    partial = folder / f"spark-driver-{key}.{os.getpid()}.tmp"
    atexit.register(_finish, partial, archive, lock)
    return f"-XX:ArchiveClassesAtExit={partial} {QUIET}"


def _key(extra_classpath: str | None) -> str:
    """What the archive depends on: the JVM and every classpath entry, with their times."""
    import pyspark
    from gridagg_hbase.jvm import java_bin

    java = Path(java_bin()).resolve()
    entries = [java, java.parent.parent / "lib" / "server" / "libjvm.so", Path(pyspark.__file__).parent / "jars"]
    entries += [Path(p) for p in (extra_classpath or "").split(os.pathsep) if p]
    text = "\n".join(f"{p}\t{p.stat().st_mtime_ns if p.exists() else 0}" for p in entries)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _take(lock: Path) -> bool:
    """Whether this process now holds `lock` (a file naming its holder's pid). A lock
    whose holder is gone (killed mid-way) is taken over."""
    for _ in range(2):
        try:
            fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            try:
                os.kill(int(lock.read_text() or 0), 0)
                return False
            except (ProcessLookupError, ValueError):
                lock.unlink(missing_ok=True)
            except OSError:  # gone meanwhile, or a live process of another user
                return False
            continue
        with os.fdopen(fd, "w") as out:
            out.write(str(os.getpid()))
        return True
    return False


def _finish(partial: Path, archive: Path, lock: Path) -> None:
    """At interpreter exit: end the driver JVM (it exits when its stdin closes, writing
    the archive on the way) and put the archive in place."""
    from pyspark import SparkContext

    proc = getattr(SparkContext._gateway, "proc", None)
    try:
        if SparkContext._active_spark_context is not None:
            # Else the session's accumulator server, still polling, prints a traceback
            # when the JVM goes.
            SparkContext._active_spark_context.stop()
        if proc is not None:
            print("gridagg: saving Spark's class archive for later sessions (once, about 20 s)", file=sys.stderr,
                  flush=True)
            proc.stdin.close()
            proc.wait(timeout=300)
            if partial.exists() and partial.stat().st_size:
                os.replace(partial, archive)
    except Exception:  # best effort: the next session tries again
        pass
    finally:
        partial.unlink(missing_ok=True)
        lock.unlink(missing_ok=True)
