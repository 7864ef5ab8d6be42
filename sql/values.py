"""Constants of a statement, read exactly from sqlglot's tree: numbers as Decimals,
times as Fractions of seconds since 1970 (UTC), intervals as whole seconds.

A constant is a literal or an expression clients write for one: a cast, a typed literal
(TIMESTAMP '...'), to_timestamp(seconds) or to_timestamp(text, format) as Superset
writes it, now() and CURRENT_TIMESTAMP, a time plus or minus an interval, and
date_trunc of a constant time (Metabase's relative filters). Anything else raises
SqlError naming it.
"""

from __future__ import annotations

import re
import time
from datetime import datetime, timezone
from decimal import Decimal, InvalidOperation
from fractions import Fraction

from sqlglot import exp

from .errors import (
    DATATYPE_MISMATCH,
    INVALID_DATETIME_FORMAT,
    INVALID_PARAMETER_VALUE,
    SqlError,
    unsupported,
)

UNIX = datetime(1970, 1, 1, tzinfo=timezone.utc)
# Seconds of the interval units of fixed length (a month or a year has none).
UNIT_SECONDS = {"microsecond": Fraction(1, 10**6), "millisecond": Fraction(1, 1000), "second": 1, "minute": 60,
                "hour": 3600, "day": 86400, "week": 7 * 86400}
UNIT_NAMES = {"us": "microsecond", "ms": "millisecond", "s": "second", "sec": "second", "secs": "second",
              "m": "minute", "min": "minute", "mins": "minute", "h": "hour", "hr": "hour", "hrs": "hour",
              "d": "day", "w": "week"}
INTERVAL_PART = re.compile(r"\s*([-+]?[0-9]+(?:\.[0-9]*)?)\s*([a-z]+)\s*", re.IGNORECASE)


def sql_text(node: exp.Expression) -> str:
    """The node as PostgreSQL text, for messages."""
    return node.sql(dialect="postgres")


def number(node: exp.Expression) -> Decimal:
    """A numeric constant, exactly."""
    if isinstance(node, exp.Paren):
        return number(node.this)
    if isinstance(node, exp.Neg):
        return -number(node.this)
    if isinstance(node, exp.Cast) and not node.to.is_type(*exp.DataType.TEMPORAL_TYPES):
        return number(node.this)
    if isinstance(node, exp.Literal):
        try:
            value = Decimal(str(node.this).strip())
        except InvalidOperation:
            raise SqlError(INVALID_PARAMETER_VALUE,
                           f"invalid input syntax for type numeric: {sql_text(node)}") from None
        if not value.is_finite():
            raise SqlError(INVALID_PARAMETER_VALUE, f"{sql_text(node)} is not a finite number")
        return value
    raise _not_a_constant(node, "a number")


def instant(node: exp.Expression, now: Fraction | None = None) -> Fraction:
    """A time constant: seconds since 1970 (UTC). now: the statement's time, for now()."""
    if isinstance(node, exp.Paren):
        return instant(node.this, now)
    if isinstance(node, exp.Literal) and node.is_string:
        return parse_time(str(node.this))
    if isinstance(node, exp.Cast) and node.to.is_type(*exp.DataType.TEMPORAL_TYPES):
        return instant(node.this, now)
    if isinstance(node, exp.StrToTime):  # to_timestamp(text, format)
        return instant(node.this, now)
    if isinstance(node, exp.UnixToTime):  # to_timestamp(seconds)
        return Fraction(number(node.this))
    if isinstance(node, (exp.CurrentTimestamp, exp.CurrentDate)) or (
            isinstance(node, exp.Anonymous) and str(node.this).lower() == "now"):
        return Fraction(time.time_ns(), 10**9) if now is None else now
    if isinstance(node, (exp.Add, exp.Sub)) and isinstance(node.expression, exp.Interval):
        shift = interval(node.expression)
        base = instant(node.this, now)
        return base + shift if isinstance(node, exp.Add) else base - shift
    if isinstance(node, (exp.TimestampTrunc, exp.DateTrunc)):
        unit = str(node.args["unit"].name).lower()
        width = _fixed_unit(unit, f"date_trunc('{unit}', ...)")
        origin = WEEK_ORIGIN if unit == "week" else 0
        value = instant(node.this, now)
        return origin + (value - origin) // width * width
    raise _not_a_constant(node, "a timestamp")


# PostgreSQL's weeks start on Mondays: 1970-01-05 was one.
WEEK_ORIGIN = 4 * 86400


def parse_time(text: str) -> Fraction:
    """ISO 8601 text (or PostgreSQL's 'YYYY-MM-DD HH:MM:SS+00'), UTC when it names no
    zone, as seconds since 1970."""
    try:
        ts = datetime.fromisoformat(text.strip())
    except ValueError:
        raise SqlError(INVALID_DATETIME_FORMAT,
                       f'invalid input syntax for type timestamp with time zone: "{text}"') from None
    if ts.tzinfo is None:
        ts = ts.replace(tzinfo=timezone.utc)
    delta = ts - UNIX
    return delta.days * 86400 + delta.seconds + Fraction(delta.microseconds, 10**6)


def interval(node: exp.Expression) -> Fraction:
    """Seconds of an interval constant: INTERVAL '7 days', '1 hour' or '90 minutes' as
    text, whole units of fixed length (a month's or a year's is not)."""
    if isinstance(node, exp.Neg):
        return -interval(node.this)
    if isinstance(node, exp.Interval):
        text = str(node.this.this) if isinstance(node.this, exp.Literal) else sql_text(node.this)
        unit = node.args.get("unit")
        return parse_interval(f"{text} {unit.name}" if unit is not None else text)
    if isinstance(node, exp.Literal) and node.is_string:
        return parse_interval(str(node.this))
    if isinstance(node, exp.Cast):
        return interval(node.this)
    raise _not_a_constant(node, "an interval")


def parse_interval(text: str) -> Fraction:
    """Seconds of interval text such as '1 day', '5 minutes', '1h 30m' or '-30 day'."""
    total, at = Fraction(0), 0
    for m in INTERVAL_PART.finditer(text):
        if m.start() != at:
            break
        total += Fraction(Decimal(m.group(1))) * _fixed_unit(m.group(2).lower(), f"interval '{text}'")
        at = m.end()
    if at != len(text) or not text.strip():
        raise SqlError(INVALID_DATETIME_FORMAT, f'invalid input syntax for type interval: "{text}"')
    return total


def _fixed_unit(unit: str, where: str) -> Fraction | int:
    name = UNIT_NAMES.get(unit, unit.rstrip("s") if unit.endswith("s") and unit != "s" else unit)
    if name in UNIT_SECONDS:
        return UNIT_SECONDS[name]
    if name in ("month", "mon", "quarter", "year", "decade", "century", "millennium"):
        raise unsupported(where, "months and years are not of fixed length; use days or weeks")
    raise SqlError(INVALID_PARAMETER_VALUE, f'{where}: unit "{unit}" not recognized')


def _not_a_constant(node: exp.Expression, what: str) -> SqlError:
    if isinstance(node, exp.Column):
        return unsupported(f"comparing two columns ({sql_text(node.parent or node)})")
    if isinstance(node, exp.Literal) and what == "a timestamp":
        return SqlError(DATATYPE_MISMATCH, f"a time column is compared with {sql_text(node)}, not a timestamp; "
                                           "write a timestamp such as '2012-06-01T00:00:00Z'")
    return unsupported(f"{sql_text(node)} (expected {what})")
