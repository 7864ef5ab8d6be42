"""`gridagg delete`, `gridagg retain` and `gridagg drop`: changes of a dataset's rows and
of the dataset itself, in-process against the configured stores (GridEngine.delete,
retain, keep_for, drop_dataset), each as the one write protocol of every writer.

    gridagg delete weather --where lon=1.5:1.5 --where time=2021-03-01..2021-03-31T23:59:59Z
    gridagg delete weather --id 8817 --id 8818
    gridagg retain weather --keep 10y
    gridagg drop weather

Bad input (an unknown dataset or column, a malformed range or retention, an unreadable
region file) is one line on stderr and exit code 2; a store that cannot answer, 1.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from datetime import datetime, timezone

from gridagg.cli.query import EXAMPLES, read_region, where_of
from gridagg.config import Settings
from gridagg.model.errors import InvalidInput, UnknownDataset
from gridagg.model.schema import parse_timestamp


def _engine(settings: Settings):
    from gridagg.engine import GridEngine

    return GridEngine.open(settings)


def _refused(command: str, message: str) -> int:
    print(f"gridagg {command}: error: {message}", file=sys.stderr)
    return 2


def _leaves(done) -> str:
    return f"leaves {done.leaves_before} -> {done.leaves_after}"


# --------------------------------------------------------------------------- delete


def run_delete(settings: Settings, args: argparse.Namespace) -> int:
    if not (args.where or args.region or args.id or args.all):
        return _refused("delete", "name the rows: --where, --region, --id, or --all for every row")
    if args.all and (args.where or args.region or args.id):
        return _refused("delete", "--all takes every row: give it alone")
    with _engine(settings) as engine:
        try:
            ds = engine.dataset(args.dataset)
            boxed = args.where or args.region or args.all
            where = where_of(ds, args.where) if boxed else None
            done = engine.delete(ds.name, where, read_region(args.region), args.id or None, wait=math.inf)
        except (InvalidInput, UnknownDataset) as exc:
            return _refused("delete", exc.detail)
    deleted = done.rows_before - done.rows_after
    if args.json:
        print(json.dumps({"dataset": ds.name, "deleted": deleted}))
    else:
        print(f"{ds.name}: deleted {deleted} rows ({_leaves(done)})")
    return 0


def add_delete(subparsers) -> None:
    """`gridagg delete` (entry point gridagg.commands: delete)."""
    p = subparsers.add_parser(
        "delete", help="delete rows: those in a box (and a polygon), or with given element IDs",
        description="Delete the rows inside a box (and a polygon), as `gridagg query` selects them, or the "
                    "rows with given element IDs (within the box, when one is given too). Every aggregate, "
                    "rollup and serving process's tree follows at once; a question asked meanwhile is answered "
                    "for the rows before the delete or after it.",
        formatter_class=argparse.RawDescriptionHelpFormatter, epilog=EXAMPLES)
    p.add_argument("dataset", help="dataset name")
    p.add_argument("--where", action="append", default=[], metavar="DIM=LO:HI",
                   help="bound a dimension (repeatable)")
    p.add_argument("--region", metavar="FILE.geojson", help="a GeoJSON polygon over the lon/lat dimensions")
    p.add_argument("--id", action="append", default=[], metavar="ID",
                   help="an element ID to delete (repeatable); without --where or --region every leaf is "
                        "looked through")
    p.add_argument("--all", action="store_true", help="delete every row (the dataset stays)")
    p.add_argument("--json", action="store_true", help="print the HTTP API's JSON answer (for scripts)")
    p.set_defaults(func=run_delete)


# --------------------------------------------------------------------------- retain


def run_retain(settings: Settings, args: argparse.Namespace) -> int:
    try:
        now = datetime.now(timezone.utc) if args.now is None else parse_timestamp(args.now, "--now")
    except InvalidInput as exc:
        return _refused("retain", exc.detail)
    with _engine(settings) as engine:
        try:
            ds = engine.dataset(args.dataset)
            if args.keep is not None:
                engine.keep_for(ds.name, None if args.keep == "forever" else args.keep)
            keep = engine.directory.retain(ds.name)
            done = engine.retain(ds.name, now=now, wait=math.inf)
        except (InvalidInput, UnknownDataset) as exc:
            return _refused("retain", exc.detail.replace("retain must", "--keep must"))
    dropped = done.rows_before - done.rows_after
    if args.json:
        print(json.dumps({"dataset": ds.name, "retain": keep, "deleted": dropped}))
    elif keep is None:
        print(f"{ds.name}: keeps its rows for ever ({_leaves(done)})")
    else:
        print(f"{ds.name}: keeps {keep}: deleted {dropped} rows older than that ({_leaves(done)})")
    return 0


def add_retain(subparsers) -> None:
    """`gridagg retain` (entry point gridagg.commands: retain)."""
    p = subparsers.add_parser(
        "retain", help="drop a dataset's rows older than its retention (and set it)",
        description="A retention round: drop the dataset's rows older than its retention (its `retain`), "
                    "reading no row of the grids wholly older, and fold the grids changes emptied. With --keep, "
                    "set the retention first. A serving process runs a round of every dataset that has one every "
                    "GRIDAGG_RETAIN_EVERY seconds.")
    p.add_argument("dataset", help="dataset name")
    p.add_argument("--keep", metavar="DURATION",
                   help="keep rows this long from now on: a whole number and a unit, d (days), w (weeks) or y "
                        "(calendar years), such as 10y or 90d; `forever` keeps every row")
    p.add_argument("--now", metavar="TIME", help="the round's time (ISO 8601; default now)")
    p.add_argument("--json", action="store_true", help="print what the round did as JSON")
    p.set_defaults(func=run_retain)


# --------------------------------------------------------------------------- drop


def run_drop(settings: Settings, args: argparse.Namespace) -> int:
    with _engine(settings) as engine:
        try:
            ds = engine.dataset(args.dataset)
        except UnknownDataset as exc:
            return _refused("drop", exc.detail)
        if not args.yes:
            rows = engine.query(ds.name, {}, ["count"]).values["count"]
            print(f"drop dataset {ds.name}: its {rows} rows, aggregates, grids, rollups and retention, for good? "
                  "Type its name to drop it: ", end="", flush=True)
            answer = sys.stdin.readline().strip()
            if answer != ds.name:
                print(f"{ds.name}: not dropped")
                return 1
        engine.drop_dataset(ds.name)
    print(f"{ds.name}: dropped")
    return 0


def add_drop(subparsers) -> None:
    """`gridagg drop` (entry point gridagg.commands: drop)."""
    p = subparsers.add_parser(
        "drop", help="drop a dataset (asks first unless --yes)",
        description="Drop a dataset: its rows and aggregates (the store frees their space), grids, change log, "
                    "rollups, retention and tree file. Asks for the dataset's name first, unless --yes.")
    p.add_argument("dataset", help="dataset name")
    p.add_argument("--yes", action="store_true", help="drop without asking")
    p.set_defaults(func=run_drop)
