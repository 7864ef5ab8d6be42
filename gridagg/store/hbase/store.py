"""The HBase store: the paper's layout in Apache HBase, reached through the Thrift1
gateway with happybase.

One table per dataset, gridagg_<name>, one HBase row per grid under the grid's key
prefix (salt + grid ID + "-"), pre-split into regions over the salt byte:
- family "r": the grid's rows as segments (gridagg.store.segments, as the embedded store keeps
  them), one per cell, numbered (gridagg.store.hbase.rows: which segments are live, and
  how a write replaces some atomically). A write appends a segment to each grid it
  touches; one that repeats a stored element ID, or would leave too many segments,
  rewrites the grid;
- family "a": the grid's partial aggregate in cell "a:v" (PartialAggregate.pack), for
  leaves and ancestors alike.

Queries' scans (CellStore.scan) run on the region servers: GridScanObserver reads the
segments of the asked grids where they are stored and sends back only aggregates (and
the rows asked for), one Thrift call per region server, all at once
(gridagg.store.hbase.scan, hbase_regions). Writes ask
the observer too (gridagg.keys): which segments a grid holds and whether the written
element IDs are among its rows, so that only new segments cross the wire. An HBase whose
region servers lack the observer is detected at a table's first use (a probe); that
table's scans and writes then read the grids' segments through Thrift (scans run the
embedded store's kernel on them), after one logged warning.

Rows keep the paper's keys at this interface (prefix + element ID): put_rows,
delete_rows, existing_keys and scan_rows take and give them; read_grid and put_grids
move a grid's rows as its prefix and Arrow arrays of element IDs (splits and merges in
place: no Python step per row).
"""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Iterator

import happybase  # noqa: F401 - importing it makes its Thrift types (Hbase_thrift) importable
import numpy as np
from Hbase_thrift import BatchMutation, Mutation, TScan

from gridagg.model.aggregate import AggArrays, PartialAggregate
from gridagg.model.grid import grid_prefix, grid_start, split_key
from gridagg.model.schema import Dataset
from gridagg.model.stamps import WriteStamps
from gridagg.store import parts, segments
from gridagg.store.base import CellStore, segment_rows
from gridagg.store.hbase import rows as grid_rows
from gridagg.store.hbase.gateway import Gateway
from gridagg.store.hbase.regions import Calls, RegionCache
from gridagg.store.hbase.scan import (
    SEGMENTS,
    ObserverMissing,
    ask,
    items_of,
    lookup,
    observer_answers,
    stop_counts,
)
from gridagg.store.kernels import scan_segments
from gridagg.store.scan import RangeCondition, ScanAnswer, ScanRequest

log = logging.getLogger(__name__)

REGIONS = 8  # pre-split regions per table: salt ranges of 256 / REGIONS
SPLITS = [bytes([i * (256 // REGIONS)]) for i in range(1, REGIONS)]  # start keys of regions 2..
# Column families and their options (happybase style, plus "block_size" and
# "data_block_encoding", which tables created through Thrift1 cannot set: docs/hbase.md says
# how to set them on an external HBase). ROW_INDEX_V1 adds an index of its rows to each
# block: a scan moving to the next grid it reads finds it in the block by a binary search,
# not by stepping over every cell before it (grid_rows.ROW_ENCODING).
FAMILIES = {
    "r": {"max_versions": 1, "block_size": grid_rows.BLOCK_BYTES, "data_block_encoding": grid_rows.ROW_ENCODING},
    "a": {"max_versions": 1},
}
CHUNK = 1000  # aggregates per multi-get or batched put
AGGREGATE_READERS = 4  # connections reading a tree's aggregates at once (the pool's size)
SCAN_AGGREGATES_FROM = 20 * CHUNK  # aggregates asked at once from which a scan reads them
AGGREGATES_PER_SCAN_BATCH = 5000  # aggregates per scanner fetch
GRIDS_PER_READ = 64  # grid rows per multi-get of segments
GRIDS_PER_SCAN_BATCH = 16  # grid rows per scanner fetch
WRITE_BYTES = 8 << 20  # segment bytes per mutateRows call
FANOUT_CONNECTIONS = 16  # connections for a scan's calls to its second and further region servers


def table_name(name: str) -> str:
    return f"gridagg_{name}"


class HBaseStore(CellStore):
    """settings: gridagg Settings; the gateway is settings.effective_hbase."""

    kind = "hbase"
    reads_by_key = True
    AGG = b"a:v"

    def __init__(self, settings, pool_size: int = 4):
        super().__init__()
        self.settings = settings
        self.scan_threads = settings.scan_threads
        self.names_unread = True  # the region servers stop at a deadline and name what they left
        self.pool = Gateway(settings, pool_size)
        # A pool of its own: a call holding a connection of `pool` may wait for these,
        # never the other way round.
        self.fanout = Gateway(settings, FANOUT_CONNECTIONS)
        self.address = self.pool.address
        with self.pool.connection():  # an unreachable gateway is reported now
            pass
        self.regions = RegionCache()
        self._observed: dict[bytes, bool] = {}  # table -> whether its regions answer scans

    @contextmanager
    def _client(self, ds_name: str, slow: bool = False):
        """(raw Thrift client, table name) for one block (slow: see Gateway.connection)."""
        table = table_name(ds_name).encode()
        with self.pool.connection(slow, table) as conn:
            yield conn.client, table

    def answers(self, ds: Dataset) -> bool:
        return self.pool.answers(table_name(ds.name).encode())

    def has_table(self, name: str) -> bool:
        """Whether dataset `name` has its table in HBase."""
        with self.pool.connection() as conn:
            return table_name(name).encode() in conn.tables()

    def create_dataset(self, ds: Dataset) -> None:
        if self.has_table(ds.name):
            return
        with self.pool.connection(slow=True) as conn:
            if self.settings.hbase is None:
                from gridagg_hbase.admin import create_presplit_table

                create_presplit_table(self.settings, table_name(ds.name), FAMILIES, SPLITS)
            else:
                # Thrift1 cannot pre-split; an external cluster splits regions as they grow.
                conn.create_table(table_name(ds.name), {
                    family: {"max_versions": opts["max_versions"]} for family, opts in FAMILIES.items()})

    def compact(self, ds: Dataset) -> str:
        """Major-compacts the dataset's table and returns once it is done: each region's
        files are rewritten as one, without the cells of segments that splits, merges and
        rewrites replaced (HBase keeps them, and every scan passes through them, until a
        major compaction: by default a week later), and in the families' data block
        encodings of FAMILIES (set first where the table has another, as a table made by
        an older gridagg does). After tuning a large dataset the replaced cells were a
        sizeable share of its bytes and of a polygon question's time. An external HBase is
        left to its own schedule."""
        table = table_name(ds.name)
        if self.settings.hbase is not None:
            return f"{table} not compacted: an external HBase compacts on its own schedule (major_compact '{table}' " \
                   "in the HBase shell does it now)"
        from gridagg_hbase.admin import COMPACT_SECONDS, region_admin

        encodings = [f"{f}={o['data_block_encoding']}" for f, o in FAMILIES.items() if "data_block_encoding" in o]
        done = region_admin(self.settings, "compact", table, *encodings, timeout=COMPACT_SECONDS)
        return f"{table} major-compacted ({done})"

    def drop_dataset(self, name: str) -> None:
        if self.has_table(name):
            with self.pool.connection(slow=True) as conn:
                conn.delete_table(table_name(name), disable=True)
        self.regions.forget(table_name(name).encode())
        self._observed.pop(table_name(name).encode(), None)

    # -- grid rows ----------------------------------------------------------------------

    def grid_segments(self, ds: Dataset, prefixes: list[bytes]) -> dict[bytes, list[tuple[int, bytes]]]:
        """Every stored (number, segment) of these grids' rows, in number order (see
        gridagg.store.hbase.rows); a grid without rows is left out."""
        with self._client(ds.name, slow=True) as (client, table):
            return self._read(client, table, prefixes)

    def _read(self, client, table: bytes, prefixes: list[bytes]) -> dict[bytes, list[tuple[int, bytes]]]:
        out = {}
        for at in range(0, len(prefixes), GRIDS_PER_READ):
            self.round_trips.add()
            for row in client.getRowsWithColumns(table, prefixes[at : at + GRIDS_PER_READ], [grid_rows.FAMILY], {}):
                out[row.row] = grid_rows.numbered({col: cell.value for col, cell in row.columns.items()})
        return out

    def read_grid(self, ds, grid_id):
        prefix = grid_prefix(grid_id)
        stored = self.grid_segments(ds, [prefix]).get(prefix, [])
        return segments.joined((seg for _, seg in grid_rows.live(stored)), len(ds.columns))

    def put_grids(self, ds, grids, stamps=None):
        stamps = stamps or WriteStamps.local()
        given = _by_grid(grids, len(ds.columns))
        if not given:
            return
        with self._client(ds.name, slow=True) as (client, table):
            known = self._lookup(client, table, {prefix: eids for prefix, (eids, _) in given.items()})
            writes, rewrites = {}, []
            for prefix in sorted(given):
                cells, repeated = known[prefix]
                live = grid_rows.live(cells)
                segs = grid_rows.pack(*given[prefix], ds)
                if live and (repeated or grid_rows.too_many([size for _, size in live], segs)):
                    rewrites.append(prefix)
                else:
                    writes[prefix] = (list(zip(grid_rows.next_numbers(cells, len(segs), base=False), segs)),
                                      [n for n, _ in cells[: len(cells) - len(live)]])
            stored = self._read(client, table, rewrites) if rewrites else {}
            for prefix in rewrites:  # the grid's rows are needed: its segments are read
                eids, values = given[prefix]
                numbered, replaced, _ = grid_rows.write(stored.get(prefix, []), eids.to_pylist(), values, ds)
                writes[prefix] = (numbered, replaced)
            puts = [BatchMutation(row=prefix, mutations=[Mutation(column=grid_rows.column(n), value=seg)
                                                         for n, seg in writes[prefix][0]]) for prefix in sorted(writes)]
            self._mutate(client, table, puts, stamps.next())
            # The replaced cells after the puts: readers pass over them meanwhile.
            self._mutate(client, table, [_deletes(p, dead) for p, (_, dead) in sorted(writes.items()) if dead],
                         stamps.next())

    def _lookup(self, client, table: bytes, grids: dict[bytes, object]) -> dict[bytes, tuple[list, set[int]]]:
        """For each grid row (key -> element IDs, an Arrow binary array): its cells as
        (segment number, size) in number order, and the indexes of the given element IDs
        its live segments hold. Found on the region servers when the observer answers,
        else from the segments read through Thrift."""
        keys = sorted(grids)
        if self._observer_answers(client, table):
            try:
                found = lookup(self._calls(client), table, [(k, grids[k]) for k in keys], self.regions,
                               self.round_trips, self.settings.hbase_call_timeout)
                return dict(zip(keys, found))
            except ObserverMissing as exc:  # unloaded since the probe
                self._client_side(table, str(exc))
        stored = self._read(client, table, keys)
        out = {}
        for k in keys:
            old = stored.get(k, [])
            held = grid_rows.rows_of(grid_rows.live(old))
            out[k] = ([(n, len(seg)) for n, seg in old], {i for i, e in enumerate(grids[k].to_pylist()) if e in held})
        return out

    def _mutate(self, client, table: bytes, batch: list, stamp: int) -> None:
        """BatchMutations in mutateRowsTs calls of about WRITE_BYTES each, their cells
        (and delete markers) stamped `stamp` (each row's mutations stay in one call: one
        atomic Put or Delete per row)."""
        chunk, size = [], 0
        for m in batch:
            chunk.append(m)
            size += sum(len(x.value or b"") for x in m.mutations)
            if size >= WRITE_BYTES:
                self.round_trips.add()
                client.mutateRowsTs(table, chunk, stamp, {})
                chunk, size = [], 0
        if chunk:
            self.round_trips.add()
            client.mutateRowsTs(table, chunk, stamp, {})

    def delete_rows(self, ds, keys, stamps=None):
        stamps = stamps or WriteStamps.local()
        gone: dict[bytes, set[bytes]] = {}
        for k in keys:
            prefix, eid = split_key(k)
            gone.setdefault(prefix, set()).add(eid)
        with self._client(ds.name, slow=True) as (client, table):
            stored = self._read(client, table, sorted(gone))
            puts, replaced = [], []
            for prefix, old in stored.items():
                rows = grid_rows.rows_of(grid_rows.live(old))
                if not gone[prefix] & rows.keys():
                    continue
                left = [e for e in rows if e not in gone[prefix]]
                if left:  # one base segment with what is left, then the old cells go
                    segs = grid_rows.pack(left, np.array([rows[e] for e in left]), ds)
                    numbers = grid_rows.next_numbers(old, len(segs), base=True)
                    puts.append(BatchMutation(row=prefix, mutations=[
                        Mutation(column=grid_rows.column(n), value=s) for n, s in zip(numbers, segs)]))
                replaced.append(_deletes(prefix, [n for n, _ in old]))  # one atomic Delete when nothing is left
            self._mutate(client, table, puts, stamps.next())
            self._mutate(client, table, replaced, stamps.next())

    def rewrite_grids(self, ds, grids, stamps=None):
        stamps = stamps or WriteStamps.local()
        given = {prefix: (eids, np.asarray(values, np.int64).reshape(-1, len(ds.columns)))
                 for prefix, eids, values in grids}
        with self._client(ds.name, slow=True) as (client, table):
            stored = self._read(client, table, sorted(given))
            puts, replaced = [], []
            for prefix in sorted(given):
                old = stored.get(prefix, [])
                eids, values = given[prefix]
                if len(values):  # a base segment replaces every cell before it, in one Put
                    segs = grid_rows.pack(eids, values, ds)
                    puts.append(BatchMutation(row=prefix, mutations=[
                        Mutation(column=grid_rows.column(n), value=s)
                        for n, s in zip(grid_rows.next_numbers(old, len(segs), base=True), segs)]))
                if old:  # then the old cells go (one atomic Delete when nothing is left)
                    replaced.append(_deletes(prefix, [n for n, _ in old]))
            self._mutate(client, table, puts, stamps.next())
            self._mutate(client, table, replaced, stamps.next())

    def clear_grids(self, ds, grid_ids, stamps=None):
        stamps = stamps or WriteStamps.local()
        with self._client(ds.name) as (client, table):
            # A delete marker on the whole family: it hides every cell stamped before it,
            # also those landing later.
            self._mutate(client, table, [_clears(grid_prefix(g)) for g in sorted(grid_ids)], stamps.next())

    def seal_grids(self, ds, grid_ids, stamps):
        if not grid_ids:
            return
        marker, base = stamps.next(), stamps.next()
        keys = [grid_prefix(g) for g in sorted(grid_ids)]
        with self._client(ds.name, slow=True) as (client, table):
            stored = self._read(client, table, keys)
            # The live rows again, as a base segment (it replaces every cell before it),
            # stamped after the marker; then the marker hides every earlier cell, those
            # a dead writer may still land too. Readers see the old live rows or the same
            # rows anew, never neither.
            puts = []
            for key, cells in stored.items():
                rows = grid_rows.rows_of(grid_rows.live(cells))
                eids = list(rows)
                segs = grid_rows.pack(eids, np.array([rows[e] for e in eids]).reshape(len(eids), len(ds.columns)), ds)
                puts.append(BatchMutation(row=key, mutations=[
                    Mutation(column=grid_rows.column(n), value=seg)
                    for n, seg in zip(grid_rows.next_numbers(cells, len(segs), base=True), segs)]))
            self._mutate(client, table, puts, base)
            self._mutate(client, table, [_clears(k) for k in keys], marker)

    def existing_keys(self, ds, keys):
        by_prefix: dict[bytes, list[bytes]] = {}
        for k in keys:
            by_prefix.setdefault(split_key(k)[0], []).append(k)
        with self._client(ds.name, slow=True) as (client, table):
            found = self._lookup(client, table, {p: segments.element_ids([split_key(k)[1] for k in ks])
                                                 for p, ks in by_prefix.items()})
        return {ks[i] for p, ks in by_prefix.items() for i in found[p][1]}

    def scan_rows(self, ds, start, stop, where: list[RangeCondition] = (), batch_rows=2000,
                  with_keys: bool = True) -> Iterator:
        first = grid_start(start)  # a start inside a grid's rows starts at that grid's row
        name = table_name(ds.name)
        with self.pool.connection(slow=True, table=name.encode()) as conn:
            table = conn.table(name)
            self.round_trips.add(2)  # opening and closing the scanner
            for n, (prefix, cells) in enumerate(table.scan(row_start=first, row_stop=stop, columns=[grid_rows.FAMILY],
                                                           batch_size=GRIDS_PER_SCAN_BATCH)):
                if n and n % GRIDS_PER_SCAN_BATCH == 0:
                    self.round_trips.add()
                for _, seg in grid_rows.live(grid_rows.numbered(cells)):
                    yield from segment_rows(prefix, seg, start, stop, where, batch_rows, with_keys)

    # -- queries ------------------------------------------------------------------------

    def scan(self, ds, request: ScanRequest) -> ScanAnswer:
        if request.rows is None or request.skip is not None:
            return self._scan(ds, request)
        # Concurrent calls: the region server answers each in a handler of its own.
        threads = self.scan_threads
        made = []  # round trips of each part

        def answer(g0: int, g1: int) -> ScanAnswer:
            before = self.round_trips()
            out = self._scan(ds, request.part(g0, g1))
            made.append(self.round_trips() - before)
            return out

        before = self.round_trips()
        out = parts.answer_in_parts(parts.cut(request.rows, threads), answer, threads)
        # Trips count per thread: those of parts run in other threads count here too.
        self.round_trips.add(sum(made) - (self.round_trips() - before))
        return out

    def _scan(self, ds, request: ScanRequest) -> ScanAnswer:
        ncols = len(ds.columns)
        if not request.grids:
            return scan_segments(request, [], ncols)
        keys = request.keys if request.keys is not None else list(map(grid_prefix, request.grids))
        with self._client(ds.name, slow=True) as (client, table):
            if self._observer_answers(client, table):
                try:
                    return ask(self._calls(client), table, SEGMENTS, ncols, request, items_of(request, keys),
                               self.regions, self.round_trips, self.settings.hbase_call_timeout)
                except ObserverMissing as exc:  # unloaded since the probe
                    self._client_side(table, str(exc))
            stored = self._read(client, table, keys)
        return scan_segments(request, [[s for _, s in grid_rows.live(stored.get(k, []))] for k in keys], ncols)

    def _calls(self, client) -> Calls:
        """Calls to the region servers at once: the first on `client`, held by the caller."""
        return Calls(client, self.fanout)

    def _observer_answers(self, client, table: bytes) -> bool:
        """Whether GridScanObserver answers scans of `table` (a probe at first use)."""
        known = self._observed.get(table)
        if known is None:
            self.round_trips.add()
            answered = observer_answers(client, table)
            if not answered:
                self._client_side(table, "a probe found no GridScanObserver on its region server")
            known = self._observed[table] = answered
        return known

    def stop_counts(self, ds) -> tuple[int, int]:
        """(scans stopped by their deadline, grids they left unread) on the region servers
        holding ds's table, since each started: how a test sees that a deadline stops
        the work on the servers."""
        with self._client(ds.name) as (client, table):
            self.round_trips.add(2)  # the region list, then the counts
            return stop_counts(client, table, self.regions)

    def _client_side(self, table: bytes, why: str) -> None:
        self._observed[table] = False
        log.warning("HBase table %s: %s; its scans and writes read every row of the grids they need through the "
                    "Thrift gateway (deploy the observer: docs/hbase.md)", table.decode(), why)

    # -- aggregates ---------------------------------------------------------------------

    def get_aggregates(self, ds, grid_ids):
        ncols = len(ds.columns)
        out: dict[str, PartialAggregate] = {}
        by_key = {grid_prefix(g): g for g in grid_ids}
        keys = list(by_key)
        with self._client(ds.name) as (client, table):
            for start in range(0, len(keys), CHUNK):
                self.round_trips.add()
                for row in client.getRowsWithColumns(table, keys[start : start + CHUNK], [self.AGG], {}):
                    out[by_key[row.row]] = PartialAggregate.unpack(row.columns[self.AGG].value, ncols)
        return out

    def get_aggregate_arrays(self, ds, grid_ids):
        """get_aggregates, unpacked all at once (how a process reads a whole tree). The
        parts are asked on AGGREGATE_READERS connections at once: one call after another, a
        large tree's load was mostly waiting. Gets of CHUNK grids each; from
        SCAN_AGGREGATES_FROM grids on, a scan of the aggregates' own family per salt range
        instead (faster than gets for that many)."""
        keys = [grid_prefix(g) for g in grid_ids]

        def get(start: int) -> list[tuple[bytes, bytes]]:
            with self._client(ds.name) as (client, table):
                self.round_trips.add()
                return [(row.row, row.columns[self.AGG].value)
                        for row in client.getRowsWithColumns(table, keys[start : start + CHUNK], [self.AGG], {})]

        def scan(salts: tuple[bytes | None, bytes | None]) -> list[tuple[bytes, bytes]]:
            # The raw Thrift scanner: happybase's Table.scan makes each row a dict, a
            # sizeable share of the time a large tree's whole load spent here.
            with self._client(ds.name, slow=True) as (client, table):
                self.round_trips.add(2)  # opening and closing the scanner
                spec = TScan(startRow=salts[0], stopRow=salts[1], columns=[self.AGG], caching=AGGREGATES_PER_SCAN_BATCH)
                scanner, found = client.scannerOpenWithScan(table, spec, {}), []
                try:
                    while batch := client.scannerGetList(scanner, AGGREGATES_PER_SCAN_BATCH):
                        found += [(row.row, row.columns[self.AGG].value) for row in batch]
                finally:
                    client.scannerClose(scanner)
                return found

        if len(keys) < SCAN_AGGREGATES_FROM:
            read, parts = get, range(0, len(keys), CHUNK)
        else:
            bounds = [None, *SPLITS, None]
            read, parts = scan, list(zip(bounds, bounds[1:]))
        with ThreadPoolExecutor(AGGREGATE_READERS) as readers:
            found = dict(cell for cells in readers.map(read, parts) for cell in cells)
        return AggArrays.unpack([found.get(k) for k in keys], len(ds.columns))

    @staticmethod
    def aggregate_cells(aggregates) -> list[tuple[bytes, bytes]]:
        """(row key, value of its AGG cell) of each aggregate, as put_aggregates writes
        them; the ingest job's bulk load writes the same cells as an HFile."""
        return [(grid_prefix(gid), agg.pack()) for gid, agg in aggregates.items()]

    def put_aggregates(self, ds, aggregates, stamps=None):
        items = self.aggregate_cells(aggregates)
        stamp = (stamps or WriteStamps.local()).next()  # a later version of a cell hides an earlier one
        with self.pool.connection() as conn:
            table = conn.table(table_name(ds.name))
            for start in range(0, len(items), CHUNK):
                self.round_trips.add()
                with table.batch(timestamp=stamp) as b:
                    for key, value in items[start : start + CHUNK]:
                        b.put(key, {self.AGG: value})

    def close(self):
        self.pool.close()
        self.fanout.close()


def _by_grid(grids, ncols: int) -> dict[bytes, tuple]:
    """put_grids' grids as prefix -> (element IDs, an Arrow binary array; int64 values):
    a grid given twice as one, an element ID given twice once (the last wins), a grid
    given no rows left out."""
    import pyarrow as pa

    parts: dict[bytes, list] = {}
    for prefix, eids, values in grids:
        parts.setdefault(prefix, []).append((segments.element_ids(eids), np.asarray(values, np.int64).reshape(-1, ncols)))
    out = {}
    for prefix, given in parts.items():
        eids = pa.concat_arrays([e for e, _ in given])
        if len(eids):
            out[prefix] = segments.last_of_each(eids, np.concatenate([v for _, v in given]))
    return out


def _clears(prefix: bytes) -> BatchMutation:
    """A delete marker on the whole rows family of grid row `prefix`."""
    return BatchMutation(row=prefix, mutations=[Mutation(column=grid_rows.FAMILY, isDelete=True)])


def _deletes(prefix: bytes, numbers: list[int]) -> BatchMutation:
    return BatchMutation(row=prefix, mutations=[Mutation(column=grid_rows.column(n), isDelete=True) for n in numbers])
