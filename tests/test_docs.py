"""The README and docs/*.md name what exists: every `gridagg ...` in their bash and
console blocks names a subcommand and options `gridagg` has, every `python -m ...` or
`python FILE` a module or script that takes the options shown (its --help lists them),
every `bash FILE` a file of the checkout, every `example:NAME` a shipped config, every
relative link a file. The walkthroughs run for real in tests/test_readme_walkthrough.py;
this keeps the other commands from drifting. Pure reading and --help, no servers."""

from __future__ import annotations

import argparse
import re
import shlex
import subprocess
import sys
from functools import cache
from pathlib import Path

from gridagg.cli.main import build_parser

ROOT = Path(__file__).resolve().parents[1]
# docs/benchmarks.md, docs/bench/ and docs/soak/ belong to the benches, which write them.
DOCS = [ROOT / "README.md", *(p for p in sorted((ROOT / "docs").glob("*.md")) if p.name != "benchmarks.md")]


def blocks(text: str) -> list[tuple[str, str]]:
    """(language, body) of the fenced bash and console blocks, indented ones too."""
    found = re.findall(r"^( *)```(bash|console)[^\n]*\n(.*?)^\1```$", text, re.S | re.M)
    return [(lang, "\n".join(line[len(indent):] for line in body.splitlines())) for indent, lang, body in found]


def commands(lang: str, body: str) -> list[str]:
    """The commands of a block, continuation lines joined, comments and prompts dropped,
    `a && b` as two."""
    lines = body.splitlines()
    if lang == "console":
        keep, continued = [], False
        for line in lines:
            if continued or line.startswith("$ "):
                keep.append(line.removeprefix("$ "))
            continued = (continued or line.startswith("$ ")) and line.endswith("\\")
        lines = keep
    text = "\n".join(re.sub(r"(^|\s)#\s.*$", "", line) for line in lines).replace("\\\n", " ")
    return [part.strip() for line in text.splitlines() for part in line.split(" && ") if part.strip()]


def shown() -> list[tuple[str, list[str]]]:
    """(where, words) of every command the docs show, environment assignments dropped."""
    out = []
    for doc in DOCS:
        for lang, body in blocks(doc.read_text()):
            for command in commands(lang, body):
                words = shlex.split(command.rstrip("&").split(" > ")[0].split(" | ")[0])
                while words and re.fullmatch(r"[A-Z_][A-Z0-9_]*=\S*", words[0]):
                    words.pop(0)
                if words:
                    out.append((f"{doc.relative_to(ROOT)}: {command}", words))
    return out


def flags(words: list[str]) -> list[str]:
    return [w.split("=", 1)[0] for w in words if w.startswith("--")]


def test_the_docs_show_commands():
    programs = {words[0] for _, words in shown()}
    assert {"gridagg", "python", "bash"} <= programs, programs


@cache
def gridagg_parser() -> argparse.ArgumentParser:
    return build_parser()


def subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    return next((a.choices for a in parser._actions if isinstance(a, argparse._SubParsersAction)), {})


def test_every_gridagg_command_and_option_exists():
    wrong = []
    for where, words in shown():
        if words[0] != "gridagg":
            continue
        parser, rest = gridagg_parser(), words[1:]
        while rest and rest[0] in subparsers(parser):
            parser, rest = subparsers(parser)[rest[0]], rest[1:]
        if subparsers(parser):
            wrong.append(f"{where}: no such subcommand {rest[:1]}")
        known = {s for action in parser._actions for s in action.option_strings}
        wrong += [f"{where}: no option {f}" for f in flags(rest) if f not in known]
        examples = [w.removeprefix("example:") for w in rest if w.startswith("example:")]
        wrong += [f"{where}: no example {e}" for e in examples
                  if not (ROOT / "ingest" / "examples" / f"{e}.toml").exists()]
    assert wrong == []


@cache
def help_of(argv: tuple[str, ...]) -> str | None:
    out = subprocess.run([sys.executable, *argv, "--help"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    return out.stdout if out.returncode == 0 else None


def test_every_python_module_and_script_takes_its_options():
    wrong = []
    for where, words in shown():
        if words[0] != "python":
            continue
        if words[1] == "-m":
            target, rest = words[1:3], words[3:]
        else:
            target, rest = words[1:2], words[2:]
            if not (ROOT / target[0]).exists():
                wrong.append(f"{where}: no file {target[0]}")
                continue
        actions = [w for w in rest[:1] if not w.startswith("-")]  # a subcommand (up, down, ...) or a URL
        text = help_of((*target, *actions)) or help_of(tuple(target))
        if text is None:
            wrong.append(f"{where}: --help fails")
            continue
        wrong += [f"{where}: its --help names no {f}" for f in flags(rest) if f not in text]
    assert wrong == []


def test_every_script_the_docs_run_exists():
    missing = [where for where, words in shown() if words[0] == "bash" and not (ROOT / words[1]).exists()]
    assert missing == []


def test_every_link_leads_somewhere():
    """Relative links of the README and the docs name files of the checkout."""
    broken = []
    for doc in DOCS:
        for target in re.findall(r"\]\(([^)\s]+)\)", doc.read_text()):
            if not re.match(r"[a-z]+:", target) and not (doc.parent / target.split("#")[0]).exists():
                broken.append(f"{doc.relative_to(ROOT)}: {target}")
    assert broken == []
