"""gridagg installs like a package: the wheel built from the checkout's files holds every
file the installed commands need besides the modules (`gridagg services up` compiles
hbase/*.java against hbase/pom.xml, the directory runs gridagg/directory/*.sql, `gridagg ingest
example:NAME` and the demo read ingest/examples/*.toml, `gridagg bench` reads
loadtest/bench/paper.toml and builds loadtest/bench/loadgen.go, `gridagg serve` serves the page's
bundle), registers every subcommand, and leaves the load-test tools to the `bench`
extra. Without the page's bundle (api/page/dist, built by api/page/build.sh) no wheel is
built: the build says what is missing (setup.py). The repository's folders install as
gridagg_<folder> (pyproject.toml says why): nothing in the wheel takes a common
top-level name."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("api", "ingest", "sql", "loadtest", "demo", "hbase")  # each installs as gridagg_<folder>


def installed(path: str) -> str:
    """Where a checkout file lands in the wheel."""
    top, _, rest = path.partition("/")
    return f"gridagg_{top}/{rest}" if top in FOLDERS else path


PAGE = ROOT / "api" / "page" / "dist"  # built, not tracked: copied in like the build would find it


def checkout_copy(tmp_path_factory, page: bool) -> Path:
    """A copy of the checkout's files (tracked and new, not ignored), so nothing left in
    the working tree can hide a missing one; with the page's bundle when `page`."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs a git checkout to know its files")
    files = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                           capture_output=True, check=True).stdout.decode().split("\0")
    src = tmp_path_factory.mktemp("src")
    for name in filter(None, files):
        if (ROOT / name).is_file() and not name.startswith("docs/bench/"):
            (src / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, src / name)
    if page:
        if not (PAGE / "main.js").is_file():
            pytest.fail("the page is not built: run `bash api/page/build.sh` (run.sh and .ci/run do)")
        shutil.copytree(PAGE, src / "api" / "page" / "dist")
    return src


def pip_wheel(src: Path, out: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "--disable-pip-version-check",
                           "-w", str(out), str(src)], capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> zipfile.ZipFile:
    """The wheel `pip wheel` builds from a copy of the checkout with its page built."""
    out = tmp_path_factory.mktemp("wheel")
    built = pip_wheel(checkout_copy(tmp_path_factory, page=True), out)
    assert built.returncode == 0, built.stderr
    (path,) = out.glob("gridagg-*.whl")
    with zipfile.ZipFile(path) as whl:
        yield whl


def names(wheel: zipfile.ZipFile) -> set[str]:
    return set(wheel.namelist())


def test_the_wheel_holds_every_file_the_commands_need(wheel):
    held = names(wheel)
    needed = [p.relative_to(ROOT).as_posix() for pattern in
              ("hbase/*.java", "hbase/observer/*.java", "hbase/pom.xml", "hbase/log4j2.properties", "gridagg/directory/*.sql",
               "ingest/examples/*.toml", "loadtest/bench/paper.toml", "loadtest/bench/loadgen.go") for p in sorted(ROOT.glob(pattern))]
    assert len(needed) >= 9
    assert [n for n in needed if installed(n) not in held] == []


def test_the_wheel_holds_the_page_it_serves(wheel):
    from gridagg_api.blueprints.page import BUNDLE

    held = names(wheel)
    bundle = [f"api/page/dist/{p.name}" for p in sorted(PAGE.iterdir())]
    assert {f"api/page/dist/{name}" for name in BUNDLE} <= set(bundle)
    assert [n for n in ["api/page/index.html", *bundle] if installed(n) not in held] == []


def test_no_wheel_without_the_page(tmp_path_factory):
    out = tmp_path_factory.mktemp("no-page")
    built = pip_wheel(checkout_copy(tmp_path_factory, page=False), out)
    assert built.returncode != 0 and list(out.iterdir()) == []
    assert ("api/page/dist is missing (main.js, main.css): run `bash api/page/build.sh` (needs Node.js and npm) "
            "before building gridagg") in built.stderr + built.stdout


def test_the_wheel_holds_every_module(wheel):
    held = names(wheel)
    for package in ("gridagg", *FOLDERS):
        modules = [p.relative_to(ROOT).as_posix() for p in (ROOT / package).rglob("*.py")]
        assert modules and [m for m in modules if installed(m) not in held] == [], package
    tops = {n.split("/")[0] for n in held if not n.split("/")[0].endswith(".dist-info")}
    assert tops == {"gridagg", *(f"gridagg_{f}" for f in FOLDERS)}


def test_the_wheel_registers_the_commands_and_keeps_load_tests_optional(wheel):
    (meta,) = [n for n in names(wheel) if n.endswith(".dist-info/METADATA")]
    (entry_points,) = [n for n in names(wheel) if n.endswith(".dist-info/entry_points.txt")]
    commands = wheel.read(entry_points).decode().split("[gridagg.commands]")[1].split("[")[0]
    registered = sorted(line.split("=")[0].strip() for line in commands.strip().splitlines())
    assert registered == ["bench", "check", "config", "datasets", "delete", "demo", "drop", "ingest", "query", "repair",
                          "retain", "series", "serve", "services", "sql", "tune"]
    requires = [line.split(":", 1)[1].strip() for line in wheel.read(meta).decode().splitlines()
                if line.startswith("Requires-Dist:")]
    service = [r for r in requires if "extra ==" not in r]
    bench = [r for r in requires if "extra == \"bench\"" in r]
    for tool in ("duckdb", "chdb", "matplotlib"):
        assert not any(r.startswith(tool) for r in service), tool
        assert any(r.startswith(tool) for r in bench), tool


def test_the_code_imports_the_folders_by_their_installed_names():
    """`from api import ...` works only inside the checkout (its root on sys.path), not
    where gridagg is installed: every import names gridagg_<folder>."""
    statement = re.compile(rf"^\s*(from|import) ({'|'.join(FOLDERS)})(\.|\s|$)", re.M)
    found = [f"{p.relative_to(ROOT)}: {m.group(0).strip()}"
             for top in ("gridagg", *FOLDERS, "tests") for p in (ROOT / top).rglob("*.py")
             if "node_modules" not in p.parts for m in statement.finditer(p.read_text())]
    assert found == []
