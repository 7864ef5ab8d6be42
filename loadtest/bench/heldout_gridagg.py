"""gridagg in the held-out bench, as a user runs it: a dataset loaded with `gridagg ingest`
from a config without an n_size (gridagg chooses it), asked over HTTP by a keep-alive
client (Client), and tuned with the training stream only: served by `gridagg serve` with
its online tuner on while a client asks the training questions, then `gridagg tune NAME`
on the questions the serving processes sampled (`tune`). What the tuning took: wall
time, CPU of the serving processes, of `gridagg tune` and of HBase, and the dataset's
bytes in its store before and after.
"""

from __future__ import annotations

import http.client
import json
import re
import subprocess
import sys
import time
from pathlib import Path

from gridagg.config import Settings
from gridagg.model.errors import UnknownDataset

from ..hosts import free_port, stop, wait_healthy
from .cpu import CpuMeter
from .heldout_families import Question
from .log import log
from .systems import engine_of

START_SECONDS = 600.0  # a serving process loads a large tree before it answers /healthz


class Client:
    """One keep-alive HTTP/1.1 connection to a server at 127.0.0.1."""

    def __init__(self, url: str):
        host, port = url.removeprefix("http://").split(":")
        self.conn = http.client.HTTPConnection(host, int(port), timeout=600)

    def post(self, path: str, body: dict) -> tuple[int, dict, float]:
        """(status, the JSON answer, ms from sending to the answer read)."""
        data = json.dumps(body).encode()
        t0 = time.perf_counter()
        self.conn.request("POST", path, data, {"Content-Type": "application/json"})
        r = self.conn.getresponse()
        text = r.read()
        ms = (time.perf_counter() - t0) * 1000
        return r.status, json.loads(text) if text else {}, ms

    def close(self) -> None:
        self.conn.close()


def config_without_n_size(example: Path, name: str, out: Path) -> Path:
    """The ingest config `example` as dataset `name`, reading Parquet, with no n_size
    or n_threshold (gridagg chooses them), written to `out`."""
    lines, section = [], ""
    for line in Path(example).read_text().splitlines():
        head = re.match(r"^\s*\[+\s*([^\]]+?)\s*\]+", line)
        section = head.group(1) if head else section
        key = line.split("=", 1)[0].strip()
        if section == "grid" and key in ("n_size", "n_threshold"):
            continue
        if section == "dataset" and key == "name":
            line = f'name = "{name}"'
        if section == "input" and key == "format":
            line = 'format = "parquet"'
        lines.append(line)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines) + "\n")
    return out


def _gridagg(*args: str) -> list[str]:
    return [sys.executable, "-m", "gridagg.cli.main", *args]


def ingest(settings: Settings, store: str, name: str, config: Path, archive: Path, logdir: Path) -> dict:
    """Dataset `name` dropped if there, then loaded by `gridagg ingest` on `store`; its
    summary, wall seconds, leaves, the n_size chosen and bytes in the store."""
    with engine_of(settings, store) as engine:
        try:
            engine.drop_dataset(name)
        except UnknownDataset:
            pass
    logdir.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    with open(logdir / f"ingest-{name}.log", "w") as err:
        done = subprocess.run(_gridagg("ingest", str(config), str(archive), "--store", store, "--quiet", "--json"),
                              env=settings.with_(store=store).environ(), stdout=subprocess.PIPE,
                              stderr=err, text=True)
    if done.returncode:
        raise RuntimeError(f"gridagg ingest of {name} failed ({done.returncode}); see {err.name}")
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    shape = tree_shape(settings, store, name)
    return {"system": f"gridagg ({store})", "store": store, "dataset": name, "rows": summary["loaded"],
            "seconds": time.perf_counter() - t0, "job_seconds": summary["seconds"],
            "quarantined": summary["quarantined"], "duplicates": summary["duplicates"],
            "bytes": dataset_bytes(settings, store, name), **shape}


def tree_shape(settings: Settings, store: str, name: str) -> dict:
    """The dataset's leaves and n_size now."""
    with engine_of(settings, store) as engine:
        ds = engine.dataset(name)
        return {"leaves": engine.trees.tree(ds).leaf_count, "n_size": ds.grid.n_size}


def dataset_bytes(settings: Settings, store: str, name: str) -> int:
    """Bytes the dataset's rows and aggregates take in the store: its LMDB databases'
    pages (embedded), its table's files in the local HBase."""
    if store == "hbase":
        from gridagg_hbase import jvm

        from gridagg.store.hbase.store import table_name

        return jvm.table_bytes(settings, table_name(name))
    from gridagg.store.embedded import EmbeddedStore

    es = EmbeddedStore(settings.lmdb_dir)
    try:
        dbs = [es._db(name, family) for family in ("s", "a")]
        with es.env.begin() as txn:
            stats = [txn.stat(db) for db in dbs]
        return sum((s["branch_pages"] + s["leaf_pages"] + s["overflow_pages"]) * s["psize"] for s in stats)
    finally:
        es.close()


def hbase_cpu(settings: Settings, store: str) -> dict:
    """The CPU group of the local HBase's JVMs (every role) on the HBase store; none else."""
    if store != "hbase":
        return {}
    from gridagg_hbase import launcher

    return {"hbase": lambda: list(launcher.running_roles(settings).values())}


def tune(settings: Settings, store: str, name: str, training: list[Question], minutes: float, every: float,
         logdir: Path) -> dict:
    """Dataset `name` tuned with the training questions only: `gridagg serve` with its
    online tuner every `every` seconds, asked the training stream round and round by
    one client until the tree has not changed for three of the tuner's rounds after two
    passes, or `minutes` pass; then `gridagg tune NAME` on what it sampled (rounds until
    still, compaction, the tree kept). Returns what it took."""
    from gridagg.directory import GridDirectory
    from gridagg.tune.online import sample_path

    sample_path(settings.data_dir, store, name).unlink(missing_ok=True)  # a sample of an earlier run's questions
    before = {"bytes": dataset_bytes(settings, store, name), **tree_shape(settings, store, name)}
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    logdir.mkdir(parents=True, exist_ok=True)
    server_log = logdir / f"tuning-{name}.log"
    env = settings.with_(store=store, tune_every=every, read_token=None).environ()
    with open(server_log, "w") as out:
        proc = subprocess.Popen(_gridagg("serve", "--port", str(port), "--no-access-log"), env=env, stdout=out,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
    meter = CpuMeter({"api": lambda: [proc.pid], **hbase_cpu(settings, store)})
    directory = GridDirectory(settings.effective_pg_url, 1)
    asked = refused = passes = changes = 0
    t0 = time.perf_counter()
    try:
        ds = directory.dataset(name)
        version = directory.changes_since(ds, 0).version
        wait_healthy(proc, url, server_log, START_SECONDS)
        with meter.measure() as served:
            client = Client(url)
            changed_at = started = time.perf_counter()
            while time.perf_counter() - started < 60 * minutes:
                for q in training:
                    status, _, _ = client.post(q.path(name), q.body)
                    asked, refused = asked + 1, refused + (status != 200)
                passes += 1
                now = directory.changes_since(ds, version).version
                if now != version:  # a round of the online tuner split or merged leaves
                    version, changes, changed_at = now, changes + 1, time.perf_counter()
                if passes >= 2 and time.perf_counter() - changed_at > 3 * every:
                    break
            client.close()
    finally:
        stop(proc)
        directory.close()
    serve_seconds = time.perf_counter() - t0
    log(f"  {name}: {asked:,} training questions asked in {passes} passes, the tree changed {changes} times; "
        f"now gridagg tune {name}")
    tune_log = logdir / f"tune-{name}.log"
    with open(tune_log, "w") as out, CpuMeter(hbase_cpu(settings, store)).measure() as tuned:
        t1 = time.perf_counter()
        proc = subprocess.Popen(_gridagg("tune", name), env=settings.with_(store=store).environ(), stdout=out,
                                stderr=subprocess.STDOUT)
        tuned.add_child(proc, timeout=24 * 3600)
        tune_seconds = time.perf_counter() - t1
    if proc.returncode:
        raise RuntimeError(f"gridagg tune {name} failed ({proc.returncode}); see {tune_log}")
    after = {"bytes": dataset_bytes(settings, store, name), **tree_shape(settings, store, name)}
    return {"store": store, "dataset": name, "training_questions": len(training), "asked": asked, "refused": refused,
            "passes": passes, "online_changes": changes, "serve_seconds": serve_seconds,
            "serve_cpu": {k: round(v, 2) for k, v in served.cpu.items() if k != "machine"},
            "tune_seconds": tune_seconds, "tune_cpu": {k: round(v, 2) for k, v in tuned.cpu.items() if k != "machine"},
            "before": before,
            "after": after, "tune_output": tune_log.read_text()[-3000:]}
