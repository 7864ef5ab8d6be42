"""The bench's second step: the systems measured, and loading the archive into each:
gridagg (one dataset per store and N_size, by the ingest job's Spark bulk load) and the
peers (loadtest/peers, each its own way, then `prepare`d as its experts would)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from gridagg.config import Settings
from gridagg.engine import GridEngine
from gridagg.model.errors import UnknownDataset
from gridagg.query.spec import QuerySpec

from ..peers import open_peer, peer_class
from ..peers.registry import PeerRegistry
from . import workload
from .archive import encoded_batches
from .log import log

GRIDAGG_APP = "gridagg_api.wsgi:app"  # as `gridagg serve` serves it
PEERS_APP = "gridagg_loadtest.peers.wsgi:app"  # the bench's own app: gridagg's and the peers' routes


@dataclass
class System:
    """One thing measured: a gridagg dataset (store, N_size) or a peer dataset.

    kind: "gridagg" or a peer's kind; stats: what the steps found (grids, table3, the
    peer's prepared choices, the settings tried and the one chosen)."""

    label: str
    dataset: str
    kind: str
    store: str | None = None
    n_size: int | None = None
    rows: int = 0
    load_seconds: float = 0.0
    stats: dict = field(default_factory=dict)

    @property
    def load_rate(self) -> float:
        return self.rows / self.load_seconds if self.load_seconds else 0.0

    @property
    def query_path(self) -> str:
        """The path its queries are POSTed to."""
        if self.kind == "gridagg":
            return f"/v1/datasets/{self.dataset}/query"
        return f"/bench/peers/{self.kind}/{self.dataset}/query"

    @property
    def app(self) -> str:
        """The WSGI app that serves it."""
        return GRIDAGG_APP if self.kind == "gridagg" else PEERS_APP

    @property
    def knobs(self) -> dict[str, tuple]:
        """Its own settings the bench tries (name -> values)."""
        return {} if self.kind == "gridagg" else peer_class(self.kind).KNOBS


def bench_settings(settings: Settings, stores: list[str]) -> Settings:
    """The settings the bench's Spark session is made for: with the HBase store among
    `stores`, its loads into HBase bulk-load HFiles (the Java half is on the session's
    classpath only when the session is made for it)."""
    return settings.with_(store="hbase") if "hbase" in stores else settings


def engine_of(settings: Settings, store: str) -> GridEngine:
    """A GridEngine on `store` (a `with` block closes it)."""
    return GridEngine.open(settings.with_(store=store))


def dataset_name(prefix: str, store: str, n_size: int | None = None) -> str:
    """The name a bench run gives its gridagg dataset of a store (and N_size)."""
    return f"{prefix}_{'hb' if store == 'hbase' else 'em'}" + (f"_n{n_size}" if n_size is not None else "")


def load_gridagg(settings: Settings, spark, store: str, ds, encoded: Path) -> System:
    """Bulk-load the encoded archive into dataset `ds` (made anew) on `store` with the
    Spark job (ingest.job.load_encoded)."""
    from gridagg_ingest.job import Progress, load_encoded

    with engine_of(settings, store) as engine:
        try:
            engine.drop_dataset(ds.name)
        except UnknownDataset:
            pass
    summary = load_encoded(spark, settings.with_(store=store), ds, spark.read.parquet(str(encoded)),
                           progress=Progress(quiet=True))
    system = System(f"gridagg-{store} N={ds.grid.n_size}", ds.name, "gridagg", store, ds.grid.n_size, summary.loaded,
                    summary.seconds)
    system.stats["grids"] = summary.leaves_after
    return system


def load_peer(settings: Settings, kind: str, ds, encoded: Path, rows: int, batch: int, samples: list[dict]) -> System:
    """Load the encoded archive's `rows` rows (archive.encoded_batches, `batch` at a time)
    into peer `kind` as dataset ds and prepare it for the `samples` boxes (sum queries of
    the workload); the load time includes what preparing built (PostgreSQL's index).
    Registers it for the bench's app."""
    reg = PeerRegistry(settings.effective_pg_url)
    peer = open_peer(kind, settings)
    try:
        peer.create(ds)
        log(f"  {peer.label}: loading {rows:,} rows")
        t0 = time.perf_counter()
        n = peer.load(ds, encoded_batches(encoded, batch))
        secs = time.perf_counter() - t0
        prepared = peer.prepare(ds, [QuerySpec.parse(ds, w, workload.AGGREGATES["sum"]) for w in samples])
        secs += prepared.get("build_seconds", 0.0)
        reg.register(kind, ds, n, secs)
        system = System(peer.label, ds.name, kind, rows=n, load_seconds=secs)
        system.stats["prepared"] = prepared
        return system
    finally:
        peer.close()
        reg.close()


def drop_all(settings: Settings, systems: list[System]) -> None:
    """Drop every system's dataset (and the peers' registrations)."""
    reg = PeerRegistry(settings.effective_pg_url)
    try:
        for s in systems:
            if s.kind == "gridagg":
                with engine_of(settings, s.store) as engine:
                    engine.drop_dataset(s.dataset)
                continue
            peer = open_peer(s.kind, settings)
            try:
                peer.drop(s.dataset)
            finally:
                peer.close()
            reg.unregister(s.kind, s.dataset)
    finally:
        reg.close()
