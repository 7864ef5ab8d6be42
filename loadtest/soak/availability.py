"""What the soak's faults cost its clients, from their logs (check.History): for each
fault (nemesis.py: Injected) how long the service was away, from the first request it
failed or slowed to the first good answer once the server was back; and every request's
counts and durations.
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from .check import History

HUNG = 10.0  # a request that takes longer hangs (the timeout of a patient client)


def summary(values: list[float]) -> dict:
    """n, min, median, p90, max of some seconds (rounded to 0.01)."""
    if not values:
        return {"n": 0}
    v = np.sort(np.array(values, dtype=float))
    return {"n": len(v), "min": round(float(v[0]), 2), "median": round(float(np.median(v)), 2),
            "p90": round(float(np.quantile(v, 0.9)), 2), "max": round(float(v[-1]), 2)}



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
        if back is not None and fault.kind in ("writer", "reader", "deleter", "corrector"):
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
