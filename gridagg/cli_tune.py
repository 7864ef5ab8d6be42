"""`gridagg tune`: the stores' cost models (gridagg.costmodel), measured on this machine
by `gridagg tune --calibrate` (gridagg.calibrate)."""

from __future__ import annotations

import argparse
import sys

from . import config, costmodel
from .config import Settings

STORES = ("embedded", "hbase")


def calibrate_stores(settings: Settings, stores, out=print) -> list[costmodel.CostModel]:
    """Calibrate each of `stores` (a scratch dataset on each, dropped after), store its
    model in the data dir and print it with `out`; returns the models."""
    from .calibrate import calibrate
    from .engine import GridEngine

    models = []
    for store in stores:
        out(f"calibrating the {store} store (a scratch dataset, about 10 s)")
        with GridEngine.open(settings.with_(store=store)) as engine:
            model = calibrate(engine, lambda m: out(f"  {m}"))
        where = costmodel.save(settings.data_dir, model)
        out(f"  {model.describe()}")
        out(f"  stored in {where}")
        models.append(model)
    return models


def _tune(settings: Settings, args: argparse.Namespace) -> int:
    if args.calibrate:
        calibrate_stores(settings, args.stores)
        return 0
    missing = []
    for store in args.stores:
        model = costmodel.load(settings.data_dir, store)
        if model is None:
            missing.append(store)
        else:
            print(model.describe())
    if missing:
        print(f"no cost model measured for {', '.join(missing)} on this machine: "
              f"gridagg tune --calibrate --stores {' '.join(missing)}", file=sys.stderr)
        return 1
    return 0


def add_tune(sub) -> None:
    p = sub.add_parser(
        "tune", help="measure (--calibrate) or show the stores' cost models",
        description="A store's cost model says what a query costs on this machine: per query, per cut grid "
                    "(a leaf whose rows are read), per row read and per reused aggregate, fitted to timed "
                    "queries over two scratch datasets (gridagg/calibrate.py). Without --calibrate the stored "
                    "models are printed; `gridagg services up` calibrates once when none is stored. Datasets "
                    "created without an n_size get one chosen with these models.",
        epilog=config.help_text("servers", "store"))
    p.add_argument("--calibrate", action="store_true",
                   help="measure the models now (a scratch dataset per store, about 10 s each) and store them "
                        f"in the data dir ({costmodel.FILE})")
    p.add_argument("--stores", nargs="+", choices=STORES, default=list(STORES),
                   help="the stores to measure or show (default both; hbase needs the HBase of "
                        "`gridagg services up`)")
    p.set_defaults(func=_tune)
