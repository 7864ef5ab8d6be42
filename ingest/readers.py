"""Readers: source files to the raw source fields, in the executors.

Raw fields are one string column per source field the config uses (null when a record
lacks it), plus `_file` (the input file), `_line` (the record's line in its file, when
known) and `_reason` (why the record is unusable as a whole, else null).

`read_source` returns a `Source`. Text formats (TMY3, CSV) are read as whole files and
parsed in Python: TMY3 by `parse_tmy3`, CSV by pyarrow's C++ parser, which is several
times faster than Spark's. Spark's `binaryFile` source lists them; the executors read
local files themselves, and files on other file systems (hdfs://, s3a://: any Spark
reads) come through Spark, which costs a copy of every byte into Python (slower than
reading locally). The parsing runs in the same Python pass as the encoding
(ingest.encode), so the raw text never travels back to Spark. Local Parquet files are
read the same way, by pyarrow in the executors, a whole file per task item: Spark's
reader turned every value into a JVM row and back into Arrow, which cost its JVM more
CPU than the whole Python pass. Parquet on other file systems, and zone-less timestamps
or dates read in a zone other than UTC (Spark's rules for local times in a gap or an
overlap of the zone are its own), go through Spark's reader. Either way numbers become
the raw fields in the same Python pass (`typed_raw`: a float its shortest decimal, as
Python's repr writes it), timestamps and dates epoch seconds.
Nothing is read on the driver but the header of the first CSV file and the schema of
the first Parquet file, when they are local.
"""

from __future__ import annotations

import csv
import glob
import io
import os
import re
from dataclasses import dataclass, replace
from datetime import datetime, timedelta, timezone
from typing import Callable

from .config import IngestConfig

EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


@dataclass(frozen=True)
class Source:
    """What Spark reads: `df`, and `parse`, a function run in the executors that turns
    the Arrow batches of `df` into Arrow batches of raw fields; None when `df` holds the
    raw fields already. Raw fields are text, except the numbers of typed inputs, which
    stay int64 or float64 (as_text turns them into text where text is needed).
    `epoch_fields`: fields the reader gives as epoch seconds whatever the config's time
    format says (typed timestamps)."""
    df: object
    parse: Callable | None = None
    epoch_fields: frozenset = frozenset()


def every_nth(src: Source, n: int) -> Source:
    """`src` with only every n-th of its rows (the 1st, the n+1st, ... of each task's):
    a systematic sample, read at the cost of every row but encoded at 1/n of it. A
    source Spark reads whole (no parse step) is sampled by Spark instead, each row kept
    with chance 1/n."""
    if n <= 1:
        return src
    if src.parse is None:
        return replace(src, df=src.df.sample(fraction=1 / n, seed=0))
    parse = src.parse

    def thin(batches):
        import numpy as np

        start = 0  # the row of the next batch to keep: the count runs on across batches
        for batch in parse(batches):
            if start < batch.num_rows:
                yield batch.take(np.arange(start, batch.num_rows, n))
            start = (start - batch.num_rows) % n

    return replace(src, parse=thin)


BYTES_PER_ROW = {"parquet": 8, "csv": 60, "tmy3": 140}


def estimated_rows(paths: list[str], fmt: str) -> int:
    """About how many rows these inputs hold, from the sizes of the local ones."""
    return sum(os.path.getsize(p) for p in paths if "://" not in p) // BYTES_PER_ROW.get(fmt, 60)


def expand_inputs(inputs: list[str]) -> list[str]:
    """Files and directories (recursively) and globs, as paths Spark can read. Paths with
    a URL scheme (hdfs://, s3a://) are passed to Spark unchanged."""
    out: list[str] = []
    for item in inputs:
        if "://" in item:
            out.append(item)
            continue
        matches = sorted(glob.glob(item, recursive=True)) if glob.has_magic(item) else [item]
        if not matches:
            raise FileNotFoundError(f"no input matches {item}")
        for m in matches:
            if os.path.isdir(m):
                for root, _, files in sorted(os.walk(m)):
                    out.extend(os.path.join(root, f) for f in sorted(files)
                               if not f.startswith((".", "_")) and not f.lower().endswith(".md"))
            elif os.path.exists(m):
                out.append(m)
            else:
                raise FileNotFoundError(f"input {m} does not exist")
    return [os.path.abspath(p) if "://" not in p else p for p in out]


def raw_schema(fields: list[str]):
    """The Spark schema of raw fields."""
    from pyspark.sql import types as T

    return T.StructType(
        [T.StructField(f, T.StringType()) for f in fields]
        + [T.StructField("_file", T.StringType()), T.StructField("_line", T.LongType()),
           T.StructField("_reason", T.StringType())]
    )


def raw_arrow_schema(fields: list[str]):
    """The Arrow schema of raw fields, as the executors' parsers build them."""
    import pyarrow as pa

    return pa.schema([(f, pa.string()) for f in fields]
                     + [("_file", pa.string()), ("_line", pa.int64()), ("_reason", pa.string())])


def read_local(path: str) -> bytes:
    """The bytes of a local file, given its path as Spark lists it: "file:/tmp/a b.csv"
    (Hadoop's paths are not escaped like URIs)."""
    with open(path.removeprefix("file:").removeprefix("//"), "rb") as f:
        return f.read()


def parse_tmy3(path: str, text: str, fields: list[str]) -> list[tuple]:
    """Records of one TMY3 file: tuples of the requested fields (strings or None), then
    _file, _line, _reason. `timestamp` is the UTC epoch second of the hour-ending local
    standard time (24:00 rolls to the next day)."""
    lines = text.splitlines()
    out: list[tuple] = []
    nf = len(fields)
    if len(lines) < 2:
        return [(*([None] * nf), path, 1, "tmy3: file has no header lines")]
    meta = next(csv.reader([lines[0]]), [])
    header = next(csv.reader([lines[1]]), [])
    if len(meta) < 7:
        return [(*([None] * nf), path, 1, f"tmy3: line 1 has {len(meta)} fields, expected 7")]
    station, name, state, offset_s, lat, lon, elev = (v.strip() for v in meta[:7])
    try:
        offset = timedelta(hours=float(offset_s))
    except ValueError:
        offset = None
    fixed = {"station": station, "name": name, "state": state, "utc_offset": offset_s,
             "latitude": lat, "longitude": lon, "elevation": elev}
    col = {h: i for i, h in enumerate(header)}
    for lineno, record in enumerate(csv.reader(io.StringIO("\n".join(lines[2:]))), start=3):
        if not record or record == [""]:
            continue
        reason = None
        values: list[str | None] = []
        ts = None
        if offset is None:
            reason = f"tmy3: UTC offset {offset_s!r} of line 1 is not a number"
        elif len(record) != len(header):
            reason = f"tmy3: {len(record)} fields, header has {len(header)}"
        else:
            try:
                day = datetime.strptime(record[0].strip(), "%m/%d/%Y")
                hh, mm = record[1].strip().split(":")
                hour, minute = int(hh), int(mm)
                if not (0 <= hour <= 24 and 0 <= minute <= 59 and (hour < 24 or minute == 0)):
                    raise ValueError
                local = day.replace(tzinfo=timezone.utc) + timedelta(hours=hour, minutes=minute)
                ts = str(int((local - offset - EPOCH).total_seconds()))
            except ValueError:
                reason = f"tmy3: unparsable date/time {record[0]!r} {record[1]!r}"
        for f in fields:
            if f == "timestamp":
                values.append(ts)
            elif f in fixed:
                values.append(fixed[f])
            elif f in col and len(record) > col[f]:
                values.append(record[col[f]])
            else:
                values.append(None)
        out.append((*values, path, lineno, reason))
    return out


def parse_csv(path: str, data, fields: list[str], header: bool, sep: str):
    """The raw-field Arrow table of one CSV file (`data`: its bytes or an Arrow buffer).

    Every field is read as text, exactly as written. A record with the wrong number of
    fields, every record of a file whose header lacks a field, and a file pyarrow cannot
    read at all become records with a reason. `_line` counts the header and skips blank
    lines: it is the line number unless a quoted value spans lines."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.csv as pcsv

    schema = raw_arrow_schema(fields)
    invalid: list[tuple[int, str]] = []

    def on_invalid(row):
        invalid.append((row.number, f"csv: {row.actual_columns} fields, header has {row.expected_columns}: "
                                    f"{row.text[:200]!r}"))
        return "skip"

    def records(lines, reasons, n):
        return pa.table([pa.nulls(n, pa.string())] * len(fields)
                        + [pa.array([path] * n, pa.string()), pa.array(lines, pa.int64()), pa.array(reasons, pa.string())],
                        schema=schema)

    # pyarrow drops a malformed row it cannot decode without a word (its handler never
    # sees it): a file that is not UTF-8 text (a binary file, another encoding) is refused whole.
    try:
        str(memoryview(data), "utf-8")
    except UnicodeDecodeError as exc:
        reason = f"csv: unreadable file: not UTF-8 text (byte {exc.start}); is the input's format right?"
        return records([None], [reason], 1)
    # Without a header pyarrow names columns f0, f1, ...; configs use Spark's names, _c0, _c1, ...
    own = [f"f{f[2:]}" if not header and re.fullmatch(r"_c[0-9]+", f) else f for f in fields]
    try:
        table = pcsv.read_csv(
            pa.BufferReader(data),
            read_options=pcsv.ReadOptions(use_threads=False, autogenerate_column_names=not header),
            parse_options=pcsv.ParseOptions(delimiter=sep, invalid_row_handler=on_invalid),
            convert_options=pcsv.ConvertOptions(
                column_types={f: pa.string() for f in own}, include_columns=own,
                include_missing_columns=True, strings_can_be_null=False))
    except pa.ArrowInvalid as exc:
        if "Empty CSV file" in str(exc):
            return records([], [], 0)
        return records([None], [f"csv: unreadable file: {exc}"], 1)
    table = table.rename_columns(fields)
    n = table.num_rows
    first = 2 if header else 1
    bad = np.array([num for num, _ in invalid], dtype=np.int64)
    lines = np.arange(first, first + n + len(bad))
    if invalid:
        lines = lines[~np.isin(lines, bad)]
    missing = [f for f in fields if table.column(f).null_count == n and n]
    reason = pa.nulls(n, pa.string())
    if missing:  # strings_can_be_null=False: only a column absent from the header is all null
        reason = pa.array([f"csv: the header has no column {missing[0]!r}"] * n, pa.string())
    good = pa.table([*table.columns, pa.array([path] * n, pa.string()), pa.array(lines, pa.int64()), reason],
                    schema=schema)
    if not invalid:
        return good
    return pa.concat_tables([good, records(bad.tolist(), [r for _, r in invalid], len(bad))])


def check_csv_header(cfg: IngestConfig, path: str) -> None:
    """Fail fast when the first input (a local CSV file with a header) lacks a field the
    config reads; later files are checked record by record in the executors."""
    import pyarrow.csv as pcsv

    if not cfg.csv_options["header"] or "://" in path:
        return
    try:
        names = pcsv.open_csv(path, parse_options=pcsv.ParseOptions(delimiter=cfg.csv_options["sep"])).schema.names
    except Exception:  # unreadable or empty: the executors report it
        return
    for f in cfg.source_fields:
        if f not in names:
            raise ValueError(f"input {path} has no column {f!r} (columns: {sorted(names)})")


def read_source(spark, cfg: IngestConfig, paths: list[str]) -> Source:
    """The inputs as a Source (see the module docstring)."""
    fields = cfg.source_fields
    if cfg.format in ("tmy3", "csv"):
        local = not any("://" in p for p in paths)  # expand_inputs: local inputs are plain paths
        files = spark.read.format("binaryFile").load(paths).select("path", *([] if local else ["content"]))
        header, sep = cfg.csv_options.get("header", True), cfg.csv_options.get("sep", ",")
        if cfg.format == "csv" and paths:
            check_csv_header(cfg, paths[0])

        def parse(batches):
            import pyarrow as pa

            schema = raw_arrow_schema(fields)
            for batch in batches:
                for i, path in enumerate(batch.column("path").to_pylist()):
                    data = read_local(path) if local else batch.column("content")[i].as_buffer()
                    if cfg.format == "csv":
                        yield from parse_csv(path, data, fields, header, sep).to_batches()
                        continue
                    recs = parse_tmy3(path, bytes(data).decode("utf-8", "replace"), fields)
                    if recs:
                        yield pa.RecordBatch.from_arrays(
                            [pa.array(c, t) for c, t in zip(zip(*recs), schema.types)], schema=schema)

        return Source(files, parse)

    return read_parquet(spark, cfg, paths)


def read_parquet(spark, cfg: IngestConfig, paths: list[str]) -> Source:
    """Parquet inputs as a Source: text columns as they are; numeric ones turned into
    raw fields in the executors (typed_raw); timestamps and dates as epoch seconds (a
    time zone-less one read in its time column's `timezone`), which the encoder reads
    as such whatever the column's format. Local files are read by pyarrow in the
    executors when they can be (see the module docstring), else by Spark."""
    fields = cfg.source_fields
    zones = {s.source: s.timezone for s in cfg.sources if s.kind == "time"}
    micros = _local_parquet(fields, zones, paths)
    if micros is not None:
        return _read_parquet_local(spark, fields, micros, paths)
    return _read_parquet_spark(spark, fields, zones, paths)


# Files per Spark task item of the local reader: enough tasks to keep every core busy to
# the end, few enough that each reads a good share (each task's start costs its worker time).
PARQUET_BYTES_PER_TASK = 64 << 20


def _local_parquet(fields: list[str], zones: dict[str, str], paths: list[str]):
    """The fields given as epoch microseconds when pyarrow may read these local files for
    `fields` as Spark would: the first file's schema holds every field, of a type gridagg
    reads, and every zone-less time is read in UTC. None when Spark must read them. A
    missing field or a type gridagg cannot read is an error here already."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    if not paths or any("://" in p for p in paths):
        return None
    schema = pq.read_schema(paths[0])
    micros = []
    for f in fields:
        if f not in schema.names:
            raise ValueError(f"input has no column {f!r} (columns: {sorted(schema.names)})")
        t = schema.field(f).type
        if pa.types.is_timestamp(t) or pa.types.is_date(t):
            if (pa.types.is_date(t) or t.tz is None) and zones.get(f, "UTC") != "UTC":
                return None
            micros.append(f)
        elif not (pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_integer(t)
                  or pa.types.is_floating(t) or pa.types.is_decimal(t) or pa.types.is_boolean(t)):
            raise ValueError(f"input column {f!r} has type {t}: gridagg reads text, numbers, timestamps and dates")
    return micros


def _read_parquet_local(spark, fields: list[str], micros: list[str], paths: list[str]) -> Source:
    """Local Parquet files read by pyarrow in the executors: Spark hands out positions in
    `paths` (a few files per task), the Python pass reads their `fields` as raw fields."""
    total = sum(os.path.getsize(p) for p in paths)
    cores = spark.sparkContext.defaultParallelism
    # A multiple of the cores, so that no last task runs alone while the others wait for
    # the shuffle (an odd number of tasks on two cores leaves one idle for a task's time).
    tasks = min(len(paths), -(-max(2 * cores, -(-total // PARQUET_BYTES_PER_TASK)) // cores) * cores)
    files = spark.range(0, len(paths), numPartitions=tasks).withColumnRenamed("id", "file")

    def parse(batches):
        for batch in batches:
            for i in batch.column("file").to_pylist():
                yield from _parquet_batches(paths[i], fields, micros)

    return Source(files, parse, frozenset(micros))


def _parquet_batches(path: str, fields: list[str], micros: list[str]):
    """One local Parquet file as batches of raw fields (typed_raw), about a million rows
    each: the encoder's work per batch is mostly per column, not per row."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    reader = pq.ParquetFile(path)
    missing = [f for f in fields if f not in reader.schema_arrow.names]
    if missing:
        raise ValueError(f"{path}: input has no column {missing[0]!r} (columns: {sorted(reader.schema_arrow.names)})")
    file = pa.scalar("file:" + path, pa.string())  # as Spark names a local file
    for batch in reader.iter_batches(batch_size=1 << 20, columns=fields):
        n = batch.num_rows
        columns = []
        for f in fields:
            col = batch.column(f)
            if f in micros:  # an instant (or a UTC wall time) as epoch microseconds, as Spark gives it
                if pa.types.is_date(col.type):
                    col = pc.cast(col, pa.timestamp("s"))
                col = pc.cast(pc.cast(col, pa.timestamp("us", col.type.tz), safe=False), pa.int64())
            columns.append(col)
        raw = pa.RecordBatch.from_arrays([*columns, pa.repeat(file, n), pa.nulls(n, pa.int64()), pa.nulls(n, pa.string())],
                                         names=[*fields, "_file", "_line", "_reason"])
        yield typed_raw(raw, fields, micros)


def _read_parquet_spark(spark, fields: list[str], zones: dict[str, str], paths: list[str]) -> Source:
    """Parquet inputs read by Spark's own reader."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    df = spark.read.parquet(*paths)
    present = set(df.columns)
    cols, micros, typed = [], [], False
    for f in fields:
        if f not in present:
            raise ValueError(f"input has no column {f!r} (columns: {sorted(present)})")
        c = df[f"`{f}`"]
        dtype = df.schema[f].dataType
        if isinstance(dtype, (T.TimestampType, T.TimestampNTZType, T.DateType)):
            if not isinstance(dtype, T.TimestampType):  # zone-less: local time of the column's zone
                c = F.to_utc_timestamp(c.cast("timestamp"), zones.get(f, "UTC"))
            c = F.unix_micros(c)
            micros.append(f)
        elif not isinstance(dtype, (T.StringType, T.NumericType, T.BooleanType)):
            raise ValueError(f"input column {f!r} has type {dtype.simpleString()}: gridagg reads text, "
                             "numbers, timestamps and dates")
        typed |= not isinstance(dtype, T.StringType)
        cols.append(c.alias(f))
    df = df.select(*cols, F.input_file_name().alias("_file"), F.lit(None).cast("long").alias("_line"),
                   F.lit(None).cast("string").alias("_reason"))
    if not typed:
        return Source(df)

    def parse(batches):
        for batch in batches:
            yield typed_raw(batch, fields, micros)

    return Source(df, parse, frozenset(micros))


def typed_raw(batch, fields: list[str], micros: list[str]):
    """An Arrow batch of typed source fields as raw fields: integers as int64 and doubles
    as they are (the encoder reads the decimal a double's shortest text writes), other
    numbers as the decimal they stand for (float32 at float32's precision), `micros`
    (epoch microseconds) as epoch seconds, with their fraction when they have one
    ("1577836800.5", which the encoder refuses)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    columns = []
    for f in fields:
        col = batch.column(f)
        if f in micros:
            us = pc.fill_null(col, 0).to_numpy(zero_copy_only=False)
            text = pc.cast(pa.array(us // 10**6), pa.string())
            fraction = np.flatnonzero(us % 10**6)
            if len(fraction):
                exact = text.to_pylist()
                for i in fraction.tolist():
                    q, r = divmod(abs(int(us[i])), 10**6)
                    exact[i] = ("-" if us[i] < 0 else "") + f"{q}." + f"{r:06d}".rstrip("0")
                text = pa.array(exact, pa.string())
            col = pc.if_else(pc.is_valid(col), text, pa.scalar(None, pa.string()))
        elif pa.types.is_integer(col.type) and col.type != pa.uint64():
            col = pc.cast(col, pa.int64())
        elif col.type not in (pa.string(), pa.float64()):
            col = pc.cast(col, pa.string())
        columns.append(col)
    return pa.RecordBatch.from_arrays([*columns, batch.column("_file"), batch.column("_line"), batch.column("_reason")],
                                      names=[*fields, "_file", "_line", "_reason"])


def as_text(batch, fields: list[str]):
    """A batch of raw fields (`fields`, then _file, _line, _reason) with every number
    among the fields as text: the decimal it stands for (a double its shortest text)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    cols = [pc.cast(batch.column(f), pa.string()) if batch.column(f).type != pa.string() else batch.column(f)
            for f in fields]
    return pa.RecordBatch.from_arrays([*cols, *batch.columns[len(fields):]], schema=raw_arrow_schema(fields))
