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
from tests.conftest import POLICIES, START

pytestmark = pytest.mark.sqlite_only

T = START + dt.timedelta(days=1)
BATCH = 100


def batched(tmp_path):
    path = tmp_path / "batched.yaml"
    path.write_text(f"name: batched\nextends: {POLICIES}/lifecycle.yaml\n"
                    f"passes:\n  decay:\n    batch: {BATCH}\n")
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
    cmd = [sys.executable, "-m", "engine.cli", "run", "--db", path, "--policy", policy,
           "--pass", "decay", "--now", T.isoformat(), "--json"]
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
            mem.store.log_call(mem.namespace, "test", "m", None, 1, 1, 1.0, "ok", None)

    before, after = write_during_the_pass(article, batched(tmp_path), write)
    assert after is not None, "the write waited for the whole pass"
    # measured across processes: 0 ranges here; 4-6 (or the whole pass) with SQLite's
    # own busy handler
    assert (after - before) // BATCH <= 2, f"the pass committed {(after - before) // BATCH} " \
        "ranges while the writer waited"


def test_a_write_still_waits_only_the_store_timeout(db_path, clock):
    Store(db_path, clock).close()
    holder = sqlite3.connect(db_path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    store = Store(db_path, clock, timeout=0.2)
    try:
        with pytest.raises(sqlite3.OperationalError, match="database is locked"):
            store.log_call("default", "test", "m", None, 1, 1, 1.0, "ok", None)
        with pytest.raises(sqlite3.OperationalError, match="database is locked"):
            with store.transaction():
                pass
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    store.log_call("default", "test", "m", None, 1, 1, 1.0, "ok", None)  # free again
    assert store.model_use("default")["calls"] == 1
    store.close()


def test_a_write_waits_for_a_lock_held_a_while(db_path, clock):
    Store(db_path, clock).close()
    holder = sqlite3.connect(db_path, isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN IMMEDIATE")
    holder.execute("INSERT INTO model_calls (namespace, step, model, prompt_tokens, "
                   "completion_tokens, latency_ms, outcome, occurred_at) "
                   "VALUES ('default', 'first', 'm', 1, 1, 1.0, 'ok', 'x')")
    release = threading.Timer(0.3, lambda: holder.execute("COMMIT"))
    store = Store(db_path, clock)
    release.start()
    try:
        store.log_call("default", "second", "m", None, 1, 1, 1.0, "ok", None)
    finally:
        release.join()
        holder.close()
    assert store.model_use("default")["by_step"] == {"first": 1, "second": 1}  # in turn
    store.close()
