"""gridagg_sql: a read-only SQL endpoint on the PostgreSQL wire protocol (docs/sql.md).

Each dataset is a table whose columns are its dimensions and measures. A statement is
parsed (sqlglot) and translated into the question the HTTP API would ask the engine
(gridagg.engine.GridEngine.query or .series), or into a catalog answer that lets psql,
Grafana, Superset and Metabase connect and browse; anything else is refused with the
SQLSTATE PostgreSQL would use, naming what is not supported.

Rooms: errors (SQLSTATEs), values (constants: numbers, times, intervals), predicates
(WHERE into a box and a region), buckets (GROUP BY a time bucket), translate (a
statement into a Question), answer (a Question's rows from the engine), catalog (tables
and the clients' catalog queries), session and server (the wire, with pg-mimic), cli
(`gridagg sql`), bench (SQL against HTTP).
"""
