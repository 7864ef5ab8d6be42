"""The dataset config file of a bulk ingest (TOML).

    [dataset]
    name = "weather"

    [grid]                      # gridagg GridParams
    n_size = 1000               # without n_size and n_threshold a new dataset's are chosen (ingest.choose)
    n_threshold = 10000
    l_time = "360d"

    [input]
    format = "tmy3"             # "tmy3", "csv" or "parquet"
    id = ["station", "timestamp"]   # source fields whose values form the element ID
    # csv only: delimiter = ",", header = true

    [[dimensions]]              # dimension i is axis i of the grid
    name = "time"
    type = "time"
    min = "1970-01-01T00:00:00Z"
    max = "2049-12-31T23:00:00Z"
    source = "timestamp"
    # csv/parquet: format = "iso" | "epoch" | a Spark datetime pattern; timezone = "UTC"

    [[dimensions]]
    name = "temperature"
    source = "Dry-bulb (C)"
    scale = 1
    min = -90
    max = 70
    unit = "C"
    missing = ["-9900", "-9999"]     # values meaning "no measurement" (bad rows; absent
                                     # values of a nullable measure), matched exactly
    rounding = "half_even"      # number columns: round values with more decimals than
                                # the scale ("half_even", "half_up", "floor", "ceil");
                                # default "refuse": such a row is quarantined

    [[measures]]                # same keys as dimensions; min/max optional
    nullable = true             # measures only: a missing value (a marker, an empty
    ...                         # field) is stored as absent instead of quarantining the row

Dimensions and measures become a gridagg Dataset; the rest tells the readers where each
column comes from.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field, replace
from pathlib import Path

from gridagg.model.errors import InvalidInput
from gridagg.model.schema import COLUMN_KEYS, Column, Dataset, GridParams

FORMATS = ("tmy3", "csv", "parquet")
# Missing-value markers of the TMY3 format, used when a tmy3 column names none.
TMY3_MISSING = ("-9900", "-9999")
# Fields the TMY3 reader derives from line 1 and the date/time columns.
TMY3_FIELDS = ("station", "name", "state", "utc_offset", "latitude", "longitude", "elevation", "timestamp")


@dataclass(frozen=True)
class ColumnSource:
    """Where one dataset column comes from: a source field, and for time columns how its
    text is read (format: "iso", "epoch" or a Spark datetime pattern; timezone of
    zone-less text)."""

    column: str
    source: str
    kind: str
    missing: tuple[str, ...] = ()
    time_format: str = "iso"
    timezone: str = "UTC"


@dataclass(frozen=True)
class IngestConfig:
    dataset: Dataset
    format: str
    id_fields: tuple[str, ...]
    sources: tuple[ColumnSource, ...]  # one per dataset column, in column order
    csv_options: dict = field(default_factory=dict)
    # The config gives neither n_size nor n_threshold: the job chooses them (ingest.choose).
    choose_n_size: bool = False

    def reading_epoch(self, fields) -> "IngestConfig":
        """This config with every time column read from one of `fields` taking epoch
        seconds, whatever its format (a reader gives typed timestamps as such)."""
        if not fields:
            return self
        return replace(self, sources=tuple(replace(s, time_format="epoch") if s.kind == "time" and s.source in fields
                                           else s for s in self.sources))

    @property
    def source_fields(self) -> list[str]:
        """Every source field the job reads (columns and element ID parts)."""
        out: list[str] = []
        for name in [s.source for s in self.sources] + list(self.id_fields):
            if name not in out:
                out.append(name)
        return out


_COLUMN_KEYS = COLUMN_KEYS | {"source", "missing", "format", "timezone"}


def _columns(specs: object, what: str, fmt: str) -> tuple[list[Column], list[ColumnSource]]:
    if specs is None:
        specs = []
    if not isinstance(specs, list):
        raise InvalidInput(f"{what} must be an array of tables ([[{what}]])", field=what)
    cols, sources = [], []
    for i, spec in enumerate(specs):
        where = f"{what}[{i}]"
        if not isinstance(spec, dict):
            raise InvalidInput(f"{where} must be a table", field=where)
        unknown = set(spec) - _COLUMN_KEYS
        if unknown:
            raise InvalidInput(f"{where}: unknown keys {sorted(unknown)}", field=where)
        col = Column.from_json({k: spec[k] for k in COLUMN_KEYS if k in spec}, where)
        source = spec.get("source", col.name)
        if not isinstance(source, str) or not source:
            raise InvalidInput(f"{where}: source must be a non-empty string", field=where)
        missing = spec.get("missing")
        if missing is None:
            missing = TMY3_MISSING if fmt == "tmy3" and col.kind == "number" else ()
        if not isinstance(missing, (list, tuple)):
            raise InvalidInput(f"{where}: missing must be a list of values", field=where)
        time_format = spec.get("format", "epoch" if fmt == "tmy3" else "iso")
        if col.kind == "time" and fmt == "tmy3" and source != "timestamp":
            raise InvalidInput(f"{where}: a tmy3 time column's source must be 'timestamp'", field=where)
        cols.append(col)
        sources.append(ColumnSource(col.name, source, col.kind, tuple(str(m) for m in missing),
                                    str(time_format), str(spec.get("timezone", "UTC"))))
    return cols, sources


def parse_config(data: dict) -> IngestConfig:
    ds_spec = data.get("dataset") or {}
    inp = data.get("input") or {}
    fmt = inp.get("format", "csv")
    if fmt not in FORMATS:
        raise InvalidInput(f"input.format must be one of {FORMATS}, not {fmt!r}", field="input.format")
    dims, dim_src = _columns(data.get("dimensions"), "dimensions", fmt)
    meas, meas_src = _columns(data.get("measures"), "measures", fmt)
    ds = Dataset(
        name=ds_spec.get("name"),
        dimensions=tuple(dims),
        measures=tuple(meas),
        grid=GridParams.from_json(data.get("grid")),
    )
    id_fields = inp.get("id")
    if not isinstance(id_fields, list) or not id_fields or not all(isinstance(f, str) for f in id_fields):
        raise InvalidInput("input.id must list the source fields forming the element ID", field="input.id")
    csv_options = {"header": bool(inp.get("header", True)), "sep": str(inp.get("delimiter", ","))}
    grid = data.get("grid") or {}
    choose = isinstance(grid, dict) and "n_size" not in grid and "n_threshold" not in grid
    return IngestConfig(ds, fmt, tuple(id_fields), tuple(dim_src + meas_src), csv_options, choose)


def load_config(path: str | Path) -> IngestConfig:
    with open(path, "rb") as f:
        try:
            data = tomllib.load(f)
        except tomllib.TOMLDecodeError as exc:
            raise InvalidInput(f"{path}: {exc}", field="config") from None
    return parse_config(data)
