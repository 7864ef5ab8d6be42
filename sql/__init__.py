"""gridagg_sql: a read-only SQL endpoint on the PostgreSQL wire protocol (docs/sql.md).

Each dataset is a table whose columns are its dimensions and measures. A statement is
parsed (sqlglot) and translated into the question the HTTP API would ask the engine
(gridagg.engine.GridEngine.query or .series), or passed to a PostgreSQL database of
empty tables mirroring the datasets, whose catalog lets psql, Grafana, Superset and
Metabase connect and browse; anything else is refused with the
SQLSTATE PostgreSQL would use, naming what is not supported.

Rooms: errors (SQLSTATEs), values (constants: numbers, times, intervals), names,
predicates and regions (WHERE into a box and a polygon), buckets (GROUP BY a time
bucket), translate (a statement into a Question), answer (a Question's rows from the
engine), mirror (the catalog, as PostgreSQL answers it), settings (SET and SHOW),
service, session and server (the wire, with pg-mimic), cli (`gridagg sql`), bench (SQL
against HTTP).
"""
