"""The nemesis: faults on a schedule drawn from a seed, injected while the soak's clients
run (Jepsen's approach).

Kinds of fault (KINDS); each is a crash, never a clean stop:
  hbase   SIGKILL the local HBase's master JVM, which in standalone mode holds the region
          server (and ZooKeeper); down a few seconds, then started again
  thrift  SIGKILL the Thrift gateway JVM; down a few seconds, then started again
  pg      PostgreSQL's immediate shutdown (every process quits, no checkpoint); down a
          few seconds, then started again (crash recovery from its WAL)
  writer  SIGKILL a writer process: at a random moment, or at a step of the write protocol
          (gridagg.faults: rows written but not their aggregates; a split's children
          written but not the directory switch; the switch made but not the intent ended);
          the crew starts a new writer in its place
  reader  SIGKILL a reader process at a random moment; a new one takes its place
Servers are crashed and started through gridagg.services (pg_crash / pg_up,
hbase_crash / hbase_up): the project's own service code.

The schedule is a list of faults, each after a pause drawn from `every` that begins when
the previous fault has healed (a server answers again, a killed client was replaced).
Kinds come round in turns, each turn in an order drawn from the seed, so a short run
sees every kind about equally often.
"""

from __future__ import annotations

import threading
import time
from dataclasses import asdict, dataclass

import numpy as np

from gridagg import services

KINDS = {
    "hbase": "kill -9 the HBase master JVM (standalone: the region server), start it again",
    "thrift": "kill -9 the HBase Thrift gateway, start it again",
    "pg": "crash PostgreSQL (immediate shutdown), start it again",
    "writer": "kill -9 a writer (at a random moment or a write-path fault point); a new one replaces it",
    "reader": "kill -9 a reader at a random moment; a new one replaces it",
}
SERVER_KINDS = ("hbase", "thrift", "pg")
DEFAULT_KINDS = {"hbase": ("hbase", "thrift", "pg", "writer", "reader"), "embedded": ("pg", "writer", "reader")}
WRITER_KILLS = ("any moment", "insert.rows_written", "insert.switching", "insert.switched")
DOWN = (1.0, 5.0)  # how long a crashed server stays down, seconds
POINT_PATIENCE = 20.0  # a writer armed at a fault point that has not died by then is killed


def parse_kinds(text: str, store: str) -> tuple[str, ...]:
    """The kinds named in `text` ("all": every kind that applies to the store). Raises
    ValueError naming an unknown kind, or one that needs the HBase store."""
    if text == "all":
        return DEFAULT_KINDS[store]
    kinds = tuple(dict.fromkeys(k.strip() for k in text.split(",") if k.strip()))
    for kind in kinds:
        if kind not in KINDS:
            raise ValueError(f"no fault kind {kind!r} (the kinds: {', '.join(KINDS)}, or all)")
        if kind in ("hbase", "thrift") and store != "hbase":
            raise ValueError(f"fault kind {kind} needs the HBase store (--store hbase)")
    return kinds


@dataclass(frozen=True)
class Fault:
    """One planned fault: `pause` seconds after the previous one healed, of `kind`;
    `down`: how long a server stays down; slot and how: which client dies, and where."""

    pause: float
    kind: str
    down: float = 0.0
    slot: int = 0
    how: str = ""

    def line(self) -> str:
        what = {"writer": f"writer {self.slot} at {self.how}", "reader": f"reader {self.slot}"}.get(
            self.kind, f"{self.kind} down {self.down:.1f} s")
        return f"after {self.pause:5.1f} s: {what}"


def schedule(kinds: tuple[str, ...], seconds: float, seed: int, every: tuple[float, float],
             writers: int, readers: int) -> list[Fault]:
    """Faults drawn from `seed` whose pauses alone fill `seconds` (restarts take longer,
    so the run ends before the last ones: they are never injected)."""
    rng = np.random.default_rng(seed)
    kinds = tuple(k for k in kinds if (k != "writer" or writers) and (k != "reader" or readers))
    faults: list[Fault] = []
    total = 0.0
    while kinds:
        for i in rng.permutation(len(kinds)):
            kind = kinds[int(i)]
            pause = float(rng.uniform(*every))
            total += pause
            if total > seconds:
                return faults
            if kind in SERVER_KINDS:
                faults.append(Fault(pause, kind, down=float(rng.uniform(*DOWN))))
            elif kind == "writer":
                faults.append(Fault(pause, kind, slot=int(rng.integers(writers)),
                                    how=WRITER_KILLS[int(rng.integers(len(WRITER_KILLS)))]))
            else:
                faults.append(Fault(pause, kind, slot=int(rng.integers(readers))))
    return faults


@dataclass
class Injected:
    """What happened to one fault (wall-clock times). killed: the crash; back: the
    server answered again (its start returned) or a new client took the killed one's
    place (None: neither before the run ended); life: the client killed ("slot.life");
    note: how it went, when not as planned."""

    kind: str
    detail: str
    killed: float
    back: float | None = None
    life: str = ""
    note: str = ""

    def as_dict(self) -> dict:
        return asdict(self)


class Nemesis(threading.Thread):
    """Injects `faults` one after another until stop() or `until` (no fault starts later);
    `injected` lists what happened. crew: the soak's loadtest.soak_clients.Crew."""

    def __init__(self, settings, faults: list[Fault], crew, until: float, progress=print):
        super().__init__(name="nemesis", daemon=True)
        self.settings = settings
        self.faults = faults
        self.crew = crew
        self.until = until
        self.progress = progress
        self.injected: list[Injected] = []
        self.error: BaseException | None = None
        self._halt = threading.Event()

    def stop(self) -> None:
        self._halt.set()

    def run(self) -> None:
        try:
            for fault in self.faults:
                if self._halt.wait(fault.pause) or time.time() >= self.until:
                    return
                record = self._inject(fault)
                self.injected.append(record)
                self.progress(f"nemesis: {record.kind} {record.detail}: "
                              + (f"back after {record.back - record.killed:.1f} s" if record.back else "not back")
                              + (f" ({record.note})" if record.note else ""))
        except BaseException as exc:  # the soak reports it and heals the servers
            self.error = exc

    def _inject(self, fault: Fault) -> Injected:
        if fault.kind in SERVER_KINDS:
            return self._crash_server(fault)
        return self._kill_client(fault)

    def _crash_server(self, fault: Fault) -> Injected:
        record = Injected(fault.kind, f"down {fault.down:.1f} s", killed=time.time())
        if fault.kind == "pg":
            services.pg_crash(self.settings)
        else:
            services.hbase_crash(self.settings, "master" if fault.kind == "hbase" else "thrift")
        time.sleep(fault.down)
        heal(self.settings, (fault.kind,))
        record.back = time.time()
        return record

    def _kill_client(self, fault: Fault) -> Injected:
        role, slot = fault.kind, fault.slot
        life = self.crew.current(role, slot)
        record = Injected(role, f"{slot} at {fault.how}" if fault.how else str(slot), killed=time.time(),
                          life=life.tag)
        if fault.how in ("", "any moment"):
            if not self.crew.kill(life):
                record.note = "its process had ended already"
        else:  # the writer kills itself at that point of the next write that reaches it
            life.arm_path.write_text(fault.how)
            until = time.time() + POINT_PATIENCE
            while self.crew.alive(life) and time.time() < until:
                time.sleep(0.02)
            record.killed = time.time()
            if self.crew.kill(life):
                record.note = f"not at {fault.how} within {POINT_PATIENCE:g} s: killed at any moment"
            life.arm_path.unlink(missing_ok=True)
        while self.crew.current(role, slot) is life and time.time() < self.until:
            time.sleep(0.02)  # the soak's main loop starts the replacement
        record.back = time.time() if self.crew.current(role, slot) is not life else None
        return record


def heal(settings, kinds) -> None:
    """Start every server of these fault kinds that is not running (trying again while
    a start fails, up to three times)."""
    for attempt in range(3):
        try:
            if "pg" in kinds:
                services.pg_up(settings)
            if "hbase" in kinds or "thrift" in kinds:
                services.hbase_up(settings)
            return
        except services.ServiceError:
            if attempt == 2:
                raise
            time.sleep(2)
