"""A small-scale run of `gridagg bench`: the harness works end to end (archive, loads,
the API server, headless locust, report) and gridagg, PostgreSQL alone and HBase alone give
the same answers. No timing assertions."""

from __future__ import annotations

import argparse
import csv

from gridagg_loadtest import bench, workload
from gridagg_loadtest.cli import register


def test_bench_cli_parses_and_defaults_follow_the_paper():
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    args = parser.parse_args(["bench"])
    # The paper's sweep, then two larger sizes (reported apart from the paper's best).
    assert args.nsize == [50, 125, 250, 500, 1000, 2000, 4000, 8000, 16000, 32000]
    assert max(n for n in args.nsize if n <= bench.PAPER_MAX_NSIZE) == 8000
    assert args.clients == [1, 8, 32, 96]
    assert callable(args.func)


def test_workload_is_the_papers():
    qs = workload.paper_queries(20, 3)
    assert len(qs) == 20 and qs == workload.paper_queries(20, 3)
    for w in qs:
        assert set(w) == {"time", "temperature", "humidity", "illuminance"}


def test_the_paper_data_space_holds_every_generated_row(tmp_path):
    """What the bench generates fits loadtest/paper.toml, and the workload's windows lie
    inside its time domain."""
    from datetime import datetime

    import pandas as pd

    from gridagg.schema import parse_timestamp
    from gridagg_ingest.encode import encode_value
    from gridagg_ingest.generate import generate

    files = generate([str(bench.WEATHER)], 20_000, str(tmp_path), "parquet", seed=1)
    df = pd.concat(pd.read_parquet(p) for p in files)
    cfg = workload.paper_config("paper", 50)
    for col, src in zip(cfg.dataset.columns, cfg.sources):
        for v in df[src.source].astype(str).tolist():
            assert encode_value(col, src, v)[1] is None
    time = cfg.dataset.dimensions[0]
    for w in workload.paper_queries(200, 5):
        start, end = (datetime.fromisoformat(t) for t in w["time"])
        assert time.epoch <= start and end <= parse_timestamp(time.hi, "max")


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
    assert {"pg-alone", "hbase-alone", "duckdb-alone"} <= labels and len(labels) == 7
    assert len(result["runs"]) == 7 * 2 * 2
    for r in result["runs"]:
        assert r["failures"] == 0, r
        assert r["requests"] > 0, r
    out = tmp_path / "report"
    text = (out / "report.md").read_text()
    assert "gridagg / PostgreSQL alone" in text and "gridagg / DuckDB" in text and "Measured selectivity" in text
    assert "| gridagg-hbase |" in text and "| gridagg-embedded |" in text  # a ratio row per store
    assert "In-process: gridagg's planner vs DuckDB" in text
    for name in ("runs.csv", "load.csv", "table3.csv", "throughput_min.png", "throughput_sum.png"):
        assert (out / name).exists(), name
    with open(out / "runs.csv") as f:
        assert len(list(csv.DictReader(f))) == len(result["runs"])
