"""The bench's fourth step: every system served over HTTP and loaded with the bench's
driver. Each is made ready in turn: its data read into the caches (prewarm.py), warm-up
runs until its rate stops rising, a trial of each of its settings (tuning.py), then at
the fastest setting the check queries' answers; it is left serving. Then the recorded
runs, the systems taking turns within each round (Bench.measure), each system's warm-up
runs of an aggregate right before its first recorded run of it, measuring the CPU each
process group spends."""

from __future__ import annotations

import json
from pathlib import Path

from gridagg.config import Settings

from . import workload
from .cpu import CpuMeter
from .driver import run_load
from .log import log
from .prewarm import prewarm
from .servers import Server, Shape
from .systems import System
from .tuning import Setting, best, candidates

# A warm-up ends once its last WARM_RUNS runs were not WARM_GAIN times as fast as the WARM_RUNS
# before them (on average: one run's rate moves by 10% on this shared machine).
WARM_RUNS, WARM_GAIN = 3, 1.03
TRIAL_AGG = "sum"  # the aggregate a setting is chosen by: the one whose work grows with the rows
TRIAL_ANSWERS = 10**9  # a trial is bounded by its time only

# The process groups whose CPU a run counts, as the report names them.
CPU_GROUPS = {"api": "API server", "hbase": "HBase JVMs", "postgresql": "PostgreSQL", "load": "load driver",
              "machine": "whole machine"}


def cpu_meter(settings: Settings, serving: list[Server]) -> CpuMeter:
    """What a run's CPU is counted for: the servers in `serving` (as it is at the run),
    and the local PostgreSQL and HBase (an external one's CPU is not this machine's)."""
    from gridagg_hbase import launcher

    from gridagg.cli.services import pg_paths

    def postgresql() -> list[int]:
        try:
            return [int((pg_paths(settings).data / "postmaster.pid").read_text().split()[0])]
        except (OSError, IndexError, ValueError):
            return []

    def hbase() -> list[int]:
        return [pid for role in ("master", "thrift") if (pid := launcher.running_pid(settings, role))]

    return CpuMeter({"api": lambda: [srv.proc.pid for srv in serving], "postgresql": postgresql, "hbase": hbase})


class Bench:
    """What every system's runs share: settings, the command line's arguments, the
    report directory and the CPU meter of the server serving now."""

    def __init__(self, settings: Settings, args, out: Path):
        self.settings = settings
        self.args = args
        self.out = out
        self.serving: list[Server] = []
        self.meter = cpu_meter(settings, self.serving)

    def load(self, server: Server, system: System, agg: str, clients: int, seconds: float, seed: int, tag: str,
             answers: int | None = None) -> dict:
        """One run (driver.run_load) of at most `answers` (default args.requests) answers."""
        return run_load(self.settings, server.url, system.query_path, agg, clients, answers or self.args.requests,
                        seconds, seed, self.out, f"{system.kind}_{system.dataset}_{tag}", self.meter)

    def serve(self, system: System, setting: Setting) -> Server:
        server = Server(self.settings, system, setting.shape, dict(setting.knobs), self.out / "logs")
        self.serving[:] = [server]
        return server

    def warm_up(self, server: Server, system: System, agg: str) -> list[float]:
        """Unrecorded runs of `agg` queries at the most clients (each up to
        args.warmup_seconds and args.requests answers) until the rate stops rising, or
        args.warmup_runs runs; returns their rates. A JVM compiles hot code as it runs
        it: the region server's row loops reach their speed after a minute or two of
        load, while the embedded store and the peers level off in their first runs. The
        recorded runs then measure a server as it serves all day."""
        rates: list[float] = []
        for i in range(self.args.warmup_runs):
            r = self.load(server, system, agg, max(self.args.clients), self.args.warmup_seconds, self.args.seed + 3 + i,
                          f"{agg}_warmup{i + 1}")
            rates.append(r["rps"])
            last, before = rates[-WARM_RUNS:], rates[-2 * WARM_RUNS : -WARM_RUNS]
            if len(before) == WARM_RUNS and sum(last) <= WARM_GAIN * sum(before):
                break
        return rates

    def choose(self, system: System, shapes: list[Shape]) -> Server:
        """Serve `system` warm at each of its settings, time a run of TRIAL_AGG at the
        most clients (after an unrecorded one that warms the new processes; both last
        args.tune_seconds whatever --requests says: a short run's rate is noise), and
        serve it at the fastest. Returns the server; the trials ({"setting", "rps",
        "p50_ms"}) and the setting go to system.stats. With one setting there is nothing
        to try."""
        options = candidates(system, shapes)
        trials: list[dict] = []
        server = None
        for i, setting in enumerate(options):
            server = self.serve(system, setting)
            if i == 0:
                prewarm(self.settings, system)
            if len(options) > 1:
                if i == 0:  # the JVMs' code compiled before any trial, not during the first
                    rates = self.warm_up(server, system, TRIAL_AGG)
                    system.stats["trial_warmup"] = rates
                    log(f"  warm-up {TRIAL_AGG}: " + ", ".join(f"{x:.0f}" for x in rates) + " q/s")
                for tag, seed in ((f"trial{i + 1}_warm", self.args.seed + 1), (f"trial{i + 1}", self.args.seed + 2)):
                    r = self.load(server, system, TRIAL_AGG, max(self.args.clients), self.args.tune_seconds, seed, tag,
                                  answers=TRIAL_ANSWERS)
                trials.append({"setting": setting, "rps": r["rps"], "p50_ms": r["p50_ms"]})
                log(f"  trial {setting}: {r['rps']:.1f} q/s, p50 {r['p50_ms']:.0f} ms")
                if i < len(options) - 1:
                    server.stop()
        chosen = best(trials) if trials else options[0]
        if trials and chosen is not trials[-1]["setting"]:
            server.stop()
            server = self.serve(system, chosen)
        system.stats["setting"] = chosen
        system.stats["trials"] = trials
        return server

    def prepare(self, system: System, shapes: list[Shape], check: list[dict]) -> Server:
        """`system` made ready to measure: its setting chosen (choose), the check
        queries' answers (system.stats["answers"]). Returns its server, left serving."""
        log(f"serving {system.label}")
        server = self.choose(system, shapes)
        system.stats["answers"] = answers(server.url, system, check)
        return server

    def measure(self, systems: list[System], shapes: list[Shape], check: list[dict]) -> list[dict]:
        """Everything over HTTP: each system made ready (prepare) and left serving, then
        each aggregate at each client count run args.rounds times, the systems taking
        turns in every round (each round begun by the next system; _rounds warms each up
        before its first recorded run of an aggregate). The speed of a shared
        host drifts by a fifth and more within minutes; taking turns lets every system
        see the same minutes of it. A system's figure is its median round by rate (the
        higher of the middle two), with every round's rate in round_rps. No server
        outlives it."""
        servers: dict[str, Server] = {}
        runs = []
        try:
            for s in systems:
                servers[s.label] = self.prepare(s, shapes, check)
            for agg in self.args.aggs:
                for i, c in enumerate(self.args.clients):
                    got = self._rounds(systems, servers, agg, c, warm=i == 0)
                    for s in systems:
                        r = sorted(got[s.label], key=lambda x: x["rps"])[len(got[s.label]) // 2]
                        runs.append({"system": s.label, "kind": s.kind, "store": s.store or s.kind,
                                     "n_size": s.n_size or "", "setting": str(s.stats["setting"]), "agg": agg,
                                     "clients": c, **r, "round_rps": [x["rps"] for x in got[s.label]]})
                        log(f"  {s.label} {agg} {c} clients: {r['rps']:.1f} q/s (rounds: "
                            + ", ".join(f"{x['rps']:.1f}" for x in got[s.label]) + f"), p50 {r['p50_ms']:.0f} ms, "
                            f"p99 {r['p99_ms']:.0f} ms, {r['requests']} answers ({r['ramp_answers']} sent in the "
                            f"ramp), {r['failures']} failures; CPU ms a request: "
                            + ", ".join(f"{g} {r[f'cpu_{g}_ms']:.2f}" for g in CPU_GROUPS if f"cpu_{g}_ms" in r))
        finally:  # also when interrupted (the server being made ready is in self.serving)
            for server in [*servers.values(), *self.serving]:
                server.stop()
            self.serving.clear()
        return runs

    def _rounds(self, systems: list[System], servers: dict[str, Server], agg: str, clients: int,
                warm: bool) -> dict[str, list[dict]]:
        """args.rounds runs of `agg` at `clients` per system (by label), the systems taking
        turns, each round begun by the next system; with `warm`, each system's warm-up runs
        of `agg` (system.stats["warmups"]) right before its first recorded run. Right
        before, not when it was made ready: on one box the systems made ready after it,
        and the runs of other aggregates, can push its pages out of the page cache (a
        100M-row PostgreSQL table's sum reads about 100 MB a query past its buffers),
        and every system is to be measured warm."""
        got: dict[str, list[dict]] = {s.label: [] for s in systems}
        for i in range(self.args.rounds):
            k = i % len(systems)
            for s in systems[k:] + systems[:k]:
                self.serving[:] = [servers[s.label]]  # whose API processes the run's CPU counts
                if warm and i == 0:  # every worker, connection, page and code path in use, compiled
                    rates = self.warm_up(servers[s.label], s, agg)
                    s.stats.setdefault("warmups", {})[agg] = rates
                    log(f"  warm-up {agg} of {s.label} at {s.stats['setting']}: "
                        + ", ".join(f"{x:.0f}" for x in rates) + " q/s")
                got[s.label].append(self.load(servers[s.label], s, agg, clients, self.args.seconds, self.args.seed,
                                              f"{agg}_c{clients}_round{i + 1}"))
        return got


def answers(url: str, system: System, queries: list[dict]) -> dict[str, str]:
    """The system's HTTP answers to the check queries (min and sum of each), as JSON
    text by "agg i" (an answer other than 200 is kept as its status and text)."""
    import requests

    out = {}
    for agg in ("min", "sum"):
        for i, w in enumerate(queries):
            r = requests.post(url + system.query_path, json=workload.paper_body(w, agg), timeout=300)
            out[f"{agg} {i}"] = (json.dumps(r.json()["results"], sort_keys=True) if r.status_code == 200
                                 else f"HTTP {r.status_code} {r.text[:200]}")
    return out


def disagreements(systems: list[System]) -> list[str]:
    """The check queries whose answers differ between systems (empty: all agree)."""
    keys = sorted({k for s in systems for k in s.stats.get("answers", {})})
    out = []
    for k in keys:
        seen = {s.label: s.stats["answers"].get(k) for s in systems if "answers" in s.stats}
        if len(set(seen.values())) > 1:
            out.append(f"{k}: answers differ: {seen}")
    return out
