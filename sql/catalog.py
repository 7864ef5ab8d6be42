"""The catalog clients read on connecting and browsing: the datasets as tables (for
pg-mimic's information_schema and pg_catalog emulation, which psql's \\d, Grafana's
query builder and SQLAlchemy's inspector query), SHOW and the settings, and table-less
SELECTs such as version().

Column types: a number column of scale 0 is bigint, of scale k numeric; a time column
is timestamp with time zone.
"""

from __future__ import annotations

from pg_mimic import TEXT, ResultColumn, StaticStatement
from sqlglot import exp

from gridagg.model.schema import Column, Dataset

from .errors import INVALID_PARAMETER_VALUE, UNDEFINED_OBJECT, SqlError

SERVER_VERSION = "16.0"
VERSION = f"PostgreSQL {SERVER_VERSION} (gridagg's read-only SQL endpoint)"
DEADLINE = "gridagg.deadline_ms"
# What SHOW answers for the settings a client may ask about; a session's SET overrides.
SETTINGS = {
    "server_version": SERVER_VERSION, "server_encoding": "UTF8", "client_encoding": "UTF8",
    "datestyle": "ISO, MDY", "timezone": "UTC", "integer_datetimes": "on", "intervalstyle": "postgres",
    "standard_conforming_strings": "on", "search_path": '"$user", public', "max_identifier_length": "63",
    "transaction_isolation": "read committed", "transaction isolation level": "read committed",
    "default_transaction_read_only": "on", "transaction_read_only": "on", "is_superuser": "off",
    "application_name": "", "statement_timeout": "0", "lc_collate": "C.UTF-8", "lc_ctype": "C.UTF-8",
    DEADLINE: "",
}


def sql_type(c: Column) -> str:
    """The column's type as pg-mimic's catalog declares it."""
    if c.kind == "time":
        return "timestamptz"
    return "bigint" if c.scale == 0 else "numeric"


def schema(datasets: list[Dataset]) -> dict:
    """{table: {column: type}} for pg-mimic's catalog emulation."""
    return {ds.name: {c.name: sql_type(c) for c in ds.columns} for ds in datasets}


def show(name: str, session_vars: dict) -> StaticStatement:
    """SHOW name: the session's value, else the server's; 42704 for a name it has not."""
    key = name.strip().strip('"').lower()
    if key == "all":
        rows = sorted({**SETTINGS, **session_vars}.items())
        return StaticStatement("SHOW", [ResultColumn("name", TEXT), ResultColumn("setting", TEXT)], rows)
    if key not in session_vars and key not in SETTINGS:
        raise SqlError(UNDEFINED_OBJECT, f'unrecognized configuration parameter "{key}"')
    value = session_vars.get(key, SETTINGS.get(key))
    return StaticStatement("SHOW", [ResultColumn(key.split(".")[-1].replace(" ", "_"), TEXT)], [(value,)])


def check_setting(name: str, value: str | None) -> None:
    """Refuses a gridagg.* setting gridagg has not, or a deadline that is no whole number
    of milliseconds (value None: reset)."""
    if not name.startswith("gridagg."):
        return
    if name != DEADLINE:
        raise SqlError(UNDEFINED_OBJECT, f'unrecognized configuration parameter "{name}" (gridagg has {DEADLINE})')
    if value is not None and not (value.isdigit() and int(value) <= 10**9):
        raise SqlError(INVALID_PARAMETER_VALUE, f'invalid value for parameter "{DEADLINE}": "{value}" (whole '
                                                "milliseconds, 0 for the tree's answer alone; DEFAULT for exact "
                                                "answers)")


def unqualified(expr: exp.Expression) -> exp.Expression:
    """A table-less SELECT with pg_catalog.f(...) written f(...), and version() as this
    server's version text, as pg-mimic's session functions read them."""
    expr = expr.copy()
    for node in list(expr.find_all(exp.Dot)):
        if isinstance(node.this, exp.Identifier) and node.this.name.lower() == "pg_catalog" \
                and isinstance(node.expression, exp.Func):
            node.replace(node.expression)
    for node in list(expr.find_all(exp.CurrentVersion, exp.Anonymous)):
        if isinstance(node, exp.CurrentVersion) or str(node.this).lower() == "version":
            node.replace(exp.Literal.string(VERSION))
    return expr
