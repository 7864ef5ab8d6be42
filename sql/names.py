"""Reading names in sqlglot's tree: functions (by their lowercase SQL name, whether
sqlglot knows them or not) and a dataset's columns (42703 for one it lacks)."""

from __future__ import annotations

from sqlglot import exp

from gridagg.model.schema import Column, Dataset

from .errors import UNDEFINED_COLUMN, SqlError


def function_name(node: exp.Expression) -> str | None:
    """'st_contains', 'count', ... for a function call; None for anything else."""
    if isinstance(node, exp.Anonymous):
        return str(node.this).lower()
    if isinstance(node, exp.Func):
        return node.sql_name().lower()
    return None


def arguments(node: exp.Expression) -> list[exp.Expression]:
    """A function call's arguments, in the order written."""
    if isinstance(node, exp.Anonymous):
        return list(node.expressions)
    return [v for k, v in node.args.items() if isinstance(v, exp.Expression) and k != "format"] + list(
        node.expressions)


def column(ds: Dataset, node: exp.Column, aliases: set[str]) -> Column:
    """The dataset's column a column reference names (qualified or not by the table's
    name or alias)."""
    if node.table and node.table not in aliases:
        raise SqlError(UNDEFINED_COLUMN, f'missing FROM-clause entry for table "{node.table}"')
    for c in ds.columns:
        if c.name == node.name:
            return c
    raise SqlError(UNDEFINED_COLUMN, f'column "{node.name}" does not exist in table "{ds.name}" (its columns: '
                                     f'{", ".join(c.name for c in ds.columns)})')
