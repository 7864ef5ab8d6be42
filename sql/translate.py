"""A SELECT over a dataset into a Question: the aggregates asked for and how they are
written (Outputs), the filter (sql/predicates.py), a time bucket when grouped by one
(sql/buckets.py), then ORDER BY, LIMIT and OFFSET over the answer's rows.

    SELECT <aggregates and at most one time bucket> FROM <dataset>
    [WHERE <ranges AND one polygon test>] [GROUP BY <the bucket>]
    [ORDER BY <outputs>] [LIMIT n] [OFFSET n]

The aggregates are count(*), count(c), sum(c), min(c), max(c) and avg(c) of any column
(sum of a number column). Grouped by a bucket, they may instead all be moving windows
over the buckets, the JSON API's series window, written as PostgreSQL computes one:
sum(count(*)), sum(count(c)), sum(sum(c)), min(min(c)) or max(max(c)) OVER (ORDER BY
<the bucket> RANGE BETWEEN INTERVAL '6 days' PRECEDING AND CURRENT ROW), a window of
that interval and one bucket. Anything else, a join, a subquery, DISTINCT, HAVING,
another window, a row-level column or GROUP BY anything but the bucket, raises
SqlError 0A000 naming it: never a wrong or partial answer.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

from sqlglot import exp

from gridagg.model.schema import Column, Dataset

from .buckets import Bucket, read_bucket
from .errors import INVALID_PARAMETER_VALUE, UNDEFINED_COLUMN, UNDEFINED_FUNCTION, SqlError, unsupported
from .names import column
from .predicates import Filter, read_where
from .values import interval, number, parse_time, sql_text

AGGREGATES = {exp.Count: "count", exp.Sum: "sum", exp.Min: "min", exp.Max: "max", exp.Avg: "avg"}
BUCKET_NAMES = {"time_bucket": "time_bucket", "timestamptrunc": "date_trunc", "datetrunc": "date_trunc",
                "unixtotime": "to_timestamp"}


@dataclass(frozen=True)
class Output:
    """One column of the answer: an aggregate (label as the JSON API writes it, such as
    "sum:temperature"; column None for count(*)) or the bucket (label None). frame: the
    window (exp.Window) of an aggregate over a moving window of buckets."""

    name: str
    label: str | None
    func: str | None = None
    column: Column | None = None
    node: exp.Expression | None = None
    frame: exp.Window | None = None


@dataclass(frozen=True)
class Order:
    output: int  # index into Question.outputs
    descending: bool
    nulls_first: bool


@dataclass(frozen=True)
class Question:
    """What a SELECT asks: a query (bucket None) or a series, and how to write it."""

    dataset: Dataset
    outputs: tuple[Output, ...]
    filter: Filter | None  # None: not read (the statement's parameters are not bound yet)
    bucket: Bucket | None
    order: tuple[Order, ...]
    limit: int | None
    offset: int
    window: int | None = None  # seconds of the moving window (None: each bucket alone)

    @property
    def labels(self) -> list[str]:
        """The aggregates to ask the engine for, each once."""
        return list(dict.fromkeys(o.label for o in self.outputs if o.label is not None))

    def series_range(self) -> tuple[int, int]:
        """(start, end) of a series in stored seconds: the first bucket's start (the
        bucket holding the time range's start) and the time range's end."""
        ds = self.dataset
        t = ds.dimensions[ds.time_axis]
        lo, hi = self.filter.ranges.get(t.name, [None, None])
        lo = t.enc_lo if lo is None else lo
        hi = t.enc_hi if hi is None else hi
        epoch = parse_time(t.epoch.isoformat())
        return math.floor(self.bucket.start(epoch + lo) - epoch), hi


def translate(select: exp.Select, ds: Dataset, now: Fraction | None, with_filter: bool = True) -> Question:
    """The Question a SELECT over `ds` asks. now: the statement's time (for now());
    with_filter False: its outputs alone, for Describe before parameters are bound."""
    aliases = _aliases(select, ds)
    outputs, bucket_of = [], {}
    for item in select.expressions:
        output, bucket = _output(item, ds, aliases)
        if bucket is not None:
            if bucket_of:
                raise unsupported(f"a second time bucket ({sql_text(item)})")
            bucket_of[sql_text(output.node)] = bucket
        outputs.append(output)
    bucket = _group_by(select, ds, aliases, outputs, bucket_of)
    if bucket is None and any(o.label is None for o in outputs):
        raise unsupported("a time bucket without GROUP BY it", "add GROUP BY 1")
    window = _window(outputs, bucket)
    where = select.args.get("where")
    found = read_where(where.this if where else None, ds, aliases, now) if with_filter else None
    return Question(ds, tuple(outputs), found, bucket, _order(select, outputs, bucket), _count(select, "limit"),
                    _count(select, "offset") or 0, window)


def table_of(select: exp.Select) -> exp.Table:
    """The one table a SELECT reads from (0A000 for a SELECT gridagg cannot answer by
    its form alone: WITH, DISTINCT, a join, a subquery, ...)."""
    _refuse_extras(select)
    source = select.args.get("from_")
    if source is None:
        raise unsupported("a SELECT without FROM over a dataset")
    if select.args.get("joins"):
        raise unsupported("JOIN", "ask one dataset at a time")
    table = source.this
    if not isinstance(table, exp.Table) or not isinstance(table.this, exp.Identifier):
        raise unsupported(f"FROM {sql_text(table)}", "name one dataset: FROM weather")
    return table


def _refuse_extras(select: exp.Select) -> None:
    for key, what in (("with_", "WITH"), ("distinct", "DISTINCT"), ("having", "HAVING"), ("windows", "WINDOW"),
                      ("qualify", "QUALIFY"), ("laterals", "LATERAL"), ("into", "SELECT INTO"),
                      ("locks", "FOR UPDATE")):
        if select.args.get(key):
            raise unsupported(what)


def _aliases(select: exp.Select, ds: Dataset) -> set[str]:
    table = table_of(select)
    names = {ds.name}
    if table.alias:
        names.add(table.alias)
    return names


def _output(item: exp.Expression, ds: Dataset, aliases: set[str]) -> tuple[Output, Bucket | None]:
    node = item.this if isinstance(item, exp.Alias) else item
    name = item.alias if isinstance(item, exp.Alias) else None
    if isinstance(node, exp.Star):
        raise unsupported("SELECT *", "gridagg answers aggregates: SELECT count(*), avg(c), ... FROM dataset")
    if isinstance(node, exp.Window):
        return _windowed(node, name, ds, aliases), None
    if isinstance(node, exp.Filter):
        raise unsupported(f"{sql_text(node)}", "FILTER is not")
    func = AGGREGATES.get(type(node))
    if func is not None:
        return _aggregate(node, func, name, ds, aliases), None
    bucket = read_bucket(node, ds, aliases)
    if bucket is not None:
        default = BUCKET_NAMES.get(type(node).__name__.lower(), "?column?")
        if isinstance(node, exp.Anonymous):
            default = str(node.this).lower()
        return Output(name or default, None, node=node), bucket
    if isinstance(node, exp.Column):
        column(ds, node, aliases)  # 42703 for a column that is not there
        raise unsupported(f"the row-level column {node.name}",
                          "gridagg answers aggregates over rows, not rows: use count, sum, min, max or avg, "
                          "or GROUP BY a time bucket")
    raise unsupported(f"the expression {sql_text(node)}", "SELECT lists aggregates of columns and a time bucket")


def _aggregate(node: exp.Expression, func: str, name: str | None, ds: Dataset, aliases: set[str]) -> Output:
    arg = node.this
    if isinstance(arg, exp.Distinct):
        raise unsupported(f"{func}(DISTINCT ...)")
    if func == "count" and (isinstance(arg, exp.Star) or (isinstance(arg, exp.Literal) and not arg.is_string)):
        return Output(name or func, "count", func, None, node)
    if not isinstance(arg, exp.Column):
        raise unsupported(f"{sql_text(node)}", "aggregates take a column")
    c = column(ds, arg, aliases)
    if func == "sum" and c.kind == "time":
        raise SqlError(UNDEFINED_FUNCTION, f"function sum(timestamp with time zone) does not exist (column {c.name})")
    return Output(name or func, f"{func}:{c.name}", func, c, node)


# A moving window's aggregate as PostgreSQL computes it over groups: outer(inner(c)).
WINDOWED = {("sum", "count"), ("sum", "sum"), ("min", "min"), ("max", "max")}


def _windowed(node: exp.Window, name: str | None, ds: Dataset, aliases: set[str]) -> Output:
    outer, inner = AGGREGATES.get(type(node.this)), node.this.this
    inner_func = AGGREGATES.get(type(inner))
    if (outer, inner_func) not in WINDOWED:
        raise unsupported(f"{sql_text(node)}", "moving windows are sum(count(*)), sum(count(c)), sum(sum(c)), "
                                               "min(min(c)) or max(max(c)) OVER (...)")
    if node.args.get("partition_by"):
        raise unsupported("PARTITION BY", "a window is over the buckets")
    aggregate = _aggregate(inner, inner_func, name or outer, ds, aliases)
    return Output(aggregate.name, aggregate.label, aggregate.func, aggregate.column, node, node)


def _window(outputs: list[Output], bucket: Bucket | None) -> int | None:
    """The seconds of the moving window all windowed outputs share (None: there are none)."""
    frames = [o.frame for o in outputs if o.frame is not None]
    if not frames:
        return None
    if bucket is None:
        raise unsupported("a moving window without GROUP BY a time bucket")
    if any(o.frame is None and o.label is not None for o in outputs):
        raise unsupported("moving windows beside plain aggregates", "ask them apart")
    bucket_output = next((o for o in outputs if o.label is None), None)
    widths = set()
    for frame in frames:
        order = frame.args.get("order")
        keys = order.expressions if order else []
        key = keys[0].this if len(keys) == 1 and not keys[0].args.get("desc") else None
        if key is None or bucket_output is None or (sql_text(key) != sql_text(bucket_output.node) and not (
                isinstance(key, exp.Column) and key.name == bucket_output.name)):
            raise unsupported(f"{sql_text(frame)}", "a window is OVER (ORDER BY <the selected bucket> RANGE "
                                                    "BETWEEN INTERVAL '...' PRECEDING AND CURRENT ROW)")
        spec = frame.args.get("spec")
        if spec is None or str(spec.args.get("kind")).lower() != "range" or \
                str(spec.args.get("start_side")).lower() != "preceding" or \
                str(spec.args.get("end")).upper() != "CURRENT ROW" or isinstance(spec.args.get("start"), str):
            raise unsupported(f"{sql_text(frame)}", "the frame is RANGE BETWEEN INTERVAL '...' PRECEDING AND "
                                                    "CURRENT ROW (ROWS would count the buckets that have rows)")
        seconds = interval(spec.args["start"])
        if seconds < 0 or seconds % bucket.step:
            raise unsupported(f"{sql_text(frame)}", f"the interval is a whole number of buckets ({bucket.step} s)")
        widths.add(int(seconds) + bucket.step)
    if len(widths) != 1:
        raise unsupported("moving windows of different widths", "ask them apart")
    return widths.pop()


def _group_by(select: exp.Select, ds: Dataset, aliases: set[str], outputs: list[Output],
              bucket_of: dict[str, Bucket]) -> Bucket | None:
    group = select.args.get("group")
    if group is None:
        return None
    if group.args.get("grouping_sets") or group.args.get("rollup") or group.args.get("cube"):
        raise unsupported("GROUPING SETS, ROLLUP and CUBE")
    items = group.expressions
    if len(items) != 1:
        raise unsupported(f"GROUP BY {', '.join(sql_text(i) for i in items)}",
                          "group by one time bucket of the time dimension")
    node = _resolve(items[0], outputs, ds)
    text = sql_text(node)
    if text in bucket_of:
        return bucket_of[text]
    bucket = read_bucket(node, ds, aliases)
    if bucket is None:
        if isinstance(node, exp.Column):
            column(ds, node, aliases)
            if any(o.name == node.name for o in outputs):
                raise unsupported(f"GROUP BY {node.name}", f"it names the column {node.name}, not the bucket "
                                  "called so (in GROUP BY a column's name comes first, as in PostgreSQL): write "
                                  "GROUP BY 1")
        raise unsupported(f"GROUP BY {sql_text(items[0])}", "group by a time bucket of the time dimension "
                                                             "(time_bucket, date_trunc)")
    if bucket_of:
        raise unsupported("GROUP BY another bucket than the one selected")
    return bucket


def _resolve(node: exp.Expression, outputs: list[Output], ds: Dataset | None = None) -> exp.Expression:
    """An output's expression for its position (GROUP BY 1) or its name; with ds (GROUP
    BY), a name of ds's columns stays the column, as PostgreSQL reads it there."""
    if isinstance(node, exp.Literal) and not node.is_string:
        k = int(number(node))
        if not 1 <= k <= len(outputs):
            raise SqlError(INVALID_PARAMETER_VALUE, f"position {k} is not in select list")
        return outputs[k - 1].node
    if isinstance(node, exp.Column) and not node.table:
        if ds is not None and any(c.name == node.name for c in ds.columns):
            return node
        for o in outputs:
            if o.name == node.name and o.node is not None and not (
                    isinstance(o.node, exp.Column) and o.node.name == node.name):
                return o.node
    return node


def _order(select: exp.Select, outputs: list[Output], bucket: Bucket | None) -> tuple[Order, ...]:
    order = select.args.get("order")
    if order is None:
        first = next((i for i, o in enumerate(outputs) if o.label is None), None)
        return () if first is None else (Order(first, False, False),)
    out = []
    texts = [sql_text(o.node) for o in outputs]
    for item in order.expressions:
        node = _resolve(item.this, outputs)
        if sql_text(node) not in texts:
            if isinstance(node, exp.Column) and not any(o.name == node.name for o in outputs):
                raise SqlError(UNDEFINED_COLUMN, f'column "{node.name}" does not exist')
            raise unsupported(f"ORDER BY {sql_text(item.this)}", "order by the columns answered")
        descending = bool(item.args.get("desc"))
        nulls_first = item.args.get("nulls_first")
        out.append(Order(texts.index(sql_text(node)), descending, descending if nulls_first is None else nulls_first))
    return tuple(out)


def _count(select: exp.Select, key: str) -> int | None:
    node = select.args.get(key)
    if node is None:
        return None
    value = number(node.expression if isinstance(node, (exp.Limit, exp.Offset)) else node)
    if value < 0 or value != int(value):
        raise SqlError(INVALID_PARAMETER_VALUE, f"{key.upper()} must be a whole number at least 0")
    return int(value)
