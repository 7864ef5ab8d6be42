"""How a write waits for its dataset's writer lock: as long as it must for bulk loads and
repair; an insert for at most the engine's writer_wait, and not at all past the first
second when the store does not answer (the holder is failing, so would the waiter). A
holder that lost the lock commits nothing more."""

from __future__ import annotations

import threading

import numpy as np
import psycopg
import pytest
from engine_support import check_tree

from gridagg.model.errors import StoreUnavailable
from gridagg.model.grid import children
from gridagg.model.schema import Dataset


@pytest.fixture
def dataset(engine, unique_name):
    ds = engine.create_dataset(Dataset.from_json({
        "name": unique_name,
        "dimensions": [{"name": "x", "min": 0, "max": 100}],
        "measures": [{"name": "v", "min": 0, "max": 100}],
        "grid": {"n_size": 10, "n_threshold": 30},
    }))
    yield ds
    engine.drop_dataset(ds.name)


class Holder:
    """Another writer: holds the dataset's writer lock in a thread of its own until
    release() (or `seconds`)."""

    def __init__(self, directory, name: str, seconds: float = 30.0):
        self.held, self.done = threading.Event(), threading.Event()
        self.letting_go = False
        self.thread = threading.Thread(target=self._hold, args=(directory, name, seconds))
        self.thread.start()
        assert self.held.wait(10)

    def _hold(self, directory, name, seconds):
        with directory.writer_lock(name):
            self.held.set()
            self.done.wait(seconds)
            self.letting_go = True

    def release(self):
        self.done.set()
        self.thread.join()


def test_a_writer_gets_the_lock_once_its_holder_lets_go(engine, dataset):
    holder = Holder(engine.directory, dataset.name, seconds=1.5)
    with engine.directory.writer_lock(dataset.name, healthy=lambda: True):
        assert holder.letting_go
    holder.release()


def test_a_writer_behind_a_holder_whose_store_does_not_answer_gives_up_at_once(engine, dataset):
    holder = Holder(engine.directory, dataset.name)
    try:
        with pytest.raises(StoreUnavailable, match="writer lock of dataset '.+' and the store does not answer"):
            with engine.directory.writer_lock(dataset.name, wait=30, healthy=lambda: False):
                pass
    finally:
        holder.release()


def test_an_insert_waits_for_the_lock_no_longer_than_writer_wait(engine, dataset):
    """Refused with a clear StoreUnavailable (a 503 over HTTP), and nothing of it is
    written; once the holder lets go, the same insert goes in."""
    assert engine.store.answers(dataset)  # the store is up: the wait runs its course
    rows = np.array([[i, i] for i in range(20)], dtype=np.int64)
    ids = [b"e%d" % i for i in range(20)]
    holder = Holder(engine.directory, dataset.name)
    engine.writer_wait = 1.0
    try:
        with pytest.raises(StoreUnavailable, match=r"held the writer lock of dataset '.+' for the 1 s"):
            engine.insert_encoded(dataset, ids, rows)
    finally:
        engine.writer_wait = 60.0
        holder.release()
    check_tree(engine, dataset.name, np.empty((0, 2), dtype=np.int64))
    assert engine.insert_encoded(dataset, ids, rows).stored == 20
    check_tree(engine, dataset.name, rows)


def end_the_lock_holders_session(settings, name: str) -> None:
    """End the PostgreSQL session holding dataset `name`'s writer lock, as a restart of
    PostgreSQL or a broken connection does: the lock goes with it."""
    with psycopg.connect(settings.effective_pg_url, autocommit=True) as conn:
        ended = conn.execute(
            "SELECT pg_terminate_backend(pid, 10000) FROM pg_locks WHERE locktype = 'advisory' AND granted "
            "AND ((classid::bigint << 32) | objid::bigint) = hashtextextended(%s, 0)", (f"gridagg:{name}",)).fetchall()
    assert ended == [(True,)]


def test_a_writer_that_lost_the_lock_commits_nothing_more(engine, settings, dataset):
    """Once its session has ended, another writer may hold the lock and change the
    leaves: a directory switch made from what the first saw then would leave leaves that
    overlap, or rows under no leaf. So the first commits nothing more: its switch fails
    with a clear StoreUnavailable, and the other writer's work stands."""
    rows = np.array([[i, i] for i in range(20)], dtype=np.int64)
    engine.insert_encoded(dataset, [b"e%d" % i for i in range(20)], rows)
    leaf = engine.directory.leaves(dataset)[0]
    with pytest.raises(StoreUnavailable, match=r"writer lock of dataset '.+' was lost"):
        with engine.writing(dataset, "tune") as first:
            first.intend([leaf.grid_id])
            end_the_lock_holders_session(settings, dataset.name)
            # Another writer takes the lock at once, recovers the first one's intent and writes.
            engine.insert_encoded(dataset, [b"late"], np.array([[50, 7]], dtype=np.int64))
            first.switch([leaf.grid_id], list(children(leaf, 0, 50, 1)))
    assert [g.grid_id for g in engine.directory.leaves(dataset)] == [leaf.grid_id]
    check_tree(engine, dataset.name, np.vstack([rows, [[50, 7]]]))
    assert engine.check(dataset.name) == []
