"""N_size for a new dataset whose config gives none (neither n_size nor n_threshold):
chosen by gridagg.nsize from the store's cost model, the input's rows (counted, and a
uniform sample of their dimensions) and the default workload, before the dataset is
made. A dataset that exists keeps its grid."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from gridagg import costmodel, nsize
from gridagg.errors import UnknownDataset
from gridagg.schema import GridParams

from .config import IngestConfig
from .encode import encode
from .readers import read_source


def with_chosen_n_size(spark, settings, engine, cfg: IngestConfig, paths: list[str], progress) -> IngestConfig:
    """cfg with its dataset's grid: an existing dataset's, else one whose n_size gridagg
    chose (N_threshold 10 x N_size; GridParams.chosen says what and why). Reads the
    inputs once more (a count and a sample) for a dataset it makes."""
    ds = cfg.dataset
    try:
        return replace(cfg, dataset=replace(ds, grid=engine.directory.dataset(ds.name).grid))
    except UnknownDataset:
        pass
    from pyspark.sql import functions as F

    rows = encode(read_source(spark, cfg, paths), cfg).filter(F.col("_reason").isNull())
    rows = rows.select(*[f"c{i}" for i in range(ds.ndim)]).persist()
    try:
        total = rows.count()
        model = costmodel.load(settings.data_dir, settings.store)
        sample = None
        if total >= nsize.MIN_ROWS and model is not None:
            share = min(1.0, nsize.SAMPLE_ROWS / total)
            picked = rows.sample(False, share, seed=1) if share < 1 else rows
            sample = np.array(picked.collect(), dtype=np.int64).reshape(-1, ds.ndim)
    finally:
        rows.unpersist()
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
