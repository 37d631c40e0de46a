"""A pass of one transaction gives way to a writer: a `remember` or `add` that finds the
write lock held by a decay pass no longer waits for the whole pass (4 s at 1M memories).
The pass rolls back and runs again in ranges, with the same results, each row done once.

The pass runs in `lethe run`, another process, as a scheduler would; the writer here."""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time

import pytest

from bench import seed_article
from engine import FixedClock, Memory, PolicyError, load_policy
from engine.run import leasing
from engine.store import Store
from engine.store.sqlite import sqlite_wait
from engine.store.sqlite.sqlite_wait import Waiters
from tests.helpers import ROOT, START, context_of, store_of

pytestmark = pytest.mark.sqlite_only

T = START + dt.timedelta(days=1)
ROWS = 200_000  # a pass in ranges here outlasts passes.QUIET_SECONDS, with room
NOTE = "gave way to a waiting writer: ran in ranges"
AT_ONCE = "no writer waited: ran the rest in one transaction"


@pytest.fixture(scope="module")
def adopted(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("give-way") / "adopted.db")
    seed_article.generate(path, ROWS, START, seed=11)
    Store(path).close()
    return path


@pytest.fixture(scope="module")
def by_itself(adopted, tmp_path_factory):
    """The adopted file after expiry and decay at T with nobody else at work, read once for
    the tests that compare a pass a writer met with it: its results, rows and recall index."""
    path = str(tmp_path_factory.mktemp("alone") / "alone.db")
    shutil.copy(adopted, path)
    with Memory(path, clock=FixedClock(T), offline=True) as mem:
        results = [r.as_dict() for r in mem.run(["expiry", "decay"])]
    return {"results": results, "rows": rows(path), "recall_index": recall_index(path)}


@pytest.fixture
def copies(adopted, tmp_path):
    """Two copies of the adopted file: one for the pass a writer meets, one for the same
    pass alone."""
    out = []
    for name in ("met.db", "alone.db"):
        shutil.copy(adopted, tmp_path / name)
        out.append(str(tmp_path / name))
    return out


def pass_command(path, policy="lifecycle") -> list[str]:
    return [
        sys.executable,
        "-m",
        "engine.cli",
        "run",
        "--db",
        path,
        "--pass",
        "expiry",
        "--pass",
        "decay",
        "--now",
        T.isoformat(),
        "--json",
        "--policy",
        policy,
    ]


def start_pass(path, policy="lifecycle"):
    return subprocess.Popen(
        pass_command(path, policy), cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def held(path) -> bool:
    """Whether another connection holds the write lock now and 30 ms later (the pass's
    transaction, not the lease's one-statement writes)."""
    db = sqlite3.connect(path, timeout=0, isolation_level=None)
    try:
        for _ in range(2):
            try:
                db.execute("BEGIN IMMEDIATE")
            except sqlite3.OperationalError:
                time.sleep(0.03)
                continue
            db.execute("ROLLBACK")
            return False
        return True
    finally:
        db.close()


def wait_until_held(path, passing) -> None:
    while not held(path):
        assert passing.poll() is None, passing.communicate()
        time.sleep(0.002)


def in_ranges(path, name: str | None = None) -> bool:
    """Whether a pass (or the one named) is part way through a run in ranges (its cursor
    is saved)."""
    db = sqlite3.connect(path, timeout=30)
    try:
        return (
            db.execute(
                "SELECT count(*) FROM pass_progress WHERE pass = coalesce(?, pass)", (name,)
            ).fetchone()[0]
            > 0
        )
    finally:
        db.close()


def decayed(path) -> bool:
    """Whether the decay pass's run at T is recorded (it has all landed)."""
    db = sqlite3.connect(path, timeout=30)
    try:
        return (
            db.execute(
                "SELECT count(*) FROM pass_runs WHERE pass = 'decay' AND last_run_at = ?", (T.isoformat(),)
            ).fetchone()[0]
            > 0
        )
    finally:
        db.close()


def rows(path, skip=()) -> tuple[list, list]:
    """Every memory's status, score and rank; every event the passes wrote, as written."""
    db = sqlite3.connect(path)
    try:
        memories = db.execute("SELECT id, status, decay_score, rank FROM memories ORDER BY id").fetchall()
        events = db.execute(
            "SELECT memory_id, event_type, detail, occurred_at FROM "
            "memory_events WHERE event_type IN ('archived', 'expired') "
            "ORDER BY memory_id, event_type, detail"
        ).fetchall()
    finally:
        db.close()
    return ([r for r in memories if r[0] not in skip], [e for e in events if e[0] not in skip])


def first_memories(adopted, tmp_path, n: int) -> str:
    """A copy of the adopted file with its first `n` memories only."""
    small = str(tmp_path / "small.db")
    shutil.copy(adopted, small)
    db = sqlite3.connect(small)
    db.execute("DELETE FROM memory_events WHERE memory_id > ?", (n,))
    db.execute("DELETE FROM memories WHERE id > ?", (n,))
    db.commit()
    db.close()
    return small


def once_each(events) -> bool:
    return len({(m, kind) for m, kind, _, _ in events}) == len(events) > 0


def alone(path) -> list[dict]:
    done = subprocess.run(pass_command(path), cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.parametrize("call", ["add", "remember"])
def test_a_writer_meeting_a_pass_does_not_wait_for_all_of_it(copies, tmp_path, call):
    met, by_itself = copies
    # the call's first use in this process (its judges, their word lists) is made before
    # the pass starts: it would otherwise outlast the pass, and the writer never meet it
    with Memory(str(tmp_path / "warm.db"), clock=lambda: T, offline=True) as warm:
        warm.add("We deploy on Mondays.") if call == "add" else warm.remember("Hi.", "Hello.")
    with Memory(met, clock=lambda: T, offline=True) as mem:
        passing = start_pass(met)
        try:
            wait_until_held(met, passing)
            if call == "add":
                written = [mem.add("We deploy on Fridays.", importance=6)]
            else:
                written = list(mem.remember("We moved the deploys to Fridays.", "Noted."))
            # it returned before the pass had landed
            landed = decayed(met)
        finally:
            out, err = passing.communicate(timeout=300)
    assert passing.returncode == 0, err
    assert not landed, "the writer waited for the whole pass"
    assert written and all(isinstance(i, int) for i in written)
    results = json.loads(out)
    assert [NOTE in r["notes"] for r in results] == [True, True]
    # the writer came once: what was left of decay then ran in one transaction again
    assert [AT_ONCE in r["notes"] for r in results if r["pass"] == "decay"] == [True]

    expected = alone(by_itself)
    assert [NOTE in r["notes"] for r in expected] == [False, False]
    for got, want in zip(results, expected):
        assert (got["pass"], got["events"], got["skipped"]) == (want["pass"], want["events"], want["skipped"])
        # what its transaction saw, not the memories written after it gave way
        assert got["changed"] == want["changed"]
    # every row as the pass alone left it, each archived or expired memory with one event
    got_rows, got_events = rows(met, skip=written)
    want_rows, want_events = rows(by_itself)
    assert got_rows == want_rows
    assert got_events == want_events and once_each(got_events)
    assert not in_ranges(met)


def test_a_pass_that_gave_way_and_died_is_finished_once(copies):
    """Killed while decay runs in ranges, the next run finishes it from its cursor, with
    the time it started with and up to the ids it saw: no row passed over, none done
    twice, none written since passed."""
    met, by_itself = copies
    with Memory(met, clock=lambda: T, offline=True) as mem:
        passing = start_pass(met)
        try:
            wait_until_held(met, passing)
            added = [mem.add("We deploy on Fridays.", importance=6)]
            deadline = time.monotonic() + 60
            while not in_ranges(met, "decay"):  # expiry's ranges done, decay's under way
                assert time.monotonic() < deadline and passing.poll() is None, "the pass never ran in ranges"
                # a writer keeps coming, so the pass keeps to ranges however slowly this
                # loop runs (once none waits for a while it would finish in one transaction)
                added.append(mem.add(f"We deploy on day {len(added)}.", importance=6))
                time.sleep(0.001)
            time.sleep(0.05)
        finally:
            passing.send_signal(signal.SIGKILL)
            passing.communicate(timeout=60)
    with Memory(met, clock=lambda: T, offline=True) as mem:  # written after the crash
        later = mem.add("We deploy on Mondays now.", importance=6, judged=False)
    finished = alone(met)
    assert any("resumed an interrupted run" in r["notes"] for r in finished)
    # nobody waits: the resumed run does the rest in one transaction
    assert [AT_ONCE in r["notes"] for r in finished if r["pass"] == "decay"] == [True]
    expected = alone(by_itself)
    # it stops where it was to stop when it began: the memory written since is not passed
    assert [r["changed"] for r in finished if r["pass"] == "decay"] == [
        r["changed"] for r in expected if r["pass"] == "decay"
    ]
    got_rows, got_events = rows(met, skip=(*added, later))
    want_rows, want_events = rows(by_itself)
    assert got_rows == want_rows
    assert got_events == want_events and once_each(got_events)


def test_a_recall_does_not_make_a_pass_give_way(copies):
    """A recall never waits (its access is kept for later): the pass stays one transaction."""
    met, _ = copies
    with Memory(met, clock=lambda: T, offline=True) as mem:
        passing = start_pass(met)
        try:
            wait_until_held(met, passing)
            mem.recall("deploys")
        finally:
            out, err = passing.communicate(timeout=300)
    assert passing.returncode == 0, err
    assert [NOTE in r["notes"] for r in json.loads(out)] == [False, False]


def test_the_waiters_file_is_never_followed_through_a_link(tmp_path):
    target = tmp_path / "elsewhere"
    path = str(tmp_path / "m.db")
    os.symlink(target, path + "-lethe-waiters")
    blocker = sqlite3.connect(path, isolation_level=None)
    with Memory(path, offline=True) as mem:
        blocker.execute("BEGIN IMMEDIATE")
        try:
            store_of(mem).timeout = store_of(mem).db.wait = 0.1
            with pytest.raises(sqlite3.OperationalError):
                mem.add("We deploy on Fridays.", judged=False)
        finally:
            blocker.execute("ROLLBACK")
    assert not target.exists()


def test_an_atomic_pass_stays_one_transaction(copies, tmp_path):
    """`atomic: true`: the writer waits for the whole pass, as before."""
    met, _ = copies
    policy = tmp_path / "atomic.yaml"
    policy.write_text("name: atomic\nextends: lifecycle\npasses:\n  decay: {atomic: true}\n")
    with Memory(met, policy=str(policy), clock=lambda: T, offline=True) as mem:
        passing = start_pass(met, str(policy))
        try:
            wait_until_held(met, passing)
            mem.add("We deploy on Fridays.", importance=6)
            landed = decayed(met)
        finally:
            out, err = passing.communicate(timeout=300)
    assert passing.returncode == 0, err
    assert landed
    assert [NOTE in r["notes"] for r in json.loads(out)] == [False, False]


@pytest.mark.parametrize(
    "decay, says",
    [
        ("{atomic: true, batch: 100}", "cannot be atomic too"),
        ("{atomic: 1}", "must be true or false, got 1"),
        ("{atomic: 'yes'}", "must be true or false, got 'yes'"),
    ],
)
def test_atomic_is_true_or_false_and_never_batched(tmp_path, decay, says):
    policy = tmp_path / "p.yaml"
    policy.write_text(f"name: p\nextends: lifecycle\npasses:\n  decay: {decay}\n")
    with pytest.raises(PolicyError, match=says):
        load_policy(str(policy))


@pytest.mark.parametrize("every", [1, 3, 40, 700, 9_000, 10**9])  # 10**9: the last look
def test_giving_way_wherever_the_interrupt_lands_gives_the_same_rows(adopted, tmp_path, monkeypatch, every):
    """In process, with a writer always waiting and the pass looking every `every` steps,
    the interrupt lands in the first statement or any later one (a count, the events, an
    update, the index rebuild), or (never looking during a statement) the look after the
    last one finds the writer: the pass rolls back and runs in ranges, with the rows and
    events of the pass alone. Its BEGIN and COMMIT are never interrupted."""
    small = first_memories(adopted, tmp_path, 3000)
    alone_copy = str(tmp_path / "alone.db")
    shutil.copy(small, alone_copy)
    with Memory(alone_copy, clock=FixedClock(T), offline=True) as mem:
        want = [r.as_dict() for r in mem.run(["expiry", "decay"])]
    monkeypatch.setattr(sqlite_wait, "LOOK_EVERY", every)
    # the in-statement looks alone, but for the one that never looks during a statement
    monkeypatch.setattr(sqlite_wait, "LAST_LOOK", every == 10**9)
    monkeypatch.setattr(Waiters, "anyone", lambda self: True)
    with Memory(small, clock=FixedClock(T), offline=True) as mem:
        got = [r.as_dict() for r in mem.run(["expiry", "decay"])]
    assert [NOTE in r["notes"] for r in got] == [True, True]
    for g, w in zip(got, want):
        assert (g["changed"], g["events"], g["skipped"]) == (w["changed"], w["events"], w["skipped"])
    assert rows(small) == rows(alone_copy) and once_each(rows(small)[1])
    assert not in_ranges(small)


def test_only_a_writer_that_needs_its_write_says_it_waits(tmp_path):
    """A pass waiting for the lock (another namespace's, in the same file), or a runner's
    commit under its lease, does not make the pass holding it give way; a writer does."""
    path = str(tmp_path / "m.db")
    said, done = {}, []
    with (
        Memory(path, offline=True) as mem,
        Memory(path, offline=True) as other,
        leasing.hold(context_of(mem)) as held,
    ):  # a runner's commits are fenced
        blocker = sqlite3.connect(path, isolation_level=None)
        try:
            for kind, begin_one in (
                ("pass", lambda: store_of(mem).transaction(exclusive=True)),
                ("runner", held.transaction),
                ("writer", store_of(other).transaction),
            ):

                def begin(begin_one=begin_one, kind=kind):
                    with begin_one():
                        done.append(kind)

                blocker.execute("BEGIN IMMEDIATE")
                waiter = threading.Thread(target=begin)
                waiter.start()
                time.sleep(0.1)
                said[kind] = Waiters(path).anyone()
                assert waiter.is_alive() and kind not in done  # it was still waiting
                blocker.execute("ROLLBACK")
                waiter.join(10)
                assert not waiter.is_alive() and done[-1] == kind
        finally:
            if blocker.in_transaction:
                blocker.execute("ROLLBACK")
            blocker.close()
    assert said == {"pass": False, "runner": False, "writer": True}


def test_the_waiters_file_is_the_one_beside_the_real_file(tmp_path):
    real = tmp_path / "data" / "m.db"
    real.parent.mkdir()
    (tmp_path / "link.db").symlink_to(real)
    assert Waiters(str(tmp_path / "link.db")).path == str(real) + "-lethe-waiters"


def test_a_fifo_in_place_of_the_waiters_file_never_blocks(tmp_path):
    """Opening a FIFO for reading blocks until a writer comes: inside a pass's progress
    handler that would hold the write lock for ever."""
    path = str(tmp_path / "m.db")
    os.mkfifo(path + "-lethe-waiters")
    waiters, said = Waiters(path), []
    looking = threading.Thread(target=lambda: said.extend([waiters.waiting(), waiters.anyone()]), daemon=True)
    looking.start()
    looking.join(5)
    if looking.is_alive():  # let it go: open the FIFO's other end
        os.close(os.open(path + "-lethe-waiters", os.O_WRONLY | os.O_NONBLOCK))
        pytest.fail("the waiters file blocked on a FIFO")
    assert said == [False, False]


def test_a_pass_without_rules_never_gives_way(tmp_path, monkeypatch):
    """Compression's part before its merges has no rules to run in ranges: a writer
    waiting at its end once sent it looking for ranged statements it does not have."""
    path = str(tmp_path / "m.db")
    with Memory(path, clock=FixedClock(T), offline=True) as mem:
        for fact in (
            "We use uv.",
            "We use uv for Python.",
            "Deploys are on Fridays.",
            "The API is owned by Alice.",
            "Logs go to Loki.",
        ):
            mem.add(fact, judged=False)
        monkeypatch.setattr(Waiters, "anyone", lambda self: True)
        results = mem.run(["compression"])
    assert [r.name for r in results] == ["compression"]
    assert all(NOTE not in n for r in results for n in r.notes)


class Tries:
    """Each pass's tries at the rest in one transaction (engine.run.passes._rest_at_once), and
    whether each landed; installs `Waiters.anyone`, which says a writer waits in the
    pass's first transaction and whenever `during_try(name, attempt, statement)` says so
    (`statement`: the SQL running on the pass's connection at that look)."""

    def __init__(self, monkeypatch, during_try, between_ranges=False):
        from engine.run import passes

        self.outcomes: dict[str, list[bool]] = {}
        self.interrupted: list[str] = []  # the statement running when a try gave way
        self.started: dict[str, float] = {}
        self.trying, self.ranges, self.statement = None, False, [""]
        rest_at_once, run_batched = passes._rest_at_once, passes.run_batched

        def counted(ctx, name, *args):
            self.trying = (name, len(self.outcomes.setdefault(name, [])) + 1)
            try:
                landed = rest_at_once(ctx, name, *args)
            finally:
                self.trying = None
            self.outcomes[name].append(landed)
            return landed

        def batched(ctx, name, *args, **kw):
            self.ranges = True
            self.started[name] = time.monotonic()
            return run_batched(ctx, name, *args, **kw)

        def anyone(waiters):
            if not self.ranges:
                return True  # the pass's first transaction gives way
            if self.trying is None:
                return between_ranges
            if during_try(*self.trying, self.statement[0]):
                self.interrupted.append(self.statement[0])
                return True
            return False

        monkeypatch.setattr(passes, "_rest_at_once", counted)
        monkeypatch.setattr(passes, "run_batched", batched)
        monkeypatch.setattr(Waiters, "anyone", anyone)

    def saw(self, sql: str) -> None:
        self.statement[0] = " ".join(sql.split())  # one line, as `where` is written


def recall_index(path: str) -> str:
    conn = sqlite3.connect(path)
    try:
        return conn.execute("SELECT sql FROM sqlite_master WHERE name = 'memories_recall'").fetchone()[0]
    finally:
        conn.close()


@pytest.mark.parametrize(
    "every, where",
    [
        (100, "SELECT count(*) FROM memory_rows AS memories"),  # the rest's reach
        (100, 'UPDATE memory_rows AS memories SET ("decay_score"'),  # its decay
        (100, "INSERT INTO memory_events"),  # the archive events
        (100, 'UPDATE memory_rows AS memories SET "status"'),  # its archive
        (10**9, "INSERT INTO pass_runs"),  # only the look after its last statement
    ],
)
def test_the_rest_run_at_once_gives_way_again_to_a_writer(
    adopted, by_itself, tmp_path, monkeypatch, every, where
):
    """A pass in ranges runs the rest in one transaction once no writer waits; a writer
    that comes then (the interrupt landing in each of its statements in turn, or after
    the last) makes it roll back and go on in ranges, and the next try finishes it: the
    rows and events of the pass alone, each once, its run recorded once. Recall's index
    holds only the head of the ranking at this size (engine.store.sqlite.recall_head): the rest, most
    of the file, leaves it in place instead of rebuilding it, and it ends as the pass
    alone left it."""
    from engine.run import passes

    met = str(tmp_path / "met.db")
    shutil.copy(adopted, met)
    want = by_itself["results"]
    tries = Tries(
        monkeypatch, lambda name, attempt, sql: name == "decay" and attempt == 1 and sql.startswith(where)
    )
    monkeypatch.setattr(passes, "QUIET_SECONDS", 0.05)
    monkeypatch.setattr(sqlite_wait, "LOOK_EVERY", every)
    built = []

    def seen(sql):
        tries.saw(sql)
        if sql.startswith("CREATE INDEX memories_recall") and tries.trying == ("decay", 2):
            built.append(sql)

    with Memory(met, clock=FixedClock(T), offline=True) as mem:
        store_of(mem).db.set_trace_callback(seen)
        got = [r.as_dict() for r in mem.run(["expiry", "decay"])]
        runs = store_of(mem).db.execute("SELECT pass, last_run_at FROM pass_runs ORDER BY pass").fetchall()
    assert tries.outcomes["decay"] == [False, True], tries.outcomes
    assert tries.interrupted and all(s.startswith(where) for s in tries.interrupted)
    assert tries.outcomes.get("expiry", []) in ([], [True])  # ranges alone may finish it
    assert [(NOTE in r["notes"], AT_ONCE in r["notes"]) for r in got] == [
        (True, bool(tries.outcomes.get("expiry"))),
        (True, True),
    ]
    for g, w in zip(got, want):
        assert (g["changed"], g["events"], g["skipped"]) == (w["changed"], w["events"], w["skipped"])
    done = rows(met)
    assert done == by_itself["rows"] and once_each(done[1])
    assert [tuple(r) for r in runs] == [("decay", T.isoformat()), ("expiry", T.isoformat())]
    assert not in_ranges(met)
    assert not built, "the rest rebuilt recall's index, which holds only the head"
    assert recall_index(met) == by_itself["recall_index"] and "rank >= " in recall_index(met)


def test_a_writer_at_every_range_keeps_the_pass_in_ranges(adopted, tmp_path, monkeypatch):
    """While writers keep waiting between its ranges, a pass that gave way never tries the
    rest in one transaction."""
    from engine.run import passes

    small = first_memories(adopted, tmp_path, 30_000)  # a second or so in ranges
    tries = Tries(monkeypatch, lambda *_: True, between_ranges=True)
    monkeypatch.setattr(passes, "QUIET_SECONDS", 0.05)  # ranges and the ways made between
    with Memory(small, clock=FixedClock(T), offline=True) as mem:
        got = [r.as_dict() for r in mem.run(["expiry", "decay"])]
    assert tries.outcomes == {} and tries.ranges
    assert [(NOTE in r["notes"], AT_ONCE in r["notes"]) for r in got] == [(True, False)] * 2


def test_each_try_that_gives_way_again_doubles_the_quiet(adopted, by_itself, tmp_path, monkeypatch):
    """A writer that comes at every try (never between ranges): the pass tries again only
    after twice the quiet each time, so a few times in all, and ends in ranges with the
    rows of the pass alone."""
    from engine.run import passes

    met = str(tmp_path / "met.db")
    shutil.copy(adopted, met)
    tries = Tries(monkeypatch, lambda *_: True)
    monkeypatch.setattr(passes, "QUIET_SECONDS", 0.01)
    with Memory(met, clock=FixedClock(T), offline=True) as mem:
        got = [r.as_dict() for r in mem.run(["expiry", "decay"])]
    took = time.monotonic() - tries.started["decay"]
    decay = tries.outcomes["decay"]
    assert decay and not any(decay)
    # tries at 0.01, 0.03, 0.07 ... s: at most log2(took / 0.01) + 1 of them
    assert len(decay) <= math.log2(took / 0.01) + 1, (len(decay), took)
    assert [AT_ONCE in r["notes"] for r in got] == [False, False]
    assert rows(met) == by_itself["rows"] and not in_ranges(met)
