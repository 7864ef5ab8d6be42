"""The core's subcommands: services, check, repair, config (registered in pyproject.toml's
entry-point group gridagg.cli.commands; see gridagg.cli.main)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from gridagg import config
from gridagg.config import Settings

# --------------------------------------------------------------------------- services


def _print_reports(reports) -> None:
    for r in reports:
        print(r.line())


def _services_up(settings: Settings, args: argparse.Namespace) -> int:
    from gridagg.cli import services

    if args.region_servers is not None:
        settings = settings.with_(hbase_region_servers=args.region_servers)
    reports = services.up(settings, hbase=not args.no_hbase)
    _print_reports(reports)
    # Once per machine: later processes load the query kernels instead of compiling them.
    from gridagg.warmup import warm

    print(f"{'kernels':<11} {warm()}")
    _calibrate_once(settings, ["embedded"] if args.no_hbase else ["embedded", "hbase"], args.calibration_rows)
    if not args.no_hbase and settings.store != "hbase":
        print("to use this HBase instead of the embedded store: export GRIDAGG_STORE=hbase")
    return 0


def _calibrate_once(settings: Settings, stores: list[str], rows: int | None) -> None:
    """Measure the cost model of each of `stores` that has none stored on this machine
    (gridagg tune --calibrate, on scratch datasets of `rows` rows, None: the store's
    default; datasets created without an n_size need it)."""
    from gridagg.cli.tune import calibrate_stores
    from gridagg.tune import costmodel

    missing = [s for s in stores if costmodel.load(settings.data_dir, s) is None]
    if missing:
        calibrate_stores(settings, missing, out=lambda m: print(f"{'cost model':<11} {m}"), rows=rows)


def _services_status(settings: Settings, args: argparse.Namespace) -> int:
    from gridagg.cli import services

    _print_reports(services.status(settings))
    return 0


def _services_down(settings: Settings, args: argparse.Namespace) -> int:
    from gridagg.cli import services

    _print_reports(services.down(settings))
    return 0


def add_services(sub) -> None:
    p = sub.add_parser(
        "services", help="start, check or stop the local PostgreSQL and HBase",
        description="Manage the local servers: a PostgreSQL (Debian binaries, run unprivileged) "
                    "and an Apache HBase with its Thrift1 gateway, both keeping their data under "
                    "GRIDAGG_DATA_DIR. With GRIDAGG_PG_URL / GRIDAGG_HBASE set, the external "
                    "servers are only checked.",
        epilog=config.help_text("servers"))
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    up = actions.add_parser("up", help="start what is not running (idempotent), then compile the query kernels "
                                       "into numba's cache (once per machine; later processes load them)")
    up.add_argument("--no-hbase", action="store_true", help="start PostgreSQL only")
    up.add_argument("--region-servers", type=int, choices=range(0, 10), metavar="N",
                    help="HBase layout: 0 = standalone (one JVM); 1-9 = distributed on this machine: ZooKeeper, "
                         "a master and N region servers, each a JVM of its own (default "
                         "GRIDAGG_HBASE_REGION_SERVERS, else the layout last started in the data dir, else "
                         "standalone). Changing it needs `gridagg services down` first; the data is kept")
    from gridagg.cli.tune import calibration_rows

    up.add_argument("--calibration-rows", type=calibration_rows, metavar="N",
                    help="rows of each scratch dataset when a store's cost model is measured (the first `up` of "
                         "a data dir; default the store's own, gridagg tune --calibrate's): fewer is quicker and "
                         "coarser, as a test machine's throwaway data dir may want")
    up.set_defaults(func=_services_up)
    actions.add_parser("status", help="show what runs and where").set_defaults(func=_services_status)
    actions.add_parser("down", help="stop the local servers (data is kept)").set_defaults(
        func=_services_down)
    jar = actions.add_parser(
        "observer-jar", help="build HBase's scan observer as a jar, for an external cluster's region servers",
        description="Build the region servers' scan observer (hbase/observer) as a jar. Put it on every "
                    "region server's classpath, set hbase.coprocessor.user.region.classes to its class and "
                    "start the region servers (Java 17 or later; docs/hbase.md); the local HBase does all "
                    "this by itself.")
    jar.add_argument("out", type=Path, help="the jar to write")
    jar.set_defaults(func=_services_observer_jar)


def _services_observer_jar(settings: Settings, args: argparse.Namespace) -> int:
    from gridagg_hbase.admin import observer_jar
    from gridagg_hbase.jvm import OBSERVER_CLASS, SERVER_FLAGS, VECTOR_API, LauncherError

    try:
        out = observer_jar(settings, args.out)
    except LauncherError as exc:
        print(f"gridagg: error: {exc}", file=sys.stderr)
        return 1
    print(f"{out}: deploy it on every region server's classpath, set "
          f"hbase.coprocessor.user.region.classes={OBSERVER_CLASS} and add {' '.join(SERVER_FLAGS)} (less CPU "
          f"a scan over a block cache of gigabytes) and {' '.join(VECTOR_API)} (scans add up 16-bit columns in "
          f"SIMD lanes) to HBASE_REGIONSERVER_OPTS")
    return 0


# --------------------------------------------------------------------------- check, repair


def _engine(settings: Settings):
    from gridagg.engine import GridEngine

    return GridEngine.open(settings)


def _check(settings: Settings, args: argparse.Namespace) -> int:
    engine = _engine(settings)
    names = [args.dataset] if args.dataset else [d.name for d in engine.directory.datasets()]
    bad = 0
    for name in names:
        problems = engine.check(name)
        bad += len(problems)
        print(f"{name}: " + ("aggregates exact, every row under a leaf" if not problems else
                             f"{len(problems)} problems (gridagg repair {name} rebuilds the aggregates)"))
        for p in problems[:50]:
            print("   " + p)
    return 1 if bad else 0


def _repair(settings: Settings, args: argparse.Namespace) -> int:
    engine = _engine(settings)
    names = [args.dataset] if args.dataset else [d.name for d in engine.directory.datasets()]
    for name in names:
        print(f"{name}: rebuilt the aggregates of {engine.repair(name)} leaves from their rows")
    return 0


def add_check(sub) -> None:
    p = sub.add_parser(
        "check", help="verify datasets' aggregates against their rows",
        description="Scan every row of a dataset and compare each leaf's and ancestor's stored "
                    "aggregate with its rows. Exit code 1 when there are problems.",
        epilog=config.help_text("servers", "store"))
    p.add_argument("dataset", nargs="?", help="dataset name (default: all)")
    p.set_defaults(func=_check)


def add_repair(sub) -> None:
    p = sub.add_parser(
        "repair", help="rebuild datasets' aggregates from their rows",
        description="Finish what crashed writers left and recompute every aggregate from the "
                    "rows, under the dataset's writer lock. Normally the next writer recovers "
                    "by itself; use this after `gridagg check` reports problems.",
        epilog=config.help_text("servers", "store"))
    p.add_argument("dataset", nargs="?", help="dataset name (default: all)")
    p.set_defaults(func=_repair)


# --------------------------------------------------------------------------- config


def _config(settings: Settings, args: argparse.Namespace) -> int:
    if args.markdown:
        sys.stdout.write(config.markdown_table())
        return 0
    rows = config.effective(settings)
    if args.json:
        print(json.dumps({variable: shown for variable, shown, _ in rows}, indent=2))
    else:
        width = max(len(variable) for variable, _, _ in rows) + 2
        for variable, shown, source in rows:
            print(f"{variable:<{width}}{shown}" + ("" if source == "default" else f"  ({source})"))
    for variable in config.unknown_variables():
        print(f"gridagg config: warning: {variable} is set but is no gridagg setting", file=sys.stderr)
    return 0


def add_config(sub) -> None:
    p = sub.add_parser(
        "config", help="show the effective settings (secrets masked)",
        description="Print every GRIDAGG_* setting with the value in effect here: from the "
                    "environment (marked so) or the default. Tokens and URL passwords are masked. "
                    "Warns about GRIDAGG_* variables that are no setting.",
        epilog=config.help_text(*config.TOPICS))
    shape = p.add_mutually_exclusive_group()
    shape.add_argument("--json", action="store_true", help="print {variable: value} as JSON")
    shape.add_argument("--markdown", action="store_true",
                       help="print the declared settings (defaults and help) as the Markdown table of docs/settings.md")
    p.set_defaults(func=_config)
