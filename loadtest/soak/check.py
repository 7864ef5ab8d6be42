"""The soak's checker: reads the clients' logs (loadtest/soak/clients.py) and judges them.

Every answer must be the answer (oracle.py) over some set S of rows with
  A <= S <= B,  A = rows of batches acknowledged before the query began (by a writer
                    standing for another host: VISIBLE_AFTER before it began) and not
                    deleted by a delete begun before it ended,
                B = rows of batches whose insert had begun when the query ended and not
                    deleted by a delete acknowledged before it began,
each counted row holding one of the values it may have had meanwhile: those of the last
correction of its batch acknowledged before the query began (its first values without
one) or of a later correction begun before the query ended (oracle.bounds). A batch,
delete or correction never acknowledged (its client was killed, or the run ended while
it was retried) is a "maybe": it may take effect from its start on, never surely.

After the run, what the store holds is read back batch by batch: every acknowledged
batch must be wholly there (but a deleted one wholly gone), every maybe wholly there or
wholly absent, a batch of a maybe-delete wholly there or wholly gone, and a corrected
batch's values those of its last acknowledged correction or of a later maybe, whole.
What each fault cost the clients is availability.py's.
"""

from __future__ import annotations

import functools
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from gridagg.model.grid import element_of, grid_prefix
from gridagg.model.schema import Dataset

from . import oracle
from .clients import (
    BATCH,
    Client,
    batch_of,
    batch_rows,
    corrected_rows,
    definition_json,
    machine_of,
    read_log,
)

# How long after its acknowledgement a write must show in the answers of other hosts:
# they learn of it through PostgreSQL (gridagg.tree), not from a board they share.
VISIBLE_AFTER = 1.0
COLUMNS = oracle.Columns(definition_json("soak"))  # the soak's dataset, as the oracle reads it


@dataclass
class Request:
    """One try of a request: start and end (wall clock), whether it succeeded, who."""

    start: float
    end: float
    ok: bool
    role: str
    tag: str
    error: str = ""  # of a failed try: "unavailable" or "unclear"
    msg: str = ""
    calls: dict | None = None  # of an answer: the store's calls by region server


@dataclass
class Change:
    """A delete or a correction of a batch: begun, acked (None: a maybe), the host of its
    client, and of a correction its corrector life and number (corrected_rows)."""

    begun: float
    acked: float | None
    machine: int
    corrector: str = ""
    n: int = 0


@dataclass
class History:
    """Everything the clients logged. batches: (writer tag, batch) -> [begun, acked or
    None]; deletes and corrections: batch -> its Changes in the order they began;
    answers: (start, end, where, aggs, values, the reader's host) of every reader
    answer; requests: every try of every request; armed: client tag ("d" + tag of a
    deleter, "c" + of a corrector) -> the fault point it was armed at; last: client tag
    -> its last record; asked and refused: the askers' records of each."""

    batches: dict[tuple[str, int], list] = field(default_factory=dict)
    deletes: dict[tuple[str, int], list[Change]] = field(default_factory=dict)
    corrections: dict[tuple[str, int], list[Change]] = field(default_factory=dict)
    answers: list[tuple] = field(default_factory=list)
    requests: list[Request] = field(default_factory=list)
    armed: dict[str, str] = field(default_factory=dict)
    last: dict[str, dict] = field(default_factory=dict)
    asked: list[dict] = field(default_factory=list)  # the askers' answers (loadtest/soak/beside.py)
    refused: list[dict] = field(default_factory=list)  # and the questions refused them

    def add_acked(self, tag: str, batch: int, begun: float, acked: float) -> None:
        self.batches[(tag, batch)] = [begun, acked]


PREFIX = {"writer": "", "reader": "r", "deleter": "d", "corrector": "c", "asker": "a"}  # of a client's tag in History


def read_history(lives: list[Client]) -> History:
    """The history of every life of every client."""
    h = History()
    for client in lives:
        if not client.log_path.exists():
            continue
        records = read_log(client.log_path)
        if records:
            h.last[PREFIX[client.role] + client.tag] = records[-1]
        changes = h.deletes if client.role == "deleter" else h.corrections
        mine: dict = {}  # this life's change in progress, by batch
        for r in records:
            kind = r["t"]
            if kind == "begin" and client.role == "writer":
                h.batches[(client.tag, r["b"])] = [r["at"], None]
            elif kind == "ack" and client.role == "writer":
                h.batches[(client.tag, r["b"])][1] = r["at"]
                h.requests.append(Request(r["start"], r["at"], True, "writer", client.tag))
            elif kind == "begin":
                key = tuple(r["k"])
                mine[key] = Change(r["at"], None, client.machine, client.tag, r.get("n", 0))
                changes.setdefault(key, []).append(mine[key])
            elif kind == "ack":
                mine[tuple(r["k"])].acked = r["at"]
                h.requests.append(Request(r["start"], r["at"], True, client.role, client.tag))
            elif kind == "answer":
                h.answers.append((r["start"], r["end"], r["where"], r["aggs"], r["values"], client.machine))
                h.requests.append(Request(r["start"], r["end"], True, "reader", client.tag, calls=r.get("calls")))
            elif kind == "asked":
                h.asked.append(r)
                h.requests.append(Request(r["start"], r["end"], True, "asker", client.tag))
            elif kind == "refused":
                h.refused.append(r)
            elif kind == "fail":
                h.requests.append(Request(r["start"], r["end"], False, client.role, client.tag, r["error"], r["msg"]))
            elif kind == "armed":
                h.armed[PREFIX[client.role] + client.tag] = r["point"]
    h.requests.sort(key=lambda q: q.start)
    for changes in (h.deletes, h.corrections):
        for key in changes:
            changes[key].sort(key=lambda c: c.begun)
    return h


# --------------------------------------------------------------------------- the answers


@dataclass
class Rows:
    """Every row of every begun batch, with its batch's start and acknowledgement
    (inf for a maybe) repeated per row, and its batch's index in `keys`."""

    values: np.ndarray
    begun: np.ndarray
    acked: np.ndarray
    keys: list[tuple[str, int]]  # the batches, in row order (BATCH rows each)
    machine: np.ndarray  # the host of each row's writer (clients.machine_of)

    @classmethod
    def of(cls, history: History, machines: int = 1) -> "Rows":
        keys = sorted(history.batches)
        if not keys:
            return cls(np.empty((0, 3), np.int64), np.empty(0), np.empty(0), [], np.empty(0, np.int64))
        times = np.array([[b, np.inf if a is None else a] for b, a in (history.batches[k] for k in keys)])
        hosts = [machine_of("writer", int(tag.split(".")[0]), machines) for tag, _ in keys]
        return cls(np.vstack([batch_rows(tag, b) for tag, b in keys]), np.repeat(times[:, 0], BATCH),
                   np.repeat(times[:, 1], BATCH), keys, np.repeat(np.array(hosts, np.int64), BATCH))

    @property
    def batch(self) -> np.ndarray:
        """Each row's batch, as an index into keys."""
        return np.repeat(np.arange(len(self.keys)), BATCH)


def _seen_by(change: Change, start: float, machine: int) -> bool:
    """Whether a query of host `machine` beginning at `start` must see `change`: it was
    acknowledged before (on another host, VISIBLE_AFTER before)."""
    return change.acked is not None and change.acked < (start if change.machine == machine else start - VISIBLE_AFTER)


@functools.cache
def _corrected_values(key: tuple[str, int], corrector: str, n: int) -> np.ndarray:
    """The values column of corrected_rows, made once for the many answers judged."""
    return corrected_rows(key, corrector, n)[:, 2]


def _values_between(history: History, rows: Rows, corrected: set[int], box: np.ndarray, start: float, end: float,
                    machine: int) -> tuple[np.ndarray, np.ndarray]:
    """(low, high): per row the least and greatest values it may hold during a query of
    host `machine` from `start` to `end`, for the rows in `box` of the batches
    `corrected` (indexes into rows.keys); the others as written."""
    low, high = rows.values, rows.values
    touched = sorted(set(np.unique(rows.batch[box]).tolist()) & corrected)
    if not touched:
        return low, high
    low, high = rows.values.copy(), rows.values.copy()
    for i in touched:
        changes = history.corrections[rows.keys[i]]
        last = max((j for j, c in enumerate(changes) if _seen_by(c, start, machine)), default=-1)
        may = [c for j, c in enumerate(changes) if j > last and c.begun < end]
        if last < 0 and not may:
            continue  # as written
        candidates = [rows.values[i * BATCH:(i + 1) * BATCH, 2] if last < 0
                      else _corrected_values(rows.keys[i], changes[last].corrector, changes[last].n)]
        candidates += [_corrected_values(rows.keys[i], c.corrector, c.n) for c in may]
        if len(candidates) == 1:
            low[i * BATCH:(i + 1) * BATCH, 2] = high[i * BATCH:(i + 1) * BATCH, 2] = candidates[0]
            continue
        stacked = np.stack(candidates)
        low[i * BATCH:(i + 1) * BATCH, 2], high[i * BATCH:(i + 1) * BATCH, 2] = stacked.min(0), stacked.max(0)
    return low, high


@dataclass
class Deletes:
    """Every delete of a batch the history holds, as arrays (one entry a delete): the
    batch's index into rows.keys, when it began, when it was acknowledged (NaN: a maybe)
    and its client's host."""

    batch: np.ndarray
    begun: np.ndarray
    acked: np.ndarray
    machine: np.ndarray

    @classmethod
    def of(cls, history: History, rows: Rows) -> Deletes:
        at = {k: i for i, k in enumerate(rows.keys)}
        each = [(at[key], c.begun, np.nan if c.acked is None else c.acked, c.machine)
                for key, changes in history.deletes.items() if key in at for c in changes]
        batch, begun, acked, machine = (np.array(a) for a in zip(*each)) if each else ([],) * 4
        return cls(np.asarray(batch, np.int64), np.asarray(begun, float), np.asarray(acked, float),
                   np.asarray(machine, np.int64))


def _deleted(deletes: Deletes, rows: Rows, start: float, end: float, machine: int) -> tuple[np.ndarray, np.ndarray]:
    """(surely, perhaps): per row whether a delete of its batch must be seen by a query
    of host `machine` from `start` to `end` (acknowledged before, as _seen_by says), and
    whether one may be."""
    surely, perhaps = np.zeros(len(rows.keys), bool), np.zeros(len(rows.keys), bool)
    seen = deletes.acked < np.where(deletes.machine == machine, start, start - VISIBLE_AFTER)  # NaN: never
    surely[deletes.batch[seen]] = True
    perhaps[deletes.batch[deletes.begun < end]] = True
    return surely[rows.batch], perhaps[rows.batch]


def check_answers(history: History, rows: Rows, at_most: int | None) -> tuple[int, list[dict]]:
    """(answers checked, the wrong ones) against the oracle; a random sample of at_most
    answers when there are more."""
    answers = history.answers
    if at_most is not None and len(answers) > at_most:
        answers = [answers[i] for i in np.random.default_rng(3).choice(len(answers), at_most, replace=False)]
    wrong = []
    corrected = {i for i, k in enumerate(rows.keys) if k in history.corrections}
    deletes = Deletes.of(history, rows)
    for start, end, where, aggs, values, machine in answers:
        box = oracle.selected(COLUMNS, rows.values, where)
        # A write acknowledged on another host must show from VISIBLE_AFTER on.
        acked_by = np.where(rows.machine == machine, start, start - VISIBLE_AFTER)
        gone, going = _deleted(deletes, rows, start, end, machine)
        surely = box & (rows.acked < acked_by) & ~going
        perhaps = box & (rows.begun < end) & ~gone
        low, high = _values_between(history, rows, corrected, box, start, end, machine)
        held = oracle.bounds(COLUMNS, low, high, surely, perhaps, ["count", *aggs])
        bad = [label for label in aggs if not oracle.holds(values[label], held[label])]
        if bad:
            wrong.append({"start": start, "end": end, "where": where, "values": values, "wrong": bad,
                          "bounds": {label: held[label] for label in bad}, "acknowledged_rows": int(surely.sum()),
                          "begun_rows": int(perhaps.sum())})
    return len(answers), wrong


# --------------------------------------------------------------------------- what is stored


@dataclass
class Stored:
    """What the store holds under the current leaves: rows per batch, and each batch's
    rows (x, y, v) by their place in the batch (-1 where none is stored); duplicates:
    element IDs found under two leaves; foreign: rows of no soak batch."""

    per_batch: Counter
    duplicates: int
    foreign: int
    rows: dict = field(default_factory=dict)


def stored_batches(engine, ds: Dataset) -> Stored:
    """Read every row under a current leaf (rows of split leaves awaiting their purge
    are copies, left out) and count them by batch."""
    leaves = {grid_prefix(g.grid_id) for g in engine.directory.leaves(ds)}
    per_batch: Counter = Counter()
    rows: dict = {}
    seen: set[bytes] = set()
    duplicates = foreign = 0
    for keys, values in engine.store.scan_rows(ds, b"", b"\xff" * 2):
        for key, row in zip(keys, values):
            eid = element_of(key)
            if key[: len(key) - len(eid)] not in leaves:
                continue
            if eid in seen:
                duplicates += 1
                continue
            seen.add(eid)
            try:
                batch = batch_of(eid)
            except ValueError:
                foreign += 1
                continue
            per_batch[batch] += 1
            rows.setdefault(batch, np.full((BATCH, 3), -1, np.int64))[int(eid.decode().rsplit(".", 1)[1])] = row
    return Stored(per_batch, duplicates, foreign, rows)


@dataclass
class Changes:
    """How the changes of the batches ended up in the store: acknowledged ones lost (a
    deleted batch still there, a corrected one without its last correction's values),
    batches a change left half done, and the count of each kind of change."""

    lost: list = field(default_factory=list)
    half: list = field(default_factory=list)
    counts: dict = field(default_factory=dict)


def stored_changes(history: History, stored: Stored) -> Changes:
    """Judge what the store holds of the deletes and corrections (the module docstring)."""
    out = Changes()
    acked = lambda changes: [c for c in changes if c.acked is not None]  # noqa: E731
    for key, changes in history.deletes.items():
        n = stored.per_batch[key]
        if acked(changes) and n:
            out.lost.append(f"{key[0]}/{key[1]}: deleted, {n} rows still there")
        elif 0 < n < BATCH:
            out.half.append(f"{key[0]}/{key[1]}: a delete left {n} of {BATCH} rows")
    for key, changes in history.corrections.items():
        if stored.per_batch[key] != BATCH:
            continue  # the batch itself is judged with the inserts
        have = stored.rows[key][:, 2]
        done = [j for j, c in enumerate(changes) if c.acked is not None]
        last = done[-1] if done else -1
        allowed = [batch_rows(*key)[:, 2] if last < 0 else corrected_rows(key, changes[last].corrector,
                                                                           changes[last].n)[:, 2]]
        allowed += [corrected_rows(key, c.corrector, c.n)[:, 2] for c in changes[last + 1:]]
        if any((have == a).all() for a in allowed):
            continue
        if np.any([have == a for a in allowed], axis=0).all():
            out.half.append(f"{key[0]}/{key[1]}: values of several corrections at once")
        else:
            out.lost.append(f"{key[0]}/{key[1]}: values older than its last acknowledged correction")
    out.counts = {"deletes": sum(len(acked(c)) for c in history.deletes.values()),
                  "deletes_maybe": sum(len(c) - len(acked(c)) for c in history.deletes.values()),
                  "corrections": sum(len(acked(c)) for c in history.corrections.values()),
                  "corrections_maybe": sum(len(c) - len(acked(c)) for c in history.corrections.values())}
    return out
