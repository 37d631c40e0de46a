"""A recall while another writer holds the write lock (a pass's one transaction, seconds at
1M memories): it answers at once, and its access (on_access) and its model call's log
line are written by the store's next transaction, with the recall's time, or at close.
The lock is held by a second store's `transaction(exclusive=True)`, which is what a pass
takes; on PostgreSQL that is a table lock the access UPDATE would wait for."""
import contextlib
import datetime as dt
import warnings

import pytest

from engine.memory import Memory
from engine.store import open_store
from engine.errors import StoreWarning
from tests.conftest import run_sql

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
        row = run_sql(store, "SELECT access_count, last_accessed FROM memories WHERE id = ?",
                      (memory_id,)).fetchone()
        return row[0], row[1]


def select_calls(db_path, clock):
    with open_store(db_path, clock) as store:
        return run_sql(store, "SELECT count(*) FROM model_calls WHERE step = 'select'").fetchone()[0]


def test_recall_answers_while_the_lock_is_held_and_its_access_lands_after(memory, held, db_path,
                                                                           clock):
    mem, tea = seeded(memory)
    recalled_at, before = clock(), select_calls(db_path, clock)
    holder = held()
    got = mem.recall("green tea")  # before: waited for the lock (30 s), then 'database is locked'
    assert [m.id for m in got] == [tea]
    assert got[0].access_count == 0  # not recorded yet: the record says what is stored
    assert access(db_path, clock, tea)[0] == 0
    holder.release()
    clock.advance(dt.timedelta(hours=3))
    # PostgreSQL's table lock does not hold up the log line; SQLite's write lock does
    assert select_calls(db_path, clock) == before + (mem.store.dialect == "postgres")
    mem.add("User walks to work.", judged=False)  # the next transaction writes them first
    count, last = access(db_path, clock, tea)
    assert count == 1
    assert last.startswith(recalled_at.strftime("%Y-%m-%dT%H:%M"))  # the recall's time
    assert select_calls(db_path, clock) == before + 1
    assert not mem.store.deferred


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
        with mem.store.transaction():
            raise RuntimeError("the caller's own failure")
    assert access(db_path, clock, tea)[0] == 0
    assert mem.store.deferred
    mem.close()
    assert access(db_path, clock, tea)[0] == 1  # once, not once per try


def test_an_unbusy_recall_records_its_access_at_once(memory, db_path, clock):
    mem, tea = seeded(memory)
    mem.recall("green tea")
    assert not mem.store.deferred
    assert access(db_path, clock, tea)[0] == 1


def test_close_that_cannot_get_the_lock_warns_and_closes(memory, held, db_path, clock, backend):
    mem, tea = seeded(memory)
    holder = held()
    mem.recall("green tea")
    if backend == "postgres":
        mem.store.db.execute("SET lock_timeout = 300")
    else:
        mem.store.timeout = mem.store.db.wait = 0.3
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
        if mem.store.dialect == "postgres":
            mem.store.db.execute("SET lock_timeout = 300")
        else:
            mem.store.timeout = mem.store.db.wait = 0.3
        with pytest.raises(Exception) as raised:
            mem.add("User walks to work.", judged=False)
        assert mem.store.is_busy(raised.value)
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
    assert not mem.store.deferred
    assert access(db_path, clock, tea)[0] == 3
    assert select_calls(db_path, clock) == 3
