"""Askers: clients that read a big dataset beside the soak's own one, which nobody writes
while the soak runs. They ask the held-out bench's question families
(loadtest/bench/heldout_families.py), drawn from that dataset by the soak's seed, and
every answer must be the reference's (DuckDB over the dataset's archive), asked once
before the run, whatever the nemesis does meanwhile. Beside them: what the region
servers went through, their heap after each collection (hbase/jvm.py: heap_after_gc)
and any OutOfMemoryError or abort their logs tell.

    python -m gridagg_loadtest.soak --store hbase --nemesis all --beside CONFIG --archive DIR --askers 32 ...
"""

from __future__ import annotations

import os
import pickle
import re
import threading
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import numpy as np
from gridagg_hbase import jvm

from gridagg.model.errors import WorkLimitExceeded

from ..bench.dashboard import ask, values_of
from ..bench.heldout_families import draw
from ..bench.heldout_peers import DUCK_TABLE, load_duckdb, open_asker, sample
from ..bench.heldout_sql import Space
from ..peers import duck

THREADS = 8  # askers per process: a process of many threads, as a serving one is
PER_FAMILY = 10  # questions drawn of each family
SAMPLE_ROWS = 20_000  # rows the questions are anchored on
HEAP_AFTER_GC_MOST = 0.8  # of a region server's heap: the most its heap after GC may hold
# Lines of the region servers' logs that mean they gave up: no soak should see one.
FATAL = re.compile(r"OutOfMemoryError|ABORTING region server|RegionServer abort|Run out of memory")


@dataclass(frozen=True)
class Beside:
    """The dataset read beside the soak (its ingest config: name and columns), its
    archive (the reference's rows), and how many askers read it."""

    config: Path
    archive: Path
    askers: int

    @property
    def space(self) -> Space:
        return Space.from_toml(self.config)

    def processes(self) -> list[int]:
        """The askers of each asker process (THREADS each, the rest in the last)."""
        full, rest = divmod(self.askers, THREADS)
        return [THREADS] * full + ([rest] if rest else [])


def questions_path(run_dir: Path) -> Path:
    return run_dir / "beside.pickle"


def prepare(settings, beside: Beside, run_dir: Path, seed: int, progress=print) -> int:
    """The askers' questions and their reference answers, into run_dir (a DuckDB copy of
    the archive already in the data dir, as the held-out bench leaves it, is used as
    it is); returns how many questions."""
    space = beside.space
    if not duck.path_of(settings, space.name).exists():
        progress(f"loading the reference (DuckDB) from {beside.archive}")
        load_duckdb(settings, space, beside.archive, space.name)
    progress(f"drawing {PER_FAMILY} questions of each family from {space.name} (seed {seed})")
    ref = open_asker(settings, "duckdb", space.name, DUCK_TABLE)
    try:
        questions = draw(sample(settings, space, space.name, seed, SAMPLE_ROWS), seed, PER_FAMILY,
                         lambda body: ref.answer(space, body))
        expected = [ref.answer(space, q.body) for q in questions]
    finally:
        ref.close()
    questions_path(run_dir).write_bytes(pickle.dumps((space.name, questions, expected)))
    return len(questions)


def run_asker(client, started) -> None:
    """The body of an asker process: client.threads askers, each asking questions drawn
    at random until the deadline; `started` is clients._started's (log, rng, engine, _).
    A refused question (the work limits) is logged as such; any error but the store's
    absence ends the process (logged by clients.call)."""
    from .clients import UNCLEAR_EXIT, call

    log, _, engine, _ = started
    name, questions, expected = pickle.loads(questions_path(client.run_dir).read_bytes())

    def asker(k: int) -> None:
        rng = np.random.default_rng([client.slot, client.life, 5, k])
        try:
            while time.time() < client.deadline:
                i = int(rng.integers(len(questions)))
                try:
                    done = call(client, log, rng, lambda: ask(engine, name, questions[i]))
                except WorkLimitExceeded as exc:
                    log.write(t="refused", at=time.time(), q=i, msg=str(exc)[:300])
                    continue
                if done is None:
                    return
                result, start, end = done
                got = values_of(result)
                log.write(t="asked", start=start, end=end, q=i, family=questions[i].family, right=got == expected[i],
                          **({} if got == expected[i] else {"got": str(got)[:300], "want": str(expected[i])[:300]}))
        except Exception:  # logged by call()
            os._exit(UNCLEAR_EXIT)

    threads = [threading.Thread(target=asker, args=(k,), daemon=True) for k in range(client.threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def region_servers(settings, since: float) -> dict:
    """What each JVM holding regions went through from `since` on: its heap after GC
    (the most, against the heap's maximum) and the lines of its log that say it gave up."""
    out = {}
    servers = jvm.layout(settings)
    roles = [f"rs{i}" for i in range(1, servers + 1)] if servers else ["master"]
    for role in roles:
        heap = jvm.heap_after_gc(settings, role, since)
        out[role] = {"heap_after_gc_peak_mb": heap and heap.peak_mb, "heap_mb": heap and heap.max_mb,
                     "collections": heap and heap.collections, "full_collections": heap and heap.full,
                     "peak_share": heap and round(heap.peak_share, 3),
                     "fatal": _fatal_lines(jvm.paths(settings).log_file(role), since)}
    return out


def _fatal_lines(log: Path, since: float) -> list[str]:
    """Lines of `log` from `since` on that mean the JVM gave up (FATAL), at most 5."""
    found = []
    if not log.exists():
        return found
    with log.open(errors="replace") as f:
        for line in f:
            if FATAL.search(line) and _logged_at(line) >= since:
                found.append(line.strip()[:300])
    return found[:5]


def _logged_at(line: str) -> float:
    """The time of a log4j2 line ("2026-12-07T20:22:25,359 ..."); a line without one
    (a stack trace's) counts as now."""
    try:
        return datetime.fromisoformat(line[:23].replace(",", ".")).timestamp()
    except ValueError:
        return time.time()


def summary(asked: list[dict], refused: list[dict], servers: dict) -> dict:
    """The askers' figures: answers, wrong ones (the first few whole), refusals, the
    answers' times, and the region servers' (region_servers)."""
    ms = np.array([1000 * (a["end"] - a["start"]) for a in asked]) if asked else np.zeros(1)
    wrong = [a for a in asked if not a["right"]]
    families = sorted({a["family"] for a in asked})
    return {"answers": len(asked), "wrong": len(wrong), "wrong_examples": wrong[:3], "refused": len(refused),
            "refused_examples": [r["msg"] for r in refused[:3]],
            "p50_ms": round(float(np.median(ms)), 1), "p99_ms": round(float(np.percentile(ms, 99)), 1),
            "by_family": {f: sum(1 for a in asked if a["family"] == f) for f in families},
            "region_servers": servers}


def holds(s: dict) -> bool:
    """The askers' targets: answers given, none wrong or refused; every region server's
    heap after GC within HEAP_AFTER_GC_MOST of its maximum, no line of giving up."""
    servers = s.get("region_servers", {}).values()
    return bool(s["answers"] and not s["wrong"] and not s["refused"]
                and all((r["peak_share"] or 0) <= HEAP_AFTER_GC_MOST and not r["fatal"] for r in servers))
