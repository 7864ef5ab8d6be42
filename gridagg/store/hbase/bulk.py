"""What the HBase store offers a bulk load (gridagg.store.bulk_format): the cells that
write rows and aggregates into its table, in its layout (gridagg.store.hbase.rows), for a
writer that makes HFiles (ingest.hfiles, with hbase/HFileBulkLoad.java) instead of going
through the Thrift gateway.

Per resulting leaf, its written rows become segment cells in the leaf's row. A leaf the
load only appends to gets segments numbered after its stored ones; a leaf the load makes
(a split's) or rewrites (too many segments) starts with a delete of its row's older
segment cells, a millisecond older than its new ones, so a crashed earlier run's
leftovers are gone when the file is.
"""

from __future__ import annotations

import struct

import numpy as np

from gridagg.model.grid import grid_prefix
from gridagg.store import segments
from gridagg.store.hbase import rows as hbase_rows
from gridagg.store.hbase.store import FAMILIES, SPLITS, HBaseStore, table_name

PUT, DELETE_FAMILY = 0, 1  # kinds of packed cells (HFileBulkLoad.Run)
DEFAULT_BLOCK_BYTES = 64 * 1024  # HBase's


class HBaseBulkFormat:
    """The HBase store's bulk-load format; one per process will do (it holds nothing)."""

    rows_family = hbase_rows.FAMILY

    def table(self, name: str) -> str:
        """The table of dataset `name`."""
        return table_name(name)

    def families(self) -> str:
        """The table's column families as HFileBulkLoad.createTable takes them."""
        from gridagg_hbase.admin import family_specs

        return ",".join(family_specs(FAMILIES))

    def block_bytes(self, family: bytes) -> int:
        """The HFile block size of the table's column family `family`."""
        return FAMILIES[family.decode()].get("block_size", DEFAULT_BLOCK_BYTES)

    def encoding(self, family: bytes) -> str:
        """The data block encoding of the table's column family `family` (HBase's name)."""
        return FAMILIES[family.decode()].get("data_block_encoding", "NONE")

    def split_keys(self) -> list[bytes]:
        """The start keys of a new table's regions after the first."""
        return list(SPLITS)

    def aggregate_column(self) -> tuple[bytes, bytes]:
        """(family, qualifier) of a grid's aggregate cell."""
        family, qualifier = HBaseStore.AGG.split(b":")
        return family, qualifier

    def aggregate_cells(self, aggregates) -> list[tuple[bytes, bytes]]:
        """(row, value) of each aggregate's cell (grid ID -> PartialAggregate), in row order."""
        return sorted(HBaseStore.aggregate_cells(aggregates))

    def read_leaves(self, store, ds, grid_ids: list[str]) -> dict[str, list]:
        """What a load needs to know of these leaves before it writes to them: their
        stored (number, segment) lists, read at once."""
        found = store.grid_segments(ds, [grid_prefix(g) for g in grid_ids])
        return {g: found.get(grid_prefix(g), []) for g in grid_ids}

    def grid_cells(self, prefix: bytes, eids, values, stored: list[tuple[int, bytes]] | None, ds) -> list[tuple]:
        """The cells that write a resulting leaf's rows (eids: an Arrow binary array, none
        of them stored; values: their int64 rows) into its row `prefix`, as (row, kind,
        qualifier, value) of dataset `ds`: `stored` is the leaf's stored (number, segment) list when the load
        adds to the leaf, None when the load makes it (a split's: its row starts over)."""
        new = hbase_rows.pack(eids, values, ds)
        live = hbase_rows.live(stored or [])
        start_over = stored is None or hbase_rows.too_many([len(seg) for _, seg in live], new)
        if stored and start_over:  # too many segments: the leaf's rows rewritten
            old_eids = [e for _, seg in live for e in segments.eids(seg)]
            old_values = [segments.values(seg) for _, seg in live]
            new = hbase_rows.pack(old_eids + eids.to_pylist(), np.concatenate([*old_values, values]), ds)
        numbers = hbase_rows.next_numbers(stored or [], len(new), base=start_over)
        head = [(prefix, DELETE_FAMILY, b"", b"")] if start_over else []
        return head + [(prefix, PUT, hbase_rows.qualifier(n), seg) for n, seg in zip(numbers, new)]

    def stored_rows(self, stored: list[tuple[int, bytes]], ncols: int) -> tuple:
        """A leaf's rows from what read_leaves gave of it (a (number, segment) list), as
        CellStore.read_grid gives them (element IDs, an Arrow binary array, and values)."""
        return segments.joined((seg for _, seg in hbase_rows.live(stored)), ncols)

    def pack_cells(self, cells: list[tuple]) -> bytes:
        """(row, kind, qualifier, value) cells, in order, as HFileBulkLoad reads them: per cell
        u8 kind, u16 row length, row, u16 qualifier length, qualifier, i32 value length, value
        (little-endian)."""
        return b"".join(struct.pack("<BH", kind, len(row)) + row + struct.pack("<H", len(qualifier)) + qualifier
                        + struct.pack("<i", len(value)) + value for row, kind, qualifier, value in cells)
