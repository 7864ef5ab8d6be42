"""The bench's peers: the same rows and the same queries in systems without the grid, set
up as their own experts would, so that `gridagg bench` measures gridagg against what a
user would pick otherwise.

- "pg": PostgreSQL alone (postgres.py; its server settings: pg_server.py);
- "hbase": HBase alone (hbase.py);
- "duckdb": DuckDB (duck.py);
- "clickhouse": ClickHouse through chDB (clickhouse.py).

Each answers a QuerySpec with a QueryResult whose values are exact stored integers, like
GridEngine.run, and names its own knobs (Peer.KNOBS) for the bench to try. They are no
part of the service: gridagg/ and api/ never import them (a contract of
[tool.importlinter] in pyproject.toml), and only the bench's own app serves them (app.py,
under /bench/peers/, never under /v1/datasets).
"""

from __future__ import annotations

import importlib

from .common import Peer

# kind -> "module:class", imported when asked for: each peer's client library comes with it.
CLASSES = {"pg": "postgres:PostgresPeer", "hbase": "hbase:HBasePeer", "duckdb": "duck:DuckDBPeer",
           "clickhouse": "clickhouse:ClickHousePeer"}
KINDS = tuple(CLASSES)
IN_PROCESS = ("duckdb", "clickhouse")  # peers that are libraries, asked in the caller's process (SqlPeer)

__all__ = ["CLASSES", "IN_PROCESS", "KINDS", "Peer", "open_peer", "peer_class"]


def peer_class(kind: str) -> type[Peer]:
    """The Peer class of `kind` (one of KINDS)."""
    if kind not in CLASSES:
        raise ValueError(f"unknown peer {kind!r}: use one of {', '.join(KINDS)}")
    module, name = CLASSES[kind].split(":")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)


def open_peer(kind: str, settings, **knobs) -> Peer:
    """A peer of `kind` for these gridagg Settings, with knob values (Peer.KNOBS) given
    as keywords; the others keep their defaults."""
    return peer_class(kind)(settings, **knobs)
