"""Readers: source files to a Spark DataFrame of raw source fields.

Every reader returns one string column per source field the config uses (null when a
record lacks it), plus `_file` (the input file), `_line` (line number when known) and
`_reason` (why the record is unusable as a whole, else null). Nothing is read on the
driver: TMY3 files are parsed in the executors, one file per task.
"""

from __future__ import annotations

import csv
import glob
import io
import os
from datetime import datetime, timedelta, timezone

from .config import IngestConfig

EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


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


def read_source(spark, cfg: IngestConfig, paths: list[str]):
    """The raw DataFrame of the inputs (see the module docstring)."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    fields = cfg.source_fields
    if cfg.format == "tmy3":
        schema = T.StructType(
            [T.StructField(f, T.StringType()) for f in fields]
            + [T.StructField("_file", T.StringType()), T.StructField("_line", T.LongType()),
               T.StructField("_reason", T.StringType())]
        )
        sc = spark.sparkContext
        rdd = sc.wholeTextFiles(",".join(paths), minPartitions=max(1, min(len(paths), sc.defaultParallelism * 4)))
        rows = rdd.flatMap(lambda kv: parse_tmy3(kv[0], kv[1], fields))
        return spark.createDataFrame(rows, schema)

    if cfg.format == "csv":
        df = (spark.read.option("header", cfg.csv_options["header"]).option("sep", cfg.csv_options["sep"])
              .option("mode", "PERMISSIVE").option("inferSchema", False).csv(paths))
    else:
        df = spark.read.parquet(*paths)
    present = set(df.columns)
    cols = []
    for f in fields:
        if f not in present:
            raise ValueError(f"input has no column {f!r} (columns: {sorted(present)})")
        c = df[f"`{f}`"]
        dtype = df.schema[f].dataType
        if isinstance(dtype, (T.TimestampType, T.TimestampNTZType)):
            c = F.unix_timestamp(c).cast("string")  # epoch seconds, like format = "epoch"
        elif not isinstance(dtype, T.StringType):
            c = c.cast("string")
        cols.append(c.alias(f))
    return df.select(*cols, F.input_file_name().alias("_file"), F.lit(None).cast("long").alias("_line"),
                     F.lit(None).cast("string").alias("_reason"))
