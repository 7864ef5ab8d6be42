"""The online tuner: a serving process adapts its datasets' trees to the questions it
serves, in the background (gridagg.tune.adapt), every `tune_every` seconds (a setting; 0
turns it off).

Each round takes, for every dataset whose n_size gridagg chose (made without one: a
dataset given an n_size keeps the leaves it asked for; `gridagg tune NAME` still
tunes it on demand) that was asked at least MIN_QUESTIONS questions since the last
round, the planner's sample of them (gridagg.query.questions), prices the
changes they ask for with the store's cost model (the one `gridagg tune --calibrate`
stored in the data dir; none stored: nothing is done) and makes them in place. Queries
never wait for it: it takes no lock they take, and the writer lock only a batch of
changes at a time (gridagg.tune.adapt.CHANGES_PER_WRITE), waiting at most WRITER_WAIT for it
(a round that cannot have it tries again next time). A round that fails is logged and
the next one runs as usual.

Each sample a round takes is also kept in the data dir (SAMPLES/<store>/<dataset>.json,
the last one per dataset, of any dataset), for `gridagg tune NAME` in another process.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from pathlib import Path

import numpy as np

from gridagg.model.errors import UnknownDataset
from gridagg.query.questions import Question
from gridagg.query.walk import WalkQuery
from gridagg.tune import costmodel
from gridagg.tune.adapt import Adapted, adapt

log = logging.getLogger("gridagg.tune.online")

# Fewer questions since the last round say too little about what is asked: the sample
# keeps growing until the next round.
MIN_QUESTIONS = 32
SAMPLES = "questions"  # the folder of the data dir the samples are kept in
# Seconds a round waits for a dataset's writer lock (held by an insert or a bulk load).
WRITER_WAIT = 5.0


class OnlineTuner:
    """Rounds of gridagg.tune.adapt over `engine` (a GridEngine; its planner's sample is the
    workload) every `every` seconds in a daemon thread, with the cost model of the store
    kept in `data_dir`, growing no tree past what loads in `load_seconds` (the
    tree_load_seconds setting; 0: no limit). start() begins, stop() ends (waiting for a
    round in progress)."""

    def __init__(self, engine, data_dir, every: float, min_questions: int = MIN_QUESTIONS, load_seconds: float = 0.0):
        self.engine, self.data_dir, self.every, self.min_questions = engine, data_dir, every, min_questions
        self.load_seconds = load_seconds
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="gridagg-online-tuner", daemon=True)

    def start(self) -> "OnlineTuner":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            try:
                self.round()
            except Exception:  # noqa: BLE001 - a background round must not end the thread
                log.exception("online tuning round failed; the next one runs as usual")

    def round(self) -> dict[str, Adapted]:
        """One round over every dataset with enough questions; returns what each changed."""
        model = costmodel.load(self.data_dir, self.engine.store.kind)
        sample = self.engine.planner.sample
        out: dict[str, Adapted] = {}
        if model is None:
            return out
        for name in sample.names():
            if sample.seen(name) < self.min_questions:
                continue
            questions = sample.take(name)
            try:
                save_sample(self.data_dir, self.engine.store.kind, name, questions)
                ds = self.engine.dataset(name)
                if ds.grid.chosen is None:
                    continue  # its definition gave its n_size: its leaves stay as asked
                done = adapt(self.engine, name, model, questions, wait=WRITER_WAIT,
                             most_leaves=self.engine.trees.leaves_loadable(ds, self.load_seconds))
            except UnknownDataset:  # dropped since it was asked
                continue
            except Exception:  # noqa: BLE001 - one dataset's failure (dropped meanwhile, lock busy) spares the rest
                log.exception("online tuning of %s failed", name)
                continue
            out[name] = done
            if done.changes:
                splits = sum(c.kind == "split" for c in done.changes)
                log.info("online tuning of %s: %d leaves split, %d grids merged, predicted %.3f ms less per "
                         "question (%d questions sampled)", name, splits, len(done.changes) - splits,
                         done.gain_per_question(), done.questions)
        return out


def start(engine, settings) -> OnlineTuner | None:
    """An OnlineTuner of `engine` started as `settings` say (tune_every seconds; None when 0)."""
    if not settings.tune_every:
        return None
    return OnlineTuner(engine, settings.data_dir, settings.tune_every,
                       load_seconds=settings.tree_load_seconds).start()


def sample_path(data_dir, store: str, name: str) -> Path:
    return Path(data_dir) / SAMPLES / store / f"{name}.json"


def save_sample(data_dir, store: str, name: str, questions: list[Question]) -> Path:
    """Keep `questions`, a sample of dataset `name` on `store`, in the data dir (written
    whole, then renamed)."""
    p = sample_path(data_dir, store, name)
    p.parent.mkdir(parents=True, exist_ok=True)
    rows = [{"query": {k: v.tolist() if isinstance(v, np.ndarray) else v for k, v in q.query._asdict().items()},
             "cut": q.cut, "rows": q.rows} for q in questions]
    tmp = p.with_name(f".{p.name}.{os.getpid()}")
    tmp.write_text(json.dumps(rows))
    os.replace(tmp, p)
    return p


def load_sample(data_dir, store: str, name: str) -> list[Question]:
    """The last sample of dataset `name` on `store` a serving process kept ([] when none,
    or unreadable)."""
    try:
        rows = json.loads(sample_path(data_dir, store, name).read_text())
        arrays = {"qlo": np.int64, "qhi": np.int64, "edges": np.float64}
        return [Question(WalkQuery(**{k: np.array(v, arrays[k]).reshape(-1, 4) if k == "edges" else
                                      np.array(v, arrays[k]) if k in arrays else v
                                      for k, v in r["query"].items()}), r["cut"], r["rows"]) for r in rows]
    except (OSError, ValueError, KeyError, TypeError):
        return []
