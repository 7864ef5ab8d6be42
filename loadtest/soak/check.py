"""The soak's checker: reads the clients' logs (loadtest/soak/clients.py) and judges them.

Every answer must be the answer (oracle.py) over some set S of rows with
  A <= S <= B,  A = rows of batches acknowledged before the query began (by a writer
                    standing for another host: VISIBLE_AFTER before it began),
                B = rows of batches whose insert had begun when the query ended
(oracle.between). A batch never acknowledged (its writer was killed, or the run ended
while it was retried) is a "maybe": in B from its start on, never in A.

After the run, what the store holds is read back batch by batch: every acknowledged
batch must be wholly there, every maybe wholly there or wholly absent. What each fault
cost the clients is availability.py's.
"""

from __future__ import annotations

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
class History:
    """Everything the clients logged. batches: (writer tag, batch) -> [begun, acked or
    None]; answers: (start, end, where, aggs, values, the reader's host) of every reader
    answer; requests:
    every try of every request; armed: writer tag -> the fault point it was armed at;
    last: client tag -> its last record."""

    batches: dict[tuple[str, int], list] = field(default_factory=dict)
    answers: list[tuple] = field(default_factory=list)
    requests: list[Request] = field(default_factory=list)
    armed: dict[str, str] = field(default_factory=dict)
    last: dict[str, dict] = field(default_factory=dict)

    def add_acked(self, tag: str, batch: int, begun: float, acked: float) -> None:
        self.batches[(tag, batch)] = [begun, acked]


def read_history(lives: list[Client]) -> History:
    """The history of every life of every client."""
    h = History()
    for client in lives:
        if not client.log_path.exists():
            continue
        records = read_log(client.log_path)
        if records:
            h.last[client.tag if client.role == "writer" else "r" + client.tag] = records[-1]
        for r in records:
            kind = r["t"]
            if kind == "begin":
                h.batches[(client.tag, r["b"])] = [r["at"], None]
            elif kind == "ack":
                h.batches[(client.tag, r["b"])][1] = r["at"]
                h.requests.append(Request(r["start"], r["at"], True, "writer", client.tag))
            elif kind == "answer":
                h.answers.append((r["start"], r["end"], r["where"], r["aggs"], r["values"], client.machine))
                h.requests.append(Request(r["start"], r["end"], True, "reader", client.tag, calls=r.get("calls")))
            elif kind == "fail":
                h.requests.append(Request(r["start"], r["end"], False, client.role, client.tag, r["error"], r["msg"]))
            elif kind == "armed":
                h.armed[client.tag] = r["point"]
    h.requests.sort(key=lambda q: q.start)
    return h


# --------------------------------------------------------------------------- the answers


@dataclass
class Rows:
    """Every row of every begun batch, with its batch's start and acknowledgement
    (inf for a maybe) repeated per row."""

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


def check_answers(history: History, rows: Rows, at_most: int | None) -> tuple[int, list[dict]]:
    """(answers checked, the wrong ones) against the oracle; a random sample of at_most
    answers when there are more."""
    answers = history.answers
    if at_most is not None and len(answers) > at_most:
        answers = [answers[i] for i in np.random.default_rng(3).choice(len(answers), at_most, replace=False)]
    wrong = []
    for start, end, where, aggs, values, machine in answers:
        box = oracle.selected(COLUMNS, rows.values, where)
        # A write acknowledged on another host must show from VISIBLE_AFTER on.
        acked_by = np.where(rows.machine == machine, start, start - VISIBLE_AFTER)
        surely = oracle.answer(COLUMNS, rows.values[box & (rows.acked < acked_by)], None, ["count", *aggs])
        perhaps = oracle.answer(COLUMNS, rows.values[box & (rows.begun < end)], None, ["count", *aggs])
        bad = [label for label in aggs if not oracle.between(label, values[label], surely, perhaps)]
        if bad:
            wrong.append({"start": start, "end": end, "where": where, "values": values, "wrong": bad,
                          "acknowledged_rows": surely["count"], "begun_rows": perhaps["count"]})
    return len(answers), wrong


# --------------------------------------------------------------------------- what is stored


@dataclass
class Stored:
    """What the store holds under the current leaves: rows per batch; duplicates:
    element IDs found under two leaves; foreign: rows of no soak batch."""

    per_batch: Counter
    duplicates: int
    foreign: int


def stored_batches(engine, ds: Dataset) -> Stored:
    """Read every row under a current leaf (rows of split leaves awaiting their purge
    are copies, left out) and count them by batch."""
    leaves = {grid_prefix(g.grid_id) for g in engine.directory.leaves(ds)}
    per_batch: Counter = Counter()
    seen: set[bytes] = set()
    duplicates = foreign = 0
    for keys, _ in engine.store.scan_rows(ds, b"", b"\xff" * 2):
        for key in keys:
            eid = element_of(key)
            if key[: len(key) - len(eid)] not in leaves:
                continue
            if eid in seen:
                duplicates += 1
                continue
            seen.add(eid)
            try:
                per_batch[batch_of(eid)] += 1
            except ValueError:
                foreign += 1
    return Stored(per_batch, duplicates, foreign)
