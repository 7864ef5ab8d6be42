"""`gridagg sql`: a prompt on the SQL endpoint (`gridagg serve --sql-port 5433`), or
one statement with -c. It connects as any PostgreSQL client does (psycopg), with the
read token as the password where one is set (GRIDAGG_READ_TOKEN).

``register(subparsers)`` adds the subcommand to `gridagg` (entry point in pyproject.toml).
"""

from __future__ import annotations

import argparse
import sys

PROMPT = "gridagg=> "


def _table(cursor) -> str:
    """A result set as psql prints one: a header, a rule, the rows, their count."""
    names = [d.name for d in cursor.description]
    rows = [["" if v is None else str(v) for v in row] for row in cursor.fetchall()]
    widths = [max([len(n)] + [len(r[i]) for r in rows]) for i, n in enumerate(names)]
    lines = [" | ".join(n.ljust(w) for n, w in zip(names, widths)), "-+-".join("-" * w for w in widths)]
    lines += [" | ".join(v.ljust(w) for v, w in zip(r, widths)) for r in rows]
    lines.append(f"({len(rows)} row{'' if len(rows) == 1 else 's'})")
    return "\n".join(lines)


def run(conn, statement: str) -> str:
    """What the prompt prints for one statement: its rows, its status, or its error."""
    import psycopg

    try:
        with conn.cursor() as cursor:
            cursor.execute(statement)
            return _table(cursor) if cursor.description else cursor.statusmessage or ""
    except psycopg.Error as exc:
        return f"ERROR:  {exc.sqlstate}: {str(exc).strip()}"


def _sql(settings, args: argparse.Namespace) -> int:
    import psycopg

    try:
        conn = psycopg.connect(host=args.host, port=args.port, user="gridagg", dbname="gridagg",
                               password=settings.read_token or "", autocommit=True)
    except psycopg.OperationalError as exc:
        print(f"gridagg sql: cannot connect to {args.host}:{args.port} ({str(exc).strip()}); start the endpoint "
              f"with `gridagg serve --sql-port {args.port}`", file=sys.stderr)
        return 1
    with conn:
        if args.command:
            out = run(conn, args.command)
            print(out)
            return 1 if out.startswith("ERROR:") else 0
        print(f"gridagg SQL on {args.host}:{args.port}: aggregates of datasets (tables); \\q or Ctrl-D quits",
              file=sys.stderr)
        while True:
            try:
                line = input(PROMPT)
            except EOFError:
                return 0
            if line.strip() in ("\\q", "quit", "exit"):
                return 0
            if line.strip():
                print(run(conn, line))


def register(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "sql", help="a SQL prompt on the SQL endpoint (gridagg serve --sql-port)",
        description="A SQL prompt on gridagg's read-only SQL endpoint (start it with `gridagg serve --sql-port "
                    "5433`): each dataset is a table; SELECT count(*), sum(c), min(c), max(c), avg(c) with range "
                    "predicates, a polygon test and GROUP BY a time bucket. docs/sql.md says what is understood; "
                    "any PostgreSQL client (psql -h HOST -p PORT) connects as well.")
    p.add_argument("--host", default="127.0.0.1", help="the endpoint's address (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=5433, help="the endpoint's port (default 5433)")
    p.add_argument("-c", "--command", help="run one statement, print its answer and exit")
    p.set_defaults(func=_sql)
    return p
