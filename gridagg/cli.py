"""The `gridagg` command.

Each subcommand is a function ``add_<name>(subparsers)`` (or a module's ``register``)
that defines its parser and sets ``func`` (called with the Settings and the parsed
arguments, returns an exit code). To add a subcommand, list it in ``_commands``.
"""

from __future__ import annotations

import argparse
import sys
import textwrap

from gridagg.config import Settings

ENV_HELP = """\
settings come from environment variables (all optional):
  GRIDAGG_DATA_DIR    data and logs of the local servers (default ~/.gridagg)
  GRIDAGG_PG_URL      external PostgreSQL URL (unset: the local server)
  GRIDAGG_PG_PORT     port of the local PostgreSQL (default 55432)
  GRIDAGG_STORE       embedded (default: LMDB in the data dir) or hbase
  GRIDAGG_HBASE       external HBase Thrift gateway host:port (unset: the local HBase)
  GRIDAGG_HBASE_PORT  Thrift port of the local HBase (default 9090)
  GRIDAGG_ZK_PORT     ZooKeeper port of the local HBase (default 2181)
"""


class _Formatter(argparse.RawDescriptionHelpFormatter):
    """Wraps one-paragraph descriptions; keeps multi-line text (the env table) as is."""

    def _fill_text(self, text, width, indent):
        if "\n" in text.strip():
            return super()._fill_text(text, width, indent)
        return textwrap.fill(text, width, initial_indent=indent, subsequent_indent=indent)


# --------------------------------------------------------------------------- services


def _print_reports(reports) -> None:
    for r in reports:
        print(r.line())


def _services_up(settings: Settings, args: argparse.Namespace) -> int:
    from gridagg import services

    reports = services.up(settings, hbase=not args.no_hbase)
    _print_reports(reports)
    if not args.no_hbase and settings.store != "hbase":
        print("to use this HBase instead of the embedded store: export GRIDAGG_STORE=hbase")
    return 0


def _services_status(settings: Settings, args: argparse.Namespace) -> int:
    from gridagg import services

    _print_reports(services.status(settings))
    return 0


def _services_down(settings: Settings, args: argparse.Namespace) -> int:
    from gridagg import services

    _print_reports(services.down(settings))
    return 0


def add_services(sub) -> None:
    p = sub.add_parser(
        "services", help="start, check or stop the local PostgreSQL and HBase",
        description="Manage the local servers: a PostgreSQL (Debian binaries, run unprivileged) "
                    "and an Apache HBase with its Thrift1 gateway, both keeping their data under "
                    "GRIDAGG_DATA_DIR. With GRIDAGG_PG_URL / GRIDAGG_HBASE set, the external "
                    "servers are only checked.",
        epilog=ENV_HELP, formatter_class=_Formatter)
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    up = actions.add_parser("up", help="start what is not running (idempotent)")
    up.add_argument("--no-hbase", action="store_true", help="start PostgreSQL only")
    up.set_defaults(func=_services_up)
    actions.add_parser("status", help="show what runs and where").set_defaults(func=_services_status)
    actions.add_parser("down", help="stop the local servers (data is kept)").set_defaults(
        func=_services_down)


# --------------------------------------------------------------------------- main

def _engine(settings: Settings):
    from gridagg.directory import GridDirectory
    from gridagg.engine import GridEngine
    from gridagg.store import open_store

    return GridEngine(GridDirectory(settings.effective_pg_url), open_store(settings))


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
        epilog=ENV_HELP, formatter_class=_Formatter)
    p.add_argument("dataset", nargs="?", help="dataset name (default: all)")
    p.set_defaults(func=_check)


def add_repair(sub) -> None:
    p = sub.add_parser(
        "repair", help="rebuild datasets' aggregates from their rows",
        description="Finish what crashed writers left and recompute every aggregate from the "
                    "rows, under the dataset's writer lock. Normally the next writer recovers "
                    "by itself; use this after `gridagg check` reports problems.",
        epilog=ENV_HELP, formatter_class=_Formatter)
    p.add_argument("dataset", nargs="?", help="dataset name (default: all)")
    p.set_defaults(func=_repair)


def _commands():
    from api.cli import register as add_serve
    from gridagg.cli_query import register as add_questions
    from gridagg.demo import register as add_demo
    from ingest.cli import register as add_ingest
    from loadtest.cli import register as add_bench

    return [add_demo, add_services, add_ingest, add_serve, add_check, add_repair, add_bench, add_questions]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gridagg",
        description="Exact range aggregates over sensor archives: a k-d grid of boxes with "
                    "partial aggregates, over PostgreSQL and HBase (or an embedded store).",
        epilog=ENV_HELP, formatter_class=_Formatter)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for add in _commands():
        add(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    settings = Settings.from_env()
    from gridagg.services import ServiceError

    try:
        return int(args.func(settings, args) or 0)
    except ServiceError as e:
        print(f"gridagg: error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("gridagg: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
