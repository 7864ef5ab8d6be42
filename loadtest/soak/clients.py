"""The soak's clients: writer, reader, deleter and corrector processes that behave like
real ones, and the crew that keeps them running while the nemesis
(loadtest/soak/nemesis.py) kills some.

A writer inserts batches of BATCH rows that follow from (writer tag, batch number) alone,
each within a square of the data space; a reader asks random box queries. A deleter
deletes whole acknowledged batches by their element IDs (within their square), a
corrector gives the rows of acknowledged batches new values, a batch's corrections one
after another (its corrector slot alone corrects it): batches whose number is 0 modulo
3 are the deleters', 1 the correctors', 2 are left alone. Deleters and correctors learn
which batches are acknowledged from the writers' logs. On
gridagg.model.errors.StoreUnavailable (the clear "try again later") a client waits with
a growing, jittered backoff and tries the same request again, until it succeeds or the
run ends. Any other error is a client crash: logged, and the process exits (the crew
starts another in its place).

Every client appends what it did to its own log, one JSON object a line, written before
the next step, so the log survives a SIGKILL (a torn last line is ignored):

  writer  {"t": "begin", "b": batch, "at": time}      before the insert's first attempt
          {"t": "ack", "b": batch, "start": s, "at": time, "stored": n, "duplicates": n}
  deleter {"t": "begin", "k": [writer tag, batch], "at": time}
          {"t": "ack", "k": [...], "start": s, "at": time, "deleted": n}
  corrector {"t": "begin", "k": [writer tag, batch], "n": its correction number, "at": time}
          {"t": "ack", "k": [...], "n": n, "start": s, "at": time, "replaced": n}
  reader  {"t": "answer", "start": s, "end": e, "where": ..., "aggs": [...], "values": {...},
           "calls": the store's calls by region server (the plan's store_calls)}
  both    {"t": "fail", "start": s, "end": e, "error": "unavailable" | "unclear", "msg": ...}
          {"t": "ready", "at": time}   connected, about to send requests
          {"t": "armed", "point": p, "at": time}   a fault point the nemesis asked for

Times are wall-clock seconds (time.time()): every process on the machine shares them. A
writer's batch (a deleter's delete, a corrector's correction) counts as begun at its
first attempt; an answer's start is the start of the attempt that succeeded.
"""

from __future__ import annotations

import contextlib
import json
import logging
import multiprocessing as mp
import os
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from gridagg.config import Settings
from gridagg.engine import GridEngine
from gridagg.model.errors import StoreUnavailable
from gridagg.model.schema import Dataset
from gridagg.write import faults

BATCH = 25
SQUARE = 1000  # a batch's rows lie in a square this wide
AGGS = ["count", "sum:v", "min:v", "max:v"]
BACKOFF = (0.05, 2.0)  # first and longest wait before trying again, seconds
UNCLEAR_EXIT = 3  # exit code of a client that met an error other than StoreUnavailable


def definition_json(name: str) -> dict:
    """The soak's dataset as a user posts it to /v1/datasets: two dimensions, one measure
    (never negative), whole numbers all; small leaves that split often."""
    return {
        "name": name,
        "dimensions": [{"name": "x", "min": 0, "max": 9999}, {"name": "y", "min": 0, "max": 9999}],
        "measures": [{"name": "v", "min": 0, "max": 1000}],
        "grid": {"n_size": 20, "n_threshold": 60},
    }


def definition(name: str) -> Dataset:
    """The soak's dataset as gridagg reads it."""
    return Dataset.from_json(definition_json(name))


def batch_rows(writer: str, batch: int) -> np.ndarray:
    """The (BATCH, 3) stored rows (x, y, v) of a writer's batch, in a square of SQUARE
    on a side somewhere in the data space (so that a delete of the batch looks at the
    few leaves there)."""
    rng = np.random.default_rng([*map(int, writer.split(".")), batch])
    x0, y0 = rng.integers(0, 10000 - SQUARE, 2)
    return np.stack([x0 + rng.integers(0, SQUARE, BATCH), y0 + rng.integers(0, SQUARE, BATCH),
                     rng.integers(0, 1001, BATCH)], axis=1).astype(np.int64)


def corrected_rows(key: tuple[str, int], corrector: str, n: int) -> np.ndarray:
    """The rows of batch `key` (writer tag, batch) as correction `n` of corrector life
    `corrector` gives them: the same points, other values."""
    rows = batch_rows(*key)
    rng = np.random.default_rng([*map(int, key[0].split(".")), key[1], *map(int, corrector.split(".")), n])
    rows[:, 2] = rng.integers(0, 1001, BATCH)
    return rows


def square_of(rows: np.ndarray) -> dict:
    """The box (as a query's where) of a batch's rows."""
    return {"x": [int(rows[:, 0].min()), int(rows[:, 0].max())], "y": [int(rows[:, 1].min()), int(rows[:, 1].max())]}


def owner(key: tuple[str, int], deleters: int, correctors: int) -> tuple[str, int] | None:
    """Who changes batch `key`: ("deleter", any slot: -1), ("corrector", its one slot),
    or None (nobody)."""
    tag, batch = key
    if batch % 3 == 0 and deleters:
        return "deleter", -1
    if batch % 3 == 1 and correctors:
        return "corrector", (sum(map(int, tag.split("."))) * 7919 + batch) % correctors
    return None


def element_ids(writer: str, batch: int) -> list[bytes]:
    """The element IDs of a batch's rows: "w<writer>.<batch>.<i>"."""
    return [f"w{writer}.{batch}.{i}".encode() for i in range(BATCH)]


def batch_of(element_id: bytes) -> tuple[str, int]:
    """(writer tag, batch number) of an element ID made by element_ids."""
    slot, life, batch, _ = element_id.decode()[1:].split(".")
    return f"{slot}.{life}", int(batch)


@dataclass(frozen=True)
class Client:
    """One life of a client process. role: "writer", "reader", "deleter" or
    "corrector"; slot: its place in the crew; life: how many processes held that slot
    before it; tag: "<slot>.<life>"."""

    settings: Settings
    dataset: str
    role: str
    slot: int
    life: int
    deadline: float  # time.time() at which to stop
    run_dir: Path  # logs and the nemesis' requests
    machine: int = 0  # the host it stands for (its settings name that host's epoch board)
    deleters: int = 0  # the crew's deleters and correctors (who changes which batch: owner)
    correctors: int = 0
    threads: int = 0  # of an asker process: its askers (loadtest/soak/beside.py)

    @property
    def tag(self) -> str:
        return f"{self.slot}.{self.life}"

    @property
    def log_path(self) -> Path:
        return self.run_dir / f"{self.role}-{self.tag}.jsonl"

    @property
    def arm_path(self) -> Path:
        """A file the nemesis writes a fault point's name into for this slot's writer."""
        return self.run_dir / f"arm-{self.role}-{self.slot}"


class Log:
    """Appends JSON lines to a file; each line reaches the OS before the call returns."""

    def __init__(self, path: Path):
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def write(self, **record) -> None:
        os.write(self.fd, (json.dumps(record) + "\n").encode())


def read_log(path: Path) -> list[dict]:
    """The records of a client's log (a line torn by a SIGKILL is left out)."""
    records = []
    for line in path.read_text().splitlines():
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            pass
    return records


class Backoff:
    """Waits between tries: doubling from BACKOFF[0] up to BACKOFF[1], each drawn between
    half and all of that (jitter, so clients do not retry in step)."""

    def __init__(self, rng: np.random.Generator):
        self.rng = rng
        self.next = BACKOFF[0]

    def wait(self) -> None:
        time.sleep(self.next * float(self.rng.uniform(0.5, 1.0)))
        self.next = min(2 * self.next, BACKOFF[1])


def call(client: Client, log: Log, rng: np.random.Generator, request):
    """request() until it succeeds: (its result, start of the successful try, its end),
    or None when the run ended first. StoreUnavailable is logged and tried again after
    a backoff; any other error is logged and raised (the client crashes)."""
    backoff = Backoff(rng)
    while time.time() < client.deadline:
        start = time.time()
        try:
            result = request()
            return result, start, time.time()
        except StoreUnavailable as exc:
            log.write(t="fail", start=start, end=time.time(), error="unavailable", msg=str(exc)[:300])
            backoff.wait()
        except Exception as exc:
            log.write(t="fail", start=start, end=time.time(), error="unclear",
                      msg=f"{type(exc).__module__}.{type(exc).__name__}: {str(exc)[:300]}")
            raise
    return None


def open_engine(settings: Settings) -> GridEngine:
    """An engine on the settings' PostgreSQL and store (raises StoreUnavailable while
    PostgreSQL is away)."""
    return GridEngine.open(settings, max_connections=2)


def _connect(client: Client, log: Log, rng: np.random.Generator):
    """(engine, dataset) once PostgreSQL answers, or None when the run ended first."""
    engine = call(client, log, rng, lambda: open_engine(client.settings))
    if engine is None:
        return None
    ds = call(client, log, rng, lambda: engine[0].dataset(client.dataset))
    return None if ds is None else (engine[0], ds[0])


def _started(client: Client, kind: int):
    """(log, rng, engine, dataset) of a client process (kind 1: a writer, 2: a reader, 3:
    a deleter, 4: a corrector), its readiness logged; None when the run ended before it
    could connect."""
    log = Log(client.log_path)
    rng = np.random.default_rng([client.slot, client.life, kind])
    connected = _connect(client, log, rng)
    if connected is None:
        return None
    log.write(t="ready", at=time.time())
    return log, rng, *connected


def run_writer(client: Client) -> None:
    """Insert batch after batch until the deadline (the body of a writer process)."""
    started = _started(client, 1)
    if started is None:
        return
    log, rng, engine, ds = started
    with contextlib.ExitStack() as armed:
        batch = 0
        while time.time() < client.deadline:
            _arm(client, log, armed)  # the nemesis may want this writer to die at a point of a write
            rows, ids = batch_rows(client.tag, batch), element_ids(client.tag, batch)
            log.write(t="begin", b=batch, at=time.time())
            done = call(client, log, rng, lambda: engine.insert_encoded(ds, ids, rows))
            if done is None:
                return  # the run ended while the store was away: this batch is a maybe
            result, start, acked = done
            log.write(t="ack", b=batch, start=start, at=acked, stored=result.stored, duplicates=result.duplicates)
            batch += 1


class AckedBatches:
    """The batches the writers' logs (in `run_dir`) acknowledge, read anew as they grow."""

    def __init__(self, run_dir: Path):
        self.run_dir = run_dir
        self.keys: list[tuple[str, int]] = []
        self._read: dict[Path, int] = {}  # log -> bytes read of it

    def refresh(self) -> list[tuple[str, int]]:
        for path in sorted(self.run_dir.glob("writer-*.jsonl")):
            tag = path.stem.removeprefix("writer-")
            with open(path, "rb") as f:
                f.seek(self._read.get(path, 0))
                data = f.read()
            whole = data[: data.rfind(b"\n") + 1]  # a line still being written waits for the next refresh
            self._read[path] = self._read.get(path, 0) + len(whole)
            for line in whole.splitlines():
                try:
                    record = json.loads(line)
                except json.JSONDecodeError:
                    continue
                if record.get("t") == "ack":
                    self.keys.append((tag, record["b"]))
        return self.keys


def _arm(client: Client, log: Log, armed: contextlib.ExitStack) -> None:
    """Arm the fault point the nemesis asked this client to die at, if it asked."""
    point = _take_request(client.arm_path)
    if point:
        armed.enter_context(faults.armed(f"{point}=kill"))
        log.write(t="armed", point=point, at=time.time())


def run_changer(client: Client) -> None:
    """Delete (a deleter) or correct (a corrector) acknowledged batches until the
    deadline (the body of a deleter or corrector process)."""
    started = _started(client, 3 if client.role == "deleter" else 4)
    if started is None:
        return
    log, rng, engine, ds = started
    acked, done, n = AckedBatches(client.run_dir), set(), 0
    slot = -1 if client.role == "deleter" else client.slot
    with contextlib.ExitStack() as armed:
        while time.time() < client.deadline:
            _arm(client, log, armed)
            mine = [k for k in acked.refresh()
                    if owner(k, client.deleters, client.correctors) == (client.role, slot) and k not in done]
            if not mine:
                time.sleep(0.1)
                continue
            key = mine[int(rng.integers(len(mine)))]
            ids, rows = element_ids(*key), batch_rows(*key)
            if client.role == "deleter":
                log.write(t="begin", k=list(key), at=time.time())
                change = lambda: engine.delete(ds.name, square_of(rows), ids=[e.decode() for e in ids])  # noqa: E731
            else:
                rows = corrected_rows(key, client.tag, n)
                log.write(t="begin", k=list(key), n=n, at=time.time())
                change = lambda: engine.correct_encoded(ds, ids, rows)  # noqa: E731
            result = call(client, log, rng, change)
            if result is None:
                return  # the run ended while the store was away: this change is a maybe
            out, start, acked_at = result
            if client.role == "deleter":
                done.add(key)  # a batch is deleted once
                log.write(t="ack", k=list(key), start=start, at=acked_at, deleted=out.rows_before - out.rows_after)
            else:
                log.write(t="ack", k=list(key), n=n, start=start, at=acked_at, replaced=out.replaced)
                n += 1


def _take_request(path: Path) -> str | None:
    try:
        point = path.read_text().strip()
    except FileNotFoundError:
        return None
    path.unlink(missing_ok=True)
    return point or None


def random_query(rng: np.random.Generator) -> tuple[dict, list[str]]:
    """A random box and aggregates (a third of them one aggregate alone: min or max
    alone needs no scan)."""
    x0, y0 = (int(v) for v in rng.integers(0, 9000, 2))
    where = {"x": [x0, x0 + int(rng.integers(100, 5000))], "y": [y0, y0 + int(rng.integers(100, 5000))]}
    aggs = [AGGS[int(rng.integers(0, 4))]] if rng.integers(0, 3) == 0 else AGGS
    return where, aggs


def run_reader(client: Client) -> None:
    """Ask random queries until the deadline (the body of a reader process)."""
    started = _started(client, 2)
    if started is None:
        return
    log, rng, engine, _ = started
    while time.time() < client.deadline:
        where, aggs = random_query(rng)
        done = call(client, log, rng, lambda: engine.query(client.dataset, where, aggs))
        if done is None:
            return
        result, start, end = done
        log.write(t="answer", start=start, end=end, where=where, aggs=aggs, values=result.values,
                  calls=result.plan.store_calls)


def run_askers(client: Client) -> None:
    """Ask the big dataset's questions until the deadline (the body of an asker process)."""
    from .beside import run_asker

    started = _started(client, 5)
    if started is not None:
        run_asker(client, started)


def _main(client: Client) -> None:
    # The pool's workers warn at every failed reconnection while PostgreSQL is down;
    # the client's log has each failed request already.
    logging.getLogger("psycopg.pool").setLevel(logging.ERROR)
    try:
        {"writer": run_writer, "reader": run_reader, "asker": run_askers}.get(client.role, run_changer)(client)
    except Exception:  # logged by call(); the exit code tells the crew
        os._exit(UNCLEAR_EXIT)


def machine_of(role: str, slot: int, machines: int) -> int:
    """The host a client stands for, of `machines`: writers and readers in turns, the
    first reader on another host than the first writer (deleters and correctors too)."""
    return (slot + (role != "writer")) % machines


class Crew:
    """Keeps `writers` writer, `readers` reader, `deleters` deleter and `correctors`
    corrector processes running until the deadline: a process that died (killed, or
    crashed on an unclear error) is replaced by a new life in its slot. Every life's Client is kept in `lives`. With `machines` > 1 the
    clients stand for that many hosts (machine_of): each host's clients share an epoch
    board of their own (run_dir/board-<host>), so a write reaches the others' queries
    only through PostgreSQL, as between API servers on separate hosts."""

    def __init__(self, settings: Settings, dataset: str, deadline: float, run_dir: Path, writers: int,
                 readers: int, machines: int = 1, deleters: int = 0, correctors: int = 0,
                 askers: list[int] = ()):
        self.ctx = mp.get_context("spawn")
        self.dataset = dataset
        self.machines = machines
        self.lives: list[Client] = []
        self.exits: dict[str, int | None] = {}  # log file name -> exit code
        self._procs: dict[tuple[str, int], tuple[Client, mp.Process]] = {}
        self._lock = threading.Lock()
        template = Client(settings, dataset, "writer", 0, 0, deadline, run_dir, deleters=deleters,
                          correctors=correctors)
        for role, n in (("writer", writers), ("reader", readers), ("deleter", deleters), ("corrector", correctors)):
            for slot in range(n):
                machine = machine_of(role, slot, machines)
                here = settings.with_(epoch_dir=run_dir / f"board-{machine}") if machines > 1 else settings
                self._start(replace(template, settings=here, role=role, slot=slot, machine=machine))
        for slot, threads in enumerate(askers):  # each a process of `threads` askers, on the first host
            self._start(replace(template, role="asker", slot=slot, threads=threads))

    def _start(self, client: Client) -> None:
        proc = self.ctx.Process(target=_main, args=(client,), daemon=True)
        proc.start()
        self.lives.append(client)
        self._procs[(client.role, client.slot)] = (client, proc)

    def replace_dead(self, until: float) -> list[Client]:
        """Start a new life in every slot whose process died (if there is time before
        `until`); returns the new lives."""
        started = []
        with self._lock:
            for (role, slot), (client, proc) in list(self._procs.items()):
                if proc.is_alive() or time.time() >= until:
                    continue
                proc.join()
                self.exits[client.log_path.name] = proc.exitcode
                new = replace(client, life=client.life + 1)
                self._start(new)
                started.append(new)
        return started

    def current(self, role: str, slot: int) -> Client:
        """The life that holds that slot now."""
        with self._lock:
            return self._procs[(role, slot)][0]

    def alive(self, client: Client) -> bool:
        """Whether that life's process still runs."""
        with self._lock:
            held, proc = self._procs[(client.role, client.slot)]
            return held is client and proc.is_alive()

    def kill(self, client: Client) -> bool:
        """SIGKILL that life's process if it still runs; returns whether it did."""
        with self._lock:
            held, proc = self._procs[(client.role, client.slot)]
            if held is not client or not proc.is_alive():
                return False
            proc.kill()
            proc.join()
            return True

    def join(self, timeout: float) -> list[Client]:
        """Wait for every process to end by itself (they stop at the deadline); kill those
        still running after `timeout` seconds and return their lives (hung clients)."""
        hung = []
        until = time.time() + timeout
        with self._lock:
            for client, proc in self._procs.values():
                proc.join(max(0.0, until - time.time()))
                if proc.is_alive():
                    proc.kill()
                    proc.join()
                    hung.append(client)
                self.exits[client.log_path.name] = proc.exitcode
        return hung
