"""`gridagg ingest`: the bulk ingest job from the command line.

``register(subparsers)`` adds the subcommand to `gridagg` (entry point in
pyproject.toml); the same command runs as ``python -m gridagg_ingest CONFIG INPUT...`` or under
spark-submit as ``spark-submit ingest/spark_job.py CONFIG INPUT...``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from gridagg import config
from gridagg.config import Settings
from gridagg.write import faults

EXAMPLES = Path(__file__).resolve().parent / "examples"
EXAMPLE_PREFIX = "example:"

DESCRIPTION = (
    "Bulk-load archives into a dataset with Spark: read CSV, Parquet or TMY3 files (files, "
    "directories, globs), encode them as the config file says, build the grid tree in bulk and "
    "write rows, aggregates and grid boxes. Reruns of the same input add nothing; bad rows go "
    "to a quarantine output. The dataset is created from the config file if it does not exist."
)


def example_config(name: str) -> Path:
    """The shipped example config `name` (ingest/examples/NAME.toml, installed with the
    package). Raises InvalidInput naming the examples there are."""
    from gridagg.model.errors import InvalidInput

    path = EXAMPLES / f"{name}.toml"
    if not path.is_file():
        raise InvalidInput(f"no example config {name!r}; the examples: {', '.join(example_names())}",
                           field="config")
    return path


def example_names() -> list[str]:
    return sorted(p.stem for p in EXAMPLES.glob("*.toml"))


def _epilog() -> str:
    return (f"example configs (pass {EXAMPLE_PREFIX}NAME as CONFIG): {', '.join(example_names())}\n"
            f"  in {EXAMPLES}\n\n" + config.help_text("servers", "store", "spark"))


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("config", help="dataset config file (TOML), or example:NAME for a shipped example "
                                  "(e.g. example:weather)")
    p.add_argument("inputs", nargs="+", help="input files, directories or globs")
    p.add_argument("--master", help="Spark master URL (default GRIDAGG_SPARK_MASTER; under spark-submit, its --master)")
    p.add_argument("--quarantine", metavar="DIR",
                   help="where bad rows go as JSON lines (default quarantine/<dataset>-<time>)")
    p.add_argument("--store", choices=["embedded", "hbase"], help="cell store (default GRIDAGG_STORE)")
    p.add_argument("--shuffle-partitions", type=int,
                   help="spark.sql.shuffle.partitions, also the number of buckets the rows travel "
                        "in; a Python worker holds one bucket at a time (default: 8 per core Spark has, or "
                        "one per about 500,000 input rows when that gives more)")
    p.add_argument("--replace", action="store_true",
                   help="a row whose element ID is stored (in the grid its dimensions place it in) replaces the "
                        "stored row: a reload of a stretch, such as a reprocessed month (without: it is a duplicate, "
                        "not loaded)")
    p.add_argument("--quiet", action="store_true", help="no progress lines, only the summary")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")


def run(settings: Settings, args: argparse.Namespace) -> int:
    from gridagg.model.errors import GridaggError

    from .config import load_config
    from .job import Progress, run_ingest, spark_session

    if args.store:
        settings = settings.with_(store=args.store)
    try:
        path = (example_config(args.config.removeprefix(EXAMPLE_PREFIX))
                if args.config.startswith(EXAMPLE_PREFIX) else args.config)
        cfg = load_config(path)
    except (GridaggError, OSError) as exc:
        print(f"gridagg ingest: error: {exc}", file=sys.stderr)
        return 2
    spark = spark_session(args.master, shuffle_partitions=args.shuffle_partitions, settings=settings)
    progress = Progress(spark=spark, quiet=args.quiet)
    try:
        summary = run_ingest(spark, settings, cfg, args.inputs, quarantine=args.quarantine, progress=progress,
                             replace=args.replace)
    except (GridaggError, FileNotFoundError, ValueError) as exc:
        print(f"gridagg ingest: error: {exc}", file=sys.stderr)
        return 1
    finally:
        progress.close()
    if args.json:
        print(json.dumps(summary.to_json()))
    else:
        print("\n".join(summary.lines()))
    if settings.store == "hbase" and not settings.hbase:
        _say_if_beyond_the_cache(settings, cfg.dataset.name)
    return 0


def _say_if_beyond_the_cache(settings: Settings, name: str) -> None:
    """One line when the dataset's table is larger than the local HBase's block caches:
    its queries then read from disk, slower, and a larger heap would cache it."""
    from gridagg.store.hbase.store import table_name
    from gridagg_hbase import jvm

    size, servers = jvm.table_bytes(settings, table_name(name)), max(1, jvm.layout(settings))
    cache = jvm.block_cache_bytes(settings) * servers
    if size > cache:
        heap = -(-size // servers // int(jvm.DATA_CACHE_SHARE * (1 << 30)))
        print(f"gridagg ingest: dataset {name} takes {size / 2**30:.1f} GiB in HBase, more than its block "
              f"cache of {cache / 2**30:.1f} GiB: its queries read from disk, slower; GRIDAGG_HBASE_HEAP={heap}g "
              f"(then `gridagg services down` and `up`) or more region servers would cache it", file=sys.stderr)


def register(subparsers) -> argparse.ArgumentParser:
    """Add the `ingest` subcommand to gridagg's subparsers (sets func(settings, args))."""
    p = subparsers.add_parser("ingest", help="bulk-load archives with Spark", description=DESCRIPTION,
                              epilog=_epilog())
    add_arguments(p)
    p.set_defaults(func=run)
    return p


def main(argv: list[str] | None = None) -> int:
    from gridagg.cli.main import Formatter

    p = argparse.ArgumentParser(prog="gridagg ingest", description=DESCRIPTION, epilog=_epilog(),
                                formatter_class=Formatter)
    add_arguments(p)
    args = p.parse_args(argv)
    try:
        settings = Settings.from_env()
        faults.arm(settings.faults)
        return run(settings, args)
    except config.SettingError as exc:
        print(f"gridagg ingest: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("gridagg ingest: interrupted", file=sys.stderr)
        return 130
