"""Property tests: on random datasets of 1 to 6 dimensions, random rows and random boxes,
every aggregate the engine returns equals brute force, on the embedded store and on the
real HBase, with PostgreSQL holding the grid directory.

GRIDAGG_PROPERTY_SCALE multiplies the number of examples (CI runs scale 1).
"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta, timezone
from decimal import Decimal

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings as hsettings, strategies as st

from engine_support import check_answer, check_tree, open_engine
from gridagg.config import Settings
from gridagg.schema import Dataset

SCALE = Settings.from_env().property_scale
EPOCH = "2020-01-01T00:00:00Z"
EPOCH_DT = datetime(2020, 1, 1, tzinfo=timezone.utc)


@st.composite
def dataset_specs(draw):
    ndim = draw(st.integers(1, 6))
    dims = []
    for i in range(ndim):
        if i == 0 and draw(st.booleans()):
            width = draw(st.integers(0, 20 * 86400))
            dims.append({"name": "t", "type": "time", "min": EPOCH,
                         "max": (EPOCH_DT + timedelta(seconds=width)).isoformat()})
            continue
        scale = draw(st.integers(0, 2))
        lo = draw(st.integers(-60, 60))
        hi = lo + draw(st.sampled_from([0, 1, 2, 5, 30, 200]))
        dims.append({"name": f"d{i}", "scale": scale,
                     "min": str(Decimal(lo).scaleb(-scale)), "max": str(Decimal(hi).scaleb(-scale))})
    measures = [{"name": f"m{j}", "scale": draw(st.integers(0, 3))} for j in range(draw(st.integers(0, 2)))]
    n_size = draw(st.integers(1, 6))
    grid = {"n_size": n_size, "n_threshold": n_size * draw(st.integers(1, 4))}
    if dims[0].get("type") == "time" and draw(st.booleans()):
        grid["l_time"] = draw(st.integers(3600, 5 * 86400))
    return {"name": "p_" + uuid.uuid4().hex[:10], "dimensions": dims, "measures": measures, "grid": grid}


def user_value(col, v: int):
    if col.kind == "time":
        return (col.epoch + timedelta(seconds=v)).isoformat()
    return str(Decimal(v).scaleb(-col.scale))


def encoded_value(draw, col):
    if col.bounded:
        return draw(st.integers(col.enc_lo, col.enc_hi))
    return draw(st.integers(-10**6, 10**6))


@st.composite
def bound(draw, col, v: int, nudge: bool):
    """A user-unit query bound at stored value v, or half a step above it if nudge
    and hypothesis says so (so ceil/floor of bounds get tested)."""
    half = nudge and draw(st.booleans())
    if col.kind == "time":
        return (col.epoch + timedelta(seconds=v + (0.5 if half else 0))).isoformat()
    d = Decimal(v).scaleb(-col.scale)
    if half:
        d += Decimal(5).scaleb(-col.scale - 1)
    return str(d)


@st.composite
def workloads(draw):
    spec = draw(dataset_specs())
    ds = Dataset.from_json(spec)
    ops = []
    seen: list[list[int]] = []
    for _ in range(draw(st.integers(1, 6))):
        if draw(st.integers(0, 2)) < 2:
            n = draw(st.integers(1, 40))
            batch = []
            for _ in range(n):
                if seen and draw(st.integers(0, 4)) == 0:
                    batch.append(list(draw(st.sampled_from(seen))))  # an exact duplicate row
                else:
                    batch.append([encoded_value(draw, c) for c in ds.columns])
            seen.extend(batch)
            ops.append(("insert", batch))
        where = {}
        for c in ds.dimensions:
            kind = draw(st.sampled_from(["none", "range", "range", "point", "whole"]))
            if kind == "none":
                continue
            if kind == "whole":
                where[c.name] = [None, None]
                continue
            a = draw(st.integers(c.enc_lo - 2, c.enc_hi + 2))
            if kind == "point":
                where[c.name] = [user_value(c, a), user_value(c, a)]
            else:
                b = draw(st.integers(a, c.enc_hi + 2))
                where[c.name] = [draw(bound(c, a, a < b)), draw(bound(c, b, True))]
        names = [c.name for c in ds.columns]
        aggs = draw(st.lists(
            st.one_of(st.just("count"),
                      st.builds(lambda f, c: f"{f}:{c}", st.sampled_from(["sum", "min", "max", "avg"]),
                                st.sampled_from(names))),
            min_size=1, max_size=5, unique=True))
        ops.append(("query", where, aggs))
    return spec, ops


def run_workload(engine, spec, ops):
    ds = engine.create_dataset(Dataset.from_json(spec))
    rows = np.empty((0, len(ds.columns)), dtype=np.int64)
    try:
        for op in ops:
            if op[0] == "insert":
                batch = op[1]
                result = engine.insert(ds.name, [
                    {c.name: user_value(c, v) for c, v in zip(ds.columns, row)} for row in batch
                ])
                assert result.rejected == [] and result.stored == len(batch)
                rows = np.vstack([rows, np.array(batch, dtype=np.int64)])
            else:
                check_answer(engine.query(ds.name, op[1], op[2]), rows)
        check_tree(engine, ds.name, rows)
    finally:
        engine.drop_dataset(ds.name)


COMMON = dict(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                    HealthCheck.too_slow, HealthCheck.data_too_large])


@pytest.fixture(scope="module")
def embedded_engine(settings, services, tmp_path_factory):
    return open_engine(settings, "embedded", tmp_path_factory.mktemp("lmdb"))


@pytest.fixture(scope="module")
def hbase_engine(settings, services, tmp_path_factory):
    return open_engine(settings, "hbase", tmp_path_factory.mktemp("unused"))


@hsettings(max_examples=80 * SCALE, **COMMON)
@given(workloads())
def test_embedded_matches_brute_force(embedded_engine, workload):
    run_workload(embedded_engine, *workload)


@hsettings(max_examples=12 * SCALE, **COMMON)
@given(workloads())
def test_hbase_matches_brute_force(hbase_engine, workload):
    run_workload(hbase_engine, *workload)
