"""The stores' cost models (gridagg.tune.costmodel, gridagg.tune.calibrate, `gridagg tune`): the fit,
where models are kept, and a calibrated model's predictions against measured times on a
small dataset of its own, on both stores (the one comparison of times here, with a wide
stated factor: the machine is shared)."""

from __future__ import annotations

import statistics
import subprocess
import sys

import numpy as np
import pytest

from gridagg.model.schema import Column, Dataset, GridParams
from gridagg.tune import calibrate, costmodel

# Predicted and measured times of a small dataset's queries agree within this factor (the
# median over its boxes). The margin is for a shared machine, where calibration and
# measurement can meet different loads.
FACTOR = 5.0


def test_the_fit_finds_the_costs_that_made_the_times():
    rng = np.random.default_rng(3)
    grids, rows, reused = rng.integers(0, 200, 60), rng.integers(0, 100_000, 60), rng.integers(0, 50, 60)
    ms = 0.5 + 0.01 * grids + 5e-6 * rows + 0.002 * reused
    model = costmodel.fit(np.column_stack([grids, rows, reused, ms]), "embedded", "now")
    assert (model.per_query, model.per_grid, model.per_row, model.per_reused) == pytest.approx(
        (0.5, 0.01, 5e-6, 0.002), rel=1e-6)
    assert model.spread == pytest.approx(1.0)
    assert model.grid_in_rows() == pytest.approx(2000)


def test_noise_never_makes_a_cost_a_gain():
    # Times that fall as rows grow: the row term is dropped rather than fitted negative.
    samples = np.array([[10, 1000, 0, 2.0], [10, 5000, 0, 1.9], [20, 1000, 0, 3.0], [20, 5000, 0, 2.9]])
    model = costmodel.fit(samples, "hbase", "now")
    assert min(model.per_query, model.per_grid, model.per_row, model.per_reused) >= 0
    assert model.per_row == 0


def test_models_are_kept_per_store_in_the_data_dir(tmp_path):
    assert costmodel.load(tmp_path, "hbase") is None
    a = costmodel.CostModel("embedded", 0.1, 0.001, 1e-6, 0.0, "t1", 80, 1.1)
    b = costmodel.CostModel("hbase", 0.7, 0.008, 4e-6, 0.0, "t2", 80, 1.2)
    costmodel.save(tmp_path, a)
    costmodel.save(tmp_path, b)
    assert costmodel.load(tmp_path, "embedded") == a and costmodel.load(tmp_path, "hbase") == b
    costmodel.path(tmp_path).write_text("{not json")
    assert costmodel.load(tmp_path, "embedded") is None  # unreadable: measured again


def test_a_calibrated_model_predicts_another_dataset_within_a_factor(engine, unique_name):
    model = calibrate.calibrate(engine, nrows=30_000, prefix=f"{unique_name}_cal")
    assert model.store == engine.store.kind and model.queries == 2 * calibrate.BOXES
    assert min(model.per_query, model.per_grid, model.per_row, model.per_reused) >= 0
    # Another dataset: other rows, leaves of a size between the calibration's, other boxes.
    dims = tuple(Column(name, lo=0, hi=calibrate.SPAN) for name in ("x", "y", "z"))
    ds = Dataset(f"{unique_name}_small", dims, (Column("v", lo=0, hi=1000),), GridParams(300, 3000))
    try:
        calibrate.load(engine, ds, calibrate.rows(20_000, seed=11))
        measured = calibrate.timed(engine, ds.name, calibrate.boxes(20, seed=12))
    finally:
        engine.drop_dataset(ds.name)
    ratios = [model.predict(grids, rows, reused) / ms for grids, rows, reused, ms in measured]
    assert 1 / FACTOR <= statistics.median(ratios) <= FACTOR, (model.describe(), ratios)


def test_calibrate_refuses_scratch_datasets_too_small_to_time(settings):
    env = settings.environ()
    out = subprocess.run([sys.executable, "-m", "gridagg.cli.main", "tune", "--calibrate", "--rows", "500"],
                         capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 2 and "--rows: must be at least 1000 rows, not 500" in out.stderr
    out = subprocess.run([sys.executable, "-m", "gridagg.cli.main", "tune", "--calibrate", "--rows", "1e6"],
                         capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 2 and "--rows: must be a whole number of rows, not '1e6'" in out.stderr
    shown = subprocess.run([sys.executable, "-m", "gridagg.cli.main", "tune", "--help"], capture_output=True, text=True,
                           env=env, timeout=60)
    assert "--rows N" in shown.stdout and "1,000,000" in shown.stdout
