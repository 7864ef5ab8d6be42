"""The session's settings: SHOW of gridagg.deadline_ms and of what a session SET, and
the check of a gridagg.* setting (the rest of the catalog is PostgreSQL's own,
sql/mirror.py)."""

from __future__ import annotations

from pg_mimic import TEXT, ResultColumn, StaticStatement

from .errors import INVALID_PARAMETER_VALUE, UNDEFINED_OBJECT, SqlError

DEADLINE = "gridagg.deadline_ms"


def show(name: str, session_vars: dict) -> StaticStatement:
    """SHOW name of a setting the session made, or of gridagg's own (empty when unset)."""
    key = name.strip().strip('"').lower()
    check_setting(key, None)
    return StaticStatement("SHOW", [ResultColumn(key.split(".")[-1], TEXT)], [(session_vars.get(key, ""),)])


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

