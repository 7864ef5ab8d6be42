"""The nemesis: faults on a schedule drawn from a seed, injected while the soak's clients
run (Jepsen's approach).

Kinds of fault (KINDS); each is a crash or a change under load, never a clean stop:
  hbase   SIGKILL the local HBase's master JVM (standalone: it holds the region server
          and ZooKeeper too); down a few seconds, then started again
  thrift  SIGKILL the Thrift gateway JVM; down a few seconds, then started again
  pg      PostgreSQL's immediate shutdown (every process quits, no checkpoint); down a
          few seconds, then started again (crash recovery from its WAL)
  writer  SIGKILL a writer process: at a random moment, or at a step of the write protocol
          (gridagg.write.faults: rows written but not their aggregates; a split's children
          written but not the directory switch; the switch made but not the intent ended);
          the crew starts a new writer in its place
  reader  SIGKILL a reader process at a random moment; a new one takes its place
  deleter, corrector  SIGKILL a deleter (corrector) process at a random moment or at a
          step of its change's write protocol; a new one takes its place
With several region servers (`gridagg services up --region-servers N`) also:
  regionserver  SIGKILL one region server holding regions of the soak's table; the
          master finds it dead when its ZooKeeper session expires and reopens its regions
          on the others from its write-ahead log; it is started again 15-25 s later.
          Meanwhile every region it held is probed until it answers again
  move    move a region of the soak's table to another region server
  split   split a region of the soak's table in two, at the middle of its keys
  balance run the balancer (it moves regions to even out the servers' shares)
Servers are crashed and started through gridagg.cli.services (pg_crash / pg_up,
hbase_crash / hbase_up), regions changed through hbase/admin.region_admin: the
project's own code.

The schedule is a list of faults, each after a pause drawn from `every` that begins when
the previous fault has healed (a server answers again, a killed client was replaced, a
region change returned).
Kinds come round in turns, each turn in an order drawn from the seed, so a short run
sees every kind about equally often.
"""

from __future__ import annotations

import threading
import time
from dataclasses import asdict, dataclass, field

import numpy as np
from gridagg_hbase import admin, jvm, launcher

from gridagg.cli import services

KINDS = {
    "hbase": "kill -9 the HBase master JVM (standalone: the region server), start it again",
    "thrift": "kill -9 the HBase Thrift gateway, start it again",
    "pg": "crash PostgreSQL (immediate shutdown), start it again",
    "writer": "kill -9 a writer (at a random moment or a write-path fault point); a new one replaces it",
    "reader": "kill -9 a reader at a random moment; a new one replaces it",
    "deleter": "kill -9 a deleter (at a random moment or a delete's fault point); a new one replaces it",
    "corrector": "kill -9 a corrector (at a random moment or a correction's fault point); a new one replaces it",
    "regionserver": "kill -9 a region server (of several); its regions reopen elsewhere; started again later",
    "move": "move a region of the soak's table to another region server",
    "split": "split a region of the soak's table at the middle of its keys",
    "balance": "run the HBase balancer",
}
SERVER_KINDS = ("hbase", "thrift", "pg", "regionserver")
REGION_KINDS = ("move", "split", "balance")
CLUSTER_KINDS = ("regionserver", *REGION_KINDS)  # need several region servers
HBASE_KINDS = ("hbase", "thrift", *CLUSTER_KINDS)
CLIENT_KINDS = ("writer", "reader", "deleter", "corrector")
DEFAULT_KINDS = {"hbase": ("hbase", "thrift", "pg", *CLIENT_KINDS), "embedded": ("pg", *CLIENT_KINDS)}
# Where a client of each kind that writes is killed: a random moment, or a fault point
# of its write (gridagg.write.faults).
KILLS = {role: ("any moment", *(f"{kind}.{step}" for step in ("rows_written", "switching", "switched")))
         for role, kind in (("writer", "insert"), ("deleter", "delete"), ("corrector", "correct"))}
DOWN = (1.0, 5.0)  # how long a crashed server stays down, seconds
# A killed region server stays down longer than the master takes to find it dead
# (jvm.SESSION_TIMEOUT_MS) and reopen its regions elsewhere.
REGIONSERVER_DOWN = (15.0, 25.0)
REGIONS_BACK_PATIENCE = 60.0  # how long a dead server's regions are probed, seconds from the kill
POINT_PATIENCE = 20.0  # a writer armed at a fault point that has not died by then is killed


def parse_kinds(text: str, store: str, region_servers: int = 0) -> tuple[str, ...]:
    """The kinds named in `text` ("all": every kind that applies to the store and to a
    local HBase of `region_servers` region servers, 0 standalone). Raises ValueError
    naming an unknown kind, or one that needs the HBase store or several region servers."""
    if text == "all":
        return DEFAULT_KINDS[store] + (CLUSTER_KINDS if store == "hbase" and region_servers > 1 else ())
    kinds = tuple(dict.fromkeys(k.strip() for k in text.split(",") if k.strip()))
    for kind in kinds:
        if kind not in KINDS:
            raise ValueError(f"no fault kind {kind!r} (the kinds: {', '.join(KINDS)}, or all)")
        if kind in HBASE_KINDS and store != "hbase":
            raise ValueError(f"fault kind {kind} needs the HBase store (--store hbase)")
        if kind in CLUSTER_KINDS and region_servers < 2:
            raise ValueError(f"fault kind {kind} needs a local HBase of several region servers "
                             "(gridagg services up --region-servers 3)")
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
        what = (f"{self.kind} {self.slot}" + (f" at {self.how}" if self.how else "") if self.kind in CLIENT_KINDS
                else self.kind if self.kind in REGION_KINDS else f"{self.kind} down {self.down:.1f} s")
        return f"after {self.pause:5.1f} s: {what}"


def schedule(kinds: tuple[str, ...], seconds: float, seed: int, every: tuple[float, float],
             writers: int, readers: int, deleters: int = 0, correctors: int = 0) -> list[Fault]:
    """Faults drawn from `seed` whose pauses alone fill `seconds` (restarts take longer,
    so the run ends before the last ones: they are never injected); a kind of client
    the crew has none of is left out."""
    rng = np.random.default_rng(seed)
    crew = dict(zip(CLIENT_KINDS, (writers, readers, deleters, correctors)))
    kinds = tuple(k for k in kinds if crew.get(k, 1))
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
                down = REGIONSERVER_DOWN if kind == "regionserver" else DOWN
                faults.append(Fault(pause, kind, down=float(rng.uniform(*down)), slot=int(rng.integers(1 << 16))))
            elif kind in REGION_KINDS:
                faults.append(Fault(pause, kind, slot=int(rng.integers(1 << 16))))
            elif kind in KILLS:
                faults.append(Fault(pause, kind, slot=int(rng.integers(crew[kind])),
                                    how=KILLS[kind][int(rng.integers(len(KILLS[kind])))]))
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
    # A killed region server: its regions of the soak's table ([start, end) in hex) and
    # the seconds from the kill until each answered again (None: not within
    # REGIONS_BACK_PATIENCE).
    regions: list = field(default_factory=list)
    regions_back: list = field(default_factory=list)

    def as_dict(self) -> dict:
        return asdict(self)


class Nemesis(threading.Thread):
    """Injects `faults` one after another until stop() or `until` (no fault starts later);
    `injected` lists what happened. crew: the soak's loadtest/soak/clients.py: Crew."""

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
        if fault.kind == "regionserver":
            return self._kill_region_server(fault)
        if fault.kind in SERVER_KINDS:
            return self._crash_server(fault)
        if fault.kind in REGION_KINDS:
            return self._change_regions(fault)
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

    def _kill_region_server(self, fault: Fault) -> Injected:
        """Kill a region server holding regions of the soak's table (fault.slot picks
        which), probe each of those regions until it answers again, start the server
        again after fault.down seconds."""
        held = {}
        for region in soak_regions(self.settings, self.crew.dataset):
            held.setdefault(region.server, []).append(region)
        ports = {jvm.rpc_port(self.settings, role): role
                 for role in jvm.roles(jvm.recorded_layout(self.settings) or 0) if role.startswith("rs")}
        candidates = sorted(server for server in held if int(server.rpartition(":")[2]) in ports)
        if not candidates:
            return Injected(fault.kind, "no region server holds regions of the soak's table", time.time(),
                            time.time(), note="not injected")
        server = candidates[fault.slot % len(candidates)]
        role = ports[int(server.rpartition(":")[2])]
        regions = held[server]
        record = Injected(fault.kind, f"{role} down {fault.down:.1f} s", killed=time.time(),
                          regions=[f"[{r.start.hex()}, {r.end.hex()})" for r in regions])
        services.hbase_crash(self.settings, role)
        probe = threading.Thread(target=lambda: record.regions_back.extend(
            regions_back(self.settings, self.crew.dataset, regions, record.killed)), name="regions-back", daemon=True)
        probe.start()
        time.sleep(fault.down)
        heal(self.settings, (fault.kind,))
        record.back = time.time()
        probe.join()
        return record

    def _change_regions(self, fault: Fault) -> Injected:
        """Move or split a region of the soak's table (fault.slot picks which, and where
        to), or run the balancer; done when the regions are online again."""
        table = f"gridagg_{self.crew.dataset}"
        regions = soak_regions(self.settings, self.crew.dataset)
        region = regions[fault.slot % len(regions)]
        began = time.time()
        try:
            if fault.kind == "move":
                others = sorted(({r.server for r in regions} | set(region_servers(self.settings))) - {region.server})
                if not others:
                    return Injected(fault.kind, "no other region server", began, time.time(), note="not injected")
                to = others[(fault.slot >> 8) % len(others)]
                detail = f"[{region.start.hex()}, {region.end.hex()}) {region.server} -> {to}"
                admin.region_admin(self.settings, "move", table, (region.start or b"\0").hex(),
                                      to.rpartition(":")[2])
            elif fault.kind == "split":
                at = middle(region.start, region.end)
                detail = f"[{region.start.hex()}, {region.end.hex()}) at {at.hex()}"
                admin.region_admin(self.settings, "split", table, at.hex())
            else:
                detail = admin.region_admin(self.settings, "balance", table)
        except jvm.LauncherError as exc:
            # HBase may refuse, e.g. a split of a region that still holds edits recovered
            # from a dead server's log: the change did not happen, the run goes on.
            return Injected(fault.kind, f"[{region.start.hex()}, {region.end.hex()})", began, time.time(),
                            note=f"refused by HBase: {str(exc)[:300]}")
        return Injected(fault.kind, detail, killed=began, back=time.time())

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
            if any(k in ("hbase", "thrift", "regionserver") for k in kinds):
                services.hbase_up(settings)
            return
        except services.ServiceError:
            if attempt == 2:
                raise
            time.sleep(2)


def soak_regions(settings, dataset: str, patience: float = 60.0) -> list:
    """The regions of dataset's table now (hbase_regions.Region: start, end, server);
    while one is in transition (the gateway cannot list them), asked again for up to
    `patience` seconds."""
    import happybase

    from gridagg.store.hbase.regions import FAILED_CALL, RegionCache

    host, port = settings.effective_hbase
    until = time.time() + patience
    while True:
        conn = happybase.Connection(host, port, timeout=10000)
        try:
            return RegionCache().get(conn.client, f"gridagg_{dataset}".encode(), fresh=True)
        except FAILED_CALL:
            if time.time() > until:
                raise
            time.sleep(0.5)
        finally:
            conn.close()


def region_servers(settings) -> list[str]:
    """The local region servers that run, as "localhost:port"."""
    return [f"localhost:{jvm.rpc_port(settings, role)}" for role in launcher.running_roles(settings)
            if role.startswith("rs")]


def regions_back(settings, dataset: str, regions: list, killed: float) -> list[float | None]:
    """Seconds from `killed` until each of `regions` answered a read again (a Get of its
    first row through the gateway, every quarter of a second), None for one that had not
    within REGIONS_BACK_PATIENCE."""
    import happybase

    host, port = settings.effective_hbase
    table = f"gridagg_{dataset}".encode()
    back: list[float | None] = [None] * len(regions)
    until = killed + REGIONS_BACK_PATIENCE
    while time.time() < until and None in back:
        for i, region in enumerate(regions):
            if back[i] is not None:
                continue
            try:
                conn = happybase.Connection(host, port, timeout=2000)
                try:
                    conn.client.getRow(table, region.start or b"\0", {})
                    back[i] = round(time.time() - killed, 2)
                finally:
                    conn.close()
            except Exception:  # noqa: BLE001 - not answering yet
                pass
        time.sleep(0.25)
    return back


def middle(start: bytes, end: bytes) -> bytes:
    """A row key strictly between region bounds start and end (b"": the table's end), about
    half way: the key space read as base-256 fractions."""
    width = max(len(start), len(end), 1) + 1
    lo = int.from_bytes(start.ljust(width, b"\0"), "big")
    hi = int.from_bytes(end.ljust(width, b"\0"), "big") if end else 1 << (8 * width)
    return ((lo + hi) // 2).to_bytes(width, "big").rstrip(b"\0") or b"\0"
