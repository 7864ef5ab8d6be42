"""`gridagg bench`. Hook into gridagg/cli.py with:
    from loadtest.cli import register; COMMANDS.append(register)
(register(subparsers) adds the subcommand and sets func(settings, args) -> exit code)."""

from __future__ import annotations

import argparse
import shlex
import sys


def _bench(settings, args: argparse.Namespace) -> int:
    from . import bench

    args.command_line = "gridagg " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    result = bench.run(settings, args)
    return 1 if result["disagreements"] else 0


def register(subparsers) -> argparse.ArgumentParser:
    from . import bench

    p = subparsers.add_parser(
        "bench", help="the paper's experiment: gridagg vs PostgreSQL alone vs HBase alone",
        description=bench.__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    bench.add_arguments(p)
    p.set_defaults(func=_bench)
    return p
