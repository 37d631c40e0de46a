"""The scheduler: start/stop/force_run, the lease across processes, and `lethe daemon`."""

import datetime as dt
import multiprocessing
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from engine import FixedClock, Memory, Scheduler
from engine.base.clock import iso
from engine.run.scheduler import LeaseBusy
from engine.store import open_store
from tests.helpers import POLICIES, ROOT, START, run_sql, store_of

pytestmark = pytest.mark.both_backends  # SQLite and PostgreSQL; see conftest.py

# one pass, due hourly, that writes an event per active memory (a pass run twice shows
# up as twice the events), then a second statement, so that a pass has a middle
TICKING = """name: ticking
models:
  offline: {provider: rules}
passes:
  tick:
    every: 1h
    rules:
      - {when: "status = 'active'", event: ticked}
      - {when: "status = 'active'", set: {decay_score: 1.0}}
"""


@pytest.fixture
def ticking(tmp_path, db_path):
    policy = tmp_path / "ticking.yaml"
    policy.write_text(TICKING)
    with Memory(db_path, policy=str(policy), offline=True, clock=FixedClock(START)) as mem:
        for i in range(5):
            mem.add(f"fact {i}", judged=False)
    return str(policy)


def ticked(db_path) -> int:
    with Memory(db_path, policy=f"{POLICIES}/archive.yaml") as mem:
        return run_sql(
            store_of(mem), "SELECT count(*) FROM memory_events WHERE event_type = 'ticked'"
        ).fetchone()[0]


def wait_for(condition, timeout=5.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.01)
    return False


def test_start_runs_due_passes_and_stop_returns_within_a_second(memory, clock):
    mem = memory("lifecycle")
    mem.add("User prefers tabs over spaces", judged=False)
    ticks = []
    sched = Scheduler(mem, interval=3600, on_tick=ticks.append).start()
    assert wait_for(lambda: ticks)
    assert [r.name for r in ticks[0]] == ["expiry", "decay", "compression"]
    started = time.monotonic()
    assert sched.stop() is True
    assert time.monotonic() - started < 1.0  # it was sleeping for an hour: stop woke it
    assert not sched.running
    assert not [t for t in threading.enumerate() if t.name.startswith("lethe-scheduler")]
    runs = run_sql(store_of(mem), "SELECT pass FROM pass_runs ORDER BY pass").fetchall()
    assert [r[0] for r in runs] == ["compression", "decay", "expiry"]


def test_ticks_follow_the_clock(memory, clock):
    mem = memory("lifecycle")
    ticks = []
    sched = Scheduler(mem, interval=0.02, on_tick=lambda r: ticks.append([p.name for p in r])).start()
    assert wait_for(lambda: len(ticks) >= 3)
    clock.advance(dt.timedelta(hours=1, minutes=1))
    assert wait_for(lambda: ["expiry"] in ticks)
    assert sched.stop()
    assert ticks[0] == ["expiry", "decay", "compression"]
    assert ticks[1] == ticks[2] == []  # until the clock moved, nothing was due
    assert [t for t in ticks if t] == [["expiry", "decay", "compression"], ["expiry"]]


def test_force_run_runs_every_pass_now(memory, clock):
    mem = memory("lifecycle")
    sched = Scheduler(mem)
    assert [r.name for r in sched.force_run()] == ["expiry", "decay", "compression"]
    assert mem.due() == []
    assert [r.name for r in sched.force_run(["decay"])] == ["decay"]  # due or not
    assert sched.stop()


def test_a_pass_caught_by_stop_is_rolled_back_and_runs_later(ticking, db_path):
    mem = Memory(db_path, policy=ticking, offline=True, clock=FixedClock(START))
    in_pass = threading.Event()

    class SlowScheduler(Scheduler):
        def tick(self, progress=None):  # what a long pass looks like: slow statements
            return super().tick(progress=lambda label: (in_pass.set(), time.sleep(0.4)))

    sched = SlowScheduler(mem, interval=3600).start()
    assert in_pass.wait(5)
    started = time.monotonic()
    assert sched.stop() is True
    assert time.monotonic() - started < 1.0
    assert ticked(db_path) == 0 and mem.due() == ["tick"]  # all or nothing: nothing
    assert run_sql(store_of(mem), "SELECT count(*) FROM leases").fetchone()[0] == 0
    assert [r.name for r in Scheduler(mem).force_run()] == ["tick"]
    assert ticked(db_path) == 5
    mem.close()


def test_a_held_lease_skips_the_tick_and_an_expired_one_is_taken_over(ticking, db_path):
    clock = FixedClock(START)
    mem = Memory(db_path, policy=ticking, offline=True, clock=clock)
    elsewhere = open_store(db_path, clock)
    other = elsewhere.lease("default", dt.timedelta(minutes=15), "elsewhere:1")
    assert other.acquire()
    sched = Scheduler(mem)
    assert sched.tick() is None
    with pytest.raises(LeaseBusy, match="elsewhere:1"):
        sched.force_run()
    assert ticked(db_path) == 0
    clock.advance(dt.timedelta(minutes=16))  # the holder died: its lease ran out
    assert [r.name for r in sched.tick()] == ["tick"]
    assert other.current() is None  # given back after the passes: free for anyone
    assert other.acquire()
    sched.stop()
    other.close()
    elsewhere.close()
    mem.close()


def test_a_long_pass_renews_its_lease(ticking, db_path):
    clock = FixedClock(START)
    mem = Memory(db_path, policy=ticking, offline=True, clock=clock)
    sched = Scheduler(mem, lease_ttl="15m")
    seen = []

    def an_hour_a_statement(label):  # looked at inside the pass, on the scheduler's connection
        clock.advance(dt.timedelta(hours=1))
        seen.append(run_sql(sched._own.store, "SELECT expires_at FROM leases").fetchone()[0])

    sched.tick(progress=an_hour_a_statement)
    assert seen == [
        iso(START + dt.timedelta(minutes=15)),  # taken at 09:00 for 15 minutes
        iso(START + dt.timedelta(hours=1, minutes=15)),
    ]  # renewed at 10:00
    sched.stop()
    mem.close()


def _race(db_path, policy, barrier, results):
    """One process: open the store, wait for the other, then tick with a slow pass."""
    mem = Memory(db_path, policy=policy, offline=True, clock=FixedClock(START))
    sched = Scheduler(mem)
    barrier.wait()
    ran = sched.tick(progress=lambda label: time.sleep(0.5))
    results.put(None if ran is None else [r.name for r in ran])
    sched.stop()
    mem.close()


def test_two_processes_one_pass(ticking, db_path):
    ctx = multiprocessing.get_context("fork")
    barrier, results = ctx.Barrier(2), ctx.Queue()
    procs = [ctx.Process(target=_race, args=(db_path, ticking, barrier, results)) for _ in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(20)
        assert p.exitcode == 0
    outcomes = [results.get(timeout=1), results.get(timeout=1)]
    # one ran the pass; the other found the lease taken (None), or took it afterwards and
    # found nothing due ([]), depending on who got SQLite's write lock when
    assert sorted(outcomes, key=str) in ([None, ["tick"]], [["tick"], []])
    assert ticked(db_path) == 5  # five memories, one event each: the pass ran once


def test_memory_without_a_file_is_refused(clock):
    mem = Memory(":memory:", policy=f"{POLICIES}/lifecycle.yaml", offline=True, clock=clock)
    with pytest.raises(Exception, match="needs a database file"):
        Scheduler(mem)
    mem.close()


def _daemon(db_path, *extra):
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen(
        [
            sys.executable,
            "-c",
            "from engine.cli import main; main()",
            "daemon",
            "--db",
            db_path,
            "--policy",
            f"{POLICIES}/lifecycle.yaml",
            "--offline",
            "--interval",
            "0.1",
            *extra,
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_daemon_stops_cleanly_on_a_signal(db_path, sig):
    proc = _daemon(db_path, "--json")
    try:
        first = proc.stdout.readline()  # the first tick: every pass is due on a new store
        assert '"pass": "expiry"' in first
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=3)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert "lethe daemon: stopped" in err and "Traceback" not in err


# ---- a scheduler (and `lethe daemon`) whose every tick fails gives up after 5 minutes ----
class Timer:
    """A monotonic clock that moves only when the test moves it."""

    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def refuse_leases(store, refuse: bool = True) -> None:
    """Make the database refuse every lease (a trigger), as a failing database refuses
    every write: each tick with work to do fails, every time, until it is lifted."""
    if store.dialect == "postgres":
        run_sql(
            store,
            "CREATE OR REPLACE FUNCTION refuse_lease() RETURNS trigger AS $$ BEGIN "
            "RAISE EXCEPTION 'the disk says no'; END $$ LANGUAGE plpgsql",
        )
        run_sql(store, "DROP TRIGGER IF EXISTS refuse ON leases")
        if refuse:
            run_sql(
                store,
                "CREATE TRIGGER refuse BEFORE INSERT OR UPDATE ON leases "
                "FOR EACH ROW EXECUTE FUNCTION refuse_lease()",
            )
    else:
        for op in ("INSERT", "UPDATE"):
            run_sql(store, f"DROP TRIGGER IF EXISTS refuse_{op}")
            if refuse:
                run_sql(
                    store,
                    f"CREATE TRIGGER refuse_{op} BEFORE {op} ON leases "
                    "BEGIN SELECT RAISE(ABORT, 'the disk says no'); END",
                )
    if getattr(store.db, "in_transaction", False) or store.dialect == "postgres":
        store.db.commit()


def failed_more(sched, n: int = 2) -> bool:
    """Wait until `n` more ticks have failed (so the scheduler has read the timer since)."""
    start = sched.failed_ticks
    return wait_for(lambda: sched.failed_ticks >= start + n or not sched.running)


def test_a_scheduler_whose_every_tick_fails_for_five_minutes_gives_up(memory):
    """The 5 minutes of `lethe daemon` (FAILING_FOR), read on an injected timer: at 300 s
    of failed ticks it goes on, past them its thread ends with a one-line StoreError."""
    from engine.base.errors import StoreError
    from engine.cli.agent import FAILING_FOR

    mem = memory("lifecycle")
    mem.add("User prefers tabs over spaces", judged=False)  # passes are due: a tick takes the lease
    refuse_leases(store_of(mem))
    timer = Timer()
    sched = Scheduler(mem, interval=0.01, give_up_after=FAILING_FOR, timer=timer).start()
    try:
        assert failed_more(sched, 3)
        assert sched.failing_since == 0.0 and sched.running and sched.gave_up is None
        timer.now = 300.0  # the limit itself: not yet
        assert failed_more(sched)
        assert sched.running and sched.gave_up is None
        timer.now = 301.0
        assert wait_for(lambda: not sched.running)
        assert isinstance(sched.gave_up, StoreError)
        said = str(sched.gave_up)
        assert said.startswith("every tick failed for 301s (") and "the disk says no" in said
        assert "\n" not in said
        assert sched.ticks == 0  # no tick worked meanwhile
    finally:
        sched.stop()


def test_a_tick_that_works_starts_the_five_minutes_again(memory, clock):
    from engine.cli.agent import FAILING_FOR

    mem = memory("lifecycle")
    mem.add("User prefers tabs over spaces", judged=False)
    refuse_leases(store_of(mem))
    timer = Timer()
    sched = Scheduler(mem, interval=0.01, give_up_after=FAILING_FOR, timer=timer).start()
    try:
        assert failed_more(sched)
        timer.now = 299.0
        assert failed_more(sched)
        refuse_leases(store_of(mem), refuse=False)  # the database is back
        assert wait_for(lambda: sched.ticks >= 1)
        assert sched.failing_since is None and sched.failed_ticks == 0 and sched.failing_for() == 0.0
        refuse_leases(store_of(mem))  # and fails again, with work due
        clock.advance(dt.timedelta(hours=2))
        timer.now = 400.0
        assert failed_more(sched)
        assert sched.failing_since == 400.0
        timer.now = 700.0  # 300 s since the new first failure, 401 s since the old one
        assert failed_more(sched)
        assert sched.running and sched.gave_up is None
        timer.now = 701.0
        assert wait_for(lambda: not sched.running)
        assert "failed for 301s" in str(sched.gave_up)
    finally:
        sched.stop()


def test_a_library_scheduler_never_gives_up_unless_asked(memory):
    mem = memory("lifecycle")
    mem.add("User prefers tabs over spaces", judged=False)
    refuse_leases(store_of(mem))
    timer = Timer()
    sched = Scheduler(mem, interval=0.01, timer=timer).start()
    try:
        assert failed_more(sched)
        timer.now = 10 * 86400.0
        assert failed_more(sched)
        assert sched.running and sched.gave_up is None
    finally:
        sched.stop()


def test_the_daemon_exits_2_with_one_line_when_it_gives_up(db_path, monkeypatch):
    """`lethe daemon` raises what its scheduler gave up with: exit 2 (for a supervisor to
    restart it), one line, no traceback. FAILING_FOR is made 0 here (the limit is then 3
    intervals of 0.01 s), so the test waits for a few failed ticks, not for 5 minutes."""
    from click.testing import CliRunner

    from engine.cli import agent, main

    with Memory(db_path, policy=f"{POLICIES}/lifecycle.yaml", offline=True) as mem:
        mem.add("User prefers tabs over spaces", judged=False)
        refuse_leases(store_of(mem))
    monkeypatch.setattr(agent, "FAILING_FOR", 0.0)
    result = CliRunner().invoke(main, ["daemon", "--db", db_path, "--offline", "--interval", "0.01"])
    assert result.exit_code == 2, result.output
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("error: lethe daemon: every tick failed for "), result.stderr
    assert "the disk says no" in last
    assert "Traceback" not in result.stderr
