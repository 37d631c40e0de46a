"""A recall while another writer holds the write lock (a pass's one transaction, seconds at
1M memories): it answers at once, and its access (on_access) and its model call's log
line are written by the store's next transaction, or at close, resolved and timed then.
The lock is held by a second store's `transaction(exclusive=True)`, which is what a pass
takes; on PostgreSQL that is a table lock the access UPDATE would wait for."""

import contextlib
import datetime as dt
import os
import subprocess
import sys
import threading
import warnings

import pytest

from engine.base.errors import StoreWarning
from engine.memory import Memory
from engine.store import open_store
from tests.helpers import run_sql, store_of

pytestmark = pytest.mark.both_backends


@pytest.fixture
def held(db_path, clock):
    """held() takes the write lock the way a pass does and keeps it until release()."""
    stack = contextlib.ExitStack()

    class Holder:
        def __call__(self):
            self.store = stack.enter_context(open_store(db_path, clock))
            stack.enter_context(self.store.transaction(exclusive=True))
            return self

        def release(self):
            stack.close()

    yield Holder()
    stack.close()


def seeded(memory):
    mem = memory("lifecycle")
    tea = mem.add("User prefers green tea over coffee.", judged=False)
    mem.add("User's laptop runs Debian.", judged=False)
    return mem, tea


def access(db_path, clock, memory_id):
    with open_store(db_path, clock) as store:
        row = run_sql(
            store, "SELECT access_count, last_accessed FROM memories WHERE id = ?", (memory_id,)
        ).fetchone()
        return row[0], row[1]


def select_calls(db_path, clock):
    with open_store(db_path, clock) as store:
        return run_sql(store, "SELECT count(*) FROM model_calls WHERE step = 'select'").fetchone()[0]


def test_recall_answers_while_the_lock_is_held_and_its_access_lands_after(memory, held, db_path, clock):
    mem, tea = seeded(memory)
    before = select_calls(db_path, clock)
    holder = held()
    got = mem.recall("green tea")  # before: waited for the lock (30 s), then 'database is locked'
    assert [m.id for m in got] == [tea]
    assert got[0].access_count == 0  # not recorded yet: the record says what is stored
    assert access(db_path, clock, tea)[0] == 0
    holder.release()
    clock.advance(dt.timedelta(hours=3))
    # PostgreSQL's table lock does not hold up the log line; SQLite's write lock does
    assert select_calls(db_path, clock) == before + (store_of(mem).dialect == "postgres")
    mem.add("User walks to work.", judged=False)  # the next transaction writes them first
    count, last = access(db_path, clock, tea)
    assert count == 1
    assert last == clock().isoformat(timespec="seconds")  # timed when written
    assert select_calls(db_path, clock) == before + 1
    assert not store_of(mem).deferred


def test_each_recall_made_while_busy_counts_once_at_close(memory, held, db_path, clock):
    mem, tea = seeded(memory)
    holder = held()
    mem.recall("green tea")
    mem.recall("tea")
    holder.release()
    mem.close()
    assert access(db_path, clock, tea)[0] == 2
    assert select_calls(db_path, clock) == 2


def test_a_transaction_that_rolls_back_keeps_what_was_deferred(memory, held, db_path, clock):
    mem, tea = seeded(memory)
    holder = held()
    mem.recall("green tea")
    holder.release()
    with pytest.raises(RuntimeError):
        with store_of(mem).transaction():
            raise RuntimeError("the caller's own failure")
    assert access(db_path, clock, tea)[0] == 0
    assert store_of(mem).deferred
    mem.close()
    assert access(db_path, clock, tea)[0] == 1  # once, not once per try


def test_an_unbusy_recall_records_its_access_at_once(memory, db_path, clock):
    mem, tea = seeded(memory)
    mem.recall("green tea")
    assert not store_of(mem).deferred
    assert access(db_path, clock, tea)[0] == 1


def test_close_that_cannot_get_the_lock_warns_and_closes(memory, held, db_path, clock, backend):
    mem, tea = seeded(memory)
    holder = held()
    mem.recall("green tea")
    if backend == "postgres":
        store_of(mem).db.execute("SET lock_timeout = 300")
    else:
        store_of(mem).timeout = store_of(mem).db.wait = 0.3
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        mem.close()
    told = [str(w.message) for w in caught if issubclass(w.category, StoreWarning)]
    assert len(told) == 1 and "could not be made" in told[0], told
    holder.release()
    assert access(db_path, clock, tea)[0] == 0


def test_a_waiting_writer_still_waits(db_path, clock, held):
    """Only writes no caller waits on are kept: an add still waits for the lock (and,
    with a short timeout, says the database is busy) rather than returning an id that is
    not stored."""
    mem = Memory(db_path, policy="lifecycle", offline=True, clock=clock)
    try:
        holder = held()
        if store_of(mem).dialect == "postgres":
            store_of(mem).db.execute("SET lock_timeout = 300")
        else:
            store_of(mem).timeout = store_of(mem).db.wait = 0.3
        with pytest.raises(Exception) as raised:
            mem.add("User walks to work.", judged=False)
        assert store_of(mem).is_busy(raised.value)
        holder.release()
    finally:
        mem.close()


def test_the_next_recall_with_the_lock_free_writes_what_was_kept(memory, held, db_path, clock):
    mem, tea = seeded(memory)
    holder = held()
    mem.recall("green tea")
    mem.recall("green tea")  # one try only, the lock was busy a moment ago: kept too
    assert access(db_path, clock, tea)[0] == 0
    holder.release()
    mem.recall("green tea")
    assert not store_of(mem).deferred
    assert access(db_path, clock, tea)[0] == 3
    assert select_calls(db_path, clock) == 3


def test_a_memory_the_pass_merged_meanwhile_passes_its_access_on(memory, held, db_path, clock):
    mem, tea = seeded(memory)
    other = mem.add("User drinks green tea every morning.", judged=False)
    holder = held()
    assert [m.id for m in mem.recall("green tea")][:1]
    picked = [r[0] for r in run_sql(holder.store, "SELECT id FROM memories").fetchall()]
    # the pass absorbs every picked memory into a new one, as a merge does, and commits
    merged = holder.store.insert_memory(
        {"namespace": "default", "content": "User likes green tea.", "created_at": clock().isoformat()}
    )
    run_sql(
        holder.store,
        "UPDATE memories SET status = 'compressed', merged_into = ? WHERE id IN (?, ?)",
        (merged, tea, other),
    )
    holder.release()
    mem.close()
    assert access(db_path, clock, tea)[0] == 0 and access(db_path, clock, other)[0] == 0
    assert access(db_path, clock, merged)[0] >= 1, picked  # before: the access was lost


def test_a_kept_write_the_database_refuses_is_dropped_not_retried(memory, held, db_path, clock):
    mem, tea = seeded(memory)
    tries = []

    def refused():
        tries.append(1)
        raise ValueError("a value the database cannot take")

    store_of(mem).defer(refused)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        walk = mem.add("User walks to work.", judged=False)  # before: this failed, and every
        mem.forget(walk, "test")  # later write of the Memory
    assert [str(w.message) for w in caught if issubclass(w.category, StoreWarning)] == [
        f"{store_of(mem).path}: a write kept while the store was busy was dropped "
        "(ValueError: a value the database cannot take)"
    ]
    assert tries == [1] and not store_of(mem).deferred
    assert mem.get(walk).status == "archived"


def test_a_log_line_after_the_lock_is_free_writes_what_was_kept(memory, held, db_path, clock):
    mem, tea = seeded(memory)
    holder = held()
    mem.recall("green tea")
    holder.release()
    mem.explain("green tea")  # writes no access, logs its select call
    assert not store_of(mem).deferred  # before: kept until close, and more with every call
    assert access(db_path, clock, tea)[0] == 1


def test_lethe_recall_prints_before_it_waits_to_record_the_access(memory, held, db_path, clock, backend):
    if backend != "sqlite":
        pytest.skip("the CLI's store here is a file")
    mem, tea = seeded(memory)
    mem.close()
    holder = held()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "LETHE_"))}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "engine.cli",
            "recall",
            "green tea",
            "--db",
            db_path,
            "--offline",
            "--now",
            clock().isoformat(),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**env, "PYTHONPATH": root},
    )
    got = []
    reader = threading.Thread(target=lambda: got.append(proc.stdout.readline()), daemon=True)
    reader.start()
    reader.join(20)  # before: nothing until the lock was released and the process ended
    answered_while_held = bool(got)
    holder.release()
    out, err = proc.communicate(timeout=60)
    assert answered_while_held, err
    assert got[0].startswith(f"#{tea} ") and proc.returncode == 0, (got, err)
    assert access(db_path, clock, tea)[0] == 1


def test_postgres_an_inbox_write_does_not_wait_for_a_kept_access(memory, held, backend):
    if backend != "postgres":
        pytest.skip("SQLite has one write lock for every table")
    mem, tea = seeded(memory)
    holder = held()
    mem.recall("green tea")
    store_of(mem).db.execute("SET lock_timeout = 2000")
    turn = store_of(mem).add_turn("default", "I moved to Lisbon.", "")
    # a failed attempt is recorded in a transaction of the inbox's (before: it ran the kept
    # access first, waited for the pass's lock and raised LockNotAvailable)
    store_of(mem).turn_failed(turn, "a model was unreachable", 0, None, "pending", None)
    assert store_of(mem).deferred
    assert mem.pending()[0]["last_error"] == "a model was unreachable"
    holder.release()
    mem.close()


def test_a_recall_after_a_long_pass_makes_a_bounded_share_of_the_kept_writes(memory, held, db_path, clock):
    """After a pass of seconds, recalls made during it left many writes kept (1,164 after
    a 1M decay: making them all took the next recall 290 ms). A recall's transaction makes
    the first KEPT_AT_ONCE and keeps its own behind the rest: in order, none lost."""
    mem, tea = seeded(memory)
    before = select_calls(db_path, clock)
    store_of(mem).KEPT_AT_ONCE = 4
    holder = held()
    for _ in range(12):
        mem.recall("green tea")
    holder.release()
    kept = len(store_of(mem).deferred)
    assert kept >= 12
    mem.recall("green tea")
    # four made by each of its transactions (its log line's and its access's), its own
    # kept behind the rest
    assert kept - 2 * 4 <= len(store_of(mem).deferred) < kept
    assert access(db_path, clock, tea)[0] < 12
    recalls = 13
    while store_of(mem).deferred and recalls < 40:
        mem.recall("green tea")
        recalls += 1
    assert not store_of(mem).deferred
    assert access(db_path, clock, tea)[0] == recalls  # each once
    assert select_calls(db_path, clock) == before + recalls
    mem.close()
