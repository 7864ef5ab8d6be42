"""A small-scale run of `gridagg bench`: the harness works end to end (archive, loads,
settings trials, the servers, the load driver, report) and gridagg and every peer give
the same answers; the load driver's counting rule and the fair settings, small. No
timing assertions."""

from __future__ import annotations

import argparse
import csv
import http.server
import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from gridagg_loadtest.bench import (
    archive,
    cpu,
    driver,
    paper,
    report,
    runs,
    scale,
    systems,
    tuning,
    workload,
)
from gridagg_loadtest.bench.paper import PAPER_SWEEP
from gridagg_loadtest.bench.servers import Shape
from gridagg_loadtest.cli import register
from gridagg_loadtest.peers import KINDS

ROOT = Path(__file__).resolve().parents[1]
WEATHER = ROOT.parent / "shared" / "data" / "weather"


def test_bench_cli_parses_and_defaults_follow_the_paper():
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    args = parser.parse_args(["bench"])
    # The paper's sweep, then two larger sizes (reported apart from the paper's best);
    # --dashboard without --nsize loads the N_size gridagg chooses.
    assert args.nsize is None
    assert PAPER_SWEEP == [50, 125, 250, 500, 1000, 2000, 4000, 8000, 16000, 32000]
    assert max(n for n in PAPER_SWEEP if n <= report.PAPER_MAX_NSIZE) == 8000
    assert args.clients == [1, 8, 32, 96]
    assert args.peers == ["pg", "hbase", "duckdb", "clickhouse"] == list(KINDS)
    assert max(s.concurrency for s in args.shapes) == 8 and Shape(2, 1) in args.shapes
    with pytest.raises(SystemExit):
        parser.parse_args(["bench", "--shapes", "2x4", "eight"])
    assert callable(args.func)


def test_every_system_is_offered_the_same_shapes_and_tries_its_own_knobs():
    assert Shape.parse("2x4") == Shape(2, 4) and str(Shape(8, 1)) == "8x1"
    for bad in ("2", "x4", "2x0", "twoxfour"):
        with pytest.raises(ValueError, match="WORKERSxTHREADS"):
            Shape.parse(bad)
    shapes = [Shape(2, 4), Shape(8, 1)]
    grid = systems.System("gridagg-embedded N=50", "d", "gridagg", "embedded", 50)
    duck = systems.System("DuckDB", "d", "duckdb")
    pg = systems.System("PostgreSQL alone", "d", "pg")
    assert [str(s) for s in tuning.candidates(grid, shapes)] == ["2x4 (workers x threads)", "8x1 (workers x threads)"]
    assert [(str(s.shape), s.knobs) for s in tuning.candidates(duck, shapes)] == [
        ("2x4", (("threads", 2),)), ("2x4", (("threads", 1),)), ("8x1", (("threads", 2),)), ("8x1", (("threads", 1),))]
    assert {s.knobs for s in tuning.candidates(pg, shapes)} == {(("parallel", 2),), (("parallel", 0),)}
    trials = [{"setting": s, "rps": r} for s, r in zip(tuning.candidates(duck, shapes), [5.0, 9.0, 9.0, 1.0])]
    assert tuning.best(trials) is trials[1]["setting"]  # the fastest; the first of equals
    assert grid.query_path == "/v1/datasets/d/query" and grid.app == "gridagg_api.wsgi:app"
    assert duck.query_path == "/bench/peers/duckdb/d/query" and duck.app == "gridagg_loadtest.peers.wsgi:app"


class _Ready:
    """A server stand-in: it only records being stopped."""

    stopped = 0

    def stop(self):
        self.stopped += 1


class _TurnTaking(runs.Bench):
    """A Bench whose systems are ready at once and whose runs answer at given rates."""

    def __init__(self, args, rates: dict[str, list[float]]):
        self.args, self.serving, self.rates, self.turns, self.ready = args, [], rates, [], []

    def prepare(self, system, shapes, check):
        system.stats["setting"] = "1x1 (workers x threads)"
        self.ready.append(_Ready())
        return self.ready[-1]

    def load(self, server, system, agg, clients, seconds, seed, tag, answers=None):
        self.turns.append((system.label, tag))
        return {"rps": 1.0 if "warmup" in tag else self.rates[system.label].pop(0), "p50_ms": 1.0, "p99_ms": 2.0, "requests": 10,
                "ramp_answers": 0, "failures": 0}


def test_served_systems_take_turns_and_each_reports_its_median_round():
    """Every system serves at once; each round runs them all, begun by the next one, so
    that a drifting machine's minutes are shared alike; a system's figure is its median
    round, every round's rate kept beside it; each system warms up right before its
    first recorded run of an aggregate; no server outlives the measuring."""
    args = argparse.Namespace(aggs=["sum"], clients=[4, 8], rounds=3, seconds=1, seed=1, warmup_runs=1,
                              warmup_seconds=1, requests=10)
    rates = {"a": [5.0, 9.0, 7.0, 1, 1, 1], "b": [1.0, 3.0, 2.0, 1, 1, 1], "c": [4.0, 4.0, 8.0, 1, 1, 1]}
    measured = [systems.System(label, "d", "duckdb") for label in rates]
    bench = _TurnTaking(args, {k: list(v) for k, v in rates.items()})
    out = bench.measure(measured, [Shape(1, 1)], [])
    assert bench.turns[:6] == [("a", "sum_warmup1"), ("a", "sum_c4_round1"), ("b", "sum_warmup1"),
                               ("b", "sum_c4_round1"), ("c", "sum_warmup1"), ("c", "sum_c4_round1")]
    recorded = [(label, tag) for label, tag in bench.turns if "warmup" not in tag]
    assert [label for label, _ in recorded] == ["a", "b", "c", "b", "c", "a", "c", "a", "b"] * 2
    assert [tag for _, tag in recorded][:9:3] == ["sum_c4_round1", "sum_c4_round2", "sum_c4_round3"]
    assert len(bench.turns) == len(recorded) + 3 and all(s.stats["warmups"] == {"sum": [1.0]} for s in measured)
    out = out[:3]
    assert [(r["system"], r["rps"]) for r in out] == [("a", 7.0), ("b", 2.0), ("c", 4.0)]
    assert [r["round_rps"] for r in out] == [v[:3] for v in rates.values()]  # in the order of the rounds
    assert all(server.stopped for server in bench.ready) and bench.serving == []


def test_workload_is_the_papers():
    qs = workload.paper_queries(20, 3)
    assert len(qs) == 20 and qs == workload.paper_queries(20, 3)
    for w in qs:
        assert set(w) == {"time", "temperature", "humidity", "illuminance"}


def test_the_paper_data_space_holds_every_generated_row(tmp_path):
    """What the bench generates fits loadtest/bench/paper.toml, and the workload's windows lie
    inside its time domain."""
    from datetime import datetime

    import pandas as pd
    from gridagg_ingest.encode import encode_value
    from gridagg_ingest.generate import generate

    from gridagg.model.schema import parse_timestamp

    files = generate([str(archive.WEATHER)], 20_000, str(tmp_path), "parquet", seed=1, stations=10)
    df = pd.concat(pd.read_parquet(p) for p in files)
    cfg = workload.paper_config("paper", 50)
    for col, src in zip(cfg.dataset.columns, cfg.sources):
        for v in df[src.source].astype(str).tolist():
            assert encode_value(col, src, v)[1] is None
    time_dim = cfg.dataset.dimensions[0]
    for w in workload.paper_queries(200, 5):
        start, end = (datetime.fromisoformat(t) for t in w["time"])
        assert time_dim.epoch <= start and end <= parse_timestamp(time_dim.hi, "max")


def test_small_bench_runs_and_all_systems_agree(settings, services, tmp_path, unique_name):
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    args = parser.parse_args([
        "bench", "--rows", "50000", "--stations", "20", "--nsize", "50", "500", "--clients", "1", "4",
        "--requests", "60", "--seconds", "2", "--rounds", "2", "--warmup", "1", "--warmup-runs", "2",
        "--warmup-seconds", "1",
        "--stat-queries", "5", "--check-queries", "4", "--stores", "embedded", "hbase", "--shapes", "2x2",
        "--tune-seconds", "1", "--pg-shared-buffers", "keep", "--prefix", unique_name, "--out", str(tmp_path / "run"),
        "--docs", str(tmp_path / "docs")])
    args.command_line = "gridagg bench (test)"
    result = paper.run(settings, args)
    assert result["disagreements"] == []
    by_label = {s.label: s for s in result["systems"]}
    assert {"PostgreSQL alone", "HBase alone", "DuckDB", "ClickHouse (chDB)"} <= set(by_label) and len(by_label) == 8
    assert len(result["runs"]) == 8 * 2 * 2 and all(len(r["round_rps"]) == 2 for r in result["runs"])
    for r in result["runs"]:
        assert r["failures"] == 0, r
        assert r["requests"] > 0, r
        assert min(r[f"cpu_{g}_ms"] for g in runs.CPU_GROUPS) >= 0, r
    # Where the CPU went (sampled at the kernel's clock ticks: summed over the runs).
    assert sum(r["cpu_api_ms"] for r in result["runs"]) > 0
    # Each peer with knobs tried each value at the one shape; gridagg and HBase alone had nothing to try.
    assert [str(t["setting"]) for t in by_label["DuckDB"].stats["trials"]] == [
        "2x2 (workers x threads), threads 2", "2x2 (workers x threads), threads 1"]
    assert len(by_label["PostgreSQL alone"].stats["trials"]) == 2 and by_label["HBase alone"].stats["trials"] == []
    assert by_label["PostgreSQL alone"].stats["prepared"]["index"]
    out, docs = tmp_path / "run", tmp_path / "docs"
    assert result["report"] == docs / "README.md"
    text = (docs / "README.md").read_text()
    assert text.startswith("# gridagg bench") and "Command: `gridagg bench (test)`" in text and "CPUs (" in text
    assert "gridagg / PostgreSQL alone" in text and "gridagg / ClickHouse (chDB)" in text and "Measured selectivity" in text
    assert "| gridagg-hbase |" in text and "| gridagg-embedded |" in text  # a ratio row per store
    assert "In-process: gridagg's planner vs the in-process peers" in text and "Where the CPU goes" in text
    assert "| ClickHouse (chDB), 1 thread |" in text and "| DuckDB, 2 threads |" in text
    assert "run 2 times per system, the systems taking turns" in text
    assert driver.COUNTING in text and "EXPLAIN (ANALYZE, BUFFERS)" in text and "Execution Time" in text
    assert "| DuckDB | 2x2 (workers x threads), threads " in text.split("## Settings")[1]
    assert "| gridagg-hbase N=50 | sum | " in text.split("## Warm-up")[1]  # each system's warm-up rates
    for name in ("runs.csv", "load.csv", "table3.csv"):
        assert (out / name).exists(), name
    assert sorted(p.name for p in docs.iterdir()) == ["README.md", "throughput_min.png", "throughput_sum.png",
                                                      "throughput_vs_nsize.png"]
    assert "![throughput_sum](throughput_sum.png)" in text
    with open(out / "runs.csv") as f:
        assert len(list(csv.DictReader(f))) == len(result["runs"])


def test_small_dashboard_bench_asks_gridagg_and_the_in_process_peers(settings, services, tmp_path, unique_name):
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    args = parser.parse_args([
        "bench", "--dashboard", "--rows", "30000", "--stations", "30", "--nsize", "200", "--stores", "embedded",
        "--repeat", "1", "--shapes", "1x1", "--prefix", unique_name, "--out", str(tmp_path / "run"),
        "--docs", str(tmp_path / "docs")])
    args.command_line = "gridagg bench --dashboard (test)"
    result = paper.run(settings, args)
    assert result["disagreements"] == []
    text = (tmp_path / "docs" / "README.md").read_text()
    assert (tmp_path / "docs" / "dashboard.png").exists() and "![dashboard](dashboard.png)" in text
    for peer in ("DuckDB, 1 thread", "DuckDB, 2 threads", "ClickHouse (chDB), 1 thread", "ClickHouse (chDB), 2 threads"):
        assert f"| {peer} (ms) |" in text
    assert text.count("| equal |") == 8 and "gridagg / best peer" in text


def test_small_scale_bench_serves_gridagg_beside_the_peers(settings, services, tmp_path, unique_name, monkeypatch):
    """`python -m gridagg_loadtest.bench.scale` on a small generated archive loaded by `gridagg
    ingest`: with --tune the tree first adapted to the workload in place; every question
    answered alike by gridagg and DuckDB, and with --clients the paper's boxes served and
    driven for each and for PostgreSQL alone (served only, with its index trials and plan
    in the report), min and sum, without a failure."""
    from gridagg_ingest.generate import generate

    from gridagg.engine import GridEngine

    generate([str(WEATHER)], 20000, str(tmp_path / "archive"), "parquet", seed=2, stations=10)
    example = (ROOT / "ingest" / "examples" / "weather_generated.toml").read_text()
    config = tmp_path / "net.toml"
    config.write_text(example.replace('name = "weather_gen"', f'name = "{unique_name}"')
                      .replace("n_size = 1000", "n_size = 200").replace('format = "csv"', 'format = "parquet"'))
    loaded = subprocess.run([sys.executable, "-m", "gridagg.cli.main", "ingest", str(config), str(tmp_path / "archive")],
                            capture_output=True, text=True, timeout=600)
    assert loaded.returncode == 0, loaded.stderr[-2000:]
    out = tmp_path / "scale"
    # Merged leaves split anew 10 s after the merge, not 2 minutes (queries here take milliseconds).
    monkeypatch.setenv("GRIDAGG_MAX_QUERY_SECONDS", "5")
    try:
        scale.main(["--archive", str(tmp_path / "archive"), "--config", str(config), "--dataset",
                    f"embedded={unique_name}", "--peers", "duckdb", "pg", "--pg-shared-buffers", "keep", "--repeat", "1",
                    "--tune", "20", "--tune-minutes", "10", "--clients", "2", "--rounds", "2",
                    "--shapes", "1x1", "--seconds", "1", "--warmup-runs", "1", "--out", str(out),
                    "--docs", str(tmp_path / "docs")])
    finally:
        with GridEngine.open(settings) as engine:
            engine.drop_dataset(unique_name)
    result = json.loads((out / "scale-20000.json").read_text())
    assert result["tuning"]["embedded"]["questions"] >= 20  # 20 boxes and the dashboard's (not those rollups answer)
    assert all(m["agree"] for m in result["systems"]["embedded"])
    assert result["disagreements"] == []
    served = {(r["system"], r["agg"]) for r in result["served"]}
    assert served == {(s, a) for s in ("gridagg-embedded", "DuckDB", "PostgreSQL alone") for a in ("min", "sum")}
    assert set(result["systems"]["embedded"][0]["peers"]) == {"DuckDB, 1 thread", "DuckDB, 2 threads"}
    assert all(r["failures"] == 0 and r["requests"] > 0 for r in result["served"]), result["served"]
    text = (tmp_path / "docs" / "README.md").read_text()
    assert (tmp_path / "docs" / "p50.png").exists() and "## 20,000 rows" in text and "Machine: " in text
    assert "tuned first (--tune): " in text
    assert "the median of 2 rounds, the systems taking turns" in text
    assert "| sum | 2 | " in text and "gridagg-embedded / DuckDB" in text and "gridagg-embedded / PostgreSQL alone" in text
    assert "PostgreSQL alone: the index kept" in text and "EXPLAIN (ANALYZE, BUFFERS)" in text and "Index" in text


def test_bytes_on_disk_count_nothing_for_a_file_removed_during_the_walk(tmp_path, monkeypatch):
    """ClickHouse merges parts while the bench sums its directory: a file that vanishes
    between the listing and its stat counts nothing, the rest are counted."""
    (tmp_path / "part").mkdir()
    (tmp_path / "part" / "kept.bin").write_bytes(b"x" * 10)
    (tmp_path / "part" / "merged.bin").write_bytes(b"y" * 5)
    stat = scale.os.stat

    def merged_away(path, *args, **kwargs):
        if str(path).endswith("merged.bin"):
            raise FileNotFoundError(path)
        return stat(path, *args, **kwargs)

    monkeypatch.setattr(scale.os, "stat", merged_away)
    assert scale.disk_bytes(tmp_path) == 10


def test_scale_refuses_a_cap_on_tuning_it_was_not_asked_for(capsys):
    with pytest.raises(SystemExit) as exc:
        scale.main(["--archive", "a", "--config", "c.toml", "--dataset", "embedded=x", "--tune-minutes", "5"])
    assert exc.value.code == 2 and "give --tune too" in capsys.readouterr().err


class _Recorder(http.server.BaseHTTPRequestHandler):
    """Answers 200 to POST /ok/... (after a second to POST /ok/slow/...), 503 to anything
    else, and keeps every request it got: (client port, path, content type, body)."""

    bodies: list = []
    protocol_version = "HTTP/1.1"  # keep-alive, as granian

    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.bodies.append((self.client_address[1], self.path, self.headers["Content-Type"], json.loads(body)))
        if self.path.startswith("/ok/slow/"):
            time.sleep(1)
        status = 200 if self.path.startswith("/ok/") else 503
        self.send_response(status)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, *_):
        pass


@pytest.fixture
def recorder():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    server.daemon_threads = True
    _Recorder.bodies = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", _Recorder.bodies
    server.shutdown()


def _drive(settings, url, lines, tmp_path, *flags):
    requests = tmp_path / "requests.txt"
    requests.write_text("".join(f"{path}\t{json.dumps(body)}\n" for path, body in lines))
    proc = subprocess.run([str(driver.binary(settings)), "-url", url, "-requests", str(requests),
                           "-result", str(tmp_path / "result.json"), *flags], capture_output=True, text=True,
                          timeout=120)
    return proc, (json.loads((tmp_path / "result.json").read_text()) if proc.returncode == 0 else None)


def test_the_load_driver_sends_each_clients_lines_and_counts_failures(settings, recorder, tmp_path):
    url, bodies = recorder
    lines = [(f"/{'ok' if i % 4 else 'bad'}/q", {"i": i}) for i in range(12)]
    proc, res = _drive(settings, url, lines, tmp_path, "-clients", "3", "-max", "30", "-seconds", "20",
                       "-ramp", "0")
    assert proc.returncode == 0, proc.stderr
    # 30 answers counted; requests on the way when the 30th came are answered, not counted.
    assert res["requests"] == 30 and res["sent"] == len(bodies) == 30 + res["late_answers"] <= 30 + 2
    # Each client (a keep-alive connection) sends lines c, c+3, c+6, ..., wrapping around.
    sent_by: dict[int, list[int]] = {}
    for port, _, _, body in bodies:
        sent_by.setdefault(port, []).append(body["i"])
    assert len(sent_by) == 3
    assert sorted(seq[0] for seq in sent_by.values()) == [0, 1, 2]
    for seq in sent_by.values():
        assert seq == [(seq[0] + 3 * k) % 12 for k in range(len(seq))]
    assert {t for _, _, t, _ in bodies} == {"application/json"}
    assert res["failures"] == sum(1 for _, p, _, _ in bodies if p.startswith("/bad/")) > 0
    assert "HTTP 503" in proc.stderr
    assert 0 < res["p50_ms"] <= res["p95_ms"] <= res["p99_ms"] and res["rps"] > 0


def test_the_load_driver_stops_at_its_time_and_counts_the_answers_of_its_window(settings, recorder, tmp_path):
    url, bodies = recorder
    proc, res = _drive(settings, url, [("/ok/q", {"i": 0})], tmp_path, "-clients", "2", "-max", "100000000",
                       "-seconds", "1.5", "-ramp", "0.5")
    assert proc.returncode == 0, proc.stderr
    assert res["failures"] == 0 and 0 < res["requests"] < res["sent"] == len(bodies)
    assert res["seconds"] == pytest.approx(1.0)  # the window: from the ramp's end to the run's time


def test_the_load_driver_counts_every_answer_inside_its_window_whenever_sent(settings, recorder, tmp_path):
    """The fair-count rule. Answers take a second; 4 clients start over 0.2 s, the window
    is 0.2..2.6 s: the ramp's 4 requests are answered at 1.0-1.15 s and the next 4 at
    2.0-2.15, inside it and counted (4 of them sent during the ramp); the 4 sent then
    are answered after it and not counted."""
    url, bodies = recorder
    proc, res = _drive(settings, url, [("/ok/slow/q", {"i": 0})], tmp_path, "-clients", "4", "-max", "1000",
                       "-seconds", "2.6", "-ramp", "0.2")
    assert proc.returncode == 0, proc.stderr
    assert (res["sent"], res["requests"], res["ramp_answers"], res["late_answers"]) == (12, 8, 4, 4), res
    assert res["rps"] == pytest.approx(8 / 2.4) and res["p50_ms"] >= 1000


def test_the_load_drivers_budget_closes_its_window(settings, recorder, tmp_path):
    # Fast answers: the window closes at the 5th answer counted; none after it counts.
    url, bodies = recorder
    proc, res = _drive(settings, url, [("/ok/q", {"i": 0})], tmp_path, "-clients", "4", "-max", "5",
                       "-seconds", "20", "-ramp", "0.4")
    assert proc.returncode == 0, proc.stderr
    assert res["requests"] == 5 and res["sent"] == len(bodies) > 5 and res["seconds"] < 5


def test_the_load_driver_refuses_other_hosts_and_bad_request_files(settings, tmp_path):
    proc, _ = _drive(settings, "http://example.com:80", [("/ok/q", {})], tmp_path)
    assert proc.returncode == 2 and "127.0.0.1 only" in proc.stderr
    (tmp_path / "bad.txt").write_text("no tab here\n")
    proc = subprocess.run([str(driver.binary(settings)), "-url", "http://127.0.0.1:1", "-requests",
                           str(tmp_path / "bad.txt")], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "line 1: want PATH<TAB>JSON BODY" in proc.stderr


def test_the_cpu_meter_counts_processes_that_start_and_end_during_a_run(tmp_path):
    # A group's root starts a child that burns CPU, ends and is reaped while the meter runs
    # (as PostgreSQL's backends come and go): its time counts, none is subtracted.
    go = tmp_path / "go"
    root = subprocess.Popen([sys.executable, "-c", (
        "import subprocess, sys, time\n"
        f"while not __import__('os').path.exists({str(go)!r}): time.sleep(0.01)\n"
        "subprocess.run([sys.executable, '-c', 'sum(range(60_000_000))'])\n"
        "time.sleep(30)\n")])
    try:
        meter = cpu.CpuMeter({"group": lambda: [root.pid]})
        with meter.measure() as usage:
            go.touch()
            deadline = time.monotonic() + 60
            while len(cpu.descendants([root.pid])) < 2 and time.monotonic() < deadline:
                time.sleep(0.01)  # the child has started
            while len(cpu.descendants([root.pid])) > 1 and time.monotonic() < deadline:
                time.sleep(0.01)  # ... and ended
        assert usage.cpu["group"] >= 0.2, usage.cpu
        assert usage.cpu["machine"] >= usage.cpu["group"] - 0.05
        assert usage.per_request(2)["group"] == round(1000 * usage.cpu["group"] / 2, 3)
    finally:
        root.kill()
        root.wait()
