"""Connections to an HBase Thrift1 gateway that fail fast when HBase is down.

A pool of happybase connections whose sockets get timeouts. Connecting gets
CONNECT_SECONDS: a gateway that is down refuses or never answers a connection, that is
known at once. A call waits settings.hbase_call_timeout seconds for its answer: any
call takes milliseconds when HBase is up, but when HBase is away the gateway's client
may spend seconds per row locating its region before giving up (a multi-get of many
partial aggregates then takes far longer), and the caller hears "unavailable" within seconds
instead. A call whose work grows with the rows it reads or writes (scans on the region
servers, grid rows; creating or dropping tables) waits longer, up to
settings.hbase_timeout, but only while HBase answers a probe (a one-row read of the
table, within PROBE_SECONDS) each hbase_call_timeout seconds: a long scan is legitimate
and must not be cut short, a wait on an HBase that is away is not. The gateway itself
gives up within a few seconds on a single row (hbase/launcher.py, THRIFT_CLIENT_OPTIONS;
an external gateway needs the same options to fail as fast).

Every failure reaches the caller as StoreUnavailable naming the gateway and the cause; a
connection whose transport failed is dropped, the next call opens a new one.
"""

from __future__ import annotations

import queue
import threading
import time
from contextlib import contextmanager

import happybase
from Hbase_thrift import Hbase  # the Thrift types happybase loads
from Hbase_thrift import IOError as HBaseIOError
from thriftpy2.thrift import TClient, TException
from thriftpy2.transport import TSocket

from gridagg.model.errors import StoreUnavailable

CONNECT_SECONDS = 3.0
# Idle connections older than this are not reused: a gateway drops idle clients after
# hbase.thrift.server.socket.read.timeout (60 s by default), and a dropped one fails its next call.
IDLE_SECONDS = 30.0
PROBE_ROW = b"gridagg-probe"  # a row key no table holds (grid row keys and time keys never spell it)
META = b"hbase:meta"
# A probe is a one-row read: milliseconds when HBase is up; when it is away the gateway
# takes seconds to say so, and the call waiting on the probe must not wait that long.
PROBE_SECONDS = 1.0


class _PatientSocket(TSocket):
    """A socket whose reads wait for an answer in steps of `step` seconds: after a step
    without one, the read goes on waiting only while alive() says HBase still answers,
    and for `patience` seconds at most; else it raises TimeoutError."""

    step = patience = 0.0  # until wait() is called: a timeout fails the read
    alive = staticmethod(lambda: False)

    def read(self, sz):
        began = time.monotonic()
        while True:
            try:
                return super().read(sz)
            except TimeoutError:
                waited = time.monotonic() - began
                if waited + self.step > self.patience:
                    raise TimeoutError(f"did not answer within {waited:.1f} s") from None
                if not self.alive():
                    raise TimeoutError(f"did not answer within {waited:.1f} s, nor a probe "
                                       f"within {PROBE_SECONDS:g} s") from None


class _Connection(happybase.Connection):
    """happybase's connection, with a connect timeout of its own and a patient socket."""

    def _refresh_thrift_client(self):
        self.socket = _PatientSocket(host=self.host, port=self.port, socket_timeout=self.timeout,
                                     connect_timeout=int(CONNECT_SECONDS * 1000))
        self.transport = self._transport_class(self.socket)
        self.client = TClient(Hbase, self._protocol_class(self.transport, decode_response=False))

    def wait(self, step: float, patience: float, alive) -> None:
        """How its calls wait for answers (see _PatientSocket)."""
        sock = self.socket
        sock.step, sock.patience, sock.alive = step, patience, alive
        sock.socket_timeout = step
        if sock.sock is not None:
            sock.sock.settimeout(step)


class Gateway:
    """Up to `size` connections to the gateway the settings name (settings.effective_hbase)."""

    def __init__(self, settings, size: int):
        host, port = settings.effective_hbase
        self.address = f"{host}:{port}"
        self._open = lambda: _Connection(host, port, timeout=int(settings.hbase_call_timeout * 1000),
                                         autoconnect=False)
        self.step, self.patience = settings.hbase_call_timeout, settings.hbase_timeout
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
    def connection(self, slow: bool = False, table: bytes | None = None):
        """A happybase connection for the duration of the block. slow: whether its calls
        may legitimately take long (scans and grid rows, whose work grows with the rows;
        creating and dropping tables): each call of the block then waits up to
        settings.hbase_timeout seconds while HBase answers probes (a read of `table`, the
        table the block works on, else of hbase:meta), else up to
        settings.hbase_call_timeout."""
        self._slots.acquire()
        conn, healthy = None, False
        seconds = self.patience if slow else self.step
        try:
            conn = self._take()
            conn.wait(self.step, seconds, lambda: self.answers(table or META))
            conn.open()
            yield conn
            healthy = True
        except HBaseIOError as exc:  # the gateway answered: the connection is fine
            healthy = True
            raise StoreUnavailable(f"HBase (through the Thrift gateway at {self.address}) failed: "
                                   f"{_first_line(exc.message)}") from exc
        except TimeoutError as exc:
            raise StoreUnavailable(f"HBase (through the Thrift gateway at {self.address}) {exc}") from exc
        except (TException, OSError) as exc:
            raise StoreUnavailable(f"HBase Thrift gateway at {self.address} failed: "
                                   f"{type(exc).__name__}: {_first_line(getattr(exc, 'message', None) or repr(exc))}"
                                   ) from exc
        finally:
            if conn is not None:
                if healthy:
                    self._idle.put((conn, time.monotonic()))
                else:  # its transport may hold half a reply
                    conn.close()
            self._slots.release()

    def answers(self, table: bytes) -> bool:
        """Whether HBase answers a one-row read in every region of `table` within
        PROBE_SECONDS each (on a connection of its own). Of the table a call works on
        rather than hbase:meta: while a restarted HBase opens its regions, meta answers
        long before the table's regions do. Every region: with several region servers,
        one that died leaves its regions unanswered until they are reassigned, while the
        others answer, and a call waiting on such a region waits in vain."""
        conn = self._open()
        conn.wait(PROBE_SECONDS, PROBE_SECONDS, lambda: False)
        try:
            conn.open()
            starts = [b""] if table == META else [r.startKey or b"" for r in conn.client.getTableRegions(table)]
            for start in starts:
                # Just after the region's start key: a row in that region no table holds.
                conn.client.getRowWithColumns(table, start + b"\0" + PROBE_ROW, [], {})
            return True
        except (TException, OSError):
            return False
        finally:
            conn.close()

    def close(self) -> None:
        while True:
            try:
                self._idle.get_nowait()[0].close()
            except queue.Empty:
                return


def _first_line(message) -> str:
    text = message.decode(errors="replace") if isinstance(message, bytes) else str(message)
    return text.strip().splitlines()[0] if text.strip() else "(no message)"
