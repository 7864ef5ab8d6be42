"""The walkthroughs of the README and the docs, run exactly as written: each one's files
are written from its code blocks whose info string names a file ("```toml obs.toml"),
its "$ command" lines run in a shell one by one, and their output must be the output
shown ("..." in a line stands for any text, a line "..." alone for any lines).

Each walkthrough runs against the real PostgreSQL, in a database of its own, with a data
dir of its own (a fresh embedded store, epoch board and tree files) on the embedded
store: it loads its datasets from nothing, as a newcomer would, and touches nobody
else's data. A command ending in "&" runs in the background until the walkthrough ends;
port 8080 becomes a free port. The commands run in a directory beside a link to the
checkout's ../shared, so "../shared/data/weather" means what it means in a checkout."""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import uuid
from pathlib import Path
from urllib.parse import urlsplit

import pytest

ROOT = Path(__file__).resolve().parents[1]
# name -> (the file, the sections that make up its walkthrough, in order)
WALKTHROUGHS = {
    "tour": (ROOT / "README.md", ["## A five-minute tour"]),
    "csv": (ROOT / "docs" / "ingest.md", ["## Load your own CSV"]),
    "api": (ROOT / "docs" / "api.md", ["## Writing: datasets and rows", "## Streaming: answers as they improve"]),
}


def walkthrough(name: str) -> tuple[dict[str, str], list[tuple[str, list[str]]]]:
    """(files: name -> text, session: (command, expected output lines) in order) of a
    walkthrough: its sections' fenced blocks that name a file, and their console blocks
    of "$ command" lines (continued on the next line after a trailing backslash), each
    followed by its output."""
    path, headings = WALKTHROUGHS[name]
    text = path.read_text()
    files: dict[str, str] = {}
    session: list[tuple[str, list[str]]] = []
    for heading in headings:
        assert f"\n{heading}\n" in text, f"{path.name} has no section {heading!r}"
        section = text.split(f"\n{heading}\n", 1)[1].split("\n## ", 1)[0]
        for lang, file, body in re.findall(r"^```(\w+)(?: +(\S+))?\n(.*?)^```$", section, re.S | re.M):
            if file:
                files[file] = body
            elif lang == "console":
                continued = False
                for line in body.splitlines():
                    if continued:
                        session[-1] = (f"{session[-1][0]}\n{line}", [])
                    elif line.startswith("$ "):
                        session.append((line[2:], []))
                    else:
                        session[-1][1].append(line)
                    continued = line.endswith("\\")
    return files, session


def same_line(expected: str, got: str) -> bool:
    pattern = ".*".join(re.escape(part) for part in expected.split("..."))
    return re.fullmatch(pattern, got) is not None


def same_lines(expected: list[str], got: list[str]) -> bool:
    if not expected:
        return not got
    if expected[0] == "...":
        return any(same_lines(expected[1:], got[i:]) for i in range(len(got) + 1))
    return bool(got) and same_line(expected[0], got[0]) and same_lines(expected[1:], got[1:])


def program(command: str) -> str:
    """The program a command runs: its first word after any VAR=value."""
    return next(word for word in command.split() if "=" not in word)


@pytest.mark.parametrize("name, files, programs", [
    ("tour", {"carolina.geojson"}, ["gridagg", "gridagg", "gridagg", "curl", "curl", "gridagg", "gridagg"]),
    ("csv", {"obs.csv", "obs.toml"}, ["gridagg"] * 4),
    ("api", {"rooms.json", "rooms.csv"}, ["gridagg"] + ["curl"] * 7),
])
def test_a_walkthrough_reads_as_a_session(name, files, programs):
    got_files, session = walkthrough(name)
    assert set(got_files) == files
    assert [program(command) for command, _ in session] == programs
    assert all(not out for command, out in session if command.endswith("&"))


def test_dots_stand_for_what_differs():
    assert same_line("  elapsed      ...", "  elapsed      12.3 s (1 rows/s)")
    assert not same_line("count ...", "rows 3")
    assert same_lines(["PostgreSQL  ...", "..."], ["PostgreSQL  running", "kernels  loaded", "cost model ..."])
    assert same_lines(["a", "...", "z"], ["a", "z"]) and not same_lines(["a", "...", "z"], ["a", "b"])


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def sandbox(settings, services, tmp_path):
    """(working directory, environment) of a walkthrough: a database of its own on the
    real PostgreSQL, a data dir of its own (with the machine's cost models and Spark
    class archives, so nothing is measured or archived again), the embedded store."""
    import psycopg

    database = f"walk_{uuid.uuid4().hex[:10]}"
    url = urlsplit(settings.effective_pg_url)._replace(path=f"/{database}").geturl()
    with psycopg.connect(settings.effective_pg_url, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {database}")
    data = tmp_path / "data"
    data.mkdir()
    if (settings.data_dir / "cost-model.json").exists():
        shutil.copy(settings.data_dir / "cost-model.json", data)
    if (settings.data_dir / "jvm").is_dir():
        (data / "jvm").symlink_to(settings.data_dir / "jvm")
    work = tmp_path / "work" / "checkout"
    work.mkdir(parents=True)
    (work.parent / "shared").symlink_to(ROOT.parent / "shared")
    env = {k: v for k, v in os.environ.items()
           if k not in ("GRIDAGG_EPOCH_DIR", "GRIDAGG_WRITE_TOKEN", "GRIDAGG_READ_TOKEN")}
    env.update(GRIDAGG_DATA_DIR=str(data), GRIDAGG_PG_URL=url, GRIDAGG_STORE="embedded",
               PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    try:
        yield work, env
    finally:
        with psycopg.connect(settings.effective_pg_url, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {database} WITH (FORCE)")


@pytest.mark.parametrize("name", WALKTHROUGHS)
def test_the_walkthrough_runs_as_written(name, sandbox):
    work, env = sandbox
    files, session = walkthrough(name)
    for file, body in files.items():
        (work / file).write_text(body)
    port = str(free_port())
    background: list[subprocess.Popen] = []
    log = open(work.parent / "background.log", "ab")  # what the background commands print
    try:
        for command, expected in session:
            command = command.replace("8080", port)
            if command.endswith("&"):
                background.append(subprocess.Popen(["bash", "-c", command[:-1]], cwd=work, env=env,
                                                   start_new_session=True, stdout=log, stderr=subprocess.STDOUT))
                continue
            out = subprocess.run(["bash", "-c", command], cwd=work, env=env, capture_output=True, text=True,
                                 timeout=600)
            assert out.returncode == 0, (command, out.stdout[-2000:], out.stderr[-2000:])
            got = out.stdout.splitlines()
            assert same_lines(expected, got), (command, got)
    finally:
        for proc in background:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        log.close()
