"""Datasets: their columns, the exact integer encoding of values, and grid parameters.

Every value is stored as a 64-bit integer, as in the paper, so sums are exact:

- a ``number`` column with scale k stores ``value * 10**k``. A value with more than k
  decimals is refused unless the column names a rounding policy (``rounding``:
  "half_even", "half_up", "floor" or "ceil", as Python's decimal module rounds), which
  rounds it to k decimals; the domain is checked on the rounded value;
- a ``time`` column stores whole seconds since the start of its domain.

A measure may be ``nullable``: a missing value (None, blank text) is then stored as
gridagg.model.aggregate.NULL, which every aggregate skips. A dimension never is: a row needs
a point in the grid space.

A dataset's dimensions span the grid space (each has a closed domain ``[min, max]``);
every column, dimensions included, can be aggregated. Measures may give a domain too,
which is then enforced.
"""

from __future__ import annotations

import math
import numbers
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from decimal import (
    ROUND_CEILING,
    ROUND_FLOOR,
    ROUND_HALF_EVEN,
    ROUND_HALF_UP,
    Decimal,
    InvalidOperation,
)
from fractions import Fraction

import numpy as np

from gridagg.model.aggregate import NULL
from gridagg.model.errors import InvalidInput

NAME_RE = re.compile(r"^[a-z][a-z0-9_]{0,47}$")
# PostgreSQL boxes hold float8 coordinates: integers up to 2**53 are exact there.
MAX_ENCODED = 2**53 - 1
TIME_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
# A duration as text: a whole number and a unit of TIME_UNITS ("360d", "12h").
DURATION = r"^\s*([0-9]+)\s*([smhd])\s*$"
# The longest duration: 10,000 years of seconds. A series' bucket arithmetic runs in int64
# (the kernels, the region servers), where a step near 2**63 would wrap.
MAX_DURATION = 10_000 * 366 * 86400
# Rounding policies of number columns, as the decimal module's modes ("half_up": ties
# away from zero). "refuse" (the default) rounds nothing.
ROUNDINGS = {"half_even": ROUND_HALF_EVEN, "half_up": ROUND_HALF_UP, "floor": ROUND_FLOOR, "ceil": ROUND_CEILING}
REFUSE = "refuse"
# The keys of a column's definition (JSON, and the TOML of an ingest config).
COLUMN_KEYS = frozenset({"name", "type", "scale", "min", "max", "unit", "rounding", "nullable"})


def check_name(name: object, what: str) -> str:
    if not isinstance(name, str) or not NAME_RE.match(name):
        raise InvalidInput(
            f"{what} {name!r} must be lowercase letters, digits and '_', "
            "starting with a letter, at most 48 characters",
            field=what,
        )
    return name


def parse_timestamp(value: object, field_name: str) -> datetime:
    """An aware UTC datetime from ISO 8601 text, a datetime or epoch seconds.

    Text without a zone is read as UTC."""
    if isinstance(value, datetime):
        ts = value
    elif isinstance(value, str):
        try:
            ts = datetime.fromisoformat(value.strip())
        except ValueError:
            raise InvalidInput(
                f"{field_name}: {value!r} is not an ISO 8601 timestamp", field=field_name
            ) from None
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        if not math.isfinite(value):
            raise InvalidInput(f"{field_name}: {value!r} is not finite", field=field_name)
        try:
            ts = datetime.fromtimestamp(value, tz=timezone.utc)
        except (OverflowError, OSError, ValueError):
            raise InvalidInput(f"{field_name}: {value!r} seconds is outside the calendar (years 1-9999)",
                               field=field_name) from None
    else:
        raise InvalidInput(
            f"{field_name}: expected a timestamp, got {type(value).__name__}", field=field_name
        )
    if ts.tzinfo is None:
        ts = ts.replace(tzinfo=timezone.utc)
    return ts.astimezone(timezone.utc)


def parse_duration(value: object, field_name: str) -> int:
    """Seconds from an int or text such as '360d', '12h', '90m', '30s', at most MAX_DURATION."""
    seconds = None
    if isinstance(value, int) and not isinstance(value, bool):
        seconds = value
    elif isinstance(value, str):
        m = re.match(DURATION, value)
        seconds = int(m.group(1)) * TIME_UNITS[m.group(2)] if m else None
    if seconds is not None and seconds > MAX_DURATION:
        raise InvalidInput(f"{field_name}: {value!r} is longer than {MAX_DURATION}s (10,000 years)", field=field_name)
    if seconds is not None and seconds > 0:
        return seconds
    raise InvalidInput(
        f"{field_name}: {value!r} is not a positive duration like '360d' or seconds",
        field=field_name,
    )


def stored_bound(exact: Fraction | int, upper: bool) -> int:
    """The largest stored value <= an exact upper bound, or the smallest >= a lower one."""
    return math.floor(exact) if upper else math.ceil(exact)


def _to_decimal(value: object, field_name: str) -> Decimal:
    if isinstance(value, bool) or value is None:
        raise InvalidInput(f"{field_name}: missing or non-numeric value {value!r}", field=field_name)
    if isinstance(value, numbers.Integral):
        return Decimal(int(value))
    if isinstance(value, numbers.Real) and not isinstance(value, Decimal):
        value = float(value)
        if not math.isfinite(value):
            raise InvalidInput(f"{field_name}: {value!r} is not a finite number", field=field_name)
        # repr gives the shortest text that reads back as the same float: 0.1, not 0.1000000000000000055.
        return Decimal(repr(value))
    if isinstance(value, (str, Decimal)):
        try:
            d = Decimal(str(value).strip())
        except InvalidOperation:
            raise InvalidInput(f"{field_name}: {value!r} is not a number", field=field_name) from None
        if not d.is_finite():
            raise InvalidInput(f"{field_name}: {value!r} is not a finite number", field=field_name)
        return d
    raise InvalidInput(
        f"{field_name}: expected a number, got {type(value).__name__}", field=field_name
    )


def _is_missing(value: object) -> bool:
    return value is None or (isinstance(value, str) and not value.strip())


@dataclass(frozen=True)
class Column:
    """One attribute of a dataset, with its exact integer encoding.

    kind: "number" (scale = decimals kept) or "time" (seconds since domain start).
    lo/hi: the domain in user units (numbers, or ISO text for time); None for an
    unbounded measure.
    rounding: "refuse" (a value with more decimals than the scale is an error) or a
    key of ROUNDINGS (number columns only).
    nullable: a missing value is stored as NULL instead of refused (measures only;
    Dataset checks that).
    """

    name: str
    kind: str = "number"
    scale: int = 0
    lo: object = None
    hi: object = None
    unit: str | None = None
    rounding: str = REFUSE
    nullable: bool = False
    # Encoded domain, derived in __post_init__.
    enc_lo: int = field(init=False, default=-MAX_ENCODED)
    enc_hi: int = field(init=False, default=MAX_ENCODED)
    epoch: datetime | None = field(init=False, default=None, compare=False)

    def __post_init__(self):
        check_name(self.name, "column")
        if self.kind not in ("number", "time"):
            raise InvalidInput(f"column {self.name}: type must be 'number' or 'time'", field=self.name)
        if not isinstance(self.scale, int) or isinstance(self.scale, bool) or not 0 <= self.scale <= 12:
            raise InvalidInput(f"column {self.name}: scale must be an integer 0..12", field=self.name)
        if self.rounding != REFUSE and self.rounding not in ROUNDINGS:
            raise InvalidInput(
                f"column {self.name}: rounding must be one of {', '.join([REFUSE, *ROUNDINGS])}, "
                f"not {self.rounding!r}", field=self.name)
        if self.rounding != REFUSE and self.kind != "number":
            raise InvalidInput(f"column {self.name}: rounding applies to number columns only", field=self.name)
        if not isinstance(self.nullable, bool):
            raise InvalidInput(f"column {self.name}: nullable must be true or false", field=self.name)
        if self.kind == "time":
            if self.lo is None or self.hi is None:
                raise InvalidInput(f"column {self.name}: a time column needs min and max", field=self.name)
            start = parse_timestamp(self.lo, f"{self.name}.min")
            end = parse_timestamp(self.hi, f"{self.name}.max")
            object.__setattr__(self, "epoch", start)
            object.__setattr__(self, "scale", 0)
            object.__setattr__(self, "enc_lo", 0)
            object.__setattr__(self, "enc_hi", int((end - start).total_seconds()))
        else:
            # Domain bounds are exact at the scale, whatever the rounding policy.
            if self.lo is not None:
                object.__setattr__(self, "enc_lo", self._scaled(self.lo, f"{self.name}.min")[0])
            if self.hi is not None:
                object.__setattr__(self, "enc_hi", self._scaled(self.hi, f"{self.name}.max")[0])
        if self.enc_lo > self.enc_hi:
            raise InvalidInput(f"column {self.name}: min is greater than max", field=self.name)
        if max(abs(self.enc_lo), abs(self.enc_hi)) > MAX_ENCODED:
            raise InvalidInput(
                f"column {self.name}: domain too large for exact storage at scale {self.scale}",
                field=self.name,
            )

    @property
    def bounded(self) -> bool:
        return self.kind == "time" or (self.lo is not None and self.hi is not None)

    def _scaled(self, value: object, field_name: str, rounding: str = REFUSE) -> tuple[int, bool]:
        """(value * 10**scale as an integer, whether it was rounded), rounded by `rounding`."""
        d = _to_decimal(value, field_name)
        # Shifted exactly: Decimal.scaleb rounds to the context's 28 digits.
        sign, digits, exponent = d.as_tuple()
        shifted = Decimal((sign, digits, exponent + self.scale))
        if shifted.adjusted() > 18:  # far beyond MAX_ENCODED: int() of it could be huge
            raise InvalidInput(f"{field_name}: {value!r} is too large to store exactly", field=field_name)
        if rounding == REFUSE:
            whole = shifted.to_integral_value()
            if whole != shifted:
                raise InvalidInput(
                    f"{field_name}: {value!r} has more decimals than the column's scale ({self.scale})",
                    field=field_name,
                )
        else:
            whole = shifted.to_integral_value(rounding=ROUNDINGS[rounding])
        return int(whole), whole != shifted

    def encode(self, value: object) -> int:
        """The stored integer of a user value (NULL for a missing value of a nullable
        column), rounded by the column's policy; InvalidInput if it cannot be stored or
        lies outside the column's domain."""
        return self.encode_rounded(value)[0]

    def encode_rounded(self, value: object) -> tuple[int, bool]:
        """(Column.encode's stored integer, whether the value was rounded to get it)."""
        if _is_missing(value):
            if self.nullable:
                return NULL, False
            raise InvalidInput(f"{self.name}: missing value", field=self.name)
        rounded = False
        if self.kind == "time":
            delta = parse_timestamp(value, self.name) - self.epoch
            secs = delta.days * 86400 + delta.seconds
            if delta.microseconds:
                raise InvalidInput(f"{self.name}: {value!r} has fractions of a second", field=self.name)
            enc = secs
        else:
            enc, rounded = self._scaled(value, self.name, self.rounding)
        if abs(enc) > MAX_ENCODED:
            raise InvalidInput(f"{self.name}: {value!r} is too large to store exactly", field=self.name)
        if not self.enc_lo <= enc <= self.enc_hi:
            raise InvalidInput(
                f"{self.name}: {value!r} is outside the domain [{self.lo}, {self.hi}]", field=self.name)
        return enc, rounded

    def exact(self, value: object) -> Fraction | int:
        """A user value in stored units, unrounded (for query bounds). Whole values come
        back as ints, without the cost of a Fraction (query bounds usually are)."""
        if self.kind == "time":
            delta = parse_timestamp(value, self.name) - self.epoch
            secs = delta.days * 86400 + delta.seconds
            return secs + Fraction(delta.microseconds, 10**6) if delta.microseconds else secs
        if type(value) is int:
            return value * 10**self.scale
        return Fraction(_to_decimal(value, self.name)) * 10**self.scale

    def encode_bound(self, value: object, upper: bool) -> int:
        """A query bound as a stored integer: the smallest stored value >= a lower bound,
        or the largest <= an upper bound. Bounds may lie outside the domain."""
        return stored_bound(self.exact(value), upper)

    def decode(self, enc: int | Fraction | None):
        """User units of a stored value (or of a sum/mean of stored values)."""
        if enc is None:
            return None
        if self.kind == "time":
            from datetime import timedelta

            ts = self.epoch + timedelta(seconds=float(enc))
            return ts.isoformat().replace("+00:00", "Z")
        if type(enc) is int:
            if self.scale == 0:
                return enc
            if -(2**53) <= enc <= 2**53:  # exact as a double: one correctly rounded division
                return enc / 10**self.scale
        value = enc if type(enc) is Fraction else Fraction(enc)  # an avg is one already
        if value.denominator == 1 and self.scale == 0:
            return value.numerator
        # int / int rounds correctly, as float(Fraction) does, without Fraction arithmetic
        return value.numerator / (value.denominator * 10**self.scale)

    def decode_many(self, nums: list, dens: list | None = None) -> list:
        """decode() of many stored values at once, as a series' points need: nums[i] (None
        stays None), or the means nums[i] / dens[i] when dens are given. The same numbers
        as decode() gives (int / int is correctly rounded, as is its Fraction's), without a
        Fraction or a call per value."""
        if self.kind == "time":
            return [self.decode(n if dens is None or n is None else Fraction(n, d))
                    for n, d in zip(nums, dens or nums)]
        unit = 10**self.scale
        if dens is None:
            return list(nums) if self.scale == 0 else [None if n is None else n / unit for n in nums]
        if self.scale == 0:  # a whole mean stays an integer, as decode() gives it
            return [None if n is None else n // d if n % d == 0 else n / d for n, d in zip(nums, dens)]
        return [None if n is None else n / (d * unit) for n, d in zip(nums, dens)]

    def decode_times(self, enc: np.ndarray) -> list[str]:
        """decode() of many stored times (int64 seconds) at once, as a series' points need."""
        if self.epoch.microsecond:  # numpy's whole-second text would drop them
            return [self.decode(int(v)) for v in enc.tolist()]
        stamps = np.datetime64(self.epoch.replace(tzinfo=None), "s") + enc.astype("timedelta64[s]")
        return [t + "Z" for t in np.datetime_as_string(stamps, unit="s").tolist()]

    def to_json(self) -> dict:
        spec = {"name": self.name, "type": self.kind}
        if self.kind == "number":
            spec["scale"] = self.scale
        if self.lo is not None:
            spec["min"] = self.lo if not isinstance(self.lo, datetime) else self.lo.isoformat()
        if self.hi is not None:
            spec["max"] = self.hi if not isinstance(self.hi, datetime) else self.hi.isoformat()
        if self.unit:
            spec["unit"] = self.unit
        if self.rounding != REFUSE:
            spec["rounding"] = self.rounding
        if self.nullable:
            spec["nullable"] = True
        return spec

    @classmethod
    def from_json(cls, spec: object, where: str) -> "Column":
        if not isinstance(spec, dict):
            raise InvalidInput(f"{where}: each column must be an object", field=where)
        unknown = set(spec) - COLUMN_KEYS
        if unknown:
            raise InvalidInput(f"{where}: unknown keys {sorted(unknown)}", field=where)
        return cls(
            name=spec.get("name"),
            kind=spec.get("type", "number"),
            scale=spec.get("scale", 0),
            lo=spec.get("min"),
            hi=spec.get("max"),
            unit=spec.get("unit"),
            rounding=spec.get("rounding", REFUSE),
            nullable=spec.get("nullable", False),
        )


@dataclass(frozen=True)
class GridParams:
    """N_size: a split recurses while a child holds more rows than this.
    N_threshold: a leaf holding more rows than this is split.
    L_time: the time axis is pre-split until each grid is at most this many seconds wide
    (None: no pre-split)."""

    n_size: int = 1000
    n_threshold: int = 10000
    l_time: int | None = None
    # Why n_size is what it is when gridagg chose it (gridagg.tune.nsize.Choice.why); None:
    # the definition gave it.
    chosen: str | None = None

    def __post_init__(self):
        for name in ("n_size", "n_threshold"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise InvalidInput(f"grid.{name} must be a positive integer", field=f"grid.{name}")
        if self.n_size > self.n_threshold:
            raise InvalidInput("grid.n_size must not exceed grid.n_threshold", field="grid.n_size")

    def to_json(self) -> dict:
        out = {"n_size": self.n_size, "n_threshold": self.n_threshold, "l_time": self.l_time}
        if self.chosen is not None:
            out["chosen"] = self.chosen
        return out

    @classmethod
    def from_json(cls, spec: object) -> "GridParams":
        if spec is None:
            spec = {}
        if not isinstance(spec, dict):
            raise InvalidInput("grid must be an object", field="grid")
        n_size = spec.get("n_size", 1000)
        l_time = spec.get("l_time")
        return cls(
            n_size=n_size,
            n_threshold=spec.get("n_threshold", 10 * n_size if isinstance(n_size, int) else n_size),
            l_time=None if l_time is None else parse_duration(l_time, "grid.l_time"),
            chosen=spec.get("chosen") if isinstance(spec.get("chosen"), str) else None,
        )


@dataclass(frozen=True)
class Dataset:
    """A named dataset: dimensions (the grid space), measures, grid parameters."""

    name: str
    dimensions: tuple[Column, ...]
    measures: tuple[Column, ...] = ()
    grid: GridParams = GridParams()

    def __post_init__(self):
        check_name(self.name, "dataset")
        if not self.dimensions:
            raise InvalidInput("a dataset needs at least one dimension", field="dimensions")
        names = [c.name for c in self.columns]
        dupes = {n for n in names if names.count(n) > 1}
        if dupes:
            raise InvalidInput(f"duplicate column names {sorted(dupes)}", field="columns")
        for c in self.dimensions:
            if not c.bounded:
                raise InvalidInput(f"dimension {c.name} needs min and max", field=c.name)
            if c.nullable:
                raise InvalidInput(
                    f"dimension {c.name} cannot be nullable: every row needs a point in the grid space "
                    "(make it a measure to allow missing values)", field=c.name)
        if self.grid.l_time is not None and self.time_axis is None:
            raise InvalidInput("grid.l_time needs a time dimension", field="grid.l_time")

    @property
    def columns(self) -> tuple[Column, ...]:
        """Dimensions first (axis i is column i), then measures."""
        return self.dimensions + self.measures

    @property
    def ndim(self) -> int:
        return len(self.dimensions)

    @property
    def time_axis(self) -> int | None:
        for i, c in enumerate(self.dimensions):
            if c.kind == "time":
                return i
        return None

    @property
    def lonlat_axes(self) -> tuple[int, int] | None:
        """The dimensions a polygon region is over: two number dimensions named "lon" and
        "lat" (or "longitude" and "latitude"), as (lon index, lat index); None if none."""
        names = {c.name: i for i, c in enumerate(self.dimensions)}
        for lon, lat in (("lon", "lat"), ("longitude", "latitude")):
            if lon in names and lat in names:
                i, j = names[lon], names[lat]
                if self.dimensions[i].kind == "number" and self.dimensions[j].kind == "number":
                    return i, j
        return None

    def describe(self) -> dict:
        """The dataset as the HTTP API and `gridagg datasets` describe it (without counts)."""
        axes = self.lonlat_axes
        return {
            "name": self.name,
            "dimensions": [c.to_json() for c in self.dimensions],
            "measures": [c.to_json() for c in self.measures],
            "grid": self.grid.to_json(),
            "time_dimension": None if self.time_axis is None else self.dimensions[self.time_axis].name,
            "region_dimensions": None if axes is None else [self.dimensions[i].name for i in axes],
        }

    def column_index(self, name: object, field_name: str = "column") -> int:
        for i, c in enumerate(self.columns):
            if c.name == name:
                return i
        raise InvalidInput(f"dataset {self.name} has no column {name!r}", field=field_name)

    def domain(self) -> tuple[tuple[int, int], ...]:
        return tuple((c.enc_lo, c.enc_hi) for c in self.dimensions)

    def encode_row(self, row: object) -> tuple[list[int], list[int]]:
        """(stored integers, positions of the columns whose value was rounded) of one
        row given as a mapping of column name to value. Every column is required but a
        nullable one (absent, None or blank: NULL); unknown keys are refused."""
        if not isinstance(row, dict):
            raise InvalidInput("a row must be an object of column values", field="row")
        known = {c.name for c in self.columns}
        unknown = [k for k in row if k not in known and k != "id"]
        if unknown:
            raise InvalidInput(f"unknown column {unknown[0]!r}", field=str(unknown[0]))
        values, rounded = [], []
        for i, c in enumerate(self.columns):
            enc, was_rounded = c.encode_rounded(row.get(c.name))
            values.append(enc)
            if was_rounded:
                rounded.append(i)
        return values, rounded

    def to_json(self) -> dict:
        return {
            "name": self.name,
            "dimensions": [c.to_json() for c in self.dimensions],
            "measures": [c.to_json() for c in self.measures],
            "grid": self.grid.to_json(),
        }

    @classmethod
    def from_json(cls, spec: object) -> "Dataset":
        if not isinstance(spec, dict):
            raise InvalidInput("a dataset definition must be an object", field="dataset")
        dims = spec.get("dimensions")
        if not isinstance(dims, list):
            raise InvalidInput("dimensions must be a list", field="dimensions")
        measures = spec.get("measures", [])
        if not isinstance(measures, list):
            raise InvalidInput("measures must be a list", field="measures")
        return cls(
            name=spec.get("name"),
            dimensions=tuple(Column.from_json(c, f"dimensions[{i}]") for i, c in enumerate(dims)),
            measures=tuple(Column.from_json(c, f"measures[{i}]") for i, c in enumerate(measures)),
            grid=GridParams.from_json(spec.get("grid")),
        )
