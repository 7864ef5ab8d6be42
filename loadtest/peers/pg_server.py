"""PostgreSQL alone's server settings: what PostgreSQL's documentation advises for a
dedicated server ("a reasonable starting value for shared_buffers is 25% of the
memory in your system"), set on the project's local PostgreSQL for one bench run and
set back after it.

shared_buffers takes a restart. `server_settings` sets it with ALTER SYSTEM (in
postgresql.auto.conf, which PostgreSQL reads after the gridagg.conf that `gridagg
services up` writes), restarts the local PostgreSQL through gridagg.cli.services before the
bench connects to it, and at the end RESETs it and restarts again, so the rest of the
project keeps its own settings. Larger shared buffers slow nothing else down: the memory
is taken only as pages are read into it. The settings per session (effective_cache_size
and the rest) are postgres.py's. An external PostgreSQL (GRIDAGG_PG_URL) is left as it
is; the report says what was in force.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

import psycopg
from psycopg import sql

from gridagg.cli import services
from gridagg.config import Settings

from .postgres import memory_bytes


def advised() -> dict[str, str]:
    """The server settings the bench sets: shared_buffers a quarter of the memory."""
    return {"shared_buffers": f"{memory_bytes() // 4 // 2**20}MB"}


def wanted(peers, shared_buffers: str | None) -> dict[str, str] | None:
    """The server settings a bench runs with, from its --peers and --pg-shared-buffers:
    None (the server as it is) without PostgreSQL alone among the peers or for 'keep',
    else that shared_buffers, or advised() when none is given."""
    if "pg" not in peers or shared_buffers == "keep":
        return None
    return {"shared_buffers": shared_buffers} if shared_buffers else advised()


def current(settings: Settings, names) -> dict[str, str]:
    """The server's values of these settings, as SHOW prints them."""
    with psycopg.connect(settings.effective_pg_url, autocommit=True) as conn:
        return {n: conn.execute(sql.SQL("SHOW {}").format(sql.Identifier(n))).fetchone()[0] for n in names}


def _restart_with(settings: Settings, statements: list[sql.Composed]) -> None:
    """Run the ALTER SYSTEM statements, then restart the local server."""
    with psycopg.connect(settings.effective_pg_url, autocommit=True) as conn:
        for stmt in statements:
            conn.execute(stmt)
    services.pg_down(settings)
    services.pg_up(settings)


@contextmanager
def server_settings(settings: Settings, wanted: dict[str, str] | None) -> Iterator[dict[str, str]]:
    """Run with these server settings (memory sizes, e.g. {"shared_buffers": "6GB"}) on
    the local PostgreSQL, restarting it when one differs, and set them back afterwards
    (another restart; also what a run that was killed left in postgresql.auto.conf);
    None, or an external server: as it is. Yields the values in force. Nothing may hold
    a connection to it meanwhile that must survive."""
    names = sorted(wanted or advised())
    changed, left = [], []
    if wanted and not settings.pg_url:
        with psycopg.connect(settings.effective_pg_url, autocommit=True) as conn:
            changed = [n for n, v in wanted.items() if conn.execute(
                "SELECT pg_size_bytes(current_setting(%s)) <> pg_size_bytes(%s)", (n, v)).fetchone()[0]]
            left = [r[0] for r in conn.execute(
                "SELECT name FROM pg_file_settings WHERE sourcefile LIKE '%%postgresql.auto.conf' AND name = ANY(%s)",
                (list(wanted),)).fetchall()]
    if changed:
        _restart_with(settings, [sql.SQL("ALTER SYSTEM SET {} = {}").format(sql.Identifier(n), sql.Literal(wanted[n]))
                                 for n in changed])
    try:
        yield current(settings, names)
    finally:
        if changed or left:
            _restart_with(settings, [sql.SQL("ALTER SYSTEM RESET {}").format(sql.Identifier(n))
                                     for n in sorted({*changed, *left})])
