"""Where a benchmark run's CPU goes: the CPU time of named groups of processes (the API
server's tree, HBase's JVMs, PostgreSQL's processes, the load driver) and of the whole
machine over a run, per request. Read from /proc (Linux), which counts every thread of
a process; a group whose processes cannot be read counts nothing.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

TICK = os.sysconf("SC_CLK_TCK")


def descendants(roots: list[int]) -> list[int]:
    """roots and every process below them."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int(_stat_fields(entry / "stat")[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    out, todo = [], list(roots)
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo += children.get(pid, [])
    return out


def _stat_fields(path: Path) -> list[str]:
    """The fields of /proc/PID/stat after the command name (state is field 0)."""
    text = path.read_text()
    return text[text.rindex(")") + 2 :].split()


def cpu_seconds(pids: list[int]) -> float:
    """User + system CPU seconds of these processes (all their threads) and of their
    children that have ended, so far. A child's time moves to its parent as the parent
    reaps it (PostgreSQL's backends, say), so a group's sum over its tree stays whole."""
    total = 0
    for pid in pids:
        try:
            fields = _stat_fields(Path(f"/proc/{pid}/stat"))
        except (OSError, IndexError):
            continue  # gone
        total += sum(int(v) for v in fields[11:15])  # utime, stime, cutime, cstime
    return total / TICK


def machine_seconds() -> float:
    """CPU seconds every core has spent busy (not idle or waiting on I/O) so far."""
    with open("/proc/stat") as f:
        fields = [int(v) for v in f.readline().split()[1:]]
    idle = fields[3] + fields[4]
    return (sum(fields[:8]) - idle) / TICK


class Usage:
    """What one measured stretch cost: wall seconds and CPU seconds per group."""

    def __init__(self):
        self.wall = 0.0
        self.cpu: dict[str, float] = {}
        self._child: float | None = None

    def add_child(self, proc: subprocess.Popen, timeout: float) -> None:
        """Wait for `proc` (killed after timeout seconds) and count its CPU as "load"."""
        deadline = time.monotonic() + timeout
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                proc.returncode = os.waitstatus_to_exitcode(status)
                self._child = usage.ru_utime + usage.ru_stime
                return
            if time.monotonic() > deadline:
                proc.kill()
            time.sleep(0.05)

    def per_request(self, requests: int) -> dict[str, float]:
        """ms of CPU per request by group (and "load", "machine")."""
        n = max(requests, 1)
        return {group: round(1000 * seconds / n, 3) for group, seconds in self.cpu.items()}


class CpuMeter:
    """groups: name -> a function giving the root PIDs of that group's processes now
    (their descendants are counted too)."""

    def __init__(self, groups: dict[str, Callable[[], list[int]]]):
        self.groups = groups

    def seconds(self) -> dict[str, float]:
        """CPU seconds so far of each group's tree as it is now: a process started since
        the last reading counts whole, one that has ended counts in its parent."""
        return {name: cpu_seconds(descendants(roots())) for name, roots in self.groups.items()}

    @contextmanager
    def measure(self) -> Iterator[Usage]:
        usage = Usage()
        before = self.seconds()
        machine, t0 = machine_seconds(), time.monotonic()
        yield usage
        usage.wall = time.monotonic() - t0
        usage.cpu = {name: seconds - before[name] for name, seconds in self.seconds().items()}
        if usage._child is not None:
            usage.cpu["load"] = usage._child
        usage.cpu["machine"] = machine_seconds() - machine
