"""Rows in buckets: how the job's Python passes hand rows to each other through Spark.

A pass packs its rows into Arrow IPC streams, one per bucket they go to (a few per task),
and Spark shuffles those streams as single values of a (bucket, bad, blob) row. Spark
then moves a few thousand values instead of millions of rows: its JVM has next to no
per-row work left, and none to warm up for (on two cores the JIT compiling Spark's row
paths cost more CPU than the rows themselves in a session's first job). What it has
left is per byte (copies to and from the workers, the sort, LZ4): integer columns
travel in the narrowest type that holds them, which cut a load's machine CPU markedly.

`bad` counts bad rows, which travel only as that count, in bucket -1.
"""

from __future__ import annotations

import numpy as np

SCHEMA = "bucket int, bad long, blob binary"  # the Spark schema of bucketed rows
WIDE = b"gridagg.wide"  # field metadata of a column packed narrower than int64


def unpack(blobs):
    """The rows of the IPC streams in `blobs` (an Arrow binary column; nulls skipped) as
    one table, None when there are none; columns split() packed narrower come back as
    int64."""
    import pyarrow as pa

    by_schema: dict = {}  # streams of one schema are concatenated, then widened once
    for b in blobs:
        if b.is_valid:
            table = pa.ipc.open_stream(b.as_buffer()).read_all()
            by_schema.setdefault(table.schema, []).append(table)
    tables = [_widened(pa.concat_tables(ts)) for ts in by_schema.values()]
    return pa.concat_tables(tables) if tables else None


def _narrowed(table):
    """`table` with each int64 column in the narrowest signed type holding its values,
    marked WIDE: stored integers are mostly small, and every byte a pass hands on is
    copied, compressed and sorted by Spark's JVM (most of its CPU in a load)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    for i, f in enumerate(table.schema):
        if f.type != pa.int64() or not table.num_rows:
            continue
        lo, hi = (v.as_py() for v in pc.min_max(table.column(i)).values())
        if lo is None:  # all null
            continue
        narrow = next((t for t in (np.int8, np.int16, np.int32) if np.iinfo(t).min <= lo and hi <= np.iinfo(t).max), None)
        if narrow is not None:
            narrow = pa.from_numpy_dtype(narrow)
            table = table.set_column(i, pa.field(f.name, narrow, metadata={WIDE: b"int64"}), table.column(i).cast(narrow))
    return table


def _widened(table):
    """`table` with the columns _narrowed() marked WIDE back as int64."""
    import pyarrow as pa

    for i, f in enumerate(table.schema):
        if f.metadata and WIDE in f.metadata:
            table = table.set_column(i, pa.field(f.name, pa.int64()), table.column(i).cast(pa.int64()))
    return table


def bucketed(buckets: list[int], bad: list[int], blobs):
    """Bucketed rows (see SCHEMA) as an Arrow table; `blobs`: an Arrow binary array."""
    import pyarrow as pa

    return pa.table({"bucket": pa.array(buckets, pa.int32()), "bad": pa.array(bad, pa.int64()), "blob": blobs})


def split(table, keys: np.ndarray, bad: int = 0):
    """Bucketed rows: `table`'s rows packed per bucket (`keys`, one per row) as one Arrow
    IPC stream each, plus the count of bad rows when there are any."""
    import pyarrow as pa

    buckets: list[int] = []
    ends = [0]
    # Every stream goes into one buffer, which becomes the blob column as it is: a list
    # of bytes turned into a binary array cost a copy into fresh memory, a noticeable share
    # of a job's worker CPU (first touches of memory are dear).
    sink = pa.BufferOutputStream()
    if table.num_rows:
        # Bucket numbers fit 16 bits, and numpy sorts those stably by radix: many times as
        # fast as the timsort of 64-bit keys.
        small = 0 <= keys.min() and keys.max() < 1 << 16
        order = np.argsort(keys.astype(np.uint16) if small else keys, kind="stable")
        ordered, rows = keys[order], _narrowed(table).take(pa.array(order))
        cuts = np.flatnonzero(np.diff(ordered)) + 1
        for a, b in zip(np.r_[0, cuts].tolist(), np.r_[cuts, len(ordered)].tolist()):
            buckets.append(int(ordered[a]))
            with pa.ipc.new_stream(sink, rows.schema) as out:
                out.write_table(rows.slice(a, b - a))
            ends.append(sink.tell())
    counts = [0] * len(buckets)
    valid = None
    if bad:  # the bad rows' entry, the last one: a null blob
        buckets.append(-1)
        counts.append(bad)
        ends.append(ends[-1])
        valid = pa.py_buffer(np.packbits(np.arange(len(buckets)) < len(buckets) - 1, bitorder="little").tobytes())
    blobs = pa.Array.from_buffers(pa.binary(), len(buckets),
                                  [valid, pa.py_buffer(np.array(ends, dtype=np.int32)), sink.getvalue()],
                                  null_count=int(bool(bad)))
    return bucketed(buckets, counts, blobs)
