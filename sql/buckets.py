"""GROUP BY a time bucket into the JSON API's series: its step, and where buckets start.

Understood, over the dataset's time dimension:
- time_bucket('1 day', time) or time_bucket(INTERVAL '1 day', time[, origin])
  (TimescaleDB's: buckets from 2000-01-03T00:00:00Z, a Monday, unless an origin is
  given), a timestamp with time zone;
- date_trunc('day', time) for second, minute, hour, day and week (weeks start on
  Mondays), a timestamp with time zone;
- floor(extract(epoch from time)/300)*300, as Grafana's $__timeGroup(time, '5m')
  expands, seconds since 1970 (bigint); inside to_timestamp(...) a timestamp.
Months and years are not of fixed length and are refused, as is a bucket over any
other column.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from sqlglot import exp

from gridagg.model.schema import Dataset

from . import values
from .errors import INVALID_PARAMETER_VALUE, SqlError, unsupported
from .names import arguments, column, function_name
from .values import sql_text

TIMESCALE_ORIGIN = 946857600  # 2000-01-03T00:00:00Z
TRUNC_UNITS = {"second": 1, "minute": 60, "hour": 3600, "day": 86400, "week": 7 * 86400}


@dataclass(frozen=True)
class Bucket:
    """Buckets of `step` seconds starting at origin + k * step (seconds since 1970);
    epoch: the bucket is written as seconds since 1970 rather than a timestamp."""

    step: int
    origin: Fraction
    epoch: bool = False

    def start(self, unix: Fraction) -> Fraction:
        """The start of the bucket holding time `unix`."""
        return self.origin + (unix - self.origin) // self.step * self.step


def read_bucket(node: exp.Expression, ds: Dataset, aliases: set[str]) -> Bucket | None:
    """The Bucket an expression stands for; None if it is no time bucket."""
    name = function_name(node)
    if name == "time_bucket":
        args = arguments(node)
        if len(args) not in (2, 3):
            raise SqlError(INVALID_PARAMETER_VALUE, "time_bucket(width, time[, origin]) takes two or three arguments")
        _check_time(args[1], ds, aliases, node)
        origin = values.instant(args[2]) if len(args) == 3 else Fraction(TIMESCALE_ORIGIN)
        return Bucket(_whole_seconds(values.interval(args[0]), node), origin)
    if isinstance(node, (exp.TimestampTrunc, exp.DateTrunc)):
        unit = str(node.args["unit"].name).lower()
        if unit not in TRUNC_UNITS:
            raise unsupported(f"date_trunc('{unit}', ...)", "buckets of second, minute, hour, day or week: months "
                                                           "and years are not of fixed length")
        _check_time(node.this, ds, aliases, node)
        return Bucket(TRUNC_UNITS[unit], Fraction(values.WEEK_ORIGIN if unit == "week" else 0))
    if isinstance(node, exp.UnixToTime):
        inner = read_bucket(node.this, ds, aliases)
        return None if inner is None or not inner.epoch else Bucket(inner.step, inner.origin)
    return _grafana_bucket(node, ds, aliases)


def _grafana_bucket(node: exp.Expression, ds: Dataset, aliases: set[str]) -> Bucket | None:
    """floor(extract(epoch from time)/N)*N."""
    if not (isinstance(node, exp.Mul) and isinstance(node.this, exp.Floor)):
        return None
    div = node.this.this
    if not (isinstance(div, exp.Div) and isinstance(div.this, exp.Extract)
            and str(div.this.this.name).lower() == "epoch"):
        return None
    width, again = values.number(div.expression), values.number(node.expression)
    if width != again:
        raise unsupported(f"{sql_text(node)}", "divide and multiply by the same number of seconds")
    _check_time(div.this.expression, ds, aliases, node)
    return Bucket(_whole_seconds(Fraction(width), node), Fraction(0), epoch=True)


def _check_time(node: exp.Expression, ds: Dataset, aliases: set[str], bucket: exp.Expression) -> None:
    t = ds.time_axis
    if t is None:
        raise unsupported(f"{sql_text(bucket)}", f"{ds.name} has no time dimension")
    if not (isinstance(node, exp.Column) and column(ds, node, aliases) is ds.dimensions[t]):
        raise unsupported(f"{sql_text(bucket)}", f"buckets are over the time dimension, {ds.dimensions[t].name}")


def _whole_seconds(seconds: Fraction, node: exp.Expression) -> int:
    if seconds <= 0 or seconds.denominator != 1:
        raise unsupported(f"{sql_text(node)}", "bucket widths are whole seconds above 0")
    return int(seconds)
