"""`gridagg bench`: ``register(subparsers)`` adds the subcommand to `gridagg` (entry point
in pyproject.toml). The load-test tools come with the `bench` extra
(pip install 'gridagg[bench]'), not with the service; its load driver is built with Go."""

from __future__ import annotations

import argparse
import importlib.util
import shlex
import sys

from gridagg.model.errors import GridaggError


def _bench(settings, args: argparse.Namespace) -> int:
    if importlib.util.find_spec("duckdb") is None:  # without matplotlib it only makes no plots
        raise GridaggError("gridagg bench needs duckdb: pip install 'gridagg[bench]'")
    from .bench import paper
    from .bench.driver import binary

    if not args.dashboard:
        binary(settings)  # the load driver, built before the loads: no Go fails here, not after them

    args.command_line = "gridagg " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    result = paper.run(settings, args)
    return 1 if result["disagreements"] else 0


def register(subparsers) -> argparse.ArgumentParser:
    from .bench import paper

    p = subparsers.add_parser(
        "bench", help="the paper's experiment: gridagg vs PostgreSQL alone vs HBase alone",
        description=paper.__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    paper.add_arguments(p)
    p.set_defaults(func=_bench)
    return p
