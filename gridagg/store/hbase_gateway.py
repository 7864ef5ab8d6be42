"""Connections to an HBase Thrift1 gateway that fail fast when HBase is down.

A pool of happybase connections whose sockets get two timeouts: connecting gets
CONNECT_SECONDS (a gateway that is down refuses or never answers a connection: that is
known at once), a call gets settings.hbase_timeout (a long scan on the region servers is
legitimate and must not be cut short). A region server or ZooKeeper that is down is
reported by the gateway itself, which the local launcher configures to give up within a
few seconds (hbase/launcher.py, THRIFT_CLIENT_OPTIONS; an external gateway needs the same
options to fail as fast).

Every failure reaches the caller as StoreUnavailable naming the gateway and the cause; a
connection whose transport failed is dropped, the next call opens a new one.
"""

from __future__ import annotations

import queue
import threading
import time
from contextlib import contextmanager

import happybase
from Hbase_thrift import Hbase, IOError as HBaseIOError  # the Thrift types happybase loads
from thriftpy2.thrift import TClient, TException
from thriftpy2.transport import TSocket

from ..errors import StoreUnavailable

CONNECT_SECONDS = 3.0
# Idle connections older than this are not reused: a gateway drops idle clients after
# hbase.thrift.server.socket.read.timeout (60 s by default), and a dropped one fails its next call.
IDLE_SECONDS = 30.0


class _Connection(happybase.Connection):
    """happybase's connection, with a connect timeout of its own."""

    def _refresh_thrift_client(self):
        sock = TSocket(host=self.host, port=self.port, socket_timeout=self.timeout,
                       connect_timeout=int(CONNECT_SECONDS * 1000))
        self.transport = self._transport_class(sock)
        self.client = TClient(Hbase, self._protocol_class(self.transport, decode_response=False))


class Gateway:
    """Up to `size` connections to the gateway the settings name (settings.effective_hbase)."""

    def __init__(self, settings, size: int):
        host, port = settings.effective_hbase
        self.address = f"{host}:{port}"
        self._open = lambda: _Connection(host, port, timeout=int(settings.hbase_timeout * 1000), autoconnect=False)
        self._idle: queue.LifoQueue = queue.LifoQueue()  # (connection, when it was last used)
        self._slots = threading.BoundedSemaphore(size)

    def _take(self) -> _Connection:
        while True:
            try:
                conn, since = self._idle.get_nowait()
            except queue.Empty:
                return self._open()
            if time.monotonic() - since < IDLE_SECONDS:
                return conn
            conn.close()

    @contextmanager
    def connection(self):
        """A happybase connection for the duration of the block."""
        self._slots.acquire()
        conn, healthy = None, False
        try:
            conn = self._take()
            conn.open()
            yield conn
            healthy = True
        except HBaseIOError as exc:  # the gateway answered: the connection is fine
            healthy = True
            raise StoreUnavailable(f"HBase (through the Thrift gateway at {self.address}) failed: "
                                   f"{_first_line(exc.message)}") from exc
        except (TException, OSError) as exc:
            raise StoreUnavailable(f"HBase Thrift gateway at {self.address} failed: "
                                   f"{type(exc).__name__}: {exc}") from exc
        finally:
            if conn is not None:
                if healthy:
                    self._idle.put((conn, time.monotonic()))
                else:  # its transport may hold half a reply
                    conn.close()
            self._slots.release()

    def close(self) -> None:
        while True:
            try:
                self._idle.get_nowait()[0].close()
            except queue.Empty:
                return


def _first_line(message) -> str:
    text = message.decode(errors="replace") if isinstance(message, bytes) else str(message)
    return text.strip().splitlines()[0] if text.strip() else "(no message)"
