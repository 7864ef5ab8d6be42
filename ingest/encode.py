"""Source fields to stored integers, in Spark, exactly as gridagg.schema.Column.encode.

Two paths give the same result:
- the fast path, Spark SQL only, for the common shapes: numbers written as plain
  decimals ("-12.50", "7", ".5") and time already in epoch seconds (format "epoch", or a
  Spark datetime pattern resolved by Spark);
- the exact path, Python in the executors calling Column.encode itself, for every other
  row (exponents, odd whitespace, ISO timestamps, values the fast path cannot decide).
A row goes down one path or the other, never both. tests/test_ingest_encode.py checks
the two against Column.encode value by value.

Output: the raw fields, `_eid` (element ID), `c0`..`c{n-1}` (stored integers, column
order) and `_reason` (null for a good row; else why it is quarantined).
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

from gridagg.errors import InvalidInput
from gridagg.schema import Column

from .config import ColumnSource, IngestConfig

PLAIN = r"^[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)$"
EPOCH_RE = re.compile(r"^[+-]?[0-9]+$")


def _markers(col: Column, src: ColumnSource) -> set[Decimal]:
    out = set()
    for m in src.missing:
        try:
            out.add(Decimal(m))
        except InvalidOperation:
            pass
    return out


def encode_value(col: Column, src: ColumnSource, value) -> tuple[int | None, str | None]:
    """The reference encoding of one source value: (stored integer, None) or (None,
    reason). `value` is the source text, or epoch seconds (int) for a time column whose
    format Spark resolved."""
    if value is None or (isinstance(value, str) and value.strip() == ""):
        return None, f"{col.name}: missing value"
    try:
        if col.kind == "time":
            if src.time_format == "epoch" and isinstance(value, str):
                if not EPOCH_RE.match(value.strip()):
                    return None, f"{col.name}: {value!r} is not whole epoch seconds"
                value = int(value.strip())
            return col.encode(value), None
        markers = _markers(col, src)
        if markers:
            try:
                if Decimal(str(value).strip()) in markers:
                    return None, f"{col.name}: missing value ({str(value).strip()})"
            except InvalidOperation:
                pass
        return col.encode(value), None
    except (InvalidInput, OverflowError, ValueError, OSError) as exc:
        detail = getattr(exc, "detail", str(exc))
        return None, detail if detail.startswith(col.name) else f"{col.name}: {detail}"


def element_id(parts: list) -> str | None:
    if any(p is None or str(p) == "" for p in parts):
        return None
    return "|".join(str(p) for p in parts)


def encode(df, cfg: IngestConfig):
    """The encoded DataFrame (see the module docstring)."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    ds = cfg.dataset
    cols = ds.columns
    raw_fields = cfg.source_fields
    # Time columns with a Spark pattern are resolved to epoch seconds first (text -> long).
    resolved = {}
    for i, (col, src) in enumerate(zip(cols, cfg.sources)):
        s = F.trim(F.col(f"`{src.source}`"))
        if col.kind == "time" and src.time_format not in ("epoch", "iso"):
            ts = F.expr(f"try_to_timestamp(trim(`{src.source}`), '{src.time_format}')")
            if src.timezone != "UTC":
                ts = F.to_utc_timestamp(ts, src.timezone)
            resolved[i] = F.unix_timestamp(ts)
        elif col.kind == "time" and src.time_format == "epoch":
            resolved[i] = F.when(s.rlike(r"^[+-]?[0-9]{1,15}$"), s.cast("long"))
    work = df.select(
        *[F.col(f"`{f}`") for f in raw_fields], "_file", "_line", "_reason",
        *[resolved[i].alias(f"_t{i}") for i in resolved],
    )

    # Which rows the fast path can decide.
    fast_conds = []
    for i, (col, src) in enumerate(zip(cols, cfg.sources)):
        s = F.trim(F.col(f"`{src.source}`"))
        if col.kind == "time":
            if src.time_format == "iso":
                fast_conds.append(F.lit(False))
            elif src.time_format == "epoch":
                # Non-integers go to the exact path, which names the problem.
                fast_conds.append(F.col(f"_t{i}").isNotNull() | s.isNull() | (s == ""))
            continue
        raw = F.col(f"`{src.source}`")
        ok = raw.isNull() | (s == "") | (s.rlike(PLAIN) & (F.length(s) <= 30) & (raw == s))
        fast_conds.append(ok)
    is_fast = F.lit(True)
    for c in fast_conds:
        is_fast = is_fast & F.coalesce(c, F.lit(False))
    work = work.withColumn("_fast", is_fast)

    out_cols = [*raw_fields, "_file", "_line"]
    schema = T.StructType(
        [T.StructField(f, T.StringType()) for f in raw_fields]
        + [T.StructField("_file", T.StringType()), T.StructField("_line", T.LongType()),
           T.StructField("_eid", T.StringType())]
        + [T.StructField(f"c{i}", T.LongType()) for i in range(len(cols))]
        + [T.StructField("_reason", T.StringType())]
    )

    fast = _fast_path(work.filter("_fast"), cfg, resolved, out_cols)
    slow = work.filter("NOT _fast").mapInPandas(_slow_path_fn(cfg, sorted(resolved)), schema)
    return fast.unionByName(slow)


def _fast_path(df, cfg: IngestConfig, resolved, out_cols):
    from pyspark.sql import functions as F

    ds = cfg.dataset
    # First the stored integers (and fraction digits) of every column, then the reasons.
    # Built in stages (trimmed text; its parts; the integer), each stage a projection of
    # the previous one's columns: one huge nested expression per column would repeat
    # every sub-expression, and its generated code grows too big to be JIT-compiled.
    nums = [i for i, col in enumerate(ds.columns) if col.kind != "time"]
    df = df.select("*", *[F.trim(F.col(f"`{cfg.sources[i].source}`")).alias(f"_s{i}") for i in nums])
    stage = []
    for i in nums:
        # _s matches PLAIN here (or is null/empty, and then the reason is "missing"):
        # plain string functions split it, no regular expressions (they dominate the cost).
        s = F.col(f"_s{i}")
        signed = s.startswith("-") | s.startswith("+")
        stage += [F.when(s.startswith("-"), F.lit("-")).otherwise(F.lit("")).alias(f"_g{i}"),
                  F.when(signed, F.substring(s, 2, 64)).otherwise(s).alias(f"_b{i}")]
    df = df.select("*", *stage)
    stage = []
    for i in nums:
        body = F.col(f"_b{i}")
        dot = F.instr(body, ".")
        stage += [F.when(dot == 0, body).otherwise(body.substr(F.lit(1), dot - 1)).alias(f"_i{i}"),
                  F.rtrim(F.when(dot == 0, F.lit("")).otherwise(body.substr(dot + 1, F.lit(64))),
                          F.lit("0")).alias(f"_f{i}")]
    df = df.select("*", *stage)
    pre = []
    for i, (col, src) in enumerate(zip(ds.columns, cfg.sources)):
        if col.kind == "time":
            pre += [(F.col(f"_t{i}") - F.lit(int(col.epoch.timestamp()))).alias(f"_e{i}"),
                    F.lit(0).alias(f"_d{i}")]
            continue
        int_part, frac_sig = F.col(f"_i{i}"), F.col(f"_f{i}")
        digits = F.concat(int_part, F.rpad(frac_sig, col.scale, "0")) if col.scale else int_part
        unscaled = F.concat(F.col(f"_g{i}"), F.when(digits == "", F.lit("0")).otherwise(digits))
        # More decimals than the scale: no value (the reason says why).
        pre += [F.when(F.length(frac_sig) <= col.scale, unscaled.try_cast("long")).alias(f"_e{i}"),
                F.length(frac_sig).alias(f"_d{i}")]
    df = df.select("*", *pre)

    values, reasons = [], []
    for i, (col, src) in enumerate(zip(ds.columns, cfg.sources)):
        raw = F.col(f"`{src.source}`")
        s = F.trim(raw)
        enc = F.col(f"_e{i}")
        reason = F.when(raw.isNull() | (s == ""), F.lit(f"{col.name}: missing value"))
        if col.kind == "time":
            reason = reason.when(F.col(f"_t{i}").isNull(), F.concat(
                F.lit(f"{col.name}: '"), s, F.lit(f"' does not match the time format {src.time_format!r}")))
        else:
            marker_encs = _marker_encodings(col, cfg.sources[i])
            if marker_encs:
                reason = reason.when(enc.isin(marker_encs), F.concat(F.lit(f"{col.name}: missing value ("), s, F.lit(")")))
            reason = reason.when(F.col(f"_d{i}") > col.scale, F.concat(
                F.lit(f"{col.name}: '"), s, F.lit(f"' has more decimals than the column's scale ({col.scale})")))
        reason = reason.when(enc.isNull() | (enc < col.enc_lo) | (enc > col.enc_hi), F.concat(
            F.lit(f"{col.name}: '"), s, F.lit(f"' is outside the domain [{col.lo}, {col.hi}]")))
        values.append(enc)
        reasons.append(reason)
    eid_parts = [F.col(f"`{f}`") for f in cfg.id_fields]
    eid_missing = F.lit(False)
    for p in eid_parts:
        eid_missing = eid_missing | p.isNull() | (p == "")
    eid = F.concat_ws("|", *eid_parts)
    all_reasons = [F.col("_reason"), *reasons,
                   F.when(eid_missing, F.lit("element id: a field of " + ", ".join(cfg.id_fields) + " is missing"))]
    df = df.withColumn("_why", F.coalesce(*all_reasons))
    return df.select(
        *[F.col(f"`{c}`") for c in out_cols],
        eid.alias("_eid"),
        *[F.when(F.col("_why").isNull(), v).alias(f"c{i}") for i, v in enumerate(values)],
        F.col("_why").alias("_reason"),
    )


def _marker_encodings(col: Column, src: ColumnSource) -> list[int]:
    out = []
    for m in _markers(col, src):
        v = m.scaleb(col.scale)
        if v == v.to_integral_value():
            out.append(int(v))
    return out


def _slow_path_fn(cfg: IngestConfig, resolved: list[int]):
    ds = cfg.dataset
    cols = ds.columns
    sources = cfg.sources
    raw_fields = cfg.source_fields
    id_fields = cfg.id_fields

    def fn(batches):
        import pandas as pd

        for pdf in batches:
            n = len(pdf)
            eids, reasons = [], []
            values = [[None] * n for _ in cols]
            recs = pdf.to_dict("records")
            for r, rec in enumerate(recs):
                reason = rec["_reason"]
                row = []
                if reason is None:
                    for i, (col, src) in enumerate(zip(cols, sources)):
                        v = rec.get(f"_t{i}") if i in resolved else rec[src.source]
                        if i in resolved and (v is None or v != v):
                            raw = rec[src.source]
                            if raw is None or str(raw).strip() == "":
                                reason = f"{col.name}: missing value"
                            elif src.time_format == "epoch":
                                reason = f"{col.name}: {raw!r} is not whole epoch seconds"
                            else:
                                reason = f"{col.name}: {raw!r} does not match the time format {src.time_format!r}"
                            break
                        if i in resolved:
                            v = int(v)
                        enc, why = encode_value(col, src, v)
                        if why is not None:
                            reason = why
                            break
                        row.append(enc)
                eid = element_id([rec[f] for f in id_fields])
                if reason is None and eid is None:
                    reason = "element id: a field of " + ", ".join(id_fields) + " is missing"
                eids.append(eid)
                reasons.append(reason)
                if reason is None:
                    for i, v in enumerate(row):
                        values[i][r] = v
            out = pd.DataFrame({f: pdf[f] for f in raw_fields})
            out["_file"] = pdf["_file"]
            out["_line"] = pdf["_line"]
            out["_eid"] = eids
            for i in range(len(cols)):
                out[f"c{i}"] = pd.array(values[i], dtype="Int64")
            out["_reason"] = reasons
            yield out

    return fn
