"""The paper's workload on the local HBase as it runs now (standalone, or with several
region servers): throughput over HTTP and the CPU each component spends per query, the
figures docs/scale-out.md's model is built on; and the answers, for comparing layouts.

    python -m gridagg_loadtest.bench.scaleout load --rows 10000000 --n-size 8000
    python -m gridagg_loadtest.bench.scaleout run --rows 10000000 --n-size 8000

`load` generates the archive (ingest/generate.py, kept in <data dir>/archives) and
bulk-loads it into dataset paper_<rows>_<n_size> unless that exists. `run` serves the
settings' servers with one API server (granian, as `gridagg serve`), warms it up, then
loads it with the bench's driver (loadtest/bench/loadgen.go: closed-loop clients, the paper's
sum and min queries) and measures the CPU of every process group per query: the API
server, the Thrift gateway, each region server (standalone: the one HBase JVM), the
master, ZooKeeper, PostgreSQL and the driver. It also answers the first --check paper
queries of each kind in process: written to --answers when the file does not exist,
else compared with it (the layout must not change an answer).

`run` writes the run's data to --out (by default <data dir>/bench/scaleout):
scaleout-<layout>.json (standalone, or 3rs for three region servers), the answers and
the servers' and driver's logs; then the report over every scaleout-*.json there, the
layouts side by side: README.md and cpu.png in --docs (by default docs/bench/scaleout of
the checkout), replacing the previous run's. Run it once per layout (`gridagg services
up`, then again with `--region-servers 3`) to compare them.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

from gridagg_hbase import jvm, launcher

from gridagg.config import Settings

from .. import hosts
from ..reports import (
    REPORT,
    bench_docs,
    bench_out,
    fresh,
    machine,
    pyplot,
    stamp,
    write,
)
from . import workload
from .archive import WEATHER
from .cpu import CpuMeter
from .driver import run_load

SEED = 3
MAX_RATE = 2000  # queries/s no run reaches here: the driver's requests file holds seconds x this many


def dataset_name(rows: int, n_size: int) -> str:
    return f"paper_{rows}_{n_size}"


def load(settings: Settings, rows: int, n_size: int, master: str, progress=print) -> str:
    """Generate the archive if needed and bulk-load it into the dataset unless it exists;
    returns the dataset's name."""
    from gridagg_ingest.generate import generate
    from gridagg_ingest.job import Progress, run_ingest, spark_session

    from gridagg.directory import GridDirectory

    name = dataset_name(rows, n_size)
    directory = GridDirectory(settings.effective_pg_url)
    try:
        if name in {d.name for d in directory.datasets()}:
            progress(f"dataset {name} exists")
            return name
    finally:
        directory.close()
    archive = settings.data_dir / "archives" / f"paper-{rows}"
    if not (archive / "done").exists():
        generate([str(WEATHER)], rows, str(archive), "parquet", 1, progress=progress)
        (archive / "done").write_text("")
    spark = spark_session(master, settings=settings)
    began = time.perf_counter()
    summary = run_ingest(spark, settings, workload.paper_config(name, n_size), [str(archive)],
                         progress=Progress(spark=spark))
    progress("\n".join(summary.lines()) + f"\n  wall {time.perf_counter() - began:.1f} s")
    return name


def _pid_of(path: Path) -> list[int]:
    try:
        return [int(path.read_text().split()[0])]
    except (OSError, ValueError, IndexError):
        return []


def groups(settings: Settings, api_pid: int) -> dict:
    """The CPU meter's process groups: the API server, and every JVM of the local HBase
    by its role (the standalone master holds the region server), and PostgreSQL."""
    from gridagg.cli.services import pg_paths

    out = {"api": lambda: [api_pid]}
    for role in launcher.running_roles(settings):
        name = {"thrift": "gateway"}.get(role, role)
        if role == "master" and not jvm.recorded_layout(settings):
            name = "hbase"  # standalone: master, region server and ZooKeeper in one JVM
        out[name] = lambda r=role: [p for p in [launcher.running_pid(settings, r)] if p]
    out["postgres"] = lambda: _pid_of(pg_paths(settings).data / "postmaster.pid")
    return out


def answers(settings: Settings, name: str, n: int) -> dict:
    """The answers to the first n paper queries of each kind (in process)."""
    from gridagg.engine import GridEngine

    with GridEngine.open(settings) as engine:
        return {agg: [engine.query(name, where, aggs).values for where in workload.paper_queries(n, SEED)]
                for agg, aggs in workload.AGGREGATES.items()}


def run(settings: Settings, name: str, clients: int, seconds: float, warmup: float, check: int,
        answers_file: Path, workdir: Path, progress=print) -> dict:
    """Measure (see the module docstring); returns the report."""
    got = answers(settings, name, check)
    if answers_file.exists():
        want = json.loads(answers_file.read_text())
        same = {agg: sum(a == b for a, b in zip(got[agg], want[agg])) for agg in got}
        equal = {"compared_with": str(answers_file), "queries": {agg: len(v) for agg, v in got.items()},
                 "equal": same, "all_equal": all(same[agg] == len(got[agg]) == len(want[agg]) for agg in got)}
    else:
        answers_file.write_text(json.dumps(got))
        equal = {"recorded_in": str(answers_file), "queries": {agg: len(v) for agg, v in got.items()}}
    progress(f"answers: {equal}")
    report = {"machine": machine(), "started": stamp(), "dataset": name, "region_servers": region_servers(settings),
              "heap": settings.hbase_heap, "clients": clients, "answers": equal, "runs": {}}
    host = hosts.start(settings.with_(read_token=None), "scaleout-api", workdir, workers=2, threads=4)
    try:
        meter = CpuMeter(groups(settings, host.proc.pid))
        for agg in ("sum", "min"):
            # Warm up until the JITs have compiled the hot paths (the rate stops rising).
            rates = []
            while True:
                res = run_load(settings, host.url, name, agg, clients, int(MAX_RATE * warmup), warmup,
                               SEED + len(rates), workdir, f"warmup-{agg}-{len(rates)}", meter)
                rates.append(res["rps"])
                progress(f"  warm-up {agg}: {res['rps']} queries/s")
                if len(rates) >= 3 and rates[-1] < 1.05 * max(rates[:-1]):
                    break
            res = run_load(settings, host.url, name, agg, clients, int(MAX_RATE * seconds), seconds, SEED, workdir,
                           f"run-{agg}", meter)
            progress(f"{agg}: {res['rps']} queries/s, p50 {res['p50_ms']} ms; CPU ms/query "
                     + ", ".join(f"{k[4:-3]} {v}" for k, v in res.items() if k.startswith("cpu_")))
            report["runs"][agg] = {**res, "warmup_rps": rates}
    finally:
        host.stop()
    return report


def region_servers(settings: Settings) -> int:
    """The local HBase's region servers (0: standalone, one JVM)."""
    return jvm.recorded_layout(settings) or 0


def layout(servers: int) -> str:
    """A layout's name in file names: standalone, or <N>rs."""
    return f"{servers}rs" if servers else "standalone"


def layout_title(servers: int) -> str:
    """A layout as the report names it."""
    return f"{servers} region servers" if servers else "standalone (one HBase JVM)"


def cpu_groups(runs: list[dict]) -> list[str]:
    """The process groups whose CPU the runs counted (groups: the API server, each JVM of
    HBase by role, PostgreSQL, the driver), in the order first met; the whole machine
    apart."""
    keys = [k for r in runs for run in r["runs"].values() for k in run if k.startswith("cpu_") and k != "cpu_machine_ms"]
    return [k[4:-3] for k in dict.fromkeys(keys)]


def report(runs: list[dict]) -> list[str]:
    """The report's lines: each layout's run (scaleout-*.json) and the layouts side by side."""
    names = [layout_title(r["region_servers"]) for r in runs]
    lines = ["# The paper's workload on the local HBase, by layout", "",
             "`python -m gridagg_loadtest.bench.scaleout run` once per layout (see its --help): one API server (2 "
             "workers x 4 threads) and the bench's driver, closed-loop clients, each run after warm-up runs until "
             "its rate stopped rising; CPU as ms per query of each process group. docs/scale-out.md builds its "
             "model on these figures.", ""]
    for name, r in zip(names, runs):
        a = r["answers"]
        said = (f"{sum(a['equal'].values())} of {sum(a['queries'].values())} equal to the recorded ones"
                if "equal" in a else f"{sum(a['queries'].values())} recorded for the other layouts")
        lines += [f"## {name}", "", f"Command: `{r['command']}`", "", f"Machine: {r.get('machine') or 'not recorded'}",
                  "", f"Date: {r.get('started') or 'not recorded'}", "",
                  f"Dataset {r['dataset']}, {r['region_servers'] or 'no separate'} region servers, HBase heap "
                  f"{r['heap']}, {r['clients']} clients; answers to the check queries: {said}.", ""]
    lines += ["## Side by side", "", "| aggregate | figure | " + " | ".join(names) + " |", "|---|---|" + "---|" * len(names)]
    for agg in ("sum", "min"):
        rows = {"queries/s": "rps", "p50 ms": "p50_ms", "p99 ms": "p99_ms",
                **{f"CPU ms/query, {g}": f"cpu_{g}_ms" for g in (*cpu_groups(runs), "machine")}}
        for label, key in rows.items():
            cells = [r["runs"][agg].get(key) for r in runs]
            if any(c is not None for c in cells):
                lines.append(f"| {agg} | {label} | " + " | ".join("-" if c is None else f"{c:g}" for c in cells) + " |")
    return lines


def plot(folder: Path, runs: list[dict]) -> list[Path]:
    """CPU ms per query by process group, stacked, per layout and aggregate, in
    folder/cpu.png (none without matplotlib)."""
    plt = pyplot()
    if plt is None or not runs:
        return []
    bars = [(f"{layout_title(r['region_servers']).split(' (')[0]}\n{agg}", r["runs"][agg])
            for r in runs for agg in ("sum", "min")]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    bottom = [0.0] * len(bars)
    for group in cpu_groups(runs):
        values = [run.get(f"cpu_{group}_ms", 0.0) for _, run in bars]
        if any(values):
            ax.bar([label for label, _ in bars], values, bottom=bottom, label=group)
            bottom = [b + v for b, v in zip(bottom, values)]
    ax.set_ylabel("CPU ms per query")
    ax.legend(fontsize=7)
    ax.grid(True, axis="y", alpha=0.3)
    path = folder / "cpu.png"
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return [path]


def write_report(out: Path, docs: Path) -> Path:
    """The report over every scaleout-*.json in `out`, in folder `docs` (replacing the
    previous run's); returns its path."""
    runs = sorted((json.loads(p.read_text()) for p in out.glob("scaleout-*.json")), key=lambda r: r["region_servers"])
    return write(docs / REPORT, report(runs), plot(fresh(docs), runs))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m gridagg_loadtest.bench.scaleout", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="action", required=True)
    for action in ("load", "run"):
        p = sub.add_parser(action)
        p.add_argument("--rows", type=int, default=10_000_000, help="rows of the archive (default 10M)")
        p.add_argument("--n-size", type=int, default=8000, help="N_size of the dataset (default 8000)")
        if action == "load":
            p.add_argument("--master", default="local[*]", help="Spark master (default local[*])")
        else:
            p.add_argument("--clients", type=int, default=32, help="closed-loop clients (default 32)")
            p.add_argument("--seconds", type=float, default=60, help="seconds of each measured run (default 60)")
            p.add_argument("--warmup", type=float, default=20, help="seconds of each warm-up run (default 20)")
            p.add_argument("--check", type=int, default=200, help="queries of each kind whose answers are compared")
            p.add_argument("--answers", type=Path,
                           help="answers to compare with, written if absent (default --out/answers-ROWS-NSIZE.json)")
            p.add_argument("--out", metavar="DIR",
                           help="where the run's data goes: scaleout-<layout>.json, the answers, the logs (default "
                                "<data dir>/bench/scaleout); the report covers every scaleout-*.json there")
            p.add_argument("--docs", metavar="DIR",
                           help="where the report goes, README.md and cpu.png, replacing the previous run's (default "
                                "docs/bench/scaleout of the checkout; installed without a checkout: --out)")
    args = ap.parse_args(argv)
    settings = Settings.from_env().with_(store="hbase")
    say = lambda m: print(m, file=sys.stderr, flush=True)  # noqa: E731
    name = dataset_name(args.rows, args.n_size)
    if args.action == "load":
        load(settings, args.rows, args.n_size, args.master, say)
        return 0
    out = bench_out(settings, args.out, "scaleout")
    here = layout(region_servers(settings))
    workdir = out / f"work-{here}"  # the API server's board and log, the driver's files: this run's alone
    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True)
    answers_file = args.answers or out / f"answers-{args.rows}-{args.n_size}.json"
    result = run(settings, name, args.clients, args.seconds, args.warmup, args.check, answers_file, workdir, say)
    command = "python -m gridagg_loadtest.bench.scaleout " + " ".join(argv if argv is not None else sys.argv[1:])
    text = json.dumps({"command": command, **result}, indent=2)
    print(text)
    (out / f"scaleout-{here}.json").write_text(text + "\n")
    say(f"report: {write_report(out, bench_docs(args.docs, 'scaleout', out))}")
    return 0 if result["answers"].get("all_equal", True) else 1


if __name__ == "__main__":
    sys.exit(main())
