"""How long a write acknowledged by one API server takes to show in another's answers,
when the two share PostgreSQL and HBase but not an epoch board (as on two hosts).

Two API servers are started (loadtest/hosts.py), each with a board of its own. Then,
again and again, one row is written through one of them and, from the moment its
acknowledgement arrives, the other is asked for the dataset's row count, query after
query, until an answer counts the row. The lag of a write: from its acknowledgement to
the end of the first answer that counts it (so it includes that query, and the refresh
of the other server's tree it sets off); stale answers: those that did not count it yet. Every answer that began 1 s or more after
an acknowledgement and misses that write is a violation (the promise is: a write is in
every answer of the others that begins 1 s after it or later).

    python -m gridagg_loadtest.soak.visibility --writes 300     # HBase store, local servers

Prints a JSON report (lags p50/p90/p99/max in ms, violations) to stdout, and writes the
one current report to --report (by default docs/soak/visibility.md of the checkout),
replacing the previous run's.
"""

from __future__ import annotations

import argparse
import json
import secrets
import sys
import time
import uuid

import numpy as np

from gridagg.config import Settings

from ..hosts import started
from ..reports import header, machine, soak_report, stamp, write

VISIBLE_AFTER = 1.0  # seconds after its acknowledgement a write must show everywhere
WAIT_SECONDS = 10.0  # a write not seen by then ends the run (a failure)


def definition(name: str) -> dict:
    return {"name": name, "dimensions": [{"name": "x", "min": 0, "max": 9999}],
            "measures": [{"name": "v", "min": 0, "max": 1000}], "grid": {"n_size": 20, "n_threshold": 60}}


def measure(urls: list[str], dataset: str, writes: int, token: str, progress=lambda _: None) -> dict:
    """Write `writes` rows one at a time, in turn through each of `urls` (the dataset
    exists and is empty), and after each acknowledgement ask the next URL until it
    counts the row. Returns the report (see the module docstring)."""
    import requests

    session = requests.Session()
    auth = {"Authorization": f"Bearer {token}"}
    rng = np.random.default_rng(5)
    lags, asked, violations = [], 0, []
    for i in range(writes):
        writer, reader = urls[i % len(urls)], urls[(i + 1) % len(urls)]
        row = {"id": f"r{i}", "x": int(rng.integers(0, 10000)), "v": int(rng.integers(0, 1001))}
        got = session.post(f"{writer}/v1/datasets/{dataset}/rows", json=[row], headers=auth, timeout=30)
        acked = time.time()
        got.raise_for_status()
        while True:
            began = time.time()
            answer = session.post(f"{reader}/v1/datasets/{dataset}/query", json={"aggregates": ["count"]}, timeout=30)
            ended = time.time()
            asked += 1
            answer.raise_for_status()
            if answer.json()["count"] == i + 1:
                lags.append(ended - acked)
                break
            if began - acked >= VISIBLE_AFTER:
                violations.append({"write": i, "began_after_ack_s": round(began - acked, 3),
                                   "count": answer.json()["count"]})
            if ended - acked > WAIT_SECONDS:
                raise RuntimeError(f"write {i} through {writer} not seen by {reader} after {WAIT_SECONDS:g} s")
        if (i + 1) % 50 == 0:
            progress(f"  {i + 1} writes, lag p50 {np.median(lags) * 1000:.1f} ms")
    ms = np.array(lags) * 1000
    return {"writes": writes, "queries": asked, "stale_answers": asked - writes, "violations": len(violations),
            "violation_examples": violations[:5],
            "lag_ms": {"p50": round(float(np.percentile(ms, 50)), 1), "p90": round(float(np.percentile(ms, 90)), 1),
                       "p99": round(float(np.percentile(ms, 99)), 1), "max": round(float(ms.max()), 1),
                       "mean": round(float(ms.mean()), 1)}}


def run(settings: Settings, writes: int, hosts: int = 2, progress=lambda _: None) -> dict:
    """Start `hosts` API servers with boards of their own on the settings' servers, make
    a dataset, measure (see measure), drop the dataset, stop the servers."""
    import requests

    token = secrets.token_hex(8)
    settings = settings.with_(write_token=token, read_token=None)
    name = "visibility_" + uuid.uuid4().hex[:8]
    with started(settings, hosts) as servers:
        urls = [h.url for h in servers]
        progress(f"API servers {', '.join(urls)}, each with a board of its own; dataset {name}")
        auth = {"Authorization": f"Bearer {token}"}
        requests.post(f"{urls[0]}/v1/datasets", json=definition(name), headers=auth, timeout=60).raise_for_status()
        try:
            report = measure(urls, name, writes, token, progress)
        finally:
            _drop(settings, name)
    return {"store": settings.store, "hosts": hosts, **report}


def _drop(settings: Settings, name: str) -> None:
    """Drop the dataset (the API has no call for it)."""
    from gridagg.engine import GridEngine

    with GridEngine.open(settings) as engine:
        engine.drop_dataset(name)


def markdown(report: dict) -> list[str]:
    """The report's lines from a run's JSON report (command, machine, started and what
    run returns)."""
    lag = report["lag_ms"]
    return [*header("How soon a write shows on another API server", report["command"], report.get("machine"),
                    report.get("started")),
            f"{report['hosts']} API servers on the {report['store']} store, each with an epoch board of its own; "
            f"{report['writes']} rows written one at a time, each through one server, then counted through the next "
            "until it showed. Lag: from the acknowledgement to the end of the first answer that counted the row "
            f"(that query included). A violation: an answer begun {VISIBLE_AFTER:g} s or more after an "
            "acknowledgement that missed the write.", "",
            "| writes | queries | stale answers | violations | lag p50 ms | p90 | p99 | max | mean |",
            "|---|---|---|---|---|---|---|---|---|",
            f"| {report['writes']} | {report['queries']} | {report['stale_answers']} | {report['violations']} | "
            f"{lag['p50']} | {lag['p90']} | {lag['p99']} | {lag['max']} | {lag['mean']} |"]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m gridagg_loadtest.soak.visibility", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--writes", type=int, default=300, help="rows written, one at a time (default 300)")
    ap.add_argument("--hosts", type=int, default=2, help="API servers, each with a board of its own (default 2)")
    ap.add_argument("--store", choices=["embedded", "hbase"], default="hbase",
                    help="cell store (default hbase: the embedded store lives on one machine)")
    ap.add_argument("--report", metavar="FILE",
                    help="where the report goes, replacing the previous run's (default docs/soak/visibility.md of "
                         "the checkout; installed without a checkout: <data dir>/soak/)")
    args = ap.parse_args(argv)
    settings = Settings.from_env().with_(store=args.store)
    started_at = stamp()
    report = run(settings, args.writes, args.hosts, progress=lambda m: print(m, file=sys.stderr, flush=True))
    command = "python -m gridagg_loadtest.soak.visibility " + " ".join(argv if argv is not None else sys.argv[1:])
    report = {"command": command, "machine": machine(), "started": started_at, **report}
    print(json.dumps(report, indent=2))
    print(f"report: {write(soak_report(settings, args.report, 'visibility'), markdown(report))}", file=sys.stderr)
    return 0 if report["violations"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
