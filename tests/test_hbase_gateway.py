"""How calls to the HBase Thrift gateway wait: small calls give up after
hbase_call_timeout, calls whose work grows with the rows wait on while HBase answers
probes (gridagg.store.hbase.gateway)."""

from __future__ import annotations

import socket
import threading
import time

import pytest

from gridagg.model.errors import StoreUnavailable
from gridagg.store.hbase.gateway import Gateway, _PatientSocket


@pytest.fixture
def late_server():
    """A local TCP server that answers b"done" 0.6 s after each connection; (host, port)."""
    server = socket.create_server(("127.0.0.1", 0))

    def serve():
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            time.sleep(0.6)
            conn.sendall(b"done")
            conn.close()

    threading.Thread(target=serve, daemon=True).start()
    yield server.getsockname()
    server.close()


def patient(address, step: float, patience: float, alive) -> _PatientSocket:
    sock = _PatientSocket(host=address[0], port=address[1], socket_timeout=int(step * 1000))
    sock.step, sock.patience, sock.alive = step, patience, alive
    sock.open()
    return sock


def test_a_read_waits_past_its_step_while_the_probe_answers(late_server):
    probes = []
    sock = patient(late_server, 0.1, 5.0, lambda: probes.append(1) or True)
    assert sock.read(4) == b"done"
    assert len(probes) >= 2  # asked at each step it waited


def test_a_read_gives_up_at_the_first_failed_probe(late_server):
    sock = patient(late_server, 0.1, 5.0, lambda: False)
    with pytest.raises(TimeoutError, match="nor a probe"):
        sock.read(4)


def test_a_read_gives_up_after_its_patience_even_while_probes_answer(late_server):
    sock = patient(late_server, 0.1, 0.25, lambda: True)
    with pytest.raises(TimeoutError, match="did not answer within"):
        sock.read(4)


def test_the_probe_finds_a_running_hbase(settings, services, unique_name):
    """A probe reads a row of hbase:meta, or of the table a call works on."""
    gateway = Gateway(settings, 1)
    try:
        assert gateway.answers(b"hbase:meta")
        with gateway.connection(slow=True) as conn:
            conn.create_table(unique_name, {"f": {}})
        try:
            assert gateway.answers(unique_name.encode())
        finally:
            with gateway.connection(slow=True) as conn:
                conn.delete_table(unique_name, disable=True)
    finally:
        gateway.close()


def test_a_slow_call_outlasts_its_step_on_a_running_hbase(settings, services, unique_name):
    """With a step far below a table's creation time, slow calls (creating, then dropping
    a table) still succeed: HBase answers each probe meanwhile."""
    gateway = Gateway(settings.with_(hbase_call_timeout=0.05), 1)
    try:
        with gateway.connection(slow=True) as conn:
            conn.create_table(unique_name, {"f": {}})
        with gateway.connection(slow=True) as conn:
            assert unique_name.encode() in conn.tables()
            conn.delete_table(unique_name, disable=True)
    finally:
        gateway.close()


def test_a_small_call_past_its_step_is_unavailable(settings, late_server):
    """A gateway that answers a small call only after its step: a clear StoreUnavailable
    naming the wait (its late answer is never read)."""
    host, port = late_server
    gateway = Gateway(settings.with_(hbase=f"{host}:{port}", hbase_call_timeout=0.1), 1)
    with pytest.raises(StoreUnavailable, match=r"did not answer within 0\.1 s"):
        with gateway.connection() as conn:
            conn.tables()
