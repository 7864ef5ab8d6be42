"""Configuration in one place.

Every setting comes from an environment variable with a sensible default, so a fresh
machine needs none of them:

GRIDAGG_DATA_DIR     where local servers keep their data and logs (default ~/.gridagg)
GRIDAGG_PG_URL       PostgreSQL URL; unset means the local server that
                     `gridagg services up` starts in the data dir
GRIDAGG_PG_PORT      port of that local PostgreSQL (default 55432)
GRIDAGG_STORE        where rows and aggregates live: "embedded" (LMDB in the data dir,
                     the default) or "hbase"
GRIDAGG_HBASE        Thrift gateway of an external HBase as host:port; unset means the
                     local HBase that `gridagg services up` starts
GRIDAGG_HBASE_PORT   Thrift port of the local HBase (default 9090)
GRIDAGG_HBASE_TIMEOUT  seconds one call to the HBase gateway may take (default 60; connecting gets 3)
GRIDAGG_ZK_PORT      ZooKeeper port of the local HBase (default 2181)
GRIDAGG_WRITE_TOKEN  bearer token required for writes over HTTP
GRIDAGG_READ_TOKEN   bearer token required for reads over HTTP (unset: reads are open)
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path


@dataclass(frozen=True)
class Settings:
    data_dir: Path
    pg_url: str | None
    pg_port: int
    store: str
    hbase: str | None
    hbase_port: int
    hbase_timeout: float
    zk_port: int
    write_token: str | None
    read_token: str | None

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> "Settings":
        env = os.environ if env is None else env
        return cls(
            data_dir=Path(env.get("GRIDAGG_DATA_DIR") or Path.home() / ".gridagg").resolve(),
            pg_url=env.get("GRIDAGG_PG_URL") or None,
            pg_port=int(env.get("GRIDAGG_PG_PORT", "55432")),
            store=env.get("GRIDAGG_STORE") or "embedded",
            hbase=env.get("GRIDAGG_HBASE") or None,
            hbase_port=int(env.get("GRIDAGG_HBASE_PORT", "9090")),
            hbase_timeout=float(env.get("GRIDAGG_HBASE_TIMEOUT", "60")),
            zk_port=int(env.get("GRIDAGG_ZK_PORT", "2181")),
            write_token=env.get("GRIDAGG_WRITE_TOKEN") or None,
            read_token=env.get("GRIDAGG_READ_TOKEN") or None,
        )

    def with_(self, **changes) -> "Settings":
        return replace(self, **changes)

    @property
    def local_pg_url(self) -> str:
        """URL of the PostgreSQL that `gridagg services up` runs in the data dir."""
        return f"postgresql://gridagg@127.0.0.1:{self.pg_port}/gridagg"

    @property
    def effective_pg_url(self) -> str:
        return self.pg_url or self.local_pg_url

    @property
    def local_hbase(self) -> str:
        return f"127.0.0.1:{self.hbase_port}"

    @property
    def effective_hbase(self) -> tuple[str, int]:
        """(host, port) of the HBase Thrift gateway in use."""
        host, _, port = (self.hbase or self.local_hbase).rpartition(":")
        return host, int(port)

    @property
    def lmdb_dir(self) -> Path:
        """Where the embedded store keeps its files."""
        return self.data_dir / "lmdb"
