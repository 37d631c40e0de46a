"""The WAL is checkpointed by the store's own thread, not inside a caller's commit
(engine/store/sqlite/sqlite_checkpoint.py), and stays bounded however fast the writes come."""

from __future__ import annotations

import os
import sqlite3
import threading

import pytest

import engine.store.sqlite.sqlite_checkpoint as C
from engine import Memory
from tests.helpers import store_of


def _note(i: int) -> str:
    return f"note {i}: " + " ".join(f"n{i}w{j}" for j in range(300))


def _wal(path) -> int:
    try:
        return os.path.getsize(str(path) + "-wal")
    except OSError:
        return 0


def test_commits_leave_checkpoints_to_the_stores_thread(tmp_path):
    path = tmp_path / "m.db"
    mem = Memory(str(path), offline=True)
    try:
        assert store_of(mem).db.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == 0
        written, i = 0, 0
        while written < 3 * C.CHECKPOINT_BYTES:  # enough for the thread to be woken
            before = _wal(path)
            mem.add(_note(i), judged=False)
            written += max(0, _wal(path) - before)
            i += 1
        assert store_of(mem)._checkpoints.idle()
        assert store_of(mem)._checkpoints.done >= 1 and store_of(mem)._checkpoints.failed is None
        names = {t.name for t in threading.enumerate()}
        assert "lethe-checkpoint" in names
    finally:
        mem.close()
    assert "lethe-checkpoint" not in {t.name for t in threading.enumerate()}
    # the last close checkpointed the rest; every note is in the file itself
    assert not os.path.exists(str(path) + "-wal") or _wal(path) == 0
    db = sqlite3.connect(str(path))
    try:
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert db.execute("SELECT count(*) FROM memories").fetchone()[0] == i
    finally:
        db.close()


def _without_thread(monkeypatch) -> None:
    """The thread never woken: the bound alone holds the WAL."""
    real = C.Checkpointer.committed

    def without_thread(self, db):
        self._seen = 1 << 62  # never "grown enough"; EVERY_COMMITS never reached
        self._commits = 1
        return real(self, db)

    monkeypatch.setattr(C.Checkpointer, "committed", without_thread)


@pytest.mark.parametrize("thread", [True, False])
def test_a_burst_of_writes_keeps_the_wal_bounded(tmp_path, monkeypatch, thread):
    """Writes faster than the thread copies: the WAL never starts over by itself, so past
    BEHIND_BYTES the committing connection checkpoints (with the thread or without it)."""
    if not thread:
        _without_thread(monkeypatch)
    path = tmp_path / "m.db"
    mem = Memory(str(path), offline=True)
    try:
        largest, i = 0, 0
        while i < 1000:  # about 2.5 times BEHIND_BYTES of WAL without checkpoints
            mem.add(_note(i), judged=False)
            largest = max(largest, _wal(path))
            i += 1
    finally:
        mem.close()
    # a commit's worth over the bound at most (and, with no thread, that far: the burst
    # wrote more than the bound)
    assert largest < C.BEHIND_BYTES + C.CHECKPOINT_BYTES
    assert thread or largest >= C.BEHIND_BYTES


def test_a_reader_at_the_writers_checkpoint_does_not_let_the_wal_grow_unchecked(tmp_path, monkeypatch):
    """The writer's own checkpoint lets its next write start the WAL over only if no reader
    holds a snapshot then (on a busy machine, the thread's connection reading the schema was
    one: CI saw a 57 MB WAL). Until the WAL has started over, the writer asks again at each
    commit, so when the reader lets go the WAL starts over within a commit."""
    _without_thread(monkeypatch)
    path = tmp_path / "m.db"
    mem = Memory(str(path), offline=True)
    reader = sqlite3.connect(str(path), isolation_level=None)
    try:
        largest, held, i = 0, False, 0
        while i < 520:  # past BEHIND_BYTES and a CHECKPOINT_BYTES more
            if not held and _wal(path) > C.BEHIND_BYTES - 2 * C.CHECKPOINT_BYTES:
                reader.execute("BEGIN")
                reader.execute("SELECT count(*) FROM memories").fetchone()  # a snapshot of then
                held = True
            mem.add(_note(i), judged=False)
            if held and reader.in_transaction and _wal(path) > C.BEHIND_BYTES:
                reader.execute("COMMIT")  # after the writer's checkpoint (at BEHIND - CHECKPOINT)
            largest = max(largest, _wal(path))
            i += 1
    finally:
        reader.close()
        mem.close()
    assert held
    assert largest < C.BEHIND_BYTES + C.CHECKPOINT_BYTES


def test_a_read_only_store_has_no_checkpoints(tmp_path):
    path = tmp_path / "m.db"
    with Memory(str(path), offline=True) as mem:
        mem.add("We use uv.")
    with Memory(str(path), offline=True, read_only=True) as mem:
        assert store_of(mem)._checkpoints is None


def test_a_store_that_has_checkpointed_can_still_have_the_file_to_itself(tmp_path):
    """An import upgrades a copy of an older file and leaves it in rollback-journal mode:
    a switch no other connection may be open for, the checkpoint thread's included."""
    path = tmp_path / "m.db"
    mem = Memory(str(path), offline=True)
    try:
        i = 0
        while store_of(mem)._checkpoints.done == 0:
            mem.add(_note(i), judged=False)
            i += 1
            if i % 50 == 0:
                assert store_of(mem)._checkpoints.idle()
            assert i < 5000, "no checkpoint ran"
        store_of(mem).stop_checkpoints()
        assert store_of(mem).db.execute("PRAGMA journal_mode = DELETE").fetchone()[0] == "delete"
    finally:
        mem.close()


def test_a_wal_grown_by_another_connection_is_the_threads_to_copy(tmp_path):
    """A pass in another process that wrote 40 MB of WAL and then gave way: the writer
    that commits next checkpoints nothing in its commit (that was the fsync of the
    pass's frames: 170-300 ms, bench/RESULTS.md); the store's thread copies them."""
    path = tmp_path / "m.db"
    mem = Memory(str(path), offline=True)
    other = sqlite3.connect(str(path), isolation_level=None)
    try:
        mem.add("We use uv.", judged=False)
        other.execute("PRAGMA wal_autocheckpoint = 0")
        other.execute("BEGIN IMMEDIATE")
        other.execute("CREATE TABLE scratch (x)")
        blob = "x" * 100_000
        for _ in range(400):  # about 40 MB, past BEHIND_BYTES
            other.execute("INSERT INTO scratch VALUES (?)", (blob,))
        other.execute("COMMIT")
        assert _wal(path) > C.BEHIND_BYTES
        ran = []
        real = store_of(mem).db.execute

        def spy(sql, params=(), /):
            ran.append(sql)
            return real(sql, params)

        store_of(mem).db.execute = spy
        try:
            mem.add("We deploy on Fridays.", judged=False)
        finally:
            del store_of(mem).db.execute
        assert not [s for s in ran if "wal_checkpoint" in s]
        assert store_of(mem)._checkpoints.idle() and store_of(mem)._checkpoints.done >= 1
    finally:
        other.close()
        mem.close()


def test_a_count_that_missed_a_start_over_does_not_checkpoint_every_commit(tmp_path, monkeypatch):
    """The writer counts its own growth since the WAL last started over, seen as the file
    shrinking; another process can start it over and grow it back unseen. A checkpoint that
    copied all of it then lets the count ask again a CHECKPOINT_BYTES later, not at every
    commit (a checkpoint's fsync each)."""
    _without_thread(monkeypatch)
    path = tmp_path / "m.db"
    mem = Memory(str(path), offline=True)
    try:
        mem.add("We deploy on Fridays.", judged=False)
        store_of(mem)._checkpoints._own = C.BEHIND_BYTES  # starts-over it never saw
        asked: list[str] = []
        store_of(mem).db.set_trace_callback(lambda sql: "wal_checkpoint" in sql and asked.append(sql))
        for i in range(40):
            mem.add(f"small note {i}", judged=False)
        store_of(mem).db.set_trace_callback(None)
    finally:
        mem.close()
    assert 1 <= len(asked) <= 2, asked
