"""The `gridagg` command: subcommands that each package registers for itself.

Adding a subcommand takes two things. A function in the package the command belongs to,
which adds the command's parser and sets ``func``::

    def add_query(subparsers) -> None:
        p = subparsers.add_parser("query", help="one line for gridagg --help",
                                  description="what it does", epilog=config.help_text("store"))
        p.add_argument("dataset")
        p.set_defaults(func=run_query)  # run_query(settings, args) -> exit code

and a line in pyproject.toml's entry-point group ``gridagg.cli.commands``, under the
command's name::

    [project.entry-points."gridagg.commands"]
    query = "gridagg.query_cli:add_query"

Then ``pip install -e .`` again, so the installed metadata lists the new entry point
(tests/test_cli.py lists the commands it expects). ``gridagg --help`` lists the commands
by name with their ``help=``; every subcommand parser wraps its description and keeps
multi-line epilogs (such as ``config.help_text()``, the settings it reads) as written,
unless it picks its own ``formatter_class``.

``func`` gets the Settings (``Settings.from_env()``) and the parsed arguments. Errors
come out as one line on stderr: an InvalidInput (bad settings included) with exit code
2, other gridagg errors and server errors with 1.
"""

from __future__ import annotations

import argparse
import functools
import sys
import textwrap
from importlib.metadata import entry_points

from gridagg.config import Settings, help_text
from gridagg.model.errors import GridaggError, InvalidInput
from gridagg.write import faults

GROUP = "gridagg.commands"


class Formatter(argparse.RawDescriptionHelpFormatter):
    """Wraps one-paragraph descriptions; keeps multi-line text (settings lists) as is."""

    def _fill_text(self, text, width, indent):
        if "\n" in text.strip():
            return super()._fill_text(text, width, indent)
        return textwrap.fill(text, width, initial_indent=indent, subsequent_indent=indent)


def commands() -> list:
    """The entry points of GROUP, sorted by name (the order of `gridagg --help`)."""
    return sorted(entry_points(group=GROUP), key=lambda ep: ep.name)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gridagg",
        description="Exact range aggregates over sensor archives: a k-d grid of boxes with "
                    "partial aggregates, over PostgreSQL and HBase (or an embedded store).",
        epilog=help_text(), formatter_class=Formatter)
    sub = parser.add_subparsers(
        dest="command", metavar="COMMAND", required=True,
        parser_class=functools.partial(argparse.ArgumentParser, formatter_class=Formatter))
    found = commands()
    if not found:
        parser.error(f"no commands are registered (entry points {GROUP}): install gridagg, "
                     "e.g. pip install -e . in the checkout")
    for ep in found:
        try:
            add = ep.load()
        except Exception as exc:  # one broken package must not take the other commands down
            print(f"gridagg: warning: command {ep.name} ({ep.value}) did not load: {exc}", file=sys.stderr)
            continue
        add(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from gridagg.cli.services import ServiceError

    try:
        settings = Settings.from_env()
        faults.arm(settings.faults)
        return int(args.func(settings, args) or 0)
    except InvalidInput as e:
        print(f"gridagg: error: {e.detail}", file=sys.stderr)
        return 2
    except (GridaggError, ServiceError) as e:
        print(f"gridagg: error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("gridagg: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
