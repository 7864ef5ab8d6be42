"""N_size for a new dataset whose config gives none (neither n_size nor n_threshold):
chosen by gridagg.tune.nsize from the store's cost model, the input's rows (counted, and a
uniform sample of their dimensions) and the default workload, before the dataset is
made. A dataset that exists keeps its grid.

The count and the sample come from one pass of the job's own Python reading and encoding
(ingest.encode with a `then`) over every n-th row of the input (readers.every_nth: about
READ_ROWS rows in all, every row when it holds fewer): each task hands back its count
of good rows and, of those whose element ID hashes below a threshold, the SAMPLE_ROWS of
smallest hash, packed in one value. The driver keeps the SAMPLE_ROWS of smallest hash of
all (a bottom-k sample: uniform over the rows read, and the same however the input is
cut into tasks), and takes n times the good rows read for the input's. Spark's own rows,
counted and sampled in its JVM, took several times longer than this pass.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from gridagg.model.errors import UnknownDataset
from gridagg.model.schema import GridParams
from gridagg.store import segments
from gridagg.tune import costmodel, nsize

from . import buckets
from .config import IngestConfig
from .encode import encode
from .readers import estimated_rows, every_nth, read_source

SCHEMA = "rows long, sample binary"  # per task: its good rows, and its sampled ones packed
OVERSAMPLE = 3  # the hash threshold lets about this many times SAMPLE_ROWS through in all
READ_ROWS = 10 * nsize.SAMPLE_ROWS  # rows encoded for the choice (about): a uniform sample needs no more


def sampled(ndim: int, threshold: int, most: int):
    """The `then` of encode for the choice: per task, one row of SCHEMA: its good rows
    (`_reason` null) counted, and of those whose element ID hashes below `threshold`
    (segments.id_hashes) the `most` of smallest hash, as an Arrow IPC stream of `_h`
    and c0..c{ndim-1}."""
    cols = [f"c{i}" for i in range(ndim)]

    def fn(batches):
        import pyarrow as pa
        import pyarrow.compute as pc

        rows, held, n_held = 0, [], 0
        for batch in batches:
            good = batch.filter(pc.is_null(batch.column("_reason")))
            rows += good.num_rows
            hashes = segments.id_hashes(good.column("_eid"))
            pick = hashes < np.uint64(threshold)
            if pick.any():
                held.append(pa.table([pa.array(hashes[pick]), *[good.column(c).filter(pa.array(pick)) for c in cols]],
                                     names=["_h", *cols]))
                n_held += int(pick.sum())
            if n_held > 2 * most:
                held = [_smallest(pa.concat_tables(held), most)]
                n_held = held[0].num_rows
        kept = _smallest(pa.concat_tables(held), most) if held else None
        sink = pa.BufferOutputStream()
        if kept is not None:
            with pa.ipc.new_stream(sink, kept.schema) as out:
                out.write_table(kept)
        blob = sink.getvalue().to_pybytes() if kept is not None else None
        yield pa.record_batch([pa.array([rows], pa.int64()), pa.array([blob], pa.binary())], names=["rows", "sample"])

    return fn


def _smallest(table, most: int):
    """The `most` rows of `table` of smallest `_h`."""
    import pyarrow as pa

    h = table.column("_h").to_numpy()
    if len(h) <= most:
        return table
    return table.take(pa.array(np.argpartition(h, most - 1)[:most]))


def bottom(blobs, ndim: int, most: int) -> np.ndarray:
    """The sampled rows of `blobs` (sampled()'s packed values, an Arrow binary array)
    with the `most` smallest hashes, as an (m, ndim) int64 array ordered by hash."""
    table = buckets.unpack(blobs)
    if table is None or not table.num_rows:
        return np.zeros((0, ndim), np.int64)
    order = np.argsort(table.column("_h").to_numpy(), kind="stable")[:most]
    return np.stack([table.column(f"c{i}").to_numpy()[order] for i in range(ndim)], axis=1).astype(np.int64)


def with_chosen_n_size(spark, settings, engine, cfg: IngestConfig, paths: list[str], progress) -> IngestConfig:
    """cfg with its dataset's grid: an existing dataset's, else one whose n_size gridagg
    chose (N_threshold 10 x N_size; GridParams.chosen says what and why). Reads the
    inputs once more (a count and a sample of every n-th row, see the module docstring)
    for a dataset it makes."""
    ds = cfg.dataset
    try:
        return replace(cfg, dataset=replace(ds, grid=engine.directory.dataset(ds.name).grid))
    except UnknownDataset:
        pass
    import pyarrow as pa

    model = costmodel.load(settings.data_dir, settings.store)
    estimated = estimated_rows(paths, cfg.format)  # 0 for inputs not on this machine: every row then
    every = max(1, estimated // READ_ROWS)
    share = OVERSAMPLE * nsize.SAMPLE_ROWS * every / estimated if estimated else 1.0
    # Without a model to choose by, the count alone is wanted: no row passes a threshold of 0.
    threshold = 0 if model is None else 2**64 - 1 if share >= 1 else int(share * 2**64)
    got = encode(every_nth(read_source(spark, cfg, paths), every), cfg,
                 then=(sampled(ds.ndim, threshold, nsize.SAMPLE_ROWS), SCHEMA)).collect()
    total = every * sum(r["rows"] for r in got)
    sample = None
    if total >= nsize.MIN_ROWS and model is not None:
        sample = bottom(pa.array([r["sample"] for r in got], pa.binary()), ds.ndim, nsize.SAMPLE_ROWS)
    if sample is None or not len(sample):
        why = (f"the default: {total:,} rows are too few to choose by (at least {nsize.MIN_ROWS:,})"
               if total < nsize.MIN_ROWS else
               f"the default: no cost model of the {settings.store} store on this machine to choose by "
               "(gridagg tune --calibrate)")
        progress(f"n_size {ds.grid.n_size}, {why}")
        return replace(cfg, dataset=replace(ds, grid=replace(ds.grid, chosen=why)))
    choice = nsize.choose(ds, model, sample, total)
    progress(f"n_size {choice.n_size} {choice.why()}")
    grid = GridParams(choice.n_size, 10 * choice.n_size, ds.grid.l_time, choice.why())
    return replace(cfg, dataset=replace(ds, grid=grid))
