"""The soak: writers, readers, deleters and correctors at once, every answer checked,
optionally while a nemesis keeps breaking things.

N writer processes insert batches (small N_size, so leaves split all the time) while M
reader processes run random box queries, deleters delete acknowledged batches and
correctors give them new values (loadtest/soak/clients.py). With --nemesis,
faults are injected on a schedule drawn from --seed (loadtest/soak/nemesis.py): servers
killed with -9 and started again, writers and readers killed and replaced; clients retry
on "store unavailable" with backoff, as real ones do. Every answer is checked against
the soak's own oracle (loadtest/soak/oracle.py, through check.py: between the answers
over the rows acknowledged before it began and over the rows begun before it ended).
With --machines N the clients stand for N hosts, each host's clients sharing an epoch
board of their own (as API servers on separate hosts do): a write reaches another host's
queries through PostgreSQL, and must show there from 1 s after its acknowledgement on.

At the end the faults stop, every server is started, and the next writer (one more
batch, written here) recovers whatever a killed writer left; then `check` must find
nothing, every acknowledged batch must be stored whole (a deleted one wholly gone, a
corrected one with its last acknowledged correction's values), every maybe-batch,
maybe-delete and maybe-correction (never acknowledged) wholly done or not at all, and
every final query must equal the oracle's answer. The protocol needs no `repair`: problems `check` still finds after that write are
reported and left in place to be looked at.

    python -m gridagg_loadtest.soak --seconds 1800 --writers 2 --readers 2 --deleters 1 --correctors 1 [--store hbase]
    python -m gridagg_loadtest.soak --store hbase --nemesis all --seed 1 --seconds 1800 --every 20,40
    python -m gridagg_loadtest.soak --store hbase --nemesis all --machines 2 ...   # 2 hosts
    python -m gridagg_loadtest.soak --store hbase --nemesis all --beside CONFIG --archive DIR ...  # and a big dataset read

The JSON report goes to stdout, progress and a short table to stderr, and the soak's one
current report to --report (by default docs/soak/<store>.md of the checkout, or
docs/soak/hbase-<N>rs.md on a local HBase of N region servers; -beside.md after it with
--beside), replacing the previous
run's; exit code 0 when every target holds. Logs of the clients are kept under <data dir>/soak/<dataset> when
something failed (and the dataset is kept), removed otherwise.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import sys
import time
import uuid
from collections import Counter
from pathlib import Path

import numpy as np
from gridagg_hbase import jvm

from gridagg.config import Settings
from gridagg.model.errors import StoreUnavailable

from ..reports import machine, soak_report, stamp, write
from . import availability, check, nemesis, oracle
from . import beside as beside_mod
from .beside import Beside
from .clients import (
    AGGS,
    BATCH,
    Crew,
    batch_rows,
    definition,
    element_ids,
    open_engine,
)
from .report import SoakReport

QUIET = 15.0  # no fault starts in the last QUIET seconds (a fifth of a shorter run)
JOIN_SECONDS = 60.0  # how long clients may take to stop after the deadline before they count as hung


def run(settings: Settings, seconds: float, writers: int, readers: int, progress=print,
        check_at_most: int | None = None, kinds: tuple[str, ...] = (), seed: int = 0,
        every: tuple[float, float] = (20.0, 40.0), keep: bool = False, machines: int = 1, deleters: int = 0,
        correctors: int = 0, beside: Beside | None = None) -> SoakReport:
    """Run the soak on settings.store for `seconds` with these clients; with `kinds`
    (loadtest/soak/nemesis.py: KINDS), faults of those kinds every `every` seconds (drawn from
    `seed`). Checks every answer, or a random sample of check_at_most of them. With
    `machines` > 1 the clients stand for that many hosts (soak_clients.Crew), each with
    an epoch board of its own. With `beside`, askers read that big dataset meanwhile
    (loadtest/soak/beside.py). The dataset and the clients' logs are dropped after a
    run that holds, unless `keep`."""
    name = "soak_" + uuid.uuid4().hex[:8]
    engine = open_engine(settings)  # this process' own: creates, recovers, judges, drops
    try:
        ds = engine.create_dataset(definition(name))
        run_dir = settings.data_dir / "soak" / name
        run_dir.mkdir(parents=True)
        if beside is not None:
            n = beside_mod.prepare(settings, beside, run_dir, seed, progress)
            progress(f"{beside.askers} askers will ask {n} questions of {beside.space.name}")
        started = time.time()
        deadline = started + seconds
        plan = nemesis.schedule(kinds, seconds, seed, every, writers, readers, deleters, correctors) if kinds else []
        progress(f"soak {name}: {writers} writers, {readers} readers, {deleters} deleters, {correctors} correctors "
                 f"for {seconds:g} s ({settings.store} store)"
                 + (f", as {machines} hosts with epoch boards of their own" if machines > 1 else "")
                 + (f", nemesis {','.join(kinds)}, seed {seed}, a fault every {every[0]:g}-{every[1]:g} s"
                    if kinds else ""))
        for fault in plan:
            progress(f"  planned: {fault.line()}")
        crew = Crew(settings, name, deadline, run_dir, writers, readers, machines, deleters, correctors,
                    beside.processes() if beside else [])
        nem = nemesis.Nemesis(settings, plan, crew, until=deadline - min(QUIET, seconds / 5), progress=progress)
        nem.start()
        try:
            while time.time() < deadline and nem.error is None:
                for life in crew.replace_dead(until=deadline - 2):
                    progress(f"  {life.role} {life.tag} started")
                time.sleep(0.05)
        finally:
            nem.stop()
            nem.join()
            hung = crew.join(JOIN_SECONDS)
            nemesis.heal(settings, kinds)
        if nem.error is not None:
            raise nem.error
        ended = time.time()
        history = check.read_history(crew.lives)
        report = _judge(engine, ds, crew, history, nem, hung, started, ended, seconds,
                        (writers, readers, deleters, correctors), check_at_most, progress)
        if beside is not None:
            local = settings.store == "hbase" and not settings.hbase  # a local HBase: its logs are here
            servers = beside_mod.region_servers(settings, started) if local else {}
            report.beside = {"dataset": beside.space.name, "askers": beside.askers,
                             **beside_mod.summary(history.asked, history.refused, servers)}
        report.nemesis["schedule"] = [f.line() for f in plan]
        if report.ok and not keep:
            _retry(lambda: engine.drop_dataset(name))
            shutil.rmtree(run_dir, ignore_errors=True)
        else:
            progress(f"kept the dataset {name} and the clients' logs in {run_dir}")
        return report
    finally:
        engine.store.close()
        engine.directory.close()


def _retry(request, seconds: float = 120.0):
    """request() until it does not raise StoreUnavailable (servers just started)."""
    until = time.time() + seconds
    while True:
        try:
            return request()
        except StoreUnavailable:
            if time.time() > until:
                raise
            time.sleep(0.5)


def _judge(engine, ds, crew, history, nem, hung, started, ended, seconds, clients, check_at_most,
           progress) -> SoakReport:
    writers, readers, deleters, correctors = clients
    recovery = _recover(engine, ds, history, writers)
    progress(f"recovery: {recovery['by']}")
    rows = check.Rows.of(history, crew.machines)
    checked, wrong = check.check_answers(history, rows, check_at_most)

    stored = _retry(lambda: check.stored_batches(engine, ds))
    changes = check.stored_changes(history, stored)
    acked = [k for k, (_, a) in history.batches.items() if a is not None]
    maybes = [k for k, (_, a) in history.batches.items() if a is None]
    # A deleted batch is judged with the deletes (check.stored_changes).
    lost = sum(BATCH - min(BATCH, stored.per_batch[k]) for k in acked if k not in history.deletes)
    maybe_in = [k for k in maybes if stored.per_batch[k] == BATCH]
    half = [k for k in history.batches if 0 < stored.per_batch[k] < BATCH and k not in history.deletes]
    unknown = sum(n for k, n in stored.per_batch.items() if k not in history.batches)

    # The final answers: the oracle's over the rows stored (what check.stored_changes and
    # the counts above judged against the history).
    expected = np.vstack([np.empty((0, 3), np.int64)] + [r for k, r in stored.rows.items()
                                                         if stored.per_batch[k] == BATCH])
    final_exact = True
    rng = np.random.default_rng(7)
    for _ in range(50):
        x0, y0 = (int(v) for v in rng.integers(0, 9000, 2))
        where = {"x": [x0, x0 + 3000], "y": [y0, y0 + 3000]}
        got = _retry(lambda: engine.query(ds.name, where, AGGS)).values
        final_exact &= got == oracle.answer(check.COLUMNS, expected, where, AGGS)
    problems = recovery["check_after"]
    splits = _retry(lambda: engine.directory.leaf_count(ds.name)) - 1

    effects = availability.fault_effects(history, nem.injected, ended)
    for row in effects:
        if row["kind"] == "writer":
            row["mid_write"] = availability.mid_write(history, row["life"])
            row["armed_at"] = history.armed.get(row["life"])
    requests = availability.request_summary(history)
    requests["hung_clients"] = [f"{c.role} {c.tag}" for c in hung]
    requests["client_exits"] = dict(Counter(str(code) for code in crew.exits.values()))
    inserts = BATCH * len(acked)
    return SoakReport(
        store=engine.store.kind, seconds=seconds, writers=writers, readers=readers, deleters=deleters,
        correctors=correctors, changes=changes.counts, acked_changes_lost=len(changes.lost),
        half_changes=len(changes.half), changes_wrong=(changes.lost + changes.half)[:20],
        inserts=inserts, inserts_per_s=round(inserts / seconds, 1), queries=len(history.answers),
        queries_per_s=round(len(history.answers) / seconds, 1), splits=splits, answers_checked=checked,
        wrong_answers=len(wrong), final_exact=bool(final_exact), check_problems=problems,
        acked_writes_lost=lost, half_batches=len(half),
        batches={"acked": len(acked), "maybe": len(maybes), "maybe_in": len(maybe_in),
                 "maybe_out": sum(1 for k in maybes if stored.per_batch[k] == 0),
                 "half_in": [f"{t}/{b}: {stored.per_batch[(t, b)]} of {BATCH} rows" for t, b in half][:20],
                 "rows_of_no_batch": stored.foreign + unknown, "rows_under_two_leaves": stored.duplicates},
        requests=requests,
        nemesis={"kinds": sorted({row["kind"] for row in effects}), "faults": effects,
                 "by_kind": availability.kind_summary(effects),
                 "seconds_from_start": round(ended - started, 1)},
        recovery=recovery, wrong_examples=wrong[:5], load=" ".join(f"{x:.2f}" for x in os.getloadavg()),
    )


def _recover(engine, ds, history: check.History, writers: int) -> dict:
    """What the crash protocol leaves at the end and how it is recovered: the pending
    intents and `check` before, one more batch by a new writer (it recovers first, under
    the writer lock), `check` after. Problems left after that are a bug of the protocol:
    reported, and left in place to be looked at (`gridagg repair` mends them)."""
    pending = len(_retry(lambda: engine.directory.pending_intents(ds.name)))
    before = _retry(lambda: engine.check(ds.name))
    tag = f"{writers}.0"  # a writer slot no client used
    begun = time.time()
    _retry(lambda: engine.insert_encoded(ds, element_ids(tag, 0), batch_rows(tag, 0)))
    history.add_acked(tag, 0, begun, time.time())
    after = _retry(lambda: engine.check(ds.name))
    return {"pending_intents": pending, "check_before": before[:10], "check_before_count": len(before),
            "by": "the next writer (one more batch)", "check_after": after[:10],
            "check_after_count": len(after)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m gridagg_loadtest.soak", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=60, help="how long writers and readers run (default 60)")
    ap.add_argument("--writers", type=int, default=2, help="writer processes (default 2)")
    ap.add_argument("--readers", type=int, default=2, help="reader processes (default 2)")
    ap.add_argument("--deleters", type=int, default=1,
                    help="deleter processes, deleting acknowledged batches by element ID (default 1)")
    ap.add_argument("--correctors", type=int, default=1,
                    help="corrector processes, giving acknowledged batches new values (default 1)")
    ap.add_argument("--store", choices=["embedded", "hbase"], help="cell store (default GRIDAGG_STORE)")
    ap.add_argument("--check", type=int, default=20000,
                    help="answers to check against the oracle, a random sample (default 20000)")
    ap.add_argument("--nemesis", metavar="KINDS", default="",
                    help="faults to inject, comma-separated: " + ", ".join(nemesis.KINDS)
                         + "; or all (every kind the store has). Default: none")
    ap.add_argument("--seed", type=int, default=0, help="seed of the fault schedule (default 0)")
    ap.add_argument("--every", default="20,40", metavar="MIN,MAX",
                    help="seconds between one fault's healing and the next fault (default 20,40)")
    ap.add_argument("--machines", type=int, default=1, metavar="N",
                    help="clients stand for N hosts (writers and readers spread over them), each with an epoch "
                         "board of its own: writes reach the other hosts' queries through PostgreSQL only, and "
                         "must show there from 1 s after their acknowledgement (HBase store; default 1)")
    ap.add_argument("--report", metavar="FILE",
                    help="where the report goes, replacing the previous run's (default docs/soak/<store>.md of the "
                         "checkout, hbase-<N>rs.md with N region servers; installed without a checkout: "
                         "<data dir>/soak/)")
    ap.add_argument("--beside", metavar="CONFIG",
                    help="also read a big dataset of the store meanwhile, which nobody writes: the ingest config "
                         "it was loaded with (its name and columns); needs --archive")
    ap.add_argument("--archive", metavar="DIR",
                    help="with --beside: the archive it was loaded from, which the reference answers are taken from "
                         "(DuckDB; a copy the held-out bench left in the data dir is used as it is)")
    ap.add_argument("--askers", type=int, default=32, metavar="N",
                    help=f"with --beside: clients asking its held-out questions at once, {beside_mod.THREADS} "
                         "threads to a process (default 32)")
    ap.add_argument("--keep", action="store_true",
                    help="keep the dataset and the clients' logs (<data dir>/soak/<name>/*.jsonl) also "
                         "after a run that holds (one that does not keeps them anyway)")
    args = ap.parse_args(argv)
    settings = Settings.from_env()
    if args.store:
        settings = settings.with_(store=args.store)
    if args.machines > 1 and settings.store != "hbase":
        ap.error("--machines needs the HBase store (the embedded store lives on one machine)")
    try:
        servers = 0 if settings.hbase else jvm.layout(settings)  # the local HBase's region servers
        kinds = nemesis.parse_kinds(args.nemesis, settings.store, servers) if args.nemesis else ()
    except ValueError as exc:
        ap.error(f"--nemesis: {exc}")
    try:
        low, high = (float(v) for v in args.every.split(","))
    except ValueError:
        ap.error(f"--every must be MIN,MAX seconds, not {args.every!r}")
    if bool(args.beside) != bool(args.archive):
        ap.error("--beside and --archive go together: the dataset's ingest config and its archive")
    if args.askers < 1:
        ap.error(f"--askers must be at least 1, not {args.askers}")
    beside = Beside(Path(args.beside), Path(args.archive), args.askers) if args.beside else None
    logging.getLogger("psycopg.pool").setLevel(logging.ERROR)  # each reconnection while PostgreSQL is down
    say = lambda m: print(m, file=sys.stderr, flush=True)  # noqa: E731
    command = "python -m gridagg_loadtest.soak " + " ".join(argv if argv is not None else sys.argv[1:])
    say(command)
    meta = {"command": command, "machine": machine(), "started": stamp()}
    report = run(settings, args.seconds, args.writers, args.readers, progress=say, check_at_most=args.check,
                 kinds=kinds, seed=args.seed, every=(low, high), keep=args.keep, machines=args.machines,
                 deleters=args.deleters, correctors=args.correctors, beside=beside)
    print(json.dumps({**meta, "ok": report.ok, **report.__dict__}, indent=2, default=str))
    say(report.table())
    servers = servers if settings.store == "hbase" and servers > 1 else 0  # what the report names
    name = settings.store + (f"-{servers}rs" if servers else "") + ("-beside" if beside else "")
    say(f"report: {write(soak_report(settings, args.report, name), report.markdown(**meta, servers=servers))}")
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
