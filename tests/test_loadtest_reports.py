"""The load tools' reports (pure, no servers): each run replaces its bench's or soak's one
current report, which names the command, the machine and the date, and the writers
render a run's data as the commands do; every command docs/benchmarks.md shows takes the
flags it is shown with."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from gridagg_loadtest import reports
from gridagg_loadtest.bench import ingest, online, scaleout
from gridagg_loadtest.soak import visibility
from gridagg_loadtest.soak.report import SoakReport


def test_a_new_report_replaces_the_previous_runs_and_nothing_else(tmp_path):
    folder = tmp_path / "bench"
    folder.mkdir()
    for name in ("README.md", "old_plot.png", "notes.txt"):
        (folder / name).write_text("old")
    assert reports.fresh(folder) == folder
    assert [p.name for p in folder.iterdir()] == ["notes.txt"]
    (folder / "p50.png").write_bytes(b"png")
    path = reports.write(folder / reports.REPORT, reports.header("A bench", "cmd --x", "a machine", None),
                         [folder / "p50.png"])
    text = path.read_text()
    assert text.startswith("# A bench\n\nCommand: `cmd --x`\n\nMachine: a machine\n\nDate: not recorded\n")
    assert text.endswith("## Plots\n\n![p50](p50.png)\n")


def test_the_default_places_are_the_checkouts_docs_and_the_data_dir(settings, tmp_path):
    assert reports.bench_out(settings, None, "scale") == settings.data_dir / "bench" / "scale"
    assert reports.bench_docs(None, "scale", tmp_path) == reports.CHECKOUT / "docs" / "bench" / "scale"
    assert reports.bench_docs(str(tmp_path / "d"), "scale", tmp_path) == tmp_path / "d"
    assert reports.soak_report(settings, None, "hbase-3rs") == reports.CHECKOUT / "docs" / "soak" / "hbase-3rs.md"
    line = reports.machine()
    assert "CPUs (" in line and "GiB RAM" in line


def _soak(**changes) -> SoakReport:
    fields = dict(store="hbase", seconds=60, writers=2, readers=2, inserts=500, inserts_per_s=8.3, queries=900,
                  queries_per_s=15, splits=12, answers_checked=900, wrong_answers=0, final_exact=True,
                  check_problems=[], batches={"acked": 20, "maybe": 1, "maybe_in": 1, "maybe_out": 0},
                  requests={"acks": 20, "failed": 3, "retries": 3, "unclear_errors": 0, "hung_clients": []},
                  nemesis={"by_kind": {"pg": {"n": 2, "unavailable": {"n": 2, "min": 2.0, "median": 3.0, "max": 4.0},
                                              "recovery": {"n": 0}, "failed": 3, "hung": 0, "longest": 4.2}}})
    return SoakReport(**{**fields, **changes})


def test_the_soaks_report_says_its_verdict_and_what_each_fault_cost():
    text = "\n".join(_soak().markdown("python -m gridagg_loadtest.soak --nemesis pg", "m", "2030-01-01 10:00:00"))
    assert "Command: `python -m gridagg_loadtest.soak --nemesis pg`" in text and "Date: 2030-01-01 10:00:00" in text
    assert "faults injected: 2 pg." in text and "Verdict: every target held." in text
    assert "| pg | 2 | 2.0 / 3.0 / 4.0 | - | 3 | 0 | 4.2 |" in text
    missed = "\n".join(_soak(wrong_answers=2, final_exact=False).markdown("c", None, None))
    assert "Verdict: targets missed: wrong answers 2; final queries not exact." in missed
    assert "Machine: not recorded" in missed


def test_the_visibility_report_gives_the_lags():
    text = "\n".join(visibility.markdown({"command": "c", "store": "hbase", "hosts": 2, "writes": 3, "queries": 4,
                                          "stale_answers": 1, "violations": 0,
                                          "lag_ms": {"p50": 9.0, "p90": 20.0, "p99": 30.0, "max": 40.0, "mean": 12.0}}))
    assert "| 3 | 4 | 1 | 0 | 9.0 | 20.0 | 30.0 | 40.0 | 12.0 |" in text


def _scaleout(servers: int, rps: float, groups: dict) -> dict:
    runs = {agg: {"rps": rps, "p50_ms": 5.0, "p99_ms": 9.0, **{f"cpu_{g}_ms": v for g, v in groups.items()},
                  "cpu_machine_ms": 2.0} for agg in ("sum", "min")}
    return {"command": f"run {servers}", "dataset": "paper_1_8000", "region_servers": servers, "heap": "1g",
            "clients": 32, "answers": {"queries": {"sum": 2, "min": 2}, "equal": {"sum": 2, "min": 2}}, "runs": runs}


def test_the_scaleout_report_puts_the_layouts_side_by_side():
    runs = [_scaleout(0, 900.0, {"api": 0.7, "hbase": 0.5}), _scaleout(3, 1000.0, {"api": 0.6, "rs1": 0.2})]
    text = "\n".join(scaleout.report(runs))
    assert "## standalone (one HBase JVM)" in text and "## 3 region servers" in text
    assert "4 of 4 equal to the recorded ones" in text
    assert "| sum | queries/s | 900 | 1000 |" in text and "| min | CPU ms/query, rs1 | - | 0.2 |" in text
    assert scaleout.cpu_groups(runs) == ["api", "hbase", "rs1"]


def test_the_online_report_tables_each_phase():
    phase = {"p50_before": 1.0, "p50_after": 0.5, "first_cut": 10.0, "last_cut": 5.0, "first_rows": 100.0,
             "last_rows": 90.0, "first_ms": 1.2, "last_ms": 0.6, "still_after_s": None, "arrived_s": 15.0,
             "leaves_before": 100, "leaves_after": 80, "asked": 1000, "wrong": 0,
             "windows": [{"t": 5.0, "mean_ms": 1.2}, {"t": 10.0, "mean_ms": 0.6}]}
    out = {"command": "c", "every_s": 10.0, "window_s": 5.0, "references": [],
           "runs": [{"store": "embedded", "dataset": "d", "n_size": 4000, "paper": phase, "dashboard": phase}]}
    text = "\n".join(online.report(out))
    assert "| embedded | 4000 | paper | 1.000 -> 0.500 | 10.0 -> 5.0 | 100 -> 90 | 1.200 -> 0.600 | never |" in text


def test_the_ingest_report_holds_the_table_and_the_spark_start():
    meta = {"command": "c", "machine": "m", "started": "s", "config": "x.toml", "inputs": ["/a"]}
    text = "\n".join(ingest.report(meta, {"results": [("gridagg ingest", 1000, 2.0)], "session_start": 3.0,
                                          "workers_start": 1.5}))
    assert "Config x.toml, inputs /a" in text and "|        500 |" in text and "took 3.0 s" in text


DOC = Path(__file__).resolve().parents[1] / "docs" / "benchmarks.md"
SUBCOMMANDS = {"gridagg": 1, "python -m gridagg_loadtest.bench.scaleout": 1}  # words naming a subcommand


def _doc_commands() -> list[tuple[list[str], list[str]]]:
    """(the program's argv, the flags given) of every command docs/benchmarks.md shows:
    in its bash blocks, and the load tools' in backquotes."""
    text = DOC.read_text()
    lines = [line for block in re.findall(r"```bash\n(.*?)```", text, re.S)
             for line in block.replace("\\\n", " ").splitlines()]
    out = []
    for line in [*lines, *re.findall(r"`(python -m gridagg_loadtest[^`]*)`", text)]:
        for command in line.split("#")[0].split(";"):
            words = [w for w in command.split() if not re.fullmatch(r"[A-Z_]+=\S+", w)]
            if not words:
                continue
            prog = words[:3] if words[0] == "python" else words[:1]
            rest = words[len(prog):]
            more = SUBCOMMANDS.get(" ".join(prog), 0) + (words[:2] == ["gridagg", "services"])
            out.append(([*prog, *rest[:more]], [w for w in rest if w.startswith("--")]))
    return out


def test_every_command_the_benchmarks_page_shows_takes_its_flags():
    commands = _doc_commands()
    assert len(commands) >= 15, "has the page's format changed?"
    helps: dict[tuple, str] = {}
    for argv, flags in commands:
        key = tuple(argv)
        if key not in helps:
            run = [sys.executable, *argv[1:]] if argv[0] == "python" else [sys.executable, "-m", "gridagg.cli.main",
                                                                              *argv[1:]]
            done = subprocess.run([*run, "--help"], capture_output=True, text=True, timeout=120)
            assert done.returncode == 0, (argv, done.stderr[-500:])
            helps[key] = done.stdout
        assert [f for f in flags if f not in helps[key]] == [], argv
