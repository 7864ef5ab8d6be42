"""One client's connection, as pg-mimic drives it: each statement is parsed once
(sqlglot, remembered by its text) and answered as what it is.

- BEGIN, COMMIT, ROLLBACK, SAVEPOINT: accepted (everything is read-only);
- SET, RESET: the session's settings, gridagg.deadline_ms gridagg's own; SHOW of those;
- a SELECT that names a dataset: a Question (sql/translate.py) answered by the engine
  in a worker thread (sql/answer.py), its parameters ($1) bound first;
- any other query (the catalog, SELECT 1, version(), SHOW server_version): answered
  by PostgreSQL itself in the catalog's database (sql/mirror.py), where no rows are;
- anything else (writes, DDL, COPY): 0A000 naming it.
Errors go to the client with their SQLSTATE; the connection and the server go on.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import re
import time
from datetime import date, datetime
from decimal import Decimal
from fractions import Fraction

import psycopg
import sqlglot
from pg_mimic import PgError, ResultColumn, Session, StaticStatement
from pg_mimic.middleware import MiddlewareContext, transaction_control
from pg_mimic.session import Portal, Statement, drain_rows
from sqlglot import exp

from gridagg.model.errors import GridaggError

from . import answer, settings
from .errors import (
    CANNOT_CONNECT_NOW,
    INTERNAL_ERROR,
    PROGRAM_LIMIT_EXCEEDED,
    PROTOCOL_VIOLATION,
    SYNTAX_ERROR,
    SqlError,
    from_engine,
    unsupported,
)
from .translate import table_of, translate

log = logging.getLogger("gridagg.sql")
logging.getLogger("sqlglot").setLevel(logging.ERROR)  # its "falling back to a Command" for SHOW x.y

MAX_STATEMENT_BYTES = 64 * 1024  # dashboards' statements are a few KB; a region has at most 32 vertices
SET_RE = re.compile(r"^\s*SET\s+(?:SESSION\s+|LOCAL\s+)?([\w.]+)\s*(?:TO|=)\s*(.+?)\s*;?\s*$", re.I | re.S)
RESET_RE = re.compile(r"^\s*RESET\s+([\w.]+|ALL)\s*;?\s*$", re.I)
SHOW_RE = re.compile(r"^\s*SHOW\s+(.+?)\s*;?\s*$", re.I | re.S)
# Statements a client sends as it sets up or tidies a session, with nothing to keep here
# (SET TIME ZONE 'UTC', SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY, ...).
NO_OPS = ("SET", "DISCARD", "DEALLOCATE", "CLOSE", "UNLISTEN", "SAVEPOINT", "RELEASE")


@functools.lru_cache(maxsize=4096)
def parse(sql: str) -> exp.Expression:
    """The statement's tree (shared: never changed in place); SqlError 42601 for text
    that does not parse or holds several statements."""
    try:
        trees = [t for t in sqlglot.parse(sql, dialect="postgres") if t is not None]
    except sqlglot.errors.ParseError as exc:
        raise SqlError(SYNTAX_ERROR, f"syntax error: {_first_error(exc)}") from None
    except sqlglot.errors.TokenError as exc:
        raise SqlError(SYNTAX_ERROR, f"syntax error: {exc}") from None
    if len(trees) != 1:
        raise SqlError(SYNTAX_ERROR, "cannot insert multiple commands into a prepared statement")
    return trees[0]


def _first_error(exc: sqlglot.errors.ParseError) -> str:
    if exc.errors:
        e = exc.errors[0]
        return f"{e.get('description')} at line {e.get('line')}, column {e.get('col')}, near " \
               f"{e.get('highlight')!r}"
    return str(exc)


@contextlib.contextmanager
def as_pg_error(sql: str):
    """Errors as pg-mimic sends them: SqlError and the engine's with their SQLSTATE,
    PostgreSQL away as 57P03, anything else (a bug) logged and sent as XX000 without
    its internals, as the HTTP API's 500."""
    try:
        yield
    except PgError:
        raise
    except SqlError as exc:
        raise PgError(exc.sqlstate, exc.message) from None
    except GridaggError as exc:
        err = from_engine(exc)
        raise PgError(err.sqlstate, err.message) from None
    except psycopg.OperationalError:
        raise PgError(CANNOT_CONNECT_NOW, "PostgreSQL cannot be reached; retry later") from None
    except Exception:
        log.exception("gridagg sql: a statement failed: %.500s", sql)
        raise PgError(INTERNAL_ERROR, "internal error: the server's log has it") from None


class SqlSession(Session):
    """pg-mimic's Session for one connection to the endpoint."""

    middleware = ()  # prepare() below picks pg-mimic's middleware itself, once it knows the statement

    def __init__(self, service):
        self.service = service

    async def prepare(self, sql: str, param_oids: list[int | None]) -> Statement:
        with as_pg_error(sql):
            return await self._prepare(sql, param_oids)

    async def _prepare(self, sql: str, param_oids: list[int | None]) -> Statement:
        size = len(sql.encode())
        if size > MAX_STATEMENT_BYTES:
            raise SqlError(PROGRAM_LIMIT_EXCEEDED, f"the statement is {size:,} bytes, more than the limit of "
                                                   f"{MAX_STATEMENT_BYTES:,}")
        setting = self._setting(sql)
        if setting is not None:
            return setting
        ctx = MiddlewareContext(self._connection, sql, param_oids)
        done = await transaction_control(ctx)
        if done is not None:
            return done
        if sql.lstrip().split(None, 1)[0].upper() in NO_OPS:
            return StaticStatement(sql, None, [])
        tree = parse(sql)
        if isinstance(tree, exp.Command) and str(tree.this).upper() == "SHOW":  # the server's settings
            return await asyncio.to_thread(MirrorStatement, self.service, sql, param_oids)
        if not isinstance(tree, exp.Query):
            raise unsupported(_statement_kind(tree), "the SQL endpoint is read-only: it answers SELECTs")
        names = {t.name for t in tree.find_all(exp.Table)
                 if isinstance(t.this, exp.Identifier) and (t.db or "public") == "public"}
        datasets = await asyncio.to_thread(lambda: [n for n in names if self.service.is_dataset(n)])
        if not datasets:
            return await asyncio.to_thread(MirrorStatement, self.service, sql, param_oids)
        if not isinstance(tree, exp.Select):
            raise unsupported(type(tree).__name__.upper(), "ask one SELECT of one dataset at a time")
        name = table_of(tree).name
        dataset = await asyncio.to_thread(lambda: self.service.engine().dataset(name))
        return QuestionStatement(self, sql, tree, dataset, param_oids)

    def _setting(self, sql: str) -> Statement | None:
        """SET, RESET and SHOW (read from the text: sqlglot reads gridagg.deadline_ms as a
        column), or None."""
        session_vars = self._connection.session_vars
        m = SET_RE.match(sql)
        if m:
            name, value = m.group(1).lower(), m.group(2).strip().strip("'\"")
            value = None if value.upper() == "DEFAULT" else value
            settings.check_setting(name, value)
            return StaticStatement("SET", None, [], lambda: _assign(session_vars, name, value))
        m = RESET_RE.match(sql)
        if m:
            name = m.group(1).lower()
            settings.check_setting(name, None)
            return StaticStatement("RESET", None, [],
                                   session_vars.clear if name == "all" else lambda: session_vars.pop(name, None))
        m = SHOW_RE.match(sql)
        if m and (m.group(1).lower().startswith("gridagg.") or m.group(1).lower() in session_vars):
            return settings.show(m.group(1), session_vars)
        return None

    def deadline(self) -> float | None:
        """The session's deadline in seconds (SET gridagg.deadline_ms), or None: exact."""
        ms = self._connection.session_vars.get(settings.DEADLINE)
        return None if ms is None else int(ms) / 1000


def _assign(session_vars: dict, name: str, value: str | None) -> None:
    if value is None:
        session_vars.pop(name, None)
    else:
        session_vars[name] = value


def _statement_kind(tree: exp.Expression) -> str:
    if isinstance(tree, exp.Command):
        return str(tree.this).upper()
    return type(tree).__name__.upper().replace("TABLE", " TABLE").strip()


class QuestionStatement(Statement):
    """A SELECT from a dataset: its columns known from the statement alone (Describe),
    its answer asked when executed."""

    def __init__(self, session: SqlSession, sql: str, tree: exp.Select, dataset, param_oids: list[int | None]):
        self.session, self.sql, self.tree, self.dataset, self.param_oids = session, sql, tree, dataset, param_oids
        self._columns = None

    async def describe(self) -> list[ResultColumn]:
        if self._columns is None:
            with as_pg_error(self.sql):
                question = translate(self.tree, self.dataset, None, with_filter=False)
            deadline = self.session.deadline() is not None
            self._columns = [ResultColumn(name, oid) for name, oid in answer.columns(question, deadline)]
        return self._columns

    def bind(self, params: list) -> Portal:
        return QuestionPortal(self, params, self.session.deadline())


class QuestionPortal(Portal):
    def __init__(self, statement: QuestionStatement, params: list, deadline: float | None):
        self.statement, self.params, self.deadline = statement, params, deadline
        self._rows = None

    async def execute(self, max_rows: int) -> tuple[list[tuple], bool]:
        if self._rows is None:
            with as_pg_error(self.statement.sql):
                self._rows = _aiter(await asyncio.to_thread(self._answer))
        return await drain_rows(self._rows, max_rows)

    def _answer(self) -> list[tuple]:
        s = self.statement
        tree = bind(s.tree, self.params) if self.params else s.tree
        question = translate(tree, s.dataset, Fraction(time.time_ns(), 10**9))
        service = s.session.service
        return answer.rows(service.engine(), question, answer.Ask(service.limits, self.deadline))


class MirrorStatement(Statement):
    """A query PostgreSQL answers in the catalog's database (sql/mirror.py): described
    and run there, with the parameters as bound."""

    def __init__(self, service, sql: str, param_oids: list[int | None]):
        self.mirror, self.sql = service.synced_mirror(), sql
        self._columns, self.param_oids = self.mirror.describe(sql, [oid or 0 for oid in param_oids])

    async def describe(self) -> list[ResultColumn] | None:
        return None if self._columns is None else [ResultColumn(name, oid) for name, oid in self._columns]

    def bind(self, params: list) -> Portal:
        return MirrorPortal(self, params)


class MirrorPortal(Portal):
    def __init__(self, statement: MirrorStatement, params: list):
        self.statement, self.params = statement, params
        self._rows = None

    async def execute(self, max_rows: int) -> tuple[list[tuple], bool]:
        if self._rows is None:
            s = self.statement
            with as_pg_error(s.sql):
                self._rows = _aiter(await asyncio.to_thread(s.mirror.run, s.sql, self.params, s.param_oids))
        return await drain_rows(self._rows, max_rows)


async def _aiter(rows: list[tuple]):
    for row in rows:
        yield row


def bind(tree: exp.Expression, params: list) -> exp.Expression:
    """The statement with its parameters ($1, $2, ...) written in as constants."""
    tree = tree.copy()
    for node in list(tree.find_all(exp.Parameter, exp.Placeholder)):
        text = node.name
        if not text.isdigit() or not 1 <= int(text) <= len(params):
            raise SqlError(PROTOCOL_VIOLATION,
                           f"bind message supplies {len(params)} parameters, but ${text} is not one")
        node.replace(_literal(params[int(text) - 1]))
    return tree


def _literal(value) -> exp.Expression:
    if value is None:
        return exp.null()
    if isinstance(value, (int, float, Decimal)) and not isinstance(value, bool):
        return exp.Literal.number(str(value))
    if isinstance(value, (datetime, date)):
        return exp.Literal.string(value.isoformat())
    return exp.Literal.string(str(value))
