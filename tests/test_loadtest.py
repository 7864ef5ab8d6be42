"""A small-scale run of `gridagg bench`: the harness works end to end (archive, loads,
gunicorn, headless locust, report) and gridagg, PostgreSQL alone and HBase alone give
the same answers. No timing assertions."""

from __future__ import annotations

import argparse
import csv

from loadtest import bench, workload
from loadtest.cli import register


def test_bench_cli_parses_and_defaults_follow_the_paper():
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    args = parser.parse_args(["bench"])
    assert args.nsize == [50, 125, 250, 500, 1000, 2000, 4000, 8000]
    assert args.clients == [1, 8, 32, 96]
    assert callable(args.func)


def test_workload_is_the_papers():
    qs = workload.paper_queries(20, 3)
    assert len(qs) == 20 and qs == workload.paper_queries(20, 3)
    for w in qs:
        assert set(w) == {"time", "temperature", "humidity", "illuminance"}


def test_archive_rows_are_spread_over_the_whole_domain():
    ids, values = bench.build_archive(None, 20_000)
    assert len(ids) == len(values) == 20_000
    years = values[:, 0] // (365 * 86400)
    assert years.min() == 0 and years.max() >= 20


def test_small_bench_runs_and_all_systems_agree(settings, services, tmp_path, unique_name):
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    args = parser.parse_args([
        "bench", "--rows", "50000", "--nsize", "50", "500", "--clients", "1", "4", "--requests", "60",
        "--seconds", "4", "--warmup", "1", "--stat-queries", "5", "--check-queries", "4",
        "--stores", "embedded", "hbase", "--workers", "2", "--threads", "2",
        "--prefix", unique_name, "--out", str(tmp_path / "report")])
    args.command_line = "gridagg bench (test)"
    result = bench.run(settings, args)
    assert result["disagreements"] == []
    labels = {s.label for s in result["systems"]}
    assert {"pg-alone", "hbase-alone"} <= labels and len(labels) == 6
    assert len(result["runs"]) == 6 * 2 * 2
    for r in result["runs"]:
        assert r["failures"] == 0, r
        assert r["requests"] > 0, r
    out = tmp_path / "report"
    text = (out / "report.md").read_text()
    assert "gridagg / PostgreSQL" in text and "Measured selectivity" in text
    for name in ("runs.csv", "load.csv", "table3.csv", "throughput_min.png", "throughput_sum.png"):
        assert (out / name).exists(), name
    with open(out / "runs.csv") as f:
        assert len(list(csv.DictReader(f))) == len(result["runs"])
