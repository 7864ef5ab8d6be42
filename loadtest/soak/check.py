"""The soak's checker: reads the clients' logs (loadtest/soak/clients.py) and judges them.

The oracle. Every answer must be the brute-force answer over some set S of rows with
  A <= S <= B,  A = rows of batches acknowledged before the query began (by a writer
                    standing for another host: VISIBLE_AFTER before it began),
                B = rows of batches whose insert had begun when the query ended.
Counts and sums (measure values are >= 0) must lie between those over A and B, mins
between min over B and min over A (maxes alike). A batch never acknowledged (its writer
was killed, or the run ended while it was retried) is a "maybe": in B from its start on,
never in A.

After the run, what the store holds is read back batch by batch: every acknowledged
batch must be wholly there, every maybe wholly there or wholly absent.

Availability. For each fault the clients' failed and successful requests tell how long
the service was away: from the first failed request to the first good answer once the
server was back.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from gridagg.model.grid import element_of, grid_prefix
from gridagg.model.schema import Dataset
from gridagg.query.spec import QuerySpec

from .clients import BATCH, Client, batch_of, batch_rows, machine_of, read_log

# How long after its acknowledgement a write must show in the answers of other hosts:
# they learn of it through PostgreSQL (gridagg.tree), not from a board they share.
VISIBLE_AFTER = 1.0


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


# --------------------------------------------------------------------------- the oracle


@dataclass
class Rows:
    """Every row of every begun batch, with its batch's start and acknowledgement
    (inf for a maybe) repeated per row."""

    values: np.ndarray
    begun: np.ndarray
    acked: np.ndarray
    keys: list[tuple[str, int]]  # the batches, in row order (BATCH rows each)
    machine: np.ndarray  # the host of each row's writer (soak_clients.machine_of)

    @classmethod
    def of(cls, history: History, machines: int = 1) -> "Rows":
        keys = sorted(history.batches)
        if not keys:
            return cls(np.empty((0, 3), np.int64), np.empty(0), np.empty(0), [], np.empty(0, np.int64))
        times = np.array([[b, np.inf if a is None else a] for b, a in (history.batches[k] for k in keys)])
        hosts = [machine_of("writer", int(tag.split(".")[0]), machines) for tag, _ in keys]
        return cls(np.vstack([batch_rows(tag, b) for tag, b in keys]), np.repeat(times[:, 0], BATCH),
                   np.repeat(times[:, 1], BATCH), keys, np.repeat(np.array(hosts, np.int64), BATCH))


def in_box(spec: QuerySpec, rows: np.ndarray) -> np.ndarray:
    mask = np.ones(len(rows), dtype=bool)
    for axis, (lo, hi) in enumerate(spec.box):
        mask &= (rows[:, axis] >= lo) & (rows[:, axis] <= hi)
    return mask


def within(value, label: str, v_a: np.ndarray, v_b: np.ndarray) -> bool:
    """Whether an answer's value of `label` lies between its values over A and over B
    (v_a, v_b: the measure of the rows of A and of B inside the box)."""
    if label == "count":
        return len(v_a) <= value <= len(v_b)
    if label == "sum:v":
        return int(v_a.sum()) <= value <= int(v_b.sum())
    if value is None:
        return len(v_a) == 0
    if label == "min:v":
        return bool(len(v_b)) and int(v_b.min()) <= value and (not len(v_a) or value <= int(v_a.min()))
    return bool(len(v_b)) and value <= int(v_b.max()) and (not len(v_a) or value >= int(v_a.max()))


def check_answers(history: History, rows: Rows, ds: Dataset, at_most: int | None) -> tuple[int, list[dict]]:
    """(answers checked, the wrong ones) against the oracle; a random sample of at_most
    answers when there are more."""
    answers = history.answers
    if at_most is not None and len(answers) > at_most:
        answers = [answers[i] for i in np.random.default_rng(3).choice(len(answers), at_most, replace=False)]
    wrong = []
    for start, end, where, aggs, values, machine in answers:
        box = in_box(QuerySpec.parse(ds, where, aggs), rows.values)
        # A write acknowledged on another host must show from VISIBLE_AFTER on.
        acked_by = np.where(rows.machine == machine, start, start - VISIBLE_AFTER)
        v_a = rows.values[box & (rows.acked < acked_by), 2]
        v_b = rows.values[box & (rows.begun < end), 2]
        bad = [label for label in aggs if not within(values[label], label, v_a, v_b)]
        if bad:
            wrong.append({"start": start, "end": end, "where": where, "values": values, "wrong": bad,
                          "acknowledged_rows": len(v_a), "begun_rows": len(v_b)})
    return len(answers), wrong


def brute_force(rows: np.ndarray, ds: Dataset, where: dict, aggs: list[str]) -> dict:
    sel = rows[in_box(QuerySpec.parse(ds, where, aggs), rows), 2]
    return {"count": len(sel), "sum:v": int(sel.sum()), "min:v": int(sel.min()) if len(sel) else None,
            "max:v": int(sel.max()) if len(sel) else None}


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


# --------------------------------------------------------------------------- availability


def summary(values: list[float]) -> dict:
    """n, min, median, p90, max of some seconds (rounded to 0.01)."""
    if not values:
        return {"n": 0}
    v = np.sort(np.array(values, dtype=float))
    return {"n": len(v), "min": round(float(v[0]), 2), "median": round(float(np.median(v)), 2),
            "p90": round(float(np.quantile(v, 0.9)), 2), "max": round(float(v[-1]), 2)}


HUNG = 10.0  # a request that takes longer hangs (the timeout of a patient client)


def fault_effects(history: History, injected: list, end: float) -> list[dict]:
    """Per injected fault (loadtest/soak/nemesis.py: Injected), in seconds after its crash. The
    requests of a fault are those that ended after its crash and before the next one.
    affected: its requests that failed or took longer than HUNG; first_affected:
    the earliest start among them; back: the server answered again (a new client ran);
    first_answer, first_ack: the end of the first reader answer, writer acknowledgement
    that began after `back`; recovery: first_answer - back (for a killed client: its
    replacement's first good request - back); unavailable: first_answer -
    first_affected (0 when nothing was affected); longest: the longest of its requests."""
    out = []
    kills = [f.killed for f in injected] + [end]
    for i, fault in enumerate(injected):
        t, t_next = fault.killed, kills[i + 1]
        mine = [q for q in history.requests if t <= q.end < t_next]
        affected = [q for q in mine if not q.ok or q.end - q.start > HUNG]
        row = fault.as_dict()
        row["failed"] = sum(1 for q in mine if not q.ok)
        row["hung"] = sum(1 for q in mine if q.end - q.start > HUNG)
        row["longest"] = round(max((q.end - q.start for q in mine), default=0.0), 2)
        first_affected = min((q.start for q in affected), default=None)
        row["first_affected"] = None if first_affected is None else round(first_affected - t, 2)
        back = fault.back
        row["back"] = None if back is None else round(back - t, 2)
        if back is not None and fault.kind in ("writer", "reader"):
            replacement = _next_life(fault.life)
            good = [q.end for q in history.requests if q.ok and q.role == fault.kind and q.tag == replacement]
            row["recovery"] = round(min(good) - back, 2) if good else None
        elif back is not None:
            first_answer = min((q.end for q in history.requests if q.ok and q.role == "reader" and q.start >= back),
                               default=None)
            first_ack = min((q.end for q in history.requests if q.ok and q.role == "writer" and q.start >= back),
                            default=None)
            row["first_answer"] = None if first_answer is None else round(first_answer - t, 2)
            row["first_ack"] = None if first_ack is None else round(first_ack - t, 2)
            row["recovery"] = None if first_answer is None else round(first_answer - back, 2)
            row["unavailable"] = (0.0 if first_affected is None else None if first_answer is None
                                  else round(first_answer - first_affected, 2))
            row["failed_after_back"] = sum(1 for q in affected if q.start >= back)
        if fault.kind == "regionserver" and fault.regions:
            row["outage"] = outage(history, fault)
        out.append(row)
    return out


def outage(history: History, fault) -> dict:
    """What readers got while a killed region server's regions were away: the queries
    begun from its kill until the last of its regions answered again (or, if one never
    did, until the server was back), answered or failed; of the answers, those that
    read rows on the region servers (the others came from aggregates alone)."""
    back = [b for b in fault.regions_back if b is not None]
    until = fault.killed + max(back) if len(back) == len(fault.regions_back) else (fault.back or fault.killed)
    tries = [q for q in history.requests if q.role == "reader" and fault.killed <= q.start < until]
    answered = [q for q in tries if q.ok]
    return {"seconds": round(until - fault.killed, 2), "queries": len(tries), "answered": len(answered),
            "answered_share": round(len(answered) / len(tries), 3) if tries else None,
            "answered_with_scans": sum(1 for q in answered if q.calls)}


def _next_life(tag: str) -> str:
    slot, life = tag.split(".")
    return f"{slot}.{int(life) + 1}"


def mid_write(history: History, tag: str) -> bool:
    """Whether writer life `tag` died inside an insert: its last record is a begun
    batch or a failed try of one."""
    last = history.last.get(tag)
    return last is not None and last["t"] in ("begin", "fail")


def request_summary(history: History) -> dict:
    """Counts and durations of every try of every request."""
    failed = [q for q in history.requests if not q.ok]
    unclear = [q for q in failed if q.error == "unclear"]
    ok_seconds = [q.end - q.start for q in history.requests if q.ok]
    failed_seconds = [q.end - q.start for q in failed]
    return {
        "answers": len(history.answers),
        "acks": sum(1 for q in history.requests if q.ok and q.role == "writer"),
        "failed": len(failed),
        "retries": sum(1 for q in failed if q.error == "unavailable"),
        "unclear_errors": len(unclear),
        "unclear_samples": Counter(q.msg[:160] for q in unclear).most_common(5),
        "failed_seconds": summary(failed_seconds),
        "longest_failed": round(max(failed_seconds, default=0.0), 2),
        "longest_ok": round(max(ok_seconds, default=0.0), 2),
        "over_5s": sum(1 for d in ok_seconds + failed_seconds if d > 5),
        "hung": sum(1 for d in ok_seconds + failed_seconds if d > HUNG),
    }


def kind_summary(effects: list[dict]) -> dict:
    """fault_effects' rows summed up by kind of fault."""
    out = {}
    for kind in dict.fromkeys(row["kind"] for row in effects):
        rows = [r for r in effects if r["kind"] == kind]
        out[kind] = {
            "n": len(rows),
            "unavailable": summary([r["unavailable"] for r in rows if r.get("unavailable") is not None]),
            "recovery": summary([r["recovery"] for r in rows if r.get("recovery") is not None]),
            "back": summary([r["back"] for r in rows if r.get("back") is not None]),
            "failed": sum(r["failed"] for r in rows),
            "hung": sum(r["hung"] for r in rows),
            "longest": max(r["longest"] for r in rows),
        }
        if kind == "regionserver":
            out[kind]["regions_back"] = summary([b for r in rows for b in r["regions_back"] if b is not None])
            out[kind]["regions_never_back"] = sum(b is None for r in rows for b in r["regions_back"])
            out[kind]["answered_share_in_outage"] = [r["outage"]["answered_share"] for r in rows if "outage" in r]
    return out
