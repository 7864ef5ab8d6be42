"""Before a system's runs, its data is read where a serving process reads it from, so
every system is measured warm: this machine's page cache is reclaimed while data lies
idle, and a system that answers few queries in its warm-up would otherwise be measured
reading from disk. gridagg on the embedded store: its LMDB pages; on HBase, and HBase
alone alike: every block of the table, read by the region servers; the other peers
their own way (Peer.prewarm: pg_prewarm, files into the page cache)."""

from __future__ import annotations

from gridagg.config import Settings

from ..peers import open_peer
from ..peers.hbase import read_table
from ..peers.registry import PeerRegistry
from .systems import System


def prewarm(settings: Settings, system: System) -> None:
    if system.kind != "gridagg":
        reg = PeerRegistry(settings.effective_pg_url)
        peer = open_peer(system.kind, settings)
        try:
            peer.prewarm(reg.lookup(system.kind, system.dataset))
        finally:
            peer.close()
            reg.close()
    elif system.store == "hbase":
        from gridagg.store.hbase.gateway import Gateway
        from gridagg.store.hbase.store import table_name

        gateway = Gateway(settings.with_(store="hbase"), 1)
        try:
            read_table(gateway, table_name(system.dataset))
        finally:
            gateway.close()
    else:
        from gridagg.store.embedded import EmbeddedStore

        store = EmbeddedStore(settings.lmdb_dir)
        try:  # the dataset's own pages: its rows and aggregates, not the whole file
            dbs = [store._db(system.dataset, family) for family in ("s", "a")]
            with store.env.begin(buffers=True) as txn:
                for db in dbs:
                    for _, value in txn.cursor(db=db):
                        bytes(value)
        finally:
            store.close()
