"""The catalog as PostgreSQL itself answers it: a database of empty tables, one per
dataset with its columns and their types, whose pg_catalog and information_schema
answer every catalog query a client sends (psql's \\d, SQLAlchemy's inspector under
Superset, Grafana's query builder, Metabase's JDBC metadata), parameters and all.

The database is the directory's name plus "_sql" on the directory's PostgreSQL (made
by the directory's role on first use, which may create databases: the local server's
does). Statements are run there by the role gridagg_sql_catalog: no superuser, read
only, 10 s a statement, SELECT on the empty tables alone, so a forwarded statement can
read the catalog and nothing else (no dataset's rows are there: a statement that names
a dataset is never forwarded, it is a question, sql/session.py). Its tables follow the
datasets: made, changed or dropped as they are, before a catalog statement runs.
"""

from __future__ import annotations

import hashlib
import threading
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg import sql

from gridagg.model.schema import Column, Dataset

from .errors import SqlError

ROLE = "gridagg_sql_catalog"
SYNC_LOCK = 0x67726964  # the advisory lock one process holds while it changes the tables


def column_type(c: Column) -> str:
    """A column's PostgreSQL type: bigint at scale 0, numeric at a scale, a time timestamptz."""
    if c.kind == "time":
        return "timestamp with time zone"
    return "bigint" if c.scale == 0 else "numeric"


def table_columns(ds: Dataset) -> list[tuple[str, str, bool]]:
    """(name, type, nullable) of each column of a dataset's table, dimensions first."""
    return [(c.name, column_type(c), c.nullable) for c in ds.columns]


class CatalogMirror:
    """The mirror database of the directory at `pg_url` (a role that may create
    databases and roles)."""

    def __init__(self, pg_url: str):
        self.admin_url = pg_url
        parts = urlsplit(pg_url)
        self.database = (parts.path.lstrip("/") or "gridagg") + "_sql"
        self.password = hashlib.sha256(f"{pg_url} {ROLE}".encode()).hexdigest()[:32]
        netloc = parts.netloc.rpartition("@")[2]
        self.url = urlunsplit(parts._replace(netloc=f"{ROLE}:{self.password}@{netloc}", path=f"/{self.database}"))
        self.mirror_admin_url = urlunsplit(parts._replace(path=f"/{self.database}"))
        self._lock = threading.Lock()
        self._conn: psycopg.Connection | None = None
        self._tables: dict | None = None  # what the mirror holds, as last synced

    # -- keeping the tables as the datasets are ---------------------------------------

    def sync(self, datasets: list[Dataset]) -> None:
        """Make the mirror's tables those of `datasets` (the database and role first)."""
        want = {ds.name: table_columns(ds) for ds in datasets}
        if want == self._tables:
            return
        with self._lock:
            if self._tables is None:
                self._create_database()
            with psycopg.connect(self.mirror_admin_url, autocommit=True) as admin:
                admin.execute("SELECT pg_advisory_lock(%s)", (SYNC_LOCK,))
                have = self._read_tables(admin)
                for name in have.keys() - want.keys():
                    admin.execute(sql.SQL("DROP TABLE {}").format(sql.Identifier(name)))
                for name, cols in want.items():
                    if have.get(name) != cols:
                        self._make_table(admin, name, cols, replace=name in have)
                admin.execute("SELECT pg_advisory_unlock(%s)", (SYNC_LOCK,))
            self._tables = want

    def _create_database(self) -> None:
        with psycopg.connect(self.admin_url, autocommit=True) as admin:
            if not admin.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (ROLE,)).fetchone():
                try:
                    admin.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(ROLE)))
                except psycopg.errors.DuplicateObject:
                    pass  # another process made it meanwhile
            admin.execute(sql.SQL("ALTER ROLE {} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE PASSWORD {}").format(
                sql.Identifier(ROLE), sql.Literal(self.password)))
            for setting, value in (("default_transaction_read_only", "on"), ("statement_timeout", "10s")):
                admin.execute(sql.SQL("ALTER ROLE {} SET {} = {}").format(
                    sql.Identifier(ROLE), sql.Identifier(setting), sql.Literal(value)))
            if not admin.execute("SELECT 1 FROM pg_database WHERE datname = %s", (self.database,)).fetchone():
                try:
                    admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(self.database)))
                except psycopg.errors.DuplicateDatabase:
                    pass
        with psycopg.connect(self.mirror_admin_url, autocommit=True) as admin:
            admin.execute("REVOKE CREATE ON SCHEMA public FROM PUBLIC")
            admin.execute(sql.SQL("GRANT USAGE ON SCHEMA public TO {}").format(sql.Identifier(ROLE)))

    @staticmethod
    def _read_tables(admin: psycopg.Connection) -> dict:
        rows = admin.execute(
            "SELECT c.relname, a.attname, format_type(a.atttypid, a.atttypmod), NOT a.attnotnull "
            "FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped "
            "WHERE n.nspname = 'public' AND c.relkind = 'r' ORDER BY c.relname, a.attnum").fetchall()
        out: dict = {}
        for table, name, kind, nullable in rows:
            out.setdefault(table, []).append((name, kind, nullable))
        return out

    @staticmethod
    def _make_table(admin: psycopg.Connection, name: str, cols: list, replace: bool) -> None:
        if replace:
            admin.execute(sql.SQL("DROP TABLE {}").format(sql.Identifier(name)))
        admin.execute(sql.SQL("CREATE TABLE {} ({})").format(sql.Identifier(name), sql.SQL(", ").join(
            sql.SQL("{} {}{}").format(sql.Identifier(c), sql.SQL(kind), sql.SQL("" if nullable else " NOT NULL"))
            for c, kind, nullable in cols)))
        admin.execute(sql.SQL("GRANT SELECT ON {} TO {}").format(sql.Identifier(name), sql.Identifier(ROLE)))

    # -- answering ------------------------------------------------------------------------

    def _connection(self) -> psycopg.Connection:
        if self._conn is None or self._conn.closed:
            self._conn = psycopg.connect(self.url, autocommit=True)
        return self._conn

    def describe(self, text: str, param_oids: list[int]) -> tuple[list[tuple[str, int]] | None, list[int]]:
        """(the result's (name, type OID)s or None when it has none, the parameters' type
        OIDs) of a statement, as PostgreSQL describes it; SqlError if it refuses it."""
        with self._lock:
            pgconn = self._connection().pgconn
            _check(pgconn.prepare(b"", text.encode(), param_oids or None))
            described = _check(pgconn.describe_prepared(b""))
            fields = [(described.fname(i).decode(), described.ftype(i)) for i in range(described.nfields)]
            params = [described.param_type(i) for i in range(described.nparams)]
        return fields or None, params

    def run(self, text: str, params: list, param_oids: list[int]) -> list[tuple]:
        """A statement's rows, each value as PostgreSQL writes it (text; None for null)."""
        values = [None if p is None else str(p).encode() for p in params]
        with self._lock:
            result = _check(self._connection().pgconn.exec_params(text.encode(), values, param_oids or None))
            return [tuple(None if (v := result.get_value(r, c)) is None else v.decode() for c in range(result.nfields))
                    for r in range(result.ntuples)]

    def server_version(self) -> str:
        """The PostgreSQL version the catalog's server says it is."""
        with self._lock:
            return self._connection().info.parameter_status("server_version")


def _check(result):
    """The libpq result, or SqlError with the SQLSTATE and message of the error it holds."""
    if result.status == psycopg.pq.ExecStatus.FATAL_ERROR:
        sqlstate, message = ((result.error_field(f) or b"").decode() for f in (
            psycopg.pq.DiagnosticField.SQLSTATE, psycopg.pq.DiagnosticField.MESSAGE_PRIMARY))
        raise SqlError(sqlstate or "XX000", message)
    return result
