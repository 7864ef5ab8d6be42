"""Source fields to stored integers, in the executors, exactly as gridagg.model.schema.Column.encode.

Each Arrow batch goes through two paths that give the same result:
- the vectorized path (pyarrow kernels and integer numpy, no floats) for the common
  shapes: numbers written as plain decimals ("-12.50", "7", ".5", float text written in
  full such as "10.357019999999999": up to 18 significant digits), rounded to the scale
  by the column's rounding policy, and time in epoch seconds (format "epoch", or a Spark
  datetime pattern that Spark resolves first); missing values of nullable columns;
- the exact path, Python calling Column.encode itself, for every row the vectorized path
  cannot accept (exponents, odd whitespace, ISO timestamps, missing or out-of-domain
  values): it also writes the quarantine reason.
tests/test_ingest.py and tests/test_ingest_encode.py check the result against
Column.encode value by value.

A missing value (null, an empty field, or one of the column's `missing` markers, which
match the exact value: "-9999.4" rounded to -9999 is not the marker -9999) is NULL in a
nullable column and makes the row bad in any other.

Output: the raw fields and `_file` (kept for bad rows only: the quarantine output shows
them; null for good rows, which then cost nothing to carry on), `_line`, `_eid` (element
ID), `c0`..`c{n-1}` (stored integers, column order), `_reason` (null for a good row;
else why it is quarantined) and, for each column i with a rounding policy, `_r{i}`:
whether a good row's value was rounded. A bad row has no `_eid` and no values.
"""

from __future__ import annotations

import re
from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal, InvalidOperation

import numpy as np

from gridagg.model.aggregate import NULL
from gridagg.model.errors import InvalidInput
from gridagg.model.schema import REFUSE, Column

from .config import ColumnSource, IngestConfig

EPOCH_RE = re.compile(r"^[+-]?[0-9]+$")
MAX_MARKER = 10**18  # scaled markers beyond this can match no stored value


def _numeric_markers(src: ColumnSource) -> set[Decimal]:
    """The markers that are numbers (they match a number column's values by value)."""
    out = set()
    for m in src.missing:
        try:
            d = Decimal(m)
        except InvalidOperation:
            continue
        if d.is_finite():
            out.add(d)
    return out


def _marker(col: Column, src: ColumnSource, value) -> str | None:
    """The missing marker `value` is (its stripped text), or None: a marker matches as
    text ("NA"), and a number column's value also by value ("-9999.0" is -9999)."""
    if not src.missing:
        return None
    text = str(value).strip()
    if text in src.missing:
        return text
    if col.kind == "number":
        try:
            if Decimal(text) in _numeric_markers(src):
                return text
        except InvalidOperation:
            pass
    return None


def encode_value(col: Column, src: ColumnSource, value) -> tuple[int | None, str | None]:
    """The reference encoding of one source value: (stored integer, None) or (None,
    reason). `value` is the source text, or epoch seconds (int) for a time column whose
    format Spark resolved."""
    enc, _, why = encode_field(col, src, value)
    return enc, why


def encode_field(col: Column, src: ColumnSource, value) -> tuple[int | None, bool, str | None]:
    """encode_value, with whether the value was rounded: (stored integer, rounded, None)
    or (None, False, reason)."""
    missing = None
    if value is None or (isinstance(value, str) and value.strip() == ""):
        missing = f"{col.name}: missing value"
    elif (marker := _marker(col, src, value)) is not None:
        missing = f"{col.name}: missing value ({marker})"
    if missing is not None:
        return (NULL, False, None) if col.nullable else (None, False, missing)
    try:
        if col.kind == "time" and src.time_format == "epoch" and isinstance(value, str):
            if not EPOCH_RE.match(value.strip()):
                return None, False, f"{col.name}: {value!r} is not whole epoch seconds"
            value = int(value.strip())
        enc, rounded = col.encode_rounded(value)
        return enc, rounded, None
    except (InvalidInput, OverflowError, ValueError, OSError) as exc:
        detail = getattr(exc, "detail", str(exc))
        return None, False, detail if detail.startswith(col.name) else f"{col.name}: {detail}"


def element_id(parts: list) -> str | None:
    if any(p is None or str(p) == "" for p in parts):
        return None
    return "|".join(str(p) for p in parts)


def encode(src, cfg: IngestConfig, tree=None, then=None):
    """The encoded DataFrame (see the module docstring) of `src`, an ingest.readers.Source.
    Given `tree` (a broadcast ingest.tree.SplitTree), also `_leaf`: the position in
    tree.ids of the leaf holding each good row, -1 for a bad row. Given `then`, a pair
    (function of the encoded Arrow batches yielding Arrow batches, their Spark schema), the
    DataFrame holds what that function makes of them instead. Parsing (when the source has
    a Python parse step), encoding, locating and `then` run in one Python pass, so the rows
    cross from Spark to Python only once."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    from .readers import Source, as_text, raw_schema

    cfg = cfg.reading_epoch(src.epoch_fields)
    ds = cfg.dataset
    raw_fields = cfg.source_fields
    # Time columns with a Spark pattern are resolved to epoch seconds by Spark (text -> long).
    resolved = {}
    for i, (col, src_col) in enumerate(zip(ds.columns, cfg.sources)):
        if col.kind == "time" and src_col.time_format not in ("epoch", "iso"):
            ts = F.expr(f"try_to_timestamp(trim(`{src_col.source}`), '{src_col.time_format}')")
            if src_col.timezone != "UTC":
                ts = F.to_utc_timestamp(ts, src_col.timezone)
            resolved[i] = F.unix_timestamp(ts)
    if resolved and src.parse is not None:  # Spark must see the raw text first
        typed_parse = src.parse
        src = Source(src.df.mapInArrow(lambda batches: (as_text(b, raw_fields) for b in typed_parse(batches)),
                                       raw_schema(raw_fields)))
    work = src.df
    if src.parse is None:
        work = work.select(*[F.col(f"`{f}`") for f in raw_fields], "_file", "_line", "_reason",
                           *[e.alias(f"_t{i}") for i, e in resolved.items()])
    schema = T.StructType(
        [T.StructField(f, T.StringType()) for f in raw_fields]
        + [T.StructField("_file", T.StringType()), T.StructField("_line", T.LongType()),
           T.StructField("_eid", T.StringType())]
        + [T.StructField(f"c{i}", T.LongType()) for i in range(len(ds.columns))]
        + [T.StructField("_reason", T.StringType())]
        + [T.StructField(f"_r{i}", T.BooleanType()) for i in rounding_columns(ds)]
        + ([T.StructField("_leaf", T.LongType())] if tree is not None else [])
    )
    resolved_ids = sorted(resolved)
    parse = src.parse

    def encoded(batches):
        for batch in (parse(batches) if parse else batches):
            out = encode_batch(batch, cfg, resolved_ids)
            if tree is not None:
                out = with_leaf(out, tree.value, ds.ndim)
            yield out

    if then is None:
        return work.mapInArrow(encoded, schema)
    then_fn, then_schema = then
    return work.mapInArrow(lambda batches: then_fn(encoded(batches)), then_schema)


def rounding_columns(ds) -> list[int]:
    """Positions of the columns with a rounding policy: the `_r{i}` of encoded batches."""
    return [i for i, c in enumerate(ds.columns) if c.rounding != REFUSE]


def encode_batch(batch, cfg: IngestConfig, resolved: list[int]):
    """One Arrow batch of raw fields (+ _file, _line, _reason, and _t{i} for the columns
    in `resolved`) -> the encoded batch."""
    import pyarrow as pa
    import pyarrow.compute as pc

    ds = cfg.dataset
    n = batch.num_rows
    ok = pc.is_null(batch.column("_reason")).to_numpy(zero_copy_only=False).copy()
    values, rounded = [], {}
    for i, (col, src) in enumerate(zip(ds.columns, cfg.sources)):
        missing = None
        if i in resolved:
            t = batch.column(f"_t{i}")
            good = pc.is_valid(t).to_numpy(zero_copy_only=False)
            enc = pc.fill_null(t, 0).to_numpy().astype(np.int64) - int(col.epoch.timestamp())
        elif col.kind == "time" and src.time_format == "epoch":
            field = batch.column(src.source)
            enc, good, _ = _integers(field, 0, point=False, max_digits=15)
            is_marker = (_text_markers(field, [m for m in src.missing if m.strip() == m]) if field.type == pa.string()
                         else _number_markers(None, 0, src, enc, good, np.zeros(n, bool)))
            enc = enc - int(col.epoch.timestamp())
            if col.nullable:
                missing = _empty(field) if is_marker is None else _empty(field) | is_marker
            elif is_marker is not None:
                good &= ~is_marker
        elif col.kind == "time":  # ISO text: the exact path parses it
            enc, good = np.zeros(n, dtype=np.int64), np.zeros(n, dtype=bool)
        else:
            field = batch.column(src.source)
            enc, good, was_rounded = _integers(field, col.scale, rounding=col.rounding)
            is_marker = _number_markers(field if field.type == pa.string() else None, col.scale, src, enc, good,
                                        was_rounded)
            if col.nullable:
                missing = _empty(field) if is_marker is None else _empty(field) | is_marker
            elif is_marker is not None:
                good &= ~is_marker
            if col.rounding != REFUSE:
                rounded[i] = was_rounded
        in_domain = good & (enc >= col.enc_lo) & (enc <= col.enc_hi)
        if missing is not None:
            enc[missing] = NULL
            in_domain |= missing
            if i in rounded:
                rounded[i] &= ~missing
        ok &= in_domain
        values.append(enc)

    # Element ID: the id fields joined by "|"; none when a field is missing or empty.
    parts = [_text(batch.column(f)) for f in cfg.id_fields]
    has_id = np.ones(n, dtype=bool)
    for p in parts:
        has_id &= pc.fill_null(pc.binary_length(p), 0).to_numpy(zero_copy_only=False) > 0
    eid = pc.if_else(pa.array(has_id), pc.binary_join_element_wise(*parts, "|"), pa.scalar(None, pa.string()))
    ok &= has_id

    reasons = pa.nulls(n, pa.string())
    bad = np.flatnonzero(~ok)
    if len(bad):
        why = [None] * n
        recs = batch.take(pa.array(bad)).to_pylist()
        for r, rec in zip(bad.tolist(), recs):
            row, rounded_here, why[r] = _exact_row(cfg, resolved, rec)
            for i, v in enumerate(row):
                values[i][r] = v
            for i in rounded:
                rounded[i][r] = i in rounded_here
            ok[r] = why[r] is None
        reasons = pa.array(why, pa.string())
    mask = pa.array(~ok)
    raw = [pc.if_else(mask, _text(batch.column(f)), pa.scalar(None, pa.string())) if len(bad) else pa.nulls(n, pa.string())
           for f in [*cfg.source_fields, "_file"]]
    eid = pc.if_else(mask, pa.scalar(None, pa.string()), eid)
    cols = [pc.if_else(mask, pa.scalar(None, pa.int64()), pa.array(v)) for v in values]
    flags = [pa.array(rounded[i] & ok) for i in sorted(rounded)]
    names = [*cfg.source_fields, "_file", "_line", "_eid", *[f"c{i}" for i in range(len(values))], "_reason",
             *[f"_r{i}" for i in sorted(rounded)]]
    return pa.RecordBatch.from_arrays([*raw, batch.column("_line"), eid, *cols, reasons, *flags], names=names)


def with_leaf(batch, tree, ndim: int):
    """`batch` (with the dimensions `c0`..`c{ndim-1}`; null values mark a bad row) plus
    `_leaf`: the position in tree.ids of each row's leaf, -1 for a bad row."""
    import pyarrow as pa

    points = np.stack([batch.column(f"c{i}").fill_null(0).to_numpy() for i in range(ndim)], axis=1)
    leaf = tree.locate(points)
    leaf[~batch.column("c0").is_valid().to_numpy(zero_copy_only=False)] = -1
    return batch.append_column("_leaf", pa.array(leaf, pa.int64()))


def _empty(field) -> np.ndarray:
    """Which entries of a raw field (an Arrow string or number array) are null or empty."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if field.type != pa.string():
        return pc.is_null(field).to_numpy(zero_copy_only=False)
    return pc.fill_null(pc.binary_length(field), 0).to_numpy(zero_copy_only=False) == 0


def _text(field):
    """A raw field as text: numbers as the decimal they stand for."""
    import pyarrow as pa
    import pyarrow.compute as pc

    return field if field.type == pa.string() else pc.cast(field, pa.string())


def _integers(field, scale: int, point: bool = True, max_digits: int = 18,
              rounding: str = REFUSE) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """_plain_integers of a raw field: text parsed, numbers (int64, float64) read as
    they are, without text."""
    import pyarrow as pa

    if field.type == pa.int64():
        return _typed_integers(field, scale, max_digits)
    if field.type == pa.float64():
        return _typed_doubles(field, scale, rounding)
    return _plain_integers(field, scale, point, max_digits, rounding)


def _typed_integers(field, scale: int, max_digits: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Stored integers of int64 values: value * 10**scale; decided when that has at most
    max_digits (and 18) digits; none are rounded."""
    import pyarrow.compute as pc

    values = pc.fill_null(field, 0).to_numpy()
    good = np.abs(values) < 10 ** (min(max_digits, 18) - scale) if scale <= min(max_digits, 18) \
        else np.zeros(len(values), bool)
    good &= pc.is_valid(field).to_numpy(zero_copy_only=False)
    return np.where(good, values, 0) * 10**scale, good, np.zeros(len(values), bool)


# A double within this many units in the last place of x * 10**scale from a rounding
# boundary is left to the exact path: the decimal it stands for (its shortest text) and
# the double itself lie within an ulp, and the product adds half of one.
MARGIN_ULPS = 4


def _typed_doubles(field, scale: int, rounding: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Stored integers of float64 values, each read as the decimal its shortest text
    writes (as Column.encode reads a float), rounded by `rounding`, without text:
    - x * 10**scale rounds to an integer r with r / 10**scale == x: the decimal has at
      most `scale` decimals and is r / 10**scale (below 2**50 no other decimal of that
      scale lies within x's ulp), not rounded;
    - otherwise the decimal has more decimals than the scale; away from a rounding
      boundary by MARGIN_ULPS ulps, its side of each boundary is x * 10**scale's: rounded;
    - the rest (near a boundary or a tie, beyond 2**50, not finite, null) is left
      undecided for the exact path."""
    import pyarrow.compute as pc

    x = pc.fill_null(field, 0.0).to_numpy()
    with np.errstate(invalid="ignore", over="ignore"):
        y = x * 10.0**scale
        finite = np.isfinite(y) & (np.abs(y) < 2.0**50) & pc.is_valid(field).to_numpy(zero_copy_only=False)
        y = np.where(finite, y, 0.0)
        r = np.rint(y)
        whole = finite & (r / 10.0**scale == x)
        floor = np.floor(y)
        frac = y - floor
        margin = MARGIN_ULPS * np.spacing(np.abs(y) + 1.0)
    clear = finite & ~whole & (frac > margin) & (frac < 1 - margin) & (np.abs(frac - 0.5) > margin)
    if rounding == REFUSE:
        clear[:] = False
        up = np.zeros(len(x), bool)
    elif rounding in ("half_even", "half_up"):
        up = frac > 0.5
    elif rounding == "floor":
        up = np.zeros(len(x), bool)
    else:  # ceil
        up = np.ones(len(x), bool)
    enc = np.where(whole, r, floor + up).astype(np.int64)
    good = whole | clear
    return np.where(good, enc, 0), good, clear


def _plain_integers(text, scale: int, point: bool = True, max_digits: int = 18,
                    rounding: str = REFUSE) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Stored integers (value * 10**scale, rounded by `rounding`) of plain numbers in
    `text`, with integer arithmetic only, which entries were decided and which were
    rounded. Plain: an optional sign, then ASCII digits (up to max_digits significant
    ones; leading zeros do not count) with at most one decimal point among or around
    them (none unless `point`). Anything else, and non-zero decimals beyond the scale
    under the "refuse" policy, is left undecided. (Checked without a regex: matching one
    took a large share of the time.)"""
    import pyarrow as pa
    import pyarrow.compute as pc

    text = pc.fill_null(text, "")
    body = pc.utf8_ltrim(text, "+-")
    signs = pc.subtract(pc.binary_length(text), pc.binary_length(body)).to_numpy()
    digit_text = pc.replace_substring(body, ".", "", max_replacements=1) if point else body
    ndigits = pc.binary_length(digit_text).to_numpy().astype(np.int64)
    significant, nsig = digit_text, ndigits
    if (ndigits > 18).any():  # only then can leading zeros matter (small floats in full)
        significant = pc.utf8_ltrim(digit_text, "0")
        nsig = pc.binary_length(significant).to_numpy().astype(np.int64)
    # At most 18 significant digits, so every intermediate value below fits in int64.
    good = (pc.ascii_is_decimal(digit_text).to_numpy(zero_copy_only=False) & (signs <= 1)
            & (nsig <= min(max_digits, 18)))
    digits = pc.cast(pc.if_else(pa.array(good & (nsig > 0)), significant, pa.scalar("0")), pa.int64()).to_numpy()
    negative = pc.starts_with(text, "-").to_numpy(zero_copy_only=False)
    dot = pc.find_substring(body, ".").to_numpy() if point else np.full(len(text), -1)
    shift = scale - np.where(dot >= 0, ndigits - dot, 0)  # scale minus the decimals given
    good &= (nsig + np.maximum(shift, 0) <= 18) & (shift >= -18)
    digits = np.where(good, digits, 0)
    up = 10 ** np.clip(shift, 0, 18).astype(np.int64)
    down = 10 ** np.clip(-shift, 0, 18).astype(np.int64)
    whole, rest = np.divmod(digits, down)  # magnitudes: the value is whole + rest / down
    if rounding == REFUSE:
        good &= rest == 0  # decimals beyond the scale must all be zeros
    elif rounding == "half_even":
        whole += (2 * rest > down) | ((2 * rest == down) & (whole % 2 == 1))
    elif rounding == "half_up":  # ties away from zero, as decimal.ROUND_HALF_UP
        whole += 2 * rest >= down
    elif rounding == "floor":
        whole += (rest > 0) & negative
    else:  # ceil
        whole += (rest > 0) & ~negative
    out = np.where(shift >= 0, digits * up, whole)
    return np.where(negative, -out, out), good, good & (rest != 0)


def _text_markers(text, words: list[str]) -> np.ndarray | None:
    """Which entries of an Arrow string array are one of `words` as they stand (padded
    ones are left to the exact path), or None without words."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if not words:
        return None
    return pc.fill_null(pc.is_in(text, value_set=pa.array(words, pa.string())), False).to_numpy(zero_copy_only=False)


def _number_markers(text, scale: int, src: ColumnSource, enc: np.ndarray, good: np.ndarray,
                    rounded: np.ndarray) -> np.ndarray | None:
    """Which decided entries of a number column of this scale (`enc`, `good`, `rounded`
    as _plain_integers gives them; `text` its text, None when it holds numbers) are
    missing markers, or None when the column has none.
    Numeric markers match the exact value, never a rounded one; a rounded value next to
    a marker that has more decimals than the scale is left undecided (`good` cleared)
    for the exact path to compare."""
    if not src.missing:
        return None
    exact, near = [], []  # (text None: the field holds numbers, which no word marker matches)
    for m in _numeric_markers(src):
        sign, digits, exponent = m.as_tuple()
        v = Decimal((sign, digits, exponent + scale))  # exact: scaleb rounds to 28 digits
        if v == v.to_integral_value():
            exact.append(int(v))
        elif abs(v) < MAX_MARKER:
            near.extend([int(v.to_integral_value(rounding=ROUND_FLOOR)), int(v.to_integral_value(rounding=ROUND_CEILING))])
    if near:
        good &= ~(rounded & np.isin(enc, near))
    is_marker = good & ~rounded & np.isin(enc, exact)
    words = None if text is None else _text_markers(text, [m for m in src.missing if m.strip() == m and not _is_number(m)])
    return is_marker if words is None else is_marker | words


def _is_number(text: str) -> bool:
    try:
        Decimal(text)
        return True
    except InvalidOperation:
        return False


def _exact_row(cfg: IngestConfig, resolved: list[int], rec: dict) -> tuple[list[int], set[int], str | None]:
    """(stored integers, positions of the rounded values, None) or ([], set(), reason)
    of one row, by the reference encoder."""
    if rec["_reason"] is not None:
        return [], set(), rec["_reason"]
    row, rounded = [], set()
    for i, (col, src) in enumerate(zip(cfg.dataset.columns, cfg.sources)):
        v = rec[f"_t{i}"] if i in resolved else rec[src.source]
        if i in resolved and v is None:
            raw = rec[src.source]
            if raw is None or str(raw).strip() == "" or _marker(col, src, raw) is not None:
                if col.nullable:
                    row.append(NULL)
                    continue
                return [], set(), f"{col.name}: missing value"
            return [], set(), f"{col.name}: {raw!r} does not match the time format {src.time_format!r}"
        enc, was_rounded, why = encode_field(col, src, v)
        if why is not None:
            return [], set(), why
        row.append(enc)
        if was_rounded:
            rounded.add(i)
    if element_id([rec[f] for f in cfg.id_fields]) is None:
        return [], set(), "element id: a field of " + ", ".join(cfg.id_fields) + " is missing"
    return row, rounded, None
