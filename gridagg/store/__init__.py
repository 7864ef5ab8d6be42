"""Cell stores: where raw rows and partial aggregates live, under the paper's row keys.

One interface (CellStore), two thin adapters: the embedded LMDB store (the default, no
server needed) and Apache HBase through its Thrift gateway (the production path).
"""

from gridagg.model.errors import InvalidInput
from gridagg.store.base import CellStore, RangeCondition

__all__ = ["CellStore", "RangeCondition", "bulk_format", "open_store"]


def open_store(settings) -> CellStore:
    """The store the settings name (GRIDAGG_STORE): "embedded" or "hbase"."""
    if settings.store == "hbase":
        from gridagg.store.epochs import EpochBoard
        from gridagg.store.hbase.store import HBaseStore

        store = HBaseStore(settings)
        store.board = EpochBoard.open(settings.epoch_dir or settings.data_dir / "epochs")
        return store
    if settings.store == "embedded":
        from gridagg.store.embedded import EmbeddedStore

        return EmbeddedStore(settings.lmdb_dir, settings.scan_threads)
    raise InvalidInput(f"GRIDAGG_STORE must be 'embedded' or 'hbase', not {settings.store!r}", field="store")


def bulk_format(settings):
    """The format in which a bulk loader may write the configured store's files itself
    (HBase: HFiles of its cells, gridagg.store.hbase.bulk), or None: then a loader writes
    through the store (CellStore.put_grids)."""
    if settings.store == "hbase":
        from gridagg.store.hbase.bulk import HBaseBulkFormat

        return HBaseBulkFormat()
    return None
