"""Writers get SQLite's write lock between a batched pass's ranges, instead of waiting for
the whole pass (SQLite's own busy handler sleeps up to 100 ms between tries and misses
every gap of a pass that begins its next range at once), and still wait only as long as
the store's timeout."""

import datetime as dt
import json
import sqlite3
import subprocess
import sys
import threading
import time

import pytest

from bench import seed_article
from engine import Memory
from engine.store import Store
from tests.helpers import POLICIES, START, store_of

pytestmark = pytest.mark.sqlite_only

T = START + dt.timedelta(days=1)
BATCH = 100


def batched(tmp_path):
    path = tmp_path / "batched.yaml"
    path.write_text(
        f"name: batched\nextends: {POLICIES}/lifecycle.yaml\npasses:\n  decay:\n    batch: {BATCH}\n"
    )
    return str(path)


def cursor(path):
    """Where the running pass is (its next range's first id), or None when none runs."""
    db = sqlite3.connect(path, timeout=30)
    try:
        row = db.execute("SELECT cursor FROM pass_progress").fetchone()
    finally:
        db.close()
    return row[0] if row else None


def write_during_the_pass(path, policy, write):
    """Run decay in `lethe run`, another process, as a scheduler would; once its first
    range has committed, `write(memory)` here. Returns the pass's cursor when the write
    began and when it ended (None: the pass had ended)."""
    cmd = [
        sys.executable,
        "-m",
        "engine.cli",
        "run",
        "--db",
        path,
        "--policy",
        policy,
        "--pass",
        "decay",
        "--now",
        T.isoformat(),
        "--json",
    ]
    with Memory(path, policy=policy, clock=lambda: T, offline=True) as mem:
        passing = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            while (before := cursor(path)) is None:
                assert passing.poll() is None, "the pass ended before it was seen running"
                time.sleep(0.001)
            write(mem)
            after = cursor(path)
        finally:
            out, err = passing.communicate(timeout=120)
    assert passing.returncode == 0, err
    assert json.loads(out)[0]["changed"] > 0
    return before, after


def write_call(store, step: str) -> None:
    """One autocommit write on the store's connection (a model_calls row; the store's own
    log_call keeps its line for later when the lock is busy, so it is not used here)."""
    store.db.execute(
        "INSERT INTO model_calls (namespace, step, model, prompt_tokens, "
        "completion_tokens, latency_ms, outcome, occurred_at) "
        "VALUES ('default', ?, 'm', 1, 1, 1.0, 'ok', 'x')",
        (step,),
    )


@pytest.fixture
def article(tmp_path):
    path = str(tmp_path / "article.db")
    seed_article.generate(path, 8000, START, seed=5)
    Store(path).close()  # adopted before the pass, so the pass is all the writer waits for
    return path


@pytest.mark.parametrize("how", ["transaction", "autocommit"])
def test_a_writer_gets_in_between_two_ranges_of_a_batched_pass(tmp_path, article, how):
    def write(mem):
        if how == "transaction":
            mem.add("written while the pass runs", judged=False)
        else:  # a write outside any transaction: one statement, committed alone
            write_call(store_of(mem), "test")

    before, after = write_during_the_pass(article, batched(tmp_path), write)
    assert after is not None, "the write waited for the whole pass"
    # measured across processes: 0 ranges here; 4-6 (or the whole pass) with SQLite's
    # own busy handler
    assert (after - before) // BATCH <= 2, (
        f"the pass committed {(after - before) // BATCH} ranges while the writer waited"
    )


def test_a_write_still_waits_only_the_store_timeout(db_path, clock):
    Store(db_path, clock).close()
    holder = sqlite3.connect(db_path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    store = Store(db_path, clock, timeout=0.2)
    try:
        for write in (lambda: write_call(store, "test"), lambda: store.transaction().__enter__()):
            t0 = time.monotonic()
            with pytest.raises(sqlite3.OperationalError, match="database is locked"):
                write()
            assert 0.2 <= time.monotonic() - t0 < 1.5  # the store's timeout, not 30 s
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    write_call(store, "test")  # free again
    assert store.model_use("default")["calls"] == 1
    store.close()


def test_a_write_waits_for_a_lock_held_a_while(db_path, clock):
    Store(db_path, clock).close()
    holder = sqlite3.connect(db_path, isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN IMMEDIATE")
    holder.execute(
        "INSERT INTO model_calls (namespace, step, model, prompt_tokens, "
        "completion_tokens, latency_ms, outcome, occurred_at) "
        "VALUES ('default', 'first', 'm', 1, 1, 1.0, 'ok', 'x')"
    )
    release = threading.Timer(0.3, lambda: holder.execute("COMMIT"))
    store = Store(db_path, clock)
    release.start()
    try:
        write_call(store, "second")
    finally:
        release.join()
        holder.close()
    assert store.model_use("default")["by_step"] == {"first": 1, "second": 1}  # in turn
    store.close()


def hold_in_turns(path, first: float, hold: float, gap: float, turns: int, gaps: list):
    """Hold the write lock `first` seconds, then `turns` times free it for `gap` seconds
    and hold it `hold` seconds, as a batched pass does; `gaps` counts the gaps begun."""
    db = sqlite3.connect(path, isolation_level=None, timeout=10, check_same_thread=False)
    db.execute("BEGIN IMMEDIATE")

    def run():
        time.sleep(first)
        for _ in range(turns):
            db.execute("COMMIT")
            gaps.append(time.monotonic())
            time.sleep(gap)
            db.execute("BEGIN IMMEDIATE")
            time.sleep(hold)
        db.execute("COMMIT")
        db.close()

    thread = threading.Thread(target=run)
    thread.start()
    return thread


@pytest.mark.parametrize("how", ["transaction", "autocommit"])
def test_a_writer_that_waited_long_still_takes_the_first_short_gap(db_path, clock, how):
    # SQLite's own handler has backed off to a try every 100 ms after a second of waiting,
    # and so misses most 5 ms gaps (it got in after 7-16 of them, measured); the store's 1 ms
    # tries take the first
    Store(db_path, clock).close()
    gaps: list = []
    holder = hold_in_turns(db_path, first=1.0, hold=0.05, gap=0.005, turns=40, gaps=gaps)
    store = Store(db_path, clock)
    try:
        if how == "transaction":  # BEGIN IMMEDIATE waits, then the insert in it
            with store.transaction():
                write_call(store, "t")
        else:  # one autocommit statement waits
            write_call(store, "t")
        got_in = len(gaps)
    finally:
        holder.join()
        store.close()
    assert 1 <= got_in <= 3, f"the writer got in after {got_in} of the holder's gaps"


def test_a_read_only_open_waits_only_the_store_timeout(db_path, clock):
    Store(db_path, clock).close()
    plain = sqlite3.connect(db_path, isolation_level=None)
    plain.execute("PRAGMA journal_mode = DELETE")  # where a writer locks readers out
    plain.execute("BEGIN EXCLUSIVE")
    try:
        t0 = time.monotonic()
        try:
            Store(db_path, clock, timeout=0.2, read_only=True).close()
        except Exception:
            pass  # refused or read as it is: either way, not after 30 s
        assert time.monotonic() - t0 < 2
    finally:
        plain.execute("ROLLBACK")
        plain.close()


def test_a_commit_that_must_wait_for_a_reader_waits_then_commits(db_path, clock):
    # a file SQLite keeps in rollback-journal mode: COMMIT waits for readers to finish
    Store(db_path, clock).close()
    store = Store(db_path, clock, timeout=5)
    store.db.execute("PRAGMA journal_mode = DELETE")
    reader = sqlite3.connect(db_path, isolation_level=None, check_same_thread=False)
    reader.execute("BEGIN")
    reader.execute("SELECT count(*) FROM memories").fetchone()  # a shared lock, held
    release = threading.Timer(0.3, lambda: reader.execute("COMMIT"))
    release.start()
    try:
        with store.transaction():
            write_call(store, "t")
    finally:
        release.join()
        reader.close()
    assert not store.db.in_transaction and store.model_use("default")["calls"] == 1
    store.close()


def test_a_commit_that_times_out_rolls_back_and_frees_the_lock(db_path, clock):
    Store(db_path, clock).close()
    store = Store(db_path, clock, timeout=0.2)
    store.db.execute("PRAGMA journal_mode = DELETE")
    reader = sqlite3.connect(db_path, isolation_level=None)
    reader.execute("BEGIN")
    reader.execute("SELECT count(*) FROM memories").fetchone()
    try:
        with pytest.raises(sqlite3.OperationalError, match="database is locked"):
            with store.transaction():
                write_call(store, "t")
        assert not store.db.in_transaction  # rolled back: the write lock is not kept
    finally:
        reader.execute("COMMIT")
        reader.close()
    with store.transaction():  # and the next one works
        write_call(store, "t")
    assert store.model_use("default")["calls"] == 1
    store.close()


def test_a_store_nobody_waited_for_leaves_no_waiters_file(tmp_path):
    """Issue 43: every store left a permanent zero-byte `*.db-lethe-waiters` beside it (39
    after an experiment with --keep); only a writer that waits makes it now."""
    from engine import FixedClock, Memory

    db = tmp_path / "agent.db"
    with Memory(str(db), offline=True, clock=FixedClock("2026-01-05T09:00:00")) as mem:
        mem.remember("I moved to Lisbon.")
        mem.add("The beta launches on 2031-03-15.")
        mem.recall("where do I live?")
        mem.run_due()
    assert sorted(p.name for p in tmp_path.iterdir() if "lethe" in p.name) == []
