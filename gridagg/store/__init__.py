"""Cell stores: where raw rows and partial aggregates live, under the paper's row keys.

One interface (CellStore), two thin adapters: the embedded LMDB store (the default, no
server needed) and Apache HBase through its Thrift gateway (the production path).
"""

from .base import CellStore, RangeCondition

__all__ = ["CellStore", "RangeCondition", "open_store"]


def open_store(settings) -> CellStore:
    """The store the settings name: HBase when GRIDAGG_HBASE is set, else embedded."""
    if settings.hbase:
        from .hbase import HBaseStore

        host, _, port = settings.hbase.partition(":")
        return HBaseStore(host, int(port or 9090))
    from .embedded import EmbeddedStore

    return EmbeddedStore(settings.lmdb_dir)
