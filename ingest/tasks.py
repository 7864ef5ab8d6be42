"""The job's Python passes, run in Spark's executors (steps 1-4 of ingest.job).

Only what the tasks need is imported here: a Python worker imports this module on its
first task, and the driver's modules (PostgreSQL's client among them) would slow that.

Counts travel in negative buckets, as a count in the `bad` field and no rows: bucket -1
counts bad rows (ingest.buckets), bucket -2-i the good rows whose value of column i was
rounded (ingest.encode's `_r{i}`). Each pass adds up what it receives per bucket.
"""

from __future__ import annotations

import json

import numpy as np

from gridagg.model.aggregate import PartialAggregate
from gridagg.model.grid import Grid, grid_prefix
from gridagg.model.stamps import WriteStamps
from gridagg.store import bulk_format, open_store, segments
from gridagg.write.split import split_rows

from . import buckets, hfiles

HOLD_ROWS = 1 << 18  # rows a task of step 1 holds before it packs them


def build_leaf(stored: tuple, ds, grid: Grid, eids, new_values: np.ndarray, replace: bool = False) -> tuple[dict, list]:
    """One touched leaf, all of it in this task: its stored rows (`stored`, as
    CellStore.read_grid gives them: element IDs, an Arrow binary array, and values), the
    new rows located in it (`eids`, an Arrow binary array, and `new_values`, whose rows
    the split reorders; deduplicated against the stored ones by element ID: the stored
    row is kept, or with `replace` the new one), the subtree they make
    (gridagg.write.split: a leaf new to the load splits down to N_size, one that held
    rows only past N_threshold), and the rows to write under their final keys.
    Returns a small summary (counts and every resulting leaf's box and aggregate; with
    "rewritten", a leaf whose rows are written whole: the store's put replaces stored
    element IDs, a bulk load's cells start the leaf's row over) and those rows, as
    (leaf key prefix, element IDs, their values) per resulting leaf."""
    import pyarrow as pa
    import pyarrow.compute as pc

    ncols, ndim = len(ds.columns), ds.ndim
    n_size, n_threshold = ds.grid.n_size, ds.grid.n_threshold

    old_eids, old_values = stored
    n_old, replaced = len(old_eids), 0
    if n_old and replace:
        kept = pc.invert(pc.is_in(old_eids, value_set=eids))
        replaced = n_old - pc.sum(kept).as_py()
        if replaced:
            old_eids, old_values = old_eids.filter(kept), old_values[kept.to_numpy(zero_copy_only=False)]
            n_old = len(old_eids)
    elif n_old:
        keep = pc.invert(pc.is_in(eids, value_set=old_eids))
        if not pc.all(keep).as_py():
            new_values = new_values[keep.to_numpy(zero_copy_only=False)]
            eids = eids.filter(keep)
    if n_old:
        values = np.concatenate([old_values, new_values])
        all_eids = pa.concat_arrays([old_eids, eids])
    else:
        values = new_values
        all_eids = eids
    n_new = len(eids) - replaced
    limit = n_size if n_old + replaced == 0 else n_threshold

    done = split_rows(grid, values, PartialAggregate.of_rows(values, ncols), limit, n_size, ndim, in_place=True)
    final = done.leaves
    split = not (len(final) == 1 and final[0][0].grid_id == grid.grid_id)
    rewritten = bool(replaced) and not split  # its stored rows are written again with the new ones

    # Rows to write: every new row, and stored rows whose leaf changed, in the order the
    # stores keep a leaf's rows (by column 0, gridagg.store.segments), so that they take them
    # as they come: one gather of element IDs per leaf, none of values (done.rows).
    rows: list = []
    moved = written = start = 0
    for leaf, ix, _ in final:
        leaf_values = done.rows[start:start + len(ix)]
        start += len(ix)
        if split:
            moved += int((ix < n_old).sum())
        elif n_old and not rewritten:
            new = ix >= n_old
            ix, leaf_values = ix[new], leaf_values[new]
        if len(ix):
            order = np.argsort(leaf_values[:, 0], kind="stable")
            rows.append((grid_prefix(leaf.grid_id), all_eids.take(pa.array(ix[order])), leaf_values[order]))
            written += len(ix)
    info = {
        "n_old": n_old, "n_new": n_new, "replaced": replaced, "written": written, "moved": moved, "split": split,
        "rewritten": rewritten,
        "leaves": [[leaf.grid_id, [list(b) for b in leaf.box], leaf.next_axis, a.count, a.sums, a.mins, a.maxs,
                    a.present] for leaf, _, a in final],
    }
    return info, rows


def write_grids(store, ds, leaf_rows: list, write_batch: int, stamps: WriteStamps) -> None:
    """Write build_leaf's rows (leaf key prefix, element IDs, values per resulting leaf)
    to the store, about `write_batch` rows per put_grids: a few writes per built leaf,
    each one LMDB commit in the embedded store, where one per resulting leaf made as many
    commits as leaves, thousands in a large load."""
    batch, n = [], 0
    for prefix, eids, values in leaf_rows:
        batch.append((prefix, eids, values))
        n += len(values)
        if n >= write_batch:
            store.put_grids(ds, batch, stamps)
            batch, n = [], 0
    if batch:
        store.put_grids(ds, batch, stamps)


def rounded_bucket(column: int) -> int:
    """The bucket that counts the rounded values of a column (see the module docstring)."""
    return -2 - column


def to_eid_buckets(n_buckets: int, cols: list[str], rounding: list[int] = ()):
    """Step 1's tail, on the located batches (`_eid`, c0.., `_leaf`; -1 for a bad row,
    and `_r{i}` for each column i in `rounding`): good rows, with `_h` (a hash of the
    element ID), packed per bucket of that hash; bad rows and rounded values only
    counted. Up to HOLD_ROWS rows are held so that blobs are few and large."""

    def fn(batches):
        import pyarrow as pa

        held, n_held, bad, rounded = [], 0, 0, dict.fromkeys(rounding, 0)
        for batch in batches:
            good = batch.column("_leaf").to_numpy() >= 0
            bad += len(good) - int(good.sum())
            for i in rounding:  # a bad row's flag is false
                rounded[i] += batch.column(f"_r{i}").true_count
            rows = pa.Table.from_batches([batch]).select(["_eid", *cols, "_leaf"]).filter(pa.array(good))
            held.append(rows.append_column("_h", pa.array(segments.id_hashes(rows.column("_eid")))))
            n_held += rows.num_rows
            if n_held >= HOLD_ROWS:
                yield from _eid_split(held, bad, rounded)
                held, n_held, bad, rounded = [], 0, 0, dict.fromkeys(rounding, 0)
        yield from _eid_split(held, bad, rounded)

    def _eid_split(held, bad, rounded):
        import pyarrow as pa

        counts = {rounded_bucket(i): n for i, n in rounded.items() if n}
        out = []
        rows = pa.concat_tables(held) if held else None
        if rows is not None and (rows.num_rows or bad):
            out.extend(buckets.split(rows, rows.column("_h").to_numpy() % np.uint64(n_buckets), bad=bad).to_batches())
        if counts:
            out.extend(buckets.bucketed(list(counts), list(counts.values()), pa.nulls(len(counts), pa.binary()))
                       .to_batches())
        return out

    return fn


def dedupe_fn(n_buckets: int, cols: list[str]):
    """Step 2, per element-ID bucket (applyInArrow): one row per element ID, the largest
    (c0, c1, ..) among repeats (a deterministic choice; the leaf follows from the values),
    with `_n`, the input rows behind it; packed per bucket of their leaf."""

    def fn(key, table):
        import pyarrow as pa
        import pyarrow.compute as pc

        if key[0].as_py() < 0:  # counts only
            return buckets.bucketed([key[0].as_py()], [pc.sum(table.column("bad")).as_py()], pa.nulls(1, pa.binary()))
        rows = buckets.unpack(table.column("blob"))
        n = rows.num_rows
        # Distinct hashes mean distinct IDs.
        if not segments.repeats(rows.column("_h").to_numpy()):
            counts = np.ones(n, dtype=np.int64)
        else:
            rows = rows.take(pc.sort_indices(rows, sort_keys=[("_eid", "ascending"), *[(c, "descending") for c in cols]]))
            eid = rows.column("_eid").combine_chunks()
            starts = np.flatnonzero(np.r_[True, pc.not_equal(eid[1:], eid[:-1]).to_numpy(zero_copy_only=False)])
            counts = np.diff(np.r_[starts, n])
            rows = rows.take(pa.array(starts))
        rows = rows.drop_columns(["_h"]).append_column("_n", pa.array(counts, pa.int64()))
        return buckets.split(rows, rows.column("_leaf").to_numpy() % n_buckets)

    return fn


def build_fn(settings, ds, btree, bgrids, write_batch: int, region_starts: list[bytes] | None, scan: bool,
             stamp: int, replace: bool = False):
    """Steps 3-4, per leaf bucket (applyInArrow): each leaf of the bucket built by
    build_leaf (with the leaf's stored rows unless not `scan`: a new table has none;
    only with an HBase bulk load; a new row replacing the stored row of its element ID
    with `replace`).
    Output rows (leaf, info) carry a leaf's summary. Given the region start keys of an
    HBase bulk load, the rows to write come out as rows (region, cells): one per region,
    the store's cells of its resulting leaves in order (gridagg.store.bulk_format);
    else the task writes them to the store, stamped `stamp` (gridagg.model.stamps)."""
    ncols = len(ds.columns)
    cols = [f"c{i}" for i in range(ncols)]

    def fn(key, table):
        import pyarrow as pa
        import pyarrow.compute as pc

        bucket = key[0].as_py()
        if bucket < 0:  # counts only: of bad rows, or of a column's rounded values
            n = pc.sum(table.column("bad")).as_py()
            summaries, cells = [("", {"bad": n} if bucket == -1 else {"rounded": [rounded_bucket(bucket), n]})], []  # its own inverse
        else:
            summaries, cells = _build_bucket(buckets.unpack(table.column("blob")))
        return pa.table({"leaf": pa.array([g for g, _ in summaries] + [None] * len(cells), pa.string()),
                         "info": pa.array([json.dumps(i) for _, i in summaries] + [None] * len(cells), pa.string()),
                         "region": pa.array([None] * len(summaries) + [r for r, _ in cells], pa.int32()),
                         "cells": pa.array([None] * len(summaries) + [c for _, c in cells], pa.binary())})

    def _build_bucket(rows):
        import pyarrow as pa

        leaf = rows.column("_leaf").to_numpy()
        order = np.argsort(leaf, kind="stable")
        leaf = leaf[order]
        values = np.stack([rows.column(c).to_numpy() for c in cols], axis=1)[order]
        eids = rows.column("_eid").cast(pa.binary()).take(pa.array(order)).combine_chunks()
        inputs = rows.column("_n").to_numpy()[order]
        cuts = np.flatnonzero(np.diff(leaf)) + 1
        bounds = list(zip(np.r_[0, cuts].tolist(), np.r_[cuts, len(leaf)].tolist()))
        leaf_ids = [btree.value.ids[int(leaf[a])] for a, _ in bounds]
        summaries, cells = [], []
        store = open_store(settings) if scan else None
        fmt = bulk_format(settings) if region_starts is not None else None
        try:
            # A bulk load reads what it must know of the bucket's leaves at once.
            known = fmt.read_leaves(store, ds, leaf_ids) if fmt is not None and store is not None else {}
            for g, (a, b) in zip(leaf_ids, bounds):
                box, next_axis = bgrids.value[g]
                grid = Grid(g, tuple(tuple(x) for x in box), next_axis)
                if fmt is not None:
                    stored = fmt.stored_rows(known.get(g, []), len(ds.columns))
                else:
                    stored = store.read_grid(ds, g) if store is not None else ([], None)
                info, leaf_rows = build_leaf(stored, ds, grid, eids.slice(a, b - a), values[a:b], replace)
                info["rows"] = int(inputs[a:b].sum())
                summaries.append((g, info))
                if region_starts is None:
                    write_grids(store, ds, leaf_rows, write_batch, WriteStamps.fixed(stamp))
                else:
                    for prefix, leaf_eids, leaf_values in leaf_rows:
                        cells.extend(fmt.grid_cells(prefix, leaf_eids, leaf_values,
                                                    None if info["split"] or info["rewritten"] else known.get(g, []),
                                                    ds))
        finally:
            if store is not None:
                store.close()
        if not cells:
            return summaries, []
        # One row per resulting leaf, whose prefix is a prefix of no other's: sorting the
        # cells by row, a row's family delete first, then qualifier orders them as HBase does.
        cells.sort(key=lambda c: (c[0], -c[1], c[2]))
        keys = pa.array([c[0] for c in cells], pa.binary())
        return summaries, [(r, fmt.pack_cells(cells[a:b]))
                           for r, (a, b) in enumerate(hfiles.region_bounds(keys, region_starts)) if a < b]

    return fn
