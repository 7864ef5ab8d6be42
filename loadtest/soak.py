"""Concurrent writers and readers, every answer checked: the stress test and the soak.

N writer processes insert batches (small N_size, so leaves split all the time) while M
reader processes run random box queries. Every batch's rows follow from (writer, batch)
alone, and everyone logs wall-clock times, so afterwards each answer is checked against
the oracle condition: it must be the brute-force answer over some set S of rows with
  A <= S <= B,  A = batches acknowledged before the query began,
                B = batches whose insert had started when the query ended.
Counts and sums (measure values are >= 0) must lie between those over A and B, mins
between min over B and min over A (maxes alike). At the end, with writers stopped, every
query must equal brute force exactly and `check` must find nothing.

    python -m loadtest.soak --seconds 1800 --writers 2 --readers 2 [--store hbase]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import sys
import time
import uuid
from dataclasses import dataclass

import numpy as np

from gridagg.config import Settings
from gridagg.directory import GridDirectory
from gridagg.engine import GridEngine
from gridagg.query import QuerySpec
from gridagg.schema import Dataset
from gridagg.store import open_store

BATCH = 25
AGGS = ["count", "sum:v", "min:v", "max:v"]


def definition(name: str) -> Dataset:
    return Dataset.from_json({
        "name": name,
        "dimensions": [{"name": "x", "min": 0, "max": 9999}, {"name": "y", "min": 0, "max": 9999}],
        "measures": [{"name": "v", "min": 0, "max": 1000}],
        "grid": {"n_size": 20, "n_threshold": 60},
    })


def batch_rows(writer: int, batch: int) -> np.ndarray:
    rng = np.random.default_rng([writer, batch])
    return np.stack([rng.integers(0, 10000, BATCH), rng.integers(0, 10000, BATCH),
                     rng.integers(0, 1001, BATCH)], axis=1).astype(np.int64)


def _engine(settings: Settings) -> GridEngine:
    return GridEngine(GridDirectory(settings.effective_pg_url, max_connections=2), open_store(settings))


def _writer(settings, name, writer, deadline, out):
    engine = _engine(settings)
    ds = engine.dataset(name)
    log, batch = [], 0
    while time.time() < deadline:
        started = time.time()
        rows = batch_rows(writer, batch)
        engine.insert_encoded(ds, [f"w{writer}b{batch}r{i}".encode() for i in range(BATCH)], rows)
        log.append((batch, started, time.time()))
        batch += 1
    out.put(("writer", writer, log))


def _reader(settings, name, reader, deadline, out):
    engine = _engine(settings)
    rng = np.random.default_rng(1000 + reader)
    log = []
    while time.time() < deadline:
        x0, y0 = (int(v) for v in rng.integers(0, 9000, 2))
        where = {"x": [x0, x0 + int(rng.integers(100, 5000))], "y": [y0, y0 + int(rng.integers(100, 5000))]}
        aggs = [AGGS[int(rng.integers(0, 4))]] if rng.integers(0, 3) == 0 else AGGS  # min/max alone skip scans
        started = time.time()
        result = engine.query(name, where, aggs)
        log.append((started, time.time(), where, aggs, result.values, result.count))
    out.put(("reader", reader, log))


@dataclass
class SoakReport:
    seconds: float
    inserts: int
    inserts_per_s: float
    queries: int
    queries_per_s: float
    splits: int
    answers_checked: int
    wrong_answers: int
    final_exact: bool
    check_problems: list

    def lines(self) -> list[str]:
        return [f"{k}: {v}" for k, v in self.__dict__.items()]


def _in_box(spec: QuerySpec, rows: np.ndarray) -> np.ndarray:
    mask = np.ones(len(rows), dtype=bool)
    for axis, (lo, hi) in enumerate(spec.box):
        mask &= (rows[:, axis] >= lo) & (rows[:, axis] <= hi)
    return mask


def _within(value, label: str, sel_a: np.ndarray, sel_b: np.ndarray) -> bool:
    v_a, v_b = sel_a[:, 2], sel_b[:, 2]
    if label == "count":
        return len(sel_a) <= value <= len(sel_b)
    if label == "sum:v":
        return int(v_a.sum()) <= value <= int(v_b.sum())
    if label == "min:v":
        if value is None:
            return len(sel_a) == 0
        return (len(v_b) and int(v_b.min()) <= value) and (not len(v_a) or value <= int(v_a.min()))
    if value is None:
        return len(sel_a) == 0
    return (len(v_b) and value <= int(v_b.max())) and (not len(v_a) or value >= int(v_a.max()))


def run(settings: Settings, seconds: float, writers: int, readers: int, progress=print,
        check_at_most: int | None = None) -> SoakReport:
    """Run the soak; check every answer, or a random sample of check_at_most of them."""
    name = "soak_" + uuid.uuid4().hex[:8]
    engine = _engine(settings)
    ds = engine.create_dataset(definition(name))
    try:
        deadline = time.time() + seconds
        out: mp.Queue = mp.get_context("spawn").Queue()
        ctx = mp.get_context("spawn")
        procs = [ctx.Process(target=_writer, args=(settings, name, w, deadline, out)) for w in range(writers)]
        procs += [ctx.Process(target=_reader, args=(settings, name, r, deadline, out)) for r in range(readers)]
        for p in procs:
            p.start()
        progress(f"soak {name}: {writers} writers, {readers} readers for {seconds:g} s ({settings.store} store)")
        logs = [out.get(timeout=seconds + 600) for _ in procs]
        for p in procs:
            p.join()
        writes = {w: log for kind, w, log in logs if kind == "writer"}
        reads = [entry for kind, _, log in logs if kind == "reader" for entry in log]

        # Every row with the start and acknowledgement time of its batch.
        parts = [(batch_rows(w, b), started, acked) for w, log in writes.items() for b, started, acked in log]
        everything = np.vstack([r for r, _, _ in parts]) if parts else np.empty((0, 3), np.int64)
        begun_at = np.repeat([s for _, s, _ in parts], BATCH) if parts else np.empty(0)
        acked_at = np.repeat([a for _, _, a in parts], BATCH) if parts else np.empty(0)
        checked = reads if check_at_most is None or len(reads) <= check_at_most else [
            reads[i] for i in np.random.default_rng(3).choice(len(reads), check_at_most, replace=False)]
        wrong = 0
        for started, ended, where, aggs, values, _count in checked:
            in_box = _in_box(QuerySpec.parse(ds, where, aggs), everything)
            sel_a = everything[in_box & (acked_at < started)]
            sel_b = everything[in_box & (begun_at < ended)]
            if not all(_within(values[label], label, sel_a, sel_b) for label in aggs):
                wrong += 1
        final_exact = True
        rng = np.random.default_rng(7)
        for _ in range(50):
            x0, y0 = (int(v) for v in rng.integers(0, 9000, 2))
            where = {"x": [x0, x0 + 3000], "y": [y0, y0 + 3000]}
            got = engine.query(name, where, AGGS).values
            sel = everything[_in_box(QuerySpec.parse(ds, where, AGGS), everything)]
            want = {"count": len(sel), "sum:v": int(sel[:, 2].sum()),
                    "min:v": int(sel[:, 2].min()) if len(sel) else None,
                    "max:v": int(sel[:, 2].max()) if len(sel) else None}
            final_exact &= got == want
        problems = engine.check(name)
        leaves = engine.directory.leaf_count(name)
        return SoakReport(
            seconds=seconds, inserts=len(everything), inserts_per_s=round(len(everything) / seconds, 1),
            queries=len(reads), queries_per_s=round(len(reads) / seconds, 1), splits=leaves - 1,
            answers_checked=len(checked), wrong_answers=wrong, final_exact=final_exact, check_problems=problems,
        )
    finally:
        engine.drop_dataset(name)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m loadtest.soak", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=60, help="how long writers and readers run (default 60)")
    ap.add_argument("--writers", type=int, default=2, help="writer processes (default 2)")
    ap.add_argument("--readers", type=int, default=2, help="reader processes (default 2)")
    ap.add_argument("--store", choices=["embedded", "hbase"], help="cell store (default GRIDAGG_STORE)")
    ap.add_argument("--check", type=int, default=20000,
                    help="answers to check against the oracle, a random sample (default 20000)")
    args = ap.parse_args(argv)
    settings = Settings.from_env()
    if args.store:
        settings = settings.with_(store=args.store)
    report = run(settings, args.seconds, args.writers, args.readers,
                 progress=lambda m: print(m, file=sys.stderr, flush=True), check_at_most=args.check)
    print(json.dumps(report.__dict__, indent=2))
    return 0 if report.wrong_answers == 0 and report.final_exact and not report.check_problems else 1


if __name__ == "__main__":
    sys.exit(main())
