"""docs/architecture.md names the code as it is: every file, folder, module, class and
method it mentions in backquotes (and every file in its picture) exists in the tree.
Pure reading, no servers: a rename that leaves the tour behind fails here."""

from __future__ import annotations

import ast
import importlib
import re
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "architecture.md"
# The folders and the names they install as (pyproject.toml's package-dir).
PACKAGES = {"gridagg": "gridagg", "api": "gridagg_api", "ingest": "gridagg_ingest", "sql": "gridagg_sql",
            "loadtest": "gridagg_loadtest", "demo": "gridagg_demo", "hbase": "gridagg_hbase"}
SOURCES = [p for folder in PACKAGES for p in (ROOT / folder).rglob("*.py")]
FILE = re.compile(r"[\w/]+\.(py|java|sql)")  # a file's name, not a dotted name of code


@cache
def classes() -> dict[str, list[Path]]:
    """The files defining each class of the packages, by class name."""
    found: dict[str, list[Path]] = {}
    for path in SOURCES:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                found.setdefault(node.name, []).append(path)
    return found


def module_of(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    parts[0] = PACKAGES[parts[0]]
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def resolves(name: str) -> bool:
    """Whether a dotted name (gridagg.write.protocol, ingest.job.run_ingest, GridEngine.insert,
    TreeCache.tree) names something in the tree."""
    head, *rest = name.split(".")
    if head in PACKAGES:
        parts = [PACKAGES[head], *rest]
        for cut in range(len(parts), 0, -1):
            try:
                obj = importlib.import_module(".".join(parts[:cut]))
            except ImportError:
                continue
            for attr in parts[cut:]:
                if not hasattr(obj, attr):
                    return False
                obj = getattr(obj, attr)
            return True
        return False
    for path in classes().get(head, []):
        obj = getattr(importlib.import_module(module_of(path)), head)
        for attr in rest:
            obj = getattr(obj, attr, None)
        if obj is not None:
            return True
    return False


def mentions() -> list[str]:
    text = DOC.read_text()
    quoted = re.findall(r"`([^`\n]+)`", text)
    pictured = re.findall(r'\["([\w/]+\.(?:py|java)|[\w]+/)\s', text)  # the flowchart's boxes
    return quoted + pictured


def test_every_path_the_tour_names_exists():
    paths = [m for m in mentions() if re.fullmatch(r"[\w.]+/[\w./]*", m) or FILE.fullmatch(m)]
    assert paths, "the tour names no files: has its format changed?"
    missing = []
    for m in paths:
        if "/" in m.rstrip("/") or (ROOT / m).exists():
            ok = (ROOT / m).exists()
        else:  # a file or folder name alone, as in the picture: somewhere in the packages
            ok = any(any((ROOT / folder).rglob(m.rstrip("/"))) for folder in PACKAGES)
        if not ok:
            missing.append(m)
    assert missing == []


def test_every_module_class_and_method_the_tour_names_exists():
    names = [m.removesuffix("()") for m in mentions()
             if re.fullmatch(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)+(\(\))?", m) and not FILE.fullmatch(m)
             and (m.split(".")[0] in PACKAGES or m[0].isupper())]
    names += [m for m in mentions() if re.fullmatch(r"[A-Z][a-z]\w*[A-Z]\w*", m)]  # CamelCase classes
    assert len(names) > 10, "the tour names hardly any code: has its format changed?"
    assert [n for n in names if not resolves(n)] == []
