"""Where the load tools' reports go, and what they say of the machine.

Each bench command keeps one current report, docs/bench/<bench>/README.md with its plots
beside it, and each soak one, docs/soak/<soak>.md: every run rewrites it (what changed
since lives in git history). The run's logs and per-run data stay out of git, in the
bench's --out directory (default <data dir>/bench/<bench>). Installed without a checkout
(no docs/ beside the package), a report goes to the data directory instead.
"""

from __future__ import annotations

import os
import platform
import time
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parents[1]
BENCH_DOCS = CHECKOUT / "docs" / "bench"
SOAK_DOCS = CHECKOUT / "docs" / "soak"
REPORT = "README.md"  # a bench's report, in its folder


def machine() -> str:
    """This machine in one line: OS, CPUs (cores and model), memory, Python."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    except (ValueError, OSError):
        mem = float("nan")
    return (f"{platform.system()} {platform.release()}, {os.cpu_count()} CPUs ({cpu}), {mem:.0f} GiB RAM, "
            f"Python {platform.python_version()}")


def stamp(seconds: float | None = None) -> str:
    """A time (default now) as the reports write it: local date and time to the second."""
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(seconds))


def bench_out(settings, given: str | None, bench: str) -> Path:
    """A bench's --out directory: `given`, or <data dir>/bench/<bench>."""
    return Path(given) if given else settings.data_dir / "bench" / bench


def bench_docs(given: str | None, bench: str, out: Path) -> Path:
    """Where a bench's report goes: `given`, or docs/bench/<bench> of the checkout, or
    (no checkout) its --out directory `out`."""
    if given:
        return Path(given)
    return BENCH_DOCS / bench if BENCH_DOCS.is_dir() else out


def soak_report(settings, given: str | None, name: str) -> Path:
    """Where a soak's report goes: `given`, or docs/soak/<name>.md of the checkout, or (no
    checkout) <data dir>/soak/<name>.md."""
    if given:
        return Path(given)
    return SOAK_DOCS / f"{name}.md" if SOAK_DOCS.is_dir() else settings.data_dir / "soak" / f"{name}.md"


def fresh(folder: Path) -> Path:
    """`folder` made ready for a new report: created, its report and plots (README.md,
    *.png) of the previous run removed. Returns it."""
    folder.mkdir(parents=True, exist_ok=True)
    for old in [folder / REPORT, *folder.glob("*.png")]:
        old.unlink(missing_ok=True)
    return folder


def write(path: Path, lines: list[str], plots: list[Path] = ()) -> Path:
    """Write a report's lines to `path`, then the plots (files beside it) as images.
    Returns the path."""
    if plots:
        lines = [*lines, "", "## Plots", "", *(f"![{p.stem}]({p.name})" for p in plots)]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines).rstrip() + "\n")
    return path


def header(title: str, command: str, machine_line: str | None, started: str | None) -> list[str]:
    """A report's first lines: its title, the command that made it, the machine and the
    date (said as not recorded when a run's data lacks them)."""
    return [f"# {title}", "", f"Command: `{command}`", "", f"Machine: {machine_line or 'not recorded'}", "",
            f"Date: {started or 'not recorded'}", ""]


def pyplot():
    """matplotlib's pyplot drawing to files, or None when matplotlib is missing (the
    reports then have no plots)."""
    try:
        import matplotlib
    except ImportError:
        return None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt
