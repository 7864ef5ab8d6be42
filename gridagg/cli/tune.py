"""`gridagg tune`: the stores' cost models (gridagg.tune.costmodel), measured on this machine
by `gridagg tune --calibrate` (gridagg.tune.calibrate)."""

from __future__ import annotations

import argparse
import itertools
import sys
import time

from gridagg import config
from gridagg.config import Settings
from gridagg.tune import costmodel

STORES = ("embedded", "hbase")


def calibrate_stores(settings: Settings, stores, out=print, rows: int | None = None) -> list[costmodel.CostModel]:
    """Calibrate each of `stores` (scratch datasets of `rows` rows on each, by default
    the store's gridagg.tune.calibrate.ROWS, dropped after), store its model in the data dir
    and print it with `out`; returns the models."""
    from gridagg.engine import GridEngine
    from gridagg.tune.calibrate import ROWS, calibrate

    models = []
    for store in stores:
        n = rows or ROWS[store]
        out(f"calibrating the {store} store (two scratch datasets of {n:,} rows, about {n // 9000} s)")
        with GridEngine.open(settings.with_(store=store)) as engine:
            model = calibrate(engine, n, lambda m: out(f"  {m}"))
        where = costmodel.save(settings.data_dir, model)
        out(f"  {model.describe()}")
        out(f"  stored in {where}")
        models.append(model)
    return models


def _tune(settings: Settings, args: argparse.Namespace) -> int:
    if args.calibrate:
        calibrate_stores(settings, args.stores, rows=args.rows)
        return 0
    if args.dataset:
        return _tune_dataset(settings, args.dataset, not args.dry_run)
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


def _tune_dataset(settings: Settings, name: str, apply: bool) -> int:
    from gridagg.engine import GridEngine
    from gridagg.tune.adapt import TUNE_CANDIDATES, adapt
    from gridagg.tune.merge import tune
    from gridagg.tune.online import load_sample, sample_path

    model = costmodel.load(settings.data_dir, settings.store)
    if model is None:
        print(f"gridagg: error: no cost model of the {settings.store} store on this machine: "
              "gridagg tune --calibrate", file=sys.stderr)
        return 1
    questions = load_sample(settings.data_dir, settings.store, name)
    print(model.describe())
    with GridEngine.open(settings) as engine:
        if questions:
            print(f"{name}: priced on {len(questions)} questions a serving process sampled "
                  f"({sample_path(settings.data_dir, settings.store, name)})")
            # Each round prices at most TUNE_CANDIDATES leaves for a split, none it priced before
            # without finding one: rounds until one is still.
            settled: set = set()
            changed = False
            for n in itertools.count(1):
                budget = engine.trees.leaves_loadable(engine.dataset(name), settings.tree_load_seconds)
                adapted = adapt(engine, name, model, questions, apply, candidates=TUNE_CANDIDATES, settled=settled,
                                most_leaves=budget)
                print(f"round {n}:")
                _print_adapted(name, adapted, apply)
                changed = changed or (apply and bool(adapted.changes))
                if not apply or adapted.still:
                    if changed:
                        _after_tuning(engine, name)
                    return 0
        merges, target = tune(engine, name, model, apply)
        print(f"{name}: no questions sampled by a serving process yet (its online tuner keeps them, "
              "GRIDAGG_TUNE_EVERY): merging by the leaves' sizes alone")
        _print_merges(name, model, merges, target, apply)
        if apply and merges:
            _after_tuning(engine, name)
    return 0


def _after_tuning(engine, name: str) -> None:
    """The store rewritten without the rows the tuning replaced (gridagg.store.base.CellStore.compact),
    and the tree kept for new processes in its walk's order (gridagg.tree.TreeCache.keep)."""
    started = time.perf_counter()
    print(f"{name}: compacting what the tuning replaced ...", flush=True)
    done = engine.store.compact(engine.dataset(name))
    print(f"{name}: {done or 'nothing to compact on this store'} ({time.perf_counter() - started:.1f} s)")
    started = time.perf_counter()
    engine.trees.keep(engine.dataset(name))
    print(f"{name}: tree kept for new processes ({time.perf_counter() - started:.1f} s)")


def _print_adapted(name: str, adapted, apply: bool) -> None:
    from gridagg.tune.adapt import MARGIN

    changes = adapted.changes
    if adapted.held:
        print(f"{name}: {adapted.held:,} splits worth making left out: the tree is at its leaf budget, what loads "
              "in GRIDAGG_TREE_LOAD_SECONDS here")
    if adapted.waiting:
        print(f"{name}: {adapted.waiting:,} merged leaves to split again once their old leaves' rows are purged "
              "(2 x GRIDAGG_MAX_QUERY_SECONDS after the merge, when no query can still read them)")
    if not changes and adapted.settled:
        print(f"{name}: no change worth making at the {adapted.settled:,} leaves priced, the dearest not priced "
              "before: on to the next")
        return
    if not changes:
        print(f"{name}: nothing to change (no split or merge saves more than "
              f"{MARGIN:.0%} of what the sampled questions spend on its grids)")
        return
    splits = [c for c in changes if c.kind == "split"]
    merges = [c for c in changes if c.kind == "merge"]
    if splits:
        print(f"{name}: {'split' if apply else 'would split'} {len(splits):,} leaves into "
              f"{sum(c.new_leaves for c in splits):,}")
    if merges:
        print(f"{name}: {'merged' if apply else 'would merge'} {sum(len(c.leaves) for c in merges):,} leaves "
              f"into {len(merges):,}")
    for c in changes[:20]:
        into = (f"into {c.new_leaves} leaves" + (f" at {len(c.cuts)} of its questions' bounds" if c.cuts else "")
                if c.kind == "split" else f"{len(c.leaves)} leaves into one" + (", to be split anew" if c.resplit else ""))
        print(f"  {c.kind} {c.grid_id}: {c.rows:,} rows, {into}; its questions {c.before:.3f} -> {c.after:.3f} ms")
    if len(changes) > 20:
        print(f"  ... {len(changes) - 20} more")
    print(f"predicted gain: {adapted.gain_per_question():.4f} ms per question of the sample "
          f"({sum(c.before for c in changes):.3f} -> {sum(c.after for c in changes):.3f} ms over the "
          f"{adapted.questions} questions, at the grids changed)")


def _print_merges(name: str, model, merges, target: int, apply: bool) -> None:
    if not merges:
        print(f"{name}: no leaves to merge (no inner grid holds at most {target:,} rows, what a cut grid costs "
              "in rows here)")
        return
    before = sum(len(m.leaves) for m in merges)
    saved = (before - len(merges)) * model.per_grid
    print(f"{name}: {'merged' if apply else 'would merge'} {before:,} leaves into {len(merges):,} "
          f"(inner grids of at most {target:,} rows, what a cut grid costs in rows here)")
    for m in merges[:20]:
        print(f"  {m.grid_id}: {len(m.leaves)} leaves, {m.rows:,} rows")
    if len(merges) > 20:
        print(f"  ... {len(merges) - 20} more")
    print(f"predicted gain: a question cutting every merged grid saves up to {saved:.3f} ms "
          f"({before - len(merges):,} cut grids fewer at {model.per_grid * 1000:.2f} us each); one cutting a "
          "single old leaf reads the rest of its merged grid's rows too")


def calibration_rows(text: str) -> int:
    """Rows of a calibration's scratch datasets: a whole number of at least 1,000 (fewer
    rows time nothing but the call). argparse names the option in its error."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number of rows, not {text!r}") from None
    if value < 1000:
        raise argparse.ArgumentTypeError(f"must be at least 1000 rows, not {text}")
    return value


def add_tune(sub) -> None:
    p = sub.add_parser(
        "tune", help="measure (--calibrate) or show the stores' cost models; split or merge a dataset's leaves",
        description="A store's cost model says what a query costs on this machine: per query, per cut grid "
                    "(a leaf whose rows are read), per row read and per reused aggregate, fitted to timed "
                    "queries over two scratch datasets (gridagg/calibrate.py). Without --calibrate the stored "
                    "models are printed; `gridagg services up` calibrates once when none is stored. Datasets "
                    "created without an n_size get one chosen with these models.",
        epilog=config.help_text("servers", "store"))
    p.add_argument("dataset", nargs="?",
                   help="split and merge this dataset's leaves in place where the model says the questions a "
                        "serving process sampled (its online tuner keeps them in the data dir) would cost less "
                        "(gridagg/adapt.py), round after round until one changes nothing; without sampled "
                        "questions, merge where leaves are too small: inner grids holding at most what a cut grid "
                        "costs in rows (and at most n_threshold) become leaves (gridagg/merge.py); under the writer "
                        "lock with the crash protocol of splits")
    p.add_argument("--dry-run", action="store_true",
                   help="with a dataset: say what would be split and merged, change nothing")
    p.add_argument("--calibrate", action="store_true",
                   help="measure the models now (scratch datasets per store, loaded and queried: it takes a while) and store them "
                        f"in the data dir ({costmodel.FILE})")
    p.add_argument("--rows", type=calibration_rows, default=None, metavar="N",
                   help="rows of each scratch dataset (default 1,000,000; more take longer). A cut grid "
                        "costs more as the data outgrows the CPU's caches, so calibrate on about the size you serve")
    p.add_argument("--stores", nargs="+", choices=STORES, default=list(STORES),
                   help="the stores to measure or show (default both; hbase needs the HBase of "
                        "`gridagg services up`)")
    p.set_defaults(func=_tune)
