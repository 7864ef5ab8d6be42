"""The vectorized encoder (ingest.encode.encode_batch) against the reference encoder,
without Spark: random decimal and epoch texts, value by value."""

from __future__ import annotations

import pyarrow as pa
from gridagg_ingest.config import parse_config
from gridagg_ingest.encode import encode_batch, encode_field, encode_value
from hypothesis import given, settings
from hypothesis import strategies as st

CFG = parse_config({
    "dataset": {"name": "enc_prop"},
    "input": {"format": "csv", "id": ["k"]},
    "dimensions": [
        {"name": "t", "type": "time", "min": "2000-01-01T00:00:00Z", "max": "2030-01-01T00:00:00Z",
         "source": "t", "format": "epoch"},
        {"name": "a", "scale": 3, "min": -10**12, "max": 10**12, "source": "a", "missing": ["-9999"]},
    ],
    "measures": [{"name": "b", "scale": 0, "source": "b"}],
})

digits = st.text("0123456789", min_size=0, max_size=20)
decimal_text = st.builds(
    lambda sign, whole, dot, frac, pad: f"{pad}{sign}{whole}{dot}{frac}",
    st.sampled_from(["", "-", "+"]), digits, st.sampled_from(["", "."]), digits,
    st.sampled_from([""] * 8 + [" ", "\t"]))
odd_text = st.sampled_from(["", "1e2", "NaN", "-9999", "-9999.000", ".", "-", "+-1", "1_0", "0x10", None,
                            "1.2.3", "++1", "1-", "1.-2", "\u0661\u0662", "3.\u0665", "１２"])
epoch_text = st.one_of(st.integers(900_000_000, 1_950_000_000).map(str), st.sampled_from(["", "1.5", "x", "+946684800"]))


def reference(t, a, b):
    row = []
    for col, src, v in zip(CFG.dataset.columns, CFG.sources, (t, a, b)):
        enc, why = encode_value(col, src, v)
        if why is not None:
            return None, why
        row.append(enc)
    return row, None


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(epoch_text, st.one_of(decimal_text, odd_text), st.integers(-99, 99).map(str)),
                min_size=1, max_size=40))
def test_encode_batch_equals_reference(rows):
    n = len(rows)
    batch = pa.RecordBatch.from_arrays(
        [pa.array([r[0] for r in rows], pa.string()), pa.array([r[1] for r in rows], pa.string()),
         pa.array([r[2] for r in rows], pa.string()), pa.array([str(i) for i in range(n)], pa.string()),
         pa.array(["f"] * n), pa.nulls(n, pa.int64()), pa.nulls(n, pa.string())],
        names=["t", "a", "b", "k", "_file", "_line", "_reason"])
    out = encode_batch(batch, CFG, []).to_pylist()
    for i, ((t, a, b), got) in enumerate(zip(rows, out)):
        row, why = reference(t, a, b)
        if why is None:
            assert got["_reason"] is None, (t, a, b, got["_reason"])
            assert [got["c0"], got["c1"], got["c2"]] == row, (t, a, b)
            # A good row carries its element ID, not its raw fields.
            assert got["_eid"] == str(i) and (got["a"], got["_file"]) == (None, None)
        else:
            assert got["_reason"] == why and got["c1"] is None, (t, a, b)
            # A bad row keeps its raw fields for the quarantine output, and has no ID.
            assert (got["t"], got["a"], got["b"], got["_file"], got["_eid"]) == (t, a, b, "f", None)


# Typed inputs (Parquet numbers): int64 and float64 fields are read without text, each
# double as the decimal its shortest text writes, as the reference encoder reads a float.
TYPED = parse_config({
    "dataset": {"name": "enc_typed"},
    "input": {"format": "parquet", "id": ["k"]},
    "dimensions": [
        {"name": "t", "type": "time", "min": "2000-01-01T00:00:00Z", "max": "2030-01-01T00:00:00Z",
         "source": "t", "format": "epoch", "missing": ["-9999"]},
        {"name": "a", "scale": 2, "min": -10**9, "max": 10**9, "source": "a", "missing": ["-9999"],
         "rounding": "half_even"},
    ],
    "measures": [{"name": "b", "scale": 1, "source": "b", "rounding": "half_up", "nullable": True},
                 {"name": "c", "scale": 0, "source": "c", "min": -10**15, "max": 10**15}],
})

# Doubles a user writes (short decimals), and the hard ones: ties and near-ties of each
# scale, values beyond 2**50, tiny and huge magnitudes.
short_doubles = st.builds(lambda n, k: n / 10**k, st.integers(-10**9, 10**9), st.integers(0, 6))
near_ties = st.builds(lambda n, k, nudge: float.fromhex((n / 10**k + 5 / 10**(k + 1)).hex()) + nudge * 1e-12,
                      st.integers(-10**6, 10**6), st.integers(0, 3), st.sampled_from([-2, -1, 0, 1, 2]))
any_double = st.floats(allow_nan=True, allow_infinity=True)
doubles = st.one_of(short_doubles, near_ties, any_double, st.sampled_from([-9999.0, -9999.004, 2.0**50 + 0.5, 1e-300]))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.one_of(st.integers(900_000_000, 1_950_000_000), st.just(-9999), st.none()),
                          doubles, st.one_of(doubles, st.none()), st.integers(-10**16, 10**16)),
                min_size=1, max_size=40))
def test_typed_fields_encode_as_the_reference_reads_them(rows):
    n = len(rows)
    batch = pa.RecordBatch.from_arrays(
        [pa.array([r[0] for r in rows], pa.int64()), pa.array([r[1] for r in rows], pa.float64()),
         pa.array([r[2] for r in rows], pa.float64()), pa.array([r[3] for r in rows], pa.int64()),
         pa.array(range(n), pa.int64()), pa.array(["f"] * n), pa.nulls(n, pa.int64()), pa.nulls(n, pa.string())],
        names=["t", "a", "b", "c", "k", "_file", "_line", "_reason"])
    out = encode_batch(batch, TYPED, []).to_pylist()
    for i, (fields, got) in enumerate(zip(rows, out)):
        row, rounded, why = [], [], None
        for col, src, v in zip(TYPED.dataset.columns, TYPED.sources, fields):
            enc, was_rounded, why = encode_field(col, src, v)
            if why is not None:
                break
            row.append(enc)
            rounded.append(was_rounded)
        if why is None:
            assert got["_reason"] is None, (fields, got["_reason"])
            assert [got["c0"], got["c1"], got["c2"], got["c3"]] == row, fields
            assert [got["_r1"], got["_r2"]] == rounded[1:3], fields
            assert got["_eid"] == str(i)
        else:
            assert got["_reason"] == why and got["c1"] is None, (fields, got["_reason"], why)
            assert (got["a"], got["_file"]) == (None if fields[1] is None else repr(fields[1]), "f") or \
                float(got["a"]) == fields[1], fields


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(near_ties, short_doubles, any_double), min_size=1, max_size=60),
       st.integers(0, 3), st.sampled_from(["refuse", "half_even", "half_up", "floor", "ceil"]))
def test_doubles_decided_without_text_are_the_references(values, scale, rounding):
    """Where the typed path decides a double (ties and near-ties included), it gives the
    stored integer and rounded flag of the reference; the rest it leaves to it."""
    from gridagg_ingest.encode import _typed_doubles

    from gridagg.model.schema import Column

    col = Column("x", scale=scale, rounding=rounding)
    enc, good, rounded = _typed_doubles(pa.array(values, pa.float64()), scale, rounding)
    for v, e, g, r in zip(values, enc.tolist(), good.tolist(), rounded.tolist()):
        if g:
            assert col.encode_rounded(v) == (e, r), (v, scale, rounding)
