"""The vectorized encoder (ingest.encode.encode_batch) against the reference encoder,
without Spark: random decimal and epoch texts, value by value."""

from __future__ import annotations

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from gridagg_ingest.config import parse_config
from gridagg_ingest.encode import encode_batch, encode_value

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
