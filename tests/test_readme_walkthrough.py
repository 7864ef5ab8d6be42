"""The README's "Load your own CSV" walk-through, run exactly as written: its files are
written from the README's code blocks, its commands run in a shell, and their output
must be the output the README shows ("..." in a line stands for any text)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from gridagg.directory import GridDirectory
from gridagg.engine import GridEngine
from gridagg.model.errors import UnknownDataset
from gridagg.store import open_store

README = Path(__file__).resolve().parents[1] / "README.md"
SECTION = "## Load your own CSV"


def walkthrough() -> tuple[dict[str, str], list[tuple[str, list[str]]]]:
    """(files: name -> text, session: (command, expected output lines) in order) of the
    README section: fenced blocks whose info string names a file ("```toml obs.toml"),
    and one console block of "$ command" lines each followed by its output."""
    text = README.read_text()
    assert f"\n{SECTION}\n" in text, f"the README has no section {SECTION!r}"
    section = text.split(f"\n{SECTION}\n", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"^```(\w+)(?: +(\S+))?\n(.*?)^```$", section, re.S | re.M)
    files = {name: body for _, name, body in blocks if name}
    consoles = [body for lang, _, body in blocks if lang == "console"]
    assert files and len(consoles) == 1
    session: list[tuple[str, list[str]]] = []
    for line in consoles[0].splitlines():
        if line.startswith("$ "):
            session.append((line[2:], []))
        else:
            session[-1][1].append(line)
    return files, session


def same_line(expected: str, got: str) -> bool:
    pattern = ".*".join(re.escape(part) for part in expected.split("..."))
    return re.fullmatch(pattern, got) is not None


def test_the_walkthrough_reads_as_a_session():
    files, session = walkthrough()
    assert set(files) == {"obs.csv", "obs.toml"}
    assert [cmd.split()[:2] for cmd, _ in session] == [["gridagg", "ingest"], ["gridagg", "datasets"],
                                                      ["gridagg", "query"], ["gridagg", "query"]]
    assert same_line("  elapsed      ...", "  elapsed      12.3 s (1 rows/s)")
    assert not same_line("count ...", "rows 3")


def dataset_name(files: dict[str, str]) -> str:
    return re.search(r'^name = "(\w+)"', files["obs.toml"], re.M).group(1)


def drop(settings, name: str) -> None:
    engine = GridEngine(GridDirectory(settings.effective_pg_url), open_store(settings))
    try:
        engine.drop_dataset(name)
    except UnknownDataset:
        pass
    finally:
        engine.store.close()
        engine.directory.close()


def test_the_walkthrough_runs_as_written(settings, services, tmp_path):
    files, session = walkthrough()
    for name, body in files.items():
        (tmp_path / name).write_text(body)
    env = {**os.environ, "GRIDAGG_STORE": "embedded",
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    local = settings.with_(store="embedded")
    name = dataset_name(files)
    drop(local, name)
    try:
        for command, expected in session:
            out = subprocess.run(["bash", "-c", command], cwd=tmp_path, env=env, capture_output=True, text=True,
                                 timeout=600)
            assert out.returncode == 0, (command, out.stderr[-2000:])
            got = out.stdout.splitlines()
            assert len(got) == len(expected) and all(map(same_line, expected, got)), (command, got)
    finally:
        drop(local, name)
