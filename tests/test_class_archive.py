"""The class-data-sharing archive of Spark's driver JVM (ingest.class_archive)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from gridagg_ingest import class_archive

from gridagg.config import Settings

ROOT = Path(__file__).resolve().parents[1]


def settings_in(tmp_path) -> Settings:
    return Settings.from_env().with_(data_dir=tmp_path)


def test_the_first_session_writes_the_archive_at_exit_and_holds_the_lock(tmp_path, monkeypatch):
    at_exit = []
    monkeypatch.setattr(class_archive.atexit, "register", lambda *args: at_exit.append(args))
    options = class_archive.java_options(settings_in(tmp_path), None)
    assert options.startswith("-XX:ArchiveClassesAtExit=")
    partial, archive, lock = at_exit[0][1:]
    assert options.split()[0] == f"-XX:ArchiveClassesAtExit={partial}"
    assert lock.read_text() == str(os.getpid())
    # While this process writes it, another one runs without an archive.
    assert class_archive.java_options(settings_in(tmp_path), None) == ""
    archive.write_bytes(b"made")
    assert class_archive.java_options(settings_in(tmp_path), None).startswith(f"-XX:SharedArchiveFile={archive} ")


def test_a_lock_left_by_a_killed_process_is_taken_over(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    lock = tmp_path / "x.lock"
    lock.write_text(str(dead.pid))
    assert class_archive._take(lock)
    assert lock.read_text() == str(os.getpid())
    assert not class_archive._take(lock)  # held by a live process: this one


def test_the_archive_depends_on_the_classpath(tmp_path):
    jar = tmp_path / "tools.jar"
    jar.write_bytes(b"one")
    first = class_archive._key(str(jar))
    assert class_archive._key(str(jar)) == first
    os.utime(jar, ns=(0, 0))
    assert class_archive._key(str(jar)) != first
    assert class_archive._key(None) != first


def test_a_session_writes_the_archive_and_the_next_one_maps_it(tmp_path):
    """Two real sessions, each in a process of its own, as two `gridagg ingest` runs."""
    script = ("from ingest.job import spark_session\n"
              "spark = spark_session()\n"
              "args = spark._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments()\n"
              "print([a for a in args if 'Archive' in a])\n")
    env = {**os.environ, "GRIDAGG_DATA_DIR": str(tmp_path)}

    def session() -> str:
        done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True,
                              timeout=300)
        assert done.returncode == 0, done.stderr
        assert "][cds" not in done.stdout + done.stderr  # the JVM's CDS warnings stay quiet
        return done.stdout

    assert "ArchiveClassesAtExit" in session()
    left = sorted(p.name for p in (tmp_path / "jvm").iterdir())
    assert len(left) == 1 and left[0].startswith("spark-driver-") and left[0].endswith(".jsa"), left
    assert f"SharedArchiveFile={tmp_path / 'jvm' / left[0]}" in session()
