"""`python -m gridagg_loadtest.bench.online`: the online tuner (gridagg.tune.online) following a
change of workload, in process, on datasets loaded with `gridagg ingest` from a config
without n_size (gridagg chose it, so the dataset is tuned online).

For each dataset (--dataset STORE=NAME):
1. reference answers, asked once before any tuning, of the paper's boxes (a pool of
   --boxes, sum and count of wind speed over time, temperature, humidity and
   illuminance) and of the dashboard's eight questions (loadtest/bench/dashboard.py); then
   --warmup seconds of both (HBase's region servers compile their scans as they run);
2. an OnlineTuner of the engine runs every --every seconds while one client asks the
   paper's boxes, one after another, until the tree has stood still for --still rounds
   after changing at least once (or --phase seconds passed); then the dashboard's
   questions the same way. Before and after each phase, with no tuner at work, each
   question's p50 of --repeat runs is taken (their mean over the questions: a probe);
3. every answer is compared with its reference (exactly: the rows do not change while
   the tree does), and per window of --window seconds (each question asked at least
   once) each question's median milliseconds, their mean over the questions, the leaves
   read per question and the rows in them (from the answers' plans: no noise), the
   tree's leaves and version are recorded.

Datasets given an n_size (--reference STORE=NAME, e.g. a manual sweep of n_size) are
then probed with both workloads, and the tuned trees compared with the best of them.

Reported per phase: the probes before and after; leaves read per question, the rows in
them and the windows' mean in the first and the last window; seconds until the tree
stood still and until the windows' mean came within 10% of the last window's; leaves
before and after; answers checked and wrong. The report, README.md with a plot of the
windows, goes to --docs (by default docs/bench/online of the checkout, replaced on each
run); the run's data, online.json with every window, to --out (by default <data
dir>/bench/online).

    gridagg ingest loadtest/bench/online.toml /work/data/net-1m --store embedded
    python -m gridagg_loadtest.bench.online --dataset embedded=online1
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
import time
from pathlib import Path

from gridagg.config import Settings
from gridagg.tune.online import OnlineTuner

from ..reports import (
    REPORT,
    bench_docs,
    bench_out,
    fresh,
    header,
    machine,
    pyplot,
    stamp,
    write,
)
from . import dashboard, workload
from .log import log
from .systems import engine_of

# The window mean counts as arrived when within this share of the last window's.
ARRIVED = 0.10


def _paper_questions(n: int, seed: int) -> list[dashboard.Question]:
    return [dashboard.Question(f"paper box {i}", workload.paper_body(where, "sum"))
            for i, where in enumerate(workload.paper_queries(n, seed))]


def serve(engine, name: str, questions: list, references: list, every: float, window: float, still: int,
          most: float) -> dict:
    """Ask `questions` round robin until the tree stood still for `still` tuning rounds
    after a change (or `most` seconds); returns the windows and the counts."""
    windows, wrong, asked = [], 0, 0
    started = time.monotonic()
    tree = engine.trees.tree(engine.dataset(name))
    leaves_before, version, changed_at, moved = tree.leaf_count, tree.version, started, False
    times: dict[int, list[float]] = {}
    cut, read = 0, 0  # leaves read and the rows in them, over the window's answers
    window_end = started + window
    for k, (q, ref) in itertools.cycle(enumerate(zip(questions, references))):
        t0 = time.perf_counter()
        result = dashboard.ask(engine, name, q)
        times.setdefault(k, []).append((time.perf_counter() - t0) * 1000)
        got = dashboard.values_of(result)
        cut += result.plan.scanned_grids_after or 0
        read += result.plan.rows_in_scanned_grids or 0
        asked += 1
        wrong += not dashboard._same(got, ref)
        now = time.monotonic()
        if now < window_end or len(times) < len(questions):
            continue
        tree = engine.trees.tree(engine.dataset(name))
        if tree.version != version:
            version, changed_at, moved = tree.version, now, True
        # Each question's median over the window (the tuner's rounds and the machine's
        # other work make single answers slow), averaged over the questions.
        ms = statistics.fmean(statistics.median(t) for t in times.values())
        n = sum(map(len, times.values()))
        windows.append({"t": round(now - started, 1), "mean_ms": ms, "questions": n, "cut": cut / n,
                        "rows_read": read / n, "leaves": tree.leaf_count, "version": tree.version})
        log(f"  {now - started:6.1f} s: {ms:7.3f} ms per question (medians), {cut / n:7.1f} leaves read, "
            f"{read / n:10,.0f} rows in them; {tree.leaf_count:,} leaves")
        times, cut, read, window_end = {}, 0, 0, now + window
        if (moved and now - changed_at > still * every) or now - started > most:
            break
    last = windows[-1]["mean_ms"]
    arrived = next(w["t"] for w in windows if abs(w["mean_ms"] - last) <= ARRIVED * last)
    return {"windows": windows, "first_ms": windows[0]["mean_ms"], "last_ms": last,
            "first_cut": windows[0]["cut"], "last_cut": windows[-1]["cut"],
            "first_rows": windows[0]["rows_read"], "last_rows": windows[-1]["rows_read"],
            "still_after_s": round(changed_at - started, 1) if moved else None, "arrived_s": arrived,
            "leaves_before": leaves_before, "leaves_after": windows[-1]["leaves"], "asked": asked, "wrong": wrong}


def warm_up(engine, name: str, questions: list, seconds: float) -> None:
    """Ask `questions` round robin for `seconds` (HBase's region servers compile their
    scans as they run), leaving no sample behind."""
    log(f"{name}: warming up ({seconds:g} s, no tuner)")
    until = time.monotonic() + seconds
    for q in itertools.cycle(questions):
        if time.monotonic() > until:
            break
        dashboard.ask(engine, name, q)
    engine.planner.sample.take(name)


def probe(engine, name: str, questions: list, repeat: int) -> float:
    """Each question's p50 over `repeat` runs (after one), averaged over the questions: the
    tree's speed with no tuner at work."""
    return statistics.fmean(dashboard.p50_ms(lambda: dashboard.ask(engine, name, q), repeat) for q in questions)


def run(settings: Settings, args) -> dict:
    paper = _paper_questions(args.boxes, args.seed)
    out = {"command": args.command_line, "machine": machine(), "started": stamp(), "every_s": args.every,
           "window_s": args.window, "runs": []}
    for spec in args.dataset:
        store, name = spec.split("=", 1)
        with engine_of(settings, store) as engine:
            log(f"{name} on {store}: reference answers before any tuning")
            refs = {id(q): dashboard.values_of(dashboard.ask(engine, name, q)) for q in paper + dashboard.QUESTIONS}
            warm_up(engine, name, paper + dashboard.QUESTIONS, args.warmup)
            run_ = {"store": store, "dataset": name, "n_size": engine.dataset(name).grid.n_size}
            for phase, questions in (("paper", paper), ("dashboard", dashboard.QUESTIONS)):
                before = probe(engine, name, questions, args.repeat)
                engine.planner.sample.take(name)  # the references and probes are no workload
                log(f"{name} on {store}: serving the {phase} questions (p50 before: {before:.3f} ms per question)")
                tuner = OnlineTuner(engine, settings.data_dir, args.every, args.min_questions,
                                    settings.tree_load_seconds).start()
                try:
                    run_[phase] = serve(engine, name, questions, [refs[id(q)] for q in questions], args.every,
                                        args.window, args.still, args.phase)
                finally:
                    tuner.stop()
                run_[phase].update(p50_before=before, p50_after=probe(engine, name, questions, args.repeat))
                log(f"{name} on {store}: {phase} p50 {before:.3f} -> {run_[phase]['p50_after']:.3f} ms per question")
            out["runs"].append(run_)
    out["references"] = []
    for spec in args.reference:
        store, name = spec.split("=", 1)
        with engine_of(settings, store) as engine:
            warm_up(engine, name, paper + dashboard.QUESTIONS, args.warmup)
            ref = {"store": store, "dataset": name, "n_size": engine.dataset(name).grid.n_size,
                   "paper": probe(engine, name, paper, args.repeat),
                   "dashboard": probe(engine, name, dashboard.QUESTIONS, args.repeat)}
            log(f"{name} on {store} (n_size {ref['n_size']}): paper {ref['paper']:.3f}, dashboard "
                f"{ref['dashboard']:.3f} ms per question")
            out["references"].append(ref)
    Path(args.out).mkdir(parents=True, exist_ok=True)
    (Path(args.out) / "online.json").write_text(json.dumps(out, indent=1) + "\n")
    return out


def report(out: dict) -> list[str]:
    """The report's lines from a run's data (what run returns)."""
    lines = [*header("The online tuner following a change of workload", out["command"], out.get("machine"),
                     out.get("started")),
             f"Online tuning every {out['every_s']:g} s, windows of {out['window_s']:g} s (one client, in process): "
             "see `python -m gridagg_loadtest.bench.online --help` for what each column measures.", "",
             "| store | n_size chosen | phase | p50 ms/question before -> after (tuner idle) | "
             "leaves read per question first -> last window | rows in them | ms/question (medians) first -> last "
             "window | tree still after | window mean within 10% of last after | leaves before -> after | answers | "
             "wrong |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in out["runs"]:
        for phase in ("paper", "dashboard"):
            p = r[phase]
            still = "never" if p["still_after_s"] is None else f"{p['still_after_s']:g} s"
            lines.append(f"| {r['store']} | {r['n_size']} | {phase} | {p['p50_before']:.3f} -> {p['p50_after']:.3f} | "
                         f"{p['first_cut']:.1f} -> {p['last_cut']:.1f} | {p['first_rows']:,.0f} -> "
                         f"{p['last_rows']:,.0f} | {p['first_ms']:.3f} -> {p['last_ms']:.3f} | {still} | "
                         f"{p['arrived_s']:g} s | {p['leaves_before']:,} -> {p['leaves_after']:,} | {p['asked']:,} | "
                         f"{p['wrong']} |")
    if out["references"]:
        lines += ["", "The same questions on datasets given an n_size (not tuned), p50 ms per question (tuner idle), "
                      "and the tuned tree's after each phase against the best of them:", "",
                  "| store | n_size | paper | dashboard |", "|---|---|---|---|"]
        for r in out["references"]:
            lines.append(f"| {r['store']} | {r['n_size']} | {r['paper']:.3f} | {r['dashboard']:.3f} |")
        for r in out["runs"]:
            refs = [x for x in out["references"] if x["store"] == r["store"]]
            if refs:
                best = {ph: min(x[ph] for x in refs) for ph in ("paper", "dashboard")}
                lines.append(f"| {r['store']} | tuned online | {r['paper']['p50_after']:.3f} "
                             f"({r['paper']['p50_after'] / best['paper']:.2f}x the best) | "
                             f"{r['dashboard']['p50_after']:.3f} "
                             f"({r['dashboard']['p50_after'] / best['dashboard']:.2f}x the best) |")
    return lines


def plot(folder: Path, out: dict) -> list[Path]:
    """Each window's mean ms per question against the seconds of its phase, per store and
    phase, in folder/windows.png (none without matplotlib)."""
    plt = pyplot()
    if plt is None or not out["runs"]:
        return []
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for ax, phase in zip(axes, ("paper", "dashboard")):
        for r in out["runs"]:
            windows = r[phase]["windows"]
            ax.plot([w["t"] for w in windows], [w["mean_ms"] for w in windows], "-", label=f"{r['store']} ({r['dataset']})")
        ax.set_title(f"{phase} questions")
        ax.set_xlabel("seconds of the phase")
        ax.set_ylabel("ms per question (window's medians)")
        ax.set_yscale("log")
        ax.legend(fontsize=7)
        ax.grid(True, which="both", alpha=0.3)
    path = folder / "windows.png"
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return [path]


def write_report(docs: Path, out: dict) -> Path:
    """The report of a run (`out`, what run returns) in folder `docs`, replacing the
    previous run's; returns its path."""
    return write(docs / REPORT, report(out), plot(fresh(docs), out))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m gridagg_loadtest.bench.online", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dataset", action="append", required=True, metavar="STORE=NAME",
                   help="a dataset loaded with `gridagg ingest` from a config without n_size, and its store "
                        "(embedded or hbase); repeatable. Its tree is changed: load it anew for each run")
    p.add_argument("--reference", action="append", default=[], metavar="STORE=NAME",
                   help="a dataset of the same archive given an n_size, probed with both workloads for comparison "
                        "(after the tuned runs); repeatable")
    p.add_argument("--every", type=float, default=10.0, help="seconds between tuning rounds (default 10)")
    p.add_argument("--min-questions", type=int, default=32, help="questions a round needs (default 32)")
    p.add_argument("--window", type=float, default=5.0, help="seconds per measured window (default 5)")
    p.add_argument("--still", type=int, default=3,
                   help="a phase ends once the tree stood still this many rounds after a change (default 3)")
    p.add_argument("--phase", type=float, default=600.0, help="most seconds per phase (default 600)")
    p.add_argument("--warmup", type=float, default=30.0, help="seconds of warm-up before the first probe (default 30)")
    p.add_argument("--repeat", type=int, default=9, help="runs per p50 of the probes (default 9)")
    p.add_argument("--boxes", type=int, default=200, help="the paper's boxes asked (default 200)")
    p.add_argument("--seed", type=int, default=1, help="seed of the paper's boxes")
    p.add_argument("--out", metavar="DIR",
                   help="where the run's data goes: online.json, every window (default <data dir>/bench/online)")
    p.add_argument("--docs", metavar="DIR",
                   help="where the report goes, README.md and windows.png, replacing the previous run's (default "
                        "docs/bench/online of the checkout; installed without a checkout: --out)")
    args = p.parse_args(argv)
    args.command_line = "python -m gridagg_loadtest.bench.online " + " ".join(sys.argv[1:] if argv is None else argv)
    settings = Settings.from_env()
    args.out = str(bench_out(settings, args.out, "online"))
    path = write_report(bench_docs(args.docs, "online", Path(args.out)), run(settings, args))
    print(path.read_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
