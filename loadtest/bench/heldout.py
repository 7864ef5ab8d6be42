"""`python -m gridagg_loadtest.bench.heldout`: gridagg on questions it has never seen, as
users ask them (issue 93's held-out mode): families of questions drawn from the data by
a seed (heldout_families.py: boxes over any dimensions, lon/lat boxes, one station,
polygons, time windows, series, minima and maxima not at a floor), a training stream
and a test stream from different seeds; whatever tunes the tree sees only the training
stream, and only the test stream is measured, as loaded and after tuning, in process,
over HTTP and served to many clients, beside peers at their best physical design.

For an archive of the generator (`python -m gridagg_ingest.generate --format parquet`)
and an ingest config (default ingest/examples/weather_generated.toml), it
1. loads DuckDB from the archive by the bench's own reading of it (heldout_sql.py:
   narrow integer types, sorted by time): the reference every answer is checked
   against, exactly, and what the questions are drawn from;
2. draws the training stream (--train-seed) and the test stream (--test-seed),
   --questions of each family, each anchored on a row drawn at random;
3. loads the other peers (heldout_peers.py): ClickHouse through chDB in each table
   design (ORDER BY, projection), the one fastest on a sample of the training stream
   kept; with --peers pg, PostgreSQL alone loaded in time order, the index set (BRIN, a
   covering btree) fastest by EXPLAIN ANALYZE on that sample kept;
4. loads gridagg on each of --stores with `gridagg ingest`, from the config without an
   n_size (gridagg chooses it), and checks it holds the reference's rows;
5. as loaded: asks the test stream in process (GridEngine, and each peer, in turns
   question by question: the median of --repeat runs after one, the first timed apart),
   over HTTP (`gridagg serve`'s app at its default workers and threads, one keep-alive
   client, the median of --http-repeat requests after one; refusals, 422, counted) and,
   with --clients, served: every system behind the same HTTP stack (granian and Flask;
   the peers through heldout_app.py at the shape and knobs of theirs a trial on the
   training stream finds fastest, gridagg at `gridagg serve`'s defaults), each family
   driven by the load driver (loadgen.go) at each client count for --seconds, --rounds
   rounds, the systems taking turns;
6. tunes gridagg with the training stream only (heldout_gridagg.tune: served with its
   online tuner on while a client asks the training questions, then `gridagg tune
   NAME`), timing it, its CPU and the store's growth;
7. after tuning: the test stream again, in process, over HTTP and served (gridagg; the
   peers' figures are those of step 5);
8. writes OUT/heldout.json (--out, default <data dir>/bench/heldout) and the report,
   README.md with its plot, to --docs (default docs/bench/heldout of the checkout),
   replacing the previous run's: per store, phase and family the p50s and their
   ratios, served throughput, rows read against rows selected, refusals and wrong
   answers, and a line per target of issue 93.

Every answer of every system is checked against the reference, exactly; a wrong one is
printed as it is found, listed in the report, and makes the command exit with 1.

    python -m gridagg_ingest.generate --rows 10000000 --format parquet --out /data/net-10m
    python -m gridagg_loadtest.bench.heldout --archive /data/net-10m --stores embedded hbase \\
        --peers duckdb clickhouse pg --clients 32

A smoke run in a few minutes: --questions 3 --repeat 1 --http-repeat 1 --clients 4
--seconds 1 --rounds 1 --shapes 1x1 --trial-seconds 1 --train-minutes 0.5 --tune-every 2
(and --docs elsewhere, or it replaces the report).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from fractions import Fraction
from pathlib import Path

from gridagg_api.cli import default_threads, default_workers

from gridagg.config import Settings
from gridagg.model.errors import GridaggError

from ..peers.pg_server import server_settings
from ..peers.pg_server import wanted as pg_wanted
from ..reports import REPORT, bench_docs, bench_out, machine, stamp
from . import heldout_report
from .dashboard import ask, values_of
from .driver import binary
from .heldout_app import APP
from .heldout_families import FAMILIES, Question, draw
from .heldout_gridagg import Client, config_without_n_size, ingest, tune
from .heldout_peers import (
    CLICKHOUSE_DESIGNS,
    DUCK_TABLE,
    LABELS,
    POSTGRES_DESIGNS,
    export,
    load_clickhouse,
    load_duckdb,
    load_postgres,
    open_asker,
    register,
    sample,
)
from .heldout_peers import drop as drop_peer
from .heldout_peers import prewarm as prewarm_peer
from .heldout_sql import Space, user_answers
from .log import log
from .prewarm import prewarm
from .servers import Server, Shape
from .systems import System, dataset_name, engine_of

CONFIG = Path(__file__).resolve().parents[2] / "ingest" / "examples" / "weather_generated.toml"
PEERS = ("duckdb", "clickhouse", "pg")
SHAPES = (Shape(2, 1), Shape(2, 2), Shape(2, 4))
PEER_KNOBS = {"duckdb": [{"threads": 2}, {"threads": 1}], "clickhouse": [{"threads": 2}, {"threads": 1}],
              "pg": [{"parallel": 2}, {"parallel": 0}]}
SHOWN_WRONG = 50  # wrong answers kept whole in the run's data (all are counted)


class HeldoutPeer(System):
    """A peer served by the held-out bench's app (heldout_app.py)."""

    @property
    def app(self) -> str:
        return APP

    def path(self, q: Question) -> str:
        return f"/bench/heldout/{self.kind}/{self.dataset}/{'series' if q.series else 'query'}"


class Gridagg(System):
    def path(self, q: Question) -> str:
        return q.path(self.dataset)


# -- checking -------------------------------------------------------------------------------


class Checks:
    """Every wrong answer found: counted per (system, phase, family), the first
    SHOWN_WRONG kept whole, each printed as it is found."""

    def __init__(self):
        self.counts: dict[str, int] = {}
        self.shown: list[dict] = []

    def check(self, system: str, phase: str, q: Question, expected: list[dict], got: list[dict]) -> bool:
        if got == expected:
            return True
        key = f"{system} | {phase} | {q.family}"
        self.counts[key] = self.counts.get(key, 0) + 1
        log(f"WRONG ANSWER from {system} ({phase}) to {q.label}: {_text(got)[:300]}, expected {_text(expected)[:300]}; "
            f"question {json.dumps(q.body)[:400]}")
        if len(self.shown) < SHOWN_WRONG:
            self.shown.append({"system": system, "phase": phase, "question": q.to_json(), "got": _text(got),
                               "expected": _text(expected)})
        return False

    def wrong(self, system: str, what: str) -> None:
        """A wrong answer that is not one question's (a count of all rows)."""
        self.counts[f"{system} | {what}"] = self.counts.get(f"{system} | {what}", 0) + 1
        log(f"WRONG ANSWER from {system}: {what}")

    def to_json(self) -> dict:
        return {"counts": self.counts, "shown": self.shown}


def _text(points: list[dict]) -> str:
    return json.dumps([{k: str(v) if isinstance(v, Fraction) else v for k, v in p.items()} for p in points])


# -- in process -----------------------------------------------------------------------------


def timed(fn, repeat: int) -> tuple[object, float, float]:
    """(fn()'s answer, the first call's ms, the median ms of `repeat` calls after it)."""
    t0 = time.perf_counter()
    answer = fn()
    first = (time.perf_counter() - t0) * 1000
    runs = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        runs.append((time.perf_counter() - t0) * 1000)
    return answer, first, statistics.median(runs) if runs else first


def in_process(engine, name: str, questions: list[Question], expected: list[list[dict]], peers: dict, space: Space,
               repeat: int, checks: Checks, phase: str, system: str) -> list[dict]:
    """Each question of gridagg (in `engine`) and of each peer (label -> Asker), in turns:
    per question its times, whether each answer was right, and gridagg's plan's rows."""
    out = []
    for q, want in zip(questions, expected):
        row = {"label": q.label, "family": q.family, "peers": {}}
        try:
            result, first, ms = timed(lambda q=q: ask(engine, name, q), repeat)
        except GridaggError as exc:
            row["gridagg"] = {"refused": str(exc)}
        else:
            p = result.plan
            right = checks.check(system, phase, q, want, values_of(result))
            row["gridagg"] = {"ms": ms, "first_ms": first, "right": right,
                              "rows_selected": p.rows_in_reused_grids + p.rows_matched_by_scans,
                              "rows_in_cut_leaves": p.rows_in_scanned_grids, "rows_read": p.rows_read,
                              "rows_in_reused_blocks": p.rows_in_reused_blocks}
        for label, asker in peers.items():
            got, first, ms = timed(lambda q=q, asker=asker: asker.answer(space, q.body), repeat)
            row["peers"][label] = {"ms": ms, "right": checks.check(label, phase, q, want, got)}
        out.append(row)
        log(f"  {q.label}: gridagg {row['gridagg'].get('ms', float('nan')):.2f} ms; "
            + ", ".join(f"{k} {v['ms']:.2f}" for k, v in row["peers"].items()))
    return out


# -- over HTTP ------------------------------------------------------------------------------


def http_answers(answer: dict, series: bool) -> list[dict]:
    return [p["results"] for p in answer["points"]] if series else [answer["results"]]


def over_http(url: str, system: Gridagg, questions: list[Question], expected: list[list[dict]], space: Space,
              repeat: int, checks: Checks, phase: str) -> list[dict]:
    """Each question over HTTP, one keep-alive client: the median ms of `repeat`
    requests after one, whether the answer was right, or the refusal (422)."""
    client = Client(url)
    out = []
    try:
        for q, want in zip(questions, expected):
            path = system.path(q)
            status, answer, _ = client.post(path, q.body)
            row = {"label": q.label, "family": q.family, "status": status}
            if status == 422:
                row["refused"] = answer.get("detail", "")
            elif status != 200:
                row["error"] = json.dumps(answer)[:300]
                checks.wrong(system.label, f"{phase}: {q.label} answered HTTP {status}: {row['error']}")
            else:
                row["right"] = checks.check(system.label, phase, q, user_answers(space, want),
                                            http_answers(answer, q.series))
                row["ms"] = statistics.median(client.post(path, q.body)[2] for _ in range(max(repeat, 1)))
            out.append(row)
    finally:
        client.close()
    return out


# -- served ---------------------------------------------------------------------------------


def drive(settings: Settings, url: str, lines: list[str], clients: int, seconds: float, most: int, out: Path,
          tag: str) -> dict:
    """One run of the load driver: `clients` closed-loop clients sending `lines` (PATH
    TAB BODY, wrapping around) for `seconds` or `most` answers. Returns its result with
    `answered_rps`: the rate of 200 answers (failures are spread over the run)."""
    prefix = out / "load" / tag
    prefix.parent.mkdir(parents=True, exist_ok=True)
    requests = prefix.with_suffix(".requests")
    requests.write_text("\n".join(lines) + "\n")
    argv = [str(binary(settings)), "-url", url, "-requests", str(requests), "-clients", str(clients), "-max",
            str(most), "-seconds", f"{seconds:g}", "-ramp", f"{min(1.0, 0.01 * clients, seconds / 4):g}",
            "-result", f"{prefix}.json"]
    with open(f"{prefix}.log", "w") as logfile:
        done = subprocess.run(argv, stdout=logfile, stderr=subprocess.STDOUT, env={**os.environ, "GOMAXPROCS": "1"},
                              timeout=seconds + 300)
    if done.returncode:
        raise RuntimeError(f"the load driver exited with {done.returncode}; see {prefix}.log")
    res = json.loads(Path(f"{prefix}.json").read_text())
    ok = 1 - res["failures"] / res["sent"] if res["sent"] else 0.0
    return {"rps": res["rps"], "answered_rps": res["rps"] * max(ok, 0.0), "p50_ms": res["p50_ms"],
            "failures": res["failures"], "sent": res["sent"]}


def lines_of(system, questions: list[Question]) -> list[str]:
    return [f"{system.path(q)}\t{json.dumps(q.body, separators=(',', ':'))}" for q in questions]


def choose_setting(settings: Settings, args, system: HeldoutPeer, training: list[Question], out: Path) -> dict:
    """The shape (of args.shapes) and knobs of a peer's served setting whose trial, the
    training stream at the most clients for args.trial_seconds, answers most per second."""
    trials = []
    for shape in args.shapes:
        for knobs in PEER_KNOBS[system.kind]:
            server = Server(settings, system, shape, knobs, out / "logs")
            try:
                res = drive(settings, server.url, lines_of(system, training), max(args.clients), args.trial_seconds,
                            10**9, out, f"trial_{system.kind}_{shape}_{'_'.join(map(str, knobs.values()))}")
            finally:
                server.stop()
            trials.append({"shape": str(shape), "knobs": knobs, "answered_rps": res["answered_rps"]})
            log(f"  {system.label} served at {shape} {knobs}: {res['answered_rps']:.1f} answers/s")
    best = max(trials, key=lambda t: t["answered_rps"])
    return {"shape": best["shape"], "knobs": best["knobs"], "trials": trials}


def served_rounds(settings: Settings, args, serving: list[tuple[System, Server]], questions: list[Question],
                  out: Path, phase: str) -> dict:
    """Each family driven at each client count, args.rounds rounds, the systems taking
    turns, after one warm-up run each on the whole stream; per system, family and
    client count the median round (by answers per second) and every round's rate."""
    families = list(dict.fromkeys(q.family for q in questions))
    for system, server in serving:
        drive(settings, server.url, lines_of(system, questions), max(args.clients), min(5.0, args.seconds), 10**9,
              out, f"warmup_{phase}_{system.kind}_{system.dataset}".replace(" ", "_"))
    runs: dict = {}
    for r in range(args.rounds):
        for family in families:
            mine = [q for q in questions if q.family == family]
            for clients in args.clients:
                for system, server in serving:
                    res = drive(settings, server.url, lines_of(system, mine), clients, args.seconds, args.requests, out,
                                f"{phase}_{system.kind}_{system.dataset}_{family}_{clients}_{r}".replace(" ", "_"))
                    runs.setdefault(system.label, {}).setdefault(family, {}).setdefault(str(clients), []).append(res)
                    log(f"  {phase}, round {r + 1}: {system.label}, {family}, {clients} clients: "
                        f"{res['answered_rps']:.1f} answers/s, p50 {res['p50_ms']:.1f} ms"
                        + (f", {res['failures']} failures" if res["failures"] else ""))
    return {label: {family: {clients: _median_round(rs) for clients, rs in by_clients.items()}
                    for family, by_clients in by_family.items()} for label, by_family in runs.items()}


def _median_round(rounds: list[dict]) -> dict:
    """The round of median rate (the lower middle one of an even count), with every rate."""
    ordered = sorted(rounds, key=lambda x: x["answered_rps"])
    return {**ordered[(len(ordered) - 1) // 2], "round_rps": [round(x["answered_rps"], 1) for x in rounds]}


def check_served(url: str, system: HeldoutPeer, questions: list[Question], expected: list[list[dict]], space: Space,
                 checks: Checks, phase: str) -> None:
    """Each question asked once of a served peer, its answer checked."""
    client = Client(url)
    try:
        for q, want in zip(questions, expected):
            status, answer, _ = client.post(system.path(q), q.body)
            if status != 200:
                checks.wrong(system.label, f"{phase}: {q.label} answered HTTP {status}: {json.dumps(answer)[:300]}")
            else:
                checks.check(system.label, phase, q, user_answers(space, want), http_answers(answer, q.series))
    finally:
        client.close()


# -- the run --------------------------------------------------------------------------------


def run(settings: Settings, args) -> dict:
    """The whole run (module docstring), under PostgreSQL's server settings for it when
    pg is a peer; returns the run's data, also written to OUT/heldout.json."""
    with server_settings(settings, pg_wanted(args.peers, args.pg_shared_buffers)) as pg_server:
        return _run(settings, args, pg_server if "pg" in args.peers else None)


def _run(settings: Settings, args, pg_server: dict | None) -> dict:
    started = time.time()
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    checks = Checks()
    names = {store: dataset_name(args.prefix, store) for store in args.stores}
    configs = {store: config_without_n_size(Path(args.config), names[store], out / f"{names[store]}.toml")
               for store in args.stores}
    space = Space.from_toml(configs[args.stores[0]])
    peer_name = args.prefix
    result = {"command": args.command_line, "machine": machine(), "started": stamp(started),
              "archive": str(args.archive), "config": str(args.config), "stores": {}, "pg_server": pg_server,
              "seeds": {"training": args.train_seed, "test": args.test_seed}, "per_family": args.questions}

    log(f"loading DuckDB (the reference) from {args.archive}")
    duck = load_duckdb(settings, space, Path(args.archive), peer_name)
    result["rows"], loads = duck["rows"], [duck]
    log("drawing the training and the test streams")
    samples = {seed: sample(settings, space, peer_name, seed, args.sample_rows)
               for seed in (args.train_seed, args.test_seed)}
    ref = open_asker(settings, "duckdb", peer_name, DUCK_TABLE)
    try:
        def reference(body: dict) -> list[dict]:
            return ref.answer(space, body)

        training = draw(samples[args.train_seed], args.train_seed, args.questions, reference, tuple(args.families))
        test = draw(samples[args.test_seed], args.test_seed, args.questions, reference, tuple(args.families))
        (out / "questions.json").write_text(json.dumps({"training": [q.to_json() for q in training],
                                                        "test": [q.to_json() for q in test]}))
        expected = [reference(q.body) for q in test]
    finally:
        ref.close()
    trial_set = [q for f in args.families for q in [q for q in training if q.family == f][:args.trial_questions]]
    tables = {"duckdb": DUCK_TABLE}
    if {"clickhouse", "pg"} & set(args.peers):
        with tempfile.TemporaryDirectory(prefix="gridagg-heldout-", dir=out) as tmp:
            exported = export(settings, peer_name, Path(tmp),
                              [fmt for kind, fmt in (("clickhouse", "parquet"), ("pg", "csv")) if kind in args.peers])
            if "clickhouse" in args.peers:
                log("loading ClickHouse (chDB) in each design, timed on the training sample")
                loads.append(load_clickhouse(settings, space, peer_name, exported["parquet"], trial_set,
                                             args.chdb_designs))
            if "pg" in args.peers:
                log("loading PostgreSQL alone, each index set timed on the training sample")
                loads.append(load_postgres(settings, space, peer_name, exported["csv"], trial_set, args.pg_designs))
    tables.update({p["kind"]: p["table"] for p in loads if "table" in p})
    register(settings, peer_name, configs[args.stores[0]], tables)
    for store in args.stores:
        log(f"loading gridagg ({store}) with gridagg ingest, no n_size")
        got = ingest(settings, store, names[store], configs[store], Path(args.archive), out / "logs")
        loads.append(got)
        if got["rows"] != duck["rows"]:
            checks.wrong(got["system"], f"holds {got['rows']:,} rows, the reference {duck['rows']:,}")
    result["loads"] = loads

    peer_systems = [HeldoutPeer(LABELS[k], peer_name, k) for k in PEERS if k in args.peers]
    gridaggs = {store: Gridagg(f"gridagg ({store})", names[store], "gridagg", store) for store in args.stores}
    askers = {s.label: open_asker(settings, s.kind, peer_name, tables[s.kind]) for s in peer_systems}
    try:
        for s in peer_systems:
            prewarm_peer(settings, s.kind, peer_name, tables[s.kind])
        result["peers"] = {"in_process": None, "served": {}, "settings": {}}
        phases = ["as loaded"] + ([] if args.no_tune else ["after tuning"])
        for phase in phases:
            if phase == "after tuning":
                for store in args.stores:
                    log(f"tuning gridagg ({store}) with the training stream only")
                    result["stores"][store]["tuning"] = tune(settings, store, names[store], training,
                                                             args.train_minutes, args.tune_every, out / "logs")
            measure_phase(settings, args, phase, result, gridaggs, peer_systems if phase == "as loaded" else [],
                          askers if phase == "as loaded" else {}, training, test, expected, space, checks, out)
    finally:
        for asker in askers.values():
            asker.close()
        if not args.keep:
            for s in peer_systems:
                drop_peer(settings, s.kind, peer_name, tables[s.kind])
            for store, name in names.items():
                with engine_of(settings, store) as engine:
                    engine.drop_dataset(name)
    result["wrong"] = checks.to_json()
    result["minutes"] = (time.time() - started) / 60
    (out / "heldout.json").write_text(json.dumps(result, indent=1))
    heldout_report.write_report(result, Path(args.docs))
    return result


def measure_phase(settings: Settings, args, phase: str, result: dict, gridaggs: dict[str, Gridagg],
                  peer_systems: list[HeldoutPeer], askers: dict, training: list[Question], test: list[Question],
                  expected: list[list[dict]], space: Space, checks: Checks, out: Path) -> None:
    """One phase's measures of the test stream (steps 5 and 7 of the module docstring)."""
    serving: list[tuple[System, Server]] = []
    try:
        for i, (store, system) in enumerate(gridaggs.items()):
            prewarm(settings, system)
            with engine_of(settings, store) as engine:
                log(f"{phase}: in process, {system.label}" + (" and the peers" if askers and not i else ""))
                rows = in_process(engine, system.dataset, test, expected, askers if not i else {}, space, args.repeat,
                                  checks, phase, system.label)
            if askers and not i:
                result["peers"]["in_process"] = [{"label": r["label"], "family": r["family"], **r["peers"]}
                                                 for r in rows]
            shape = Shape(default_workers(), default_threads(store))
            server = Server(settings, system, shape, {}, out / "logs")
            serving.append((system, server))
            log(f"{phase}: over HTTP, {system.label} ({shape})")
            http = over_http(server.url, system, test, expected, space, args.http_repeat, checks, phase)
            store_result = result["stores"].setdefault(store, {"dataset": system.dataset, "phases": {}})
            store_result["phases"][phase] = {"in_process": [{k: v for k, v in r.items() if k != "peers"}
                                                            for r in rows],
                                             "http": http, "shape": str(shape)}
        if not args.clients:
            return
        for s in peer_systems:
            log(f"{phase}: choosing {s.label}'s served setting on the training stream")
            chosen = choose_setting(settings, args, s, training, out)
            result["peers"]["settings"][s.label] = chosen
            server = Server(settings, s, Shape.parse(chosen["shape"]), chosen["knobs"], out / "logs")
            serving.append((s, server))
            check_served(server.url, s, test, expected, space, checks, phase)
        log(f"{phase}: served, {', '.join(s.label for s, _ in serving)}")
        served = served_rounds(settings, args, serving, test, out, phase)
        for store, system in gridaggs.items():
            result["stores"][store]["phases"][phase]["served"] = served.get(system.label, {})
        for s in peer_systems:
            result["peers"]["served"][s.label] = served.get(s.label, {})
    finally:
        for _, server in serving:
            server.stop()


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m gridagg_loadtest.bench.heldout", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--archive", required=True, help="the generator's Parquet directory")
    p.add_argument("--config", default=str(CONFIG),
                   help="the ingest config of its data space (default ingest/examples/weather_generated.toml); "
                        "its name, n_size and format are the bench's own")
    p.add_argument("--stores", nargs="+", default=["embedded"], choices=["embedded", "hbase"],
                   help="gridagg's stores, a dataset loaded on each (default embedded)")
    p.add_argument("--peers", nargs="+", default=["duckdb", "clickhouse"], choices=list(PEERS),
                   help="the peers (default duckdb clickhouse); DuckDB is always one: it is the reference; pg, "
                        "PostgreSQL alone, is slow to load at 100M rows")
    p.add_argument("--questions", type=int, default=25, help="questions of each family in each stream (default 25)")
    p.add_argument("--families", nargs="+", default=list(FAMILIES), choices=list(FAMILIES),
                   help="the families asked (default all)")
    p.add_argument("--train-seed", type=int, default=1, help="the training stream's seed (default 1)")
    p.add_argument("--test-seed", type=int, default=2, help="the test stream's seed (default 2)")
    p.add_argument("--sample-rows", type=int, default=20000,
                   help="rows drawn from the data for each stream's anchors and quantiles (default 20000)")
    p.add_argument("--trial-questions", type=int, default=5,
                   help="questions of each family of the training stream the peers' designs are timed on (default 5)")
    p.add_argument("--chdb-designs", nargs="+", default=list(CLICKHOUSE_DESIGNS), choices=list(CLICKHOUSE_DESIGNS),
                   metavar="DESIGN", help="chDB's table designs tried (default all: "
                                          + "; ".join(CLICKHOUSE_DESIGNS) + ")")
    p.add_argument("--pg-designs", nargs="+", default=list(POSTGRES_DESIGNS), choices=list(POSTGRES_DESIGNS),
                   metavar="DESIGN", help="PostgreSQL's index sets tried (default all: "
                                          + "; ".join(POSTGRES_DESIGNS) + ")")
    p.add_argument("--pg-shared-buffers", metavar="SIZE",
                   help="PostgreSQL's shared_buffers for the run, with --peers pg (restarts the local server, and "
                        "again after; default a quarter of the memory); 'keep' leaves it as it is")
    p.add_argument("--repeat", type=int, default=5, help="timed runs per question in process (default 5)")
    p.add_argument("--http-repeat", type=int, default=5, help="timed requests per question over HTTP (default 5)")
    p.add_argument("--clients", type=int, nargs="*", default=[32],
                   help="client counts of the served runs (default 32; none: no served runs)")
    p.add_argument("--seconds", type=float, default=10, help="seconds of each served run (default 10)")
    p.add_argument("--requests", type=int, default=10**6, help="most answers counted per served run")
    p.add_argument("--rounds", type=int, default=3, help="served rounds, the systems taking turns (default 3)")
    p.add_argument("--shapes", nargs="+", type=Shape.parse, default=list(SHAPES), metavar="WxT",
                   help="server shapes (workers x threads) the peers are tried at, each with each of its knobs "
                        f"(default {' '.join(map(str, SHAPES))}); gridagg serves at `gridagg serve`'s defaults")
    p.add_argument("--trial-seconds", type=float, default=5, help="seconds of each served setting's trial (default 5)")
    p.add_argument("--train-minutes", type=float, default=10,
                   help="most minutes the training stream is served to the online tuner (default 10)")
    p.add_argument("--tune-every", type=float, default=10,
                   help="seconds between the online tuner's rounds while training (GRIDAGG_TUNE_EVERY; default 10)")
    p.add_argument("--no-tune", action="store_true", help="measure as loaded only")
    p.add_argument("--prefix", default="heldout",
                   help="the datasets' names: PREFIX_em, PREFIX_hb for gridagg, PREFIX for the peers")
    p.add_argument("--out", metavar="DIR", help="the run's data (default <data dir>/bench/heldout)")
    p.add_argument("--docs", metavar="DIR",
                   help="where the report goes, replacing the previous one (default docs/bench/heldout)")
    p.add_argument("--keep", action="store_true",
                   help="keep gridagg's datasets and the peers' copies (default: dropped once measured)")
    args = p.parse_args(argv)
    if "duckdb" not in args.peers:
        args.peers = ["duckdb", *args.peers]
    args.command_line = "python -m gridagg_loadtest.bench.heldout " + " ".join(sys.argv[1:] if argv is None else argv)
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    settings = Settings.from_env()
    args.out = str(bench_out(settings, args.out, "heldout"))
    args.docs = str(bench_docs(args.docs, "heldout", Path(args.out)))
    result = run(settings, args)
    print((Path(args.docs) / REPORT).read_text())
    return 1 if result["wrong"]["counts"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
