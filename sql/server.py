"""The SQL endpoint's server: `workers` processes answering on one port, each an
asyncio loop running pg-mimic's protocol (sql/session.py) whose questions run in a
thread pool, as each HTTP API worker answers in threads of its own.

The port is opened once and the workers are forked after (before any engine or
thread exists): each accepts connections as it is free, and each builds its own engine
on its first question, so no connection or LMDB handle crosses a process. A worker that
dies is started again; SIGTERM or SIGINT stops them all.

    python -m gridagg_sql --port 5433 [--host 127.0.0.1] [--workers 2]

which `gridagg serve --sql-port 5433` runs beside the HTTP API.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import socket
import sys

import psycopg
from pg_mimic import AuthPlugin, PgServer, messages

from gridagg.config import Settings

from .service import Service
from .session import SqlSession

log = logging.getLogger("gridagg.sql")
FALLBACK_VERSION = "16.0"


class TokenAuth(AuthPlugin):
    """The read token as the password, where one is set (Service.authorized), asked in
    clear text as the HTTP API's bearer token travels."""

    def __init__(self, service: Service):
        self.service = service

    async def authenticate(self, stream, username, identity_provider) -> bool:
        if not self.service.settings.read_token:
            return True
        stream.write(messages.make_authentication_cleartext_password())
        await stream.drain()
        tag, payload = await stream.read_message()
        if tag != messages.PASSWORD:
            return False
        return self.service.authorized(payload.rstrip(b"\x00").decode("utf-8", "replace"))


def make_server(service: Service) -> PgServer:
    """pg-mimic's server answering with `service`, telling clients the version of the
    PostgreSQL whose catalog answers theirs (psql picks its catalog queries by it)."""
    try:
        version = service.mirror.server_version() or FALLBACK_VERSION
    except psycopg.Error:  # PostgreSQL is away: the catalog's queries fail until it is back
        version = FALLBACK_VERSION
    return PgServer(lambda: SqlSession(service), auth_plugin_factory=lambda user: TokenAuth(service),
                    server_version=version)


async def _serve_socket(service: Service, sock: socket.socket) -> None:
    server = make_server(service)
    await server.start_server(sock=sock)
    await server.serve_forever()


def _worker(settings: Settings, sock: socket.socket) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    try:
        asyncio.run(_serve_socket(Service(settings), sock))
    finally:
        os._exit(0)


def serve(settings: Settings, host: str, port: int, workers: int) -> int:
    """Serve until SIGTERM or SIGINT; returns the exit status."""
    sock = socket.create_server((host, port), backlog=512)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    children: set[int] = set()

    def start() -> None:
        pid = os.fork()
        if pid == 0:
            _worker(settings, sock)
        children.add(pid)

    for _ in range(workers):
        start()
    stopping = []

    def stop(*_) -> None:
        stopping.append(True)
        for pid in children:
            os.kill(pid, signal.SIGTERM)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    print(f"gridagg SQL on postgresql://{host}:{port}/ ({workers} workers); try: psql -h {host} -p {port} "
          f"-U gridagg", file=sys.stderr, flush=True)
    while children:
        try:
            pid, status = os.wait()
        except ChildProcessError:
            break
        except InterruptedError:
            continue
        children.discard(pid)
        if not stopping:
            log.warning("gridagg sql: worker %d ended (status %d); starting another", pid, status)
            start()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gridagg_sql", description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=5433)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    return serve(Settings.from_env(), args.host, args.port, args.workers)
