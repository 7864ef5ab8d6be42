"""WHERE into the JSON API's where and region: a conjunction (AND) of range predicates
on dimensions (=, <, <=, >, >=, BETWEEN; a constant on either side) and at most one
polygon test (ST_Contains and its kin, sql/regions.py).

Bounds are kept in stored integers (a number with scale k stores value * 10**k, a time
seconds since its column's min), so a strict inequality becomes an exact inclusive
bound: lon > 1.005 at scale 2 selects stored values from 101 on, lon < 1.005 up to 100.
Several predicates on one dimension intersect; predicates that select nothing
(lon > 5 AND lon < 1) make the filter empty, which is answered without asking (no rows).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from decimal import Decimal
from fractions import Fraction

from sqlglot import exp

from gridagg.model.schema import Column, Dataset

from . import regions, values
from .errors import unsupported
from .names import column
from .values import sql_text

COMPARISONS = {exp.EQ: "=", exp.LT: "<", exp.LTE: "<=", exp.GT: ">", exp.GTE: ">="}
FLIPPED = {"=": "=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}


@dataclass
class Filter:
    """Stored [lo, hi] per dimension narrowed (None: that end open), and the region."""

    ranges: dict[str, list[int | None]] = field(default_factory=dict)
    region: dict | None = None
    empty: bool = False

    def where(self, ds: Dataset) -> dict:
        """The JSON API's where: {dimension: [lo, hi]} in user units, ends open where the
        dimension's domain already ends."""
        out = {}
        for c in ds.dimensions:
            if c.name in self.ranges:
                lo, hi = self.ranges[c.name]
                out[c.name] = [None if lo is None else user_value(c, lo), None if hi is None else user_value(c, hi)]
        return out

    def narrow(self, c: Column, op: str, exact: Fraction) -> None:
        """Intersect with `c op exact` (exact: in stored units, unrounded)."""
        lo, hi = self.ranges.get(c.name, [None, None])
        if op in (">", ">=", "="):
            bound = math.floor(exact) + 1 if op == ">" else math.ceil(exact)
            lo = bound if lo is None else max(lo, bound)
        if op in ("<", "<=", "="):
            bound = math.ceil(exact) - 1 if op == "<" else math.floor(exact)
            hi = bound if hi is None else min(hi, bound)
        # Ends at or beyond the domain's are open, so that no bound far outside it (a
        # time past the calendar) needs writing; a range outside the domain is empty.
        if lo is not None and lo <= c.enc_lo:
            lo = None
        if hi is not None and hi >= c.enc_hi:
            hi = None
        if max(c.enc_lo, lo if lo is not None else c.enc_lo) > min(c.enc_hi, hi if hi is not None else c.enc_hi):
            self.empty = True
        self.ranges[c.name] = [lo, hi]


def user_value(c: Column, stored: int) -> str:
    """A stored integer as the JSON API reads a bound: decimal text, ISO 8601 for a time."""
    if c.kind == "time":
        return c.decode(stored)
    return format(Decimal(stored).scaleb(-c.scale), "f")


def stored_exact(c: Column, node: exp.Expression, now: Fraction) -> Fraction:
    """A constant compared with column c, in c's stored units, unrounded."""
    if c.kind == "time":
        epoch = values.parse_time(c.epoch.isoformat())
        return values.instant(node, now) - epoch
    return Fraction(values.number(node)) * 10**c.scale


def read_where(node: exp.Expression | None, ds: Dataset, aliases: set[str], now: Fraction) -> Filter:
    """The Filter a WHERE clause's condition stands for (None: no WHERE)."""
    found = Filter()
    if node is not None:
        for term in _conjuncts(node):
            _read_term(term, ds, aliases, now, found)
    return found


def _conjuncts(node: exp.Expression) -> list[exp.Expression]:
    if isinstance(node, exp.Paren):
        return _conjuncts(node.this)
    if isinstance(node, exp.And):
        return _conjuncts(node.this) + _conjuncts(node.expression)
    return [node]


def _read_term(term: exp.Expression, ds: Dataset, aliases: set[str], now: Fraction, found: Filter) -> None:
    if isinstance(term, exp.Boolean) and term.this:
        return
    if isinstance(term, exp.Between):
        c = _dimension(ds, term.this, aliases, term)
        found.narrow(c, ">=", stored_exact(c, term.args["low"], now))
        found.narrow(c, "<=", stored_exact(c, term.args["high"], now))
        return
    op = COMPARISONS.get(type(term))
    if op is not None:
        left, right = term.this, term.expression
        if isinstance(right, exp.Column) and not isinstance(left, exp.Column):
            left, right, op = right, left, FLIPPED[op]
        c = _dimension(ds, left, aliases, term)
        found.narrow(c, op, stored_exact(c, right, now))
        return
    region = regions.read_region(term, ds, aliases)
    if region is not None:
        if found.region is not None:
            raise unsupported("a second polygon test", "one region a query; combine them into a MULTIPOLYGON")
        found.region = region
        return
    raise unsupported(f"the condition {sql_text(term)}", _hint(term))


def _dimension(ds: Dataset, node: exp.Expression, aliases: set[str], term: exp.Expression) -> Column:
    if not isinstance(node, exp.Column):
        raise unsupported(f"the condition {sql_text(term)}", "compare a dimension with a constant")
    c = column(ds, node, aliases)
    if c not in ds.dimensions:
        raise unsupported(f"filtering on the measure {c.name} ({sql_text(term)})",
                          f"only dimensions can be narrowed: {', '.join(d.name for d in ds.dimensions)}")
    return c


def _hint(term: exp.Expression) -> str:
    if isinstance(term, exp.Or):
        return "OR is not; ask one question per branch"
    if isinstance(term, (exp.Not, exp.NEQ)):
        return "negations are not; ask for the ranges on either side"
    if isinstance(term, exp.In):
        return "IN is not; use BETWEEN, or one question per value"
    return "WHERE takes range predicates on dimensions joined by AND, and one polygon test"
