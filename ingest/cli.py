"""`gridagg ingest`: the bulk ingest job from the command line.

gridagg.cli hooks this in with ``register(subparsers)``; without it, the same command
runs as ``python -m ingest CONFIG INPUT...`` or under spark-submit as
``spark-submit ingest/spark_job.py CONFIG INPUT...``.
"""

from __future__ import annotations

import argparse
import json
import sys

from gridagg.config import Settings

DESCRIPTION = (
    "Bulk-load archives into a dataset with Spark: read CSV, Parquet or TMY3 files (files, "
    "directories, globs), encode them as the config file says, build the grid tree in bulk and "
    "write rows, aggregates and grid boxes. Reruns of the same input add nothing; bad rows go "
    "to a quarantine output. The dataset is created from the config file if it does not exist."
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("config", help="dataset config file (TOML), e.g. ingest/examples/weather.toml")
    p.add_argument("inputs", nargs="+", help="input files, directories or globs")
    p.add_argument("--master", help="Spark master URL (default local[*]; under spark-submit, its --master)")
    p.add_argument("--quarantine", metavar="DIR",
                   help="where bad rows go as JSON lines (default quarantine/<dataset>-<time>)")
    p.add_argument("--store", choices=["embedded", "hbase"], help="cell store (default GRIDAGG_STORE)")
    p.add_argument("--shuffle-partitions", type=int,
                   help="spark.sql.shuffle.partitions, also the number of buckets the rows travel "
                        "in; a Python worker holds one bucket at a time (default: 8 per core Spark has)")
    p.add_argument("--quiet", action="store_true", help="no progress lines, only the summary")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")


def run(settings: Settings, args: argparse.Namespace) -> int:
    from gridagg.errors import GridaggError

    from .config import load_config
    from .job import Progress, run_ingest, spark_session

    if args.store:
        settings = settings.with_(store=args.store)
    try:
        cfg = load_config(args.config)
    except (GridaggError, OSError) as exc:
        print(f"gridagg ingest: error: {exc}", file=sys.stderr)
        return 2
    spark = spark_session(args.master, shuffle_partitions=args.shuffle_partitions, settings=settings)
    progress = Progress(spark=spark, quiet=args.quiet)
    try:
        summary = run_ingest(spark, settings, cfg, args.inputs, quarantine=args.quarantine, progress=progress)
    except (GridaggError, FileNotFoundError, ValueError) as exc:
        print(f"gridagg ingest: error: {exc}", file=sys.stderr)
        return 1
    finally:
        progress.close()
    if args.json:
        print(json.dumps(summary.to_json()))
    else:
        print("\n".join(summary.lines()))
    return 0


def register(subparsers) -> argparse.ArgumentParser:
    """Add the `ingest` subcommand to gridagg's subparsers (sets func(settings, args))."""
    p = subparsers.add_parser("ingest", help="bulk-load archives with Spark", description=DESCRIPTION)
    add_arguments(p)
    p.set_defaults(func=run)
    return p


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="gridagg ingest", description=DESCRIPTION)
    add_arguments(p)
    args = p.parse_args(argv)
    try:
        return run(Settings.from_env(), args)
    except KeyboardInterrupt:
        print("gridagg ingest: interrupted", file=sys.stderr)
        return 130
