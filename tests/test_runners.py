"""Every runner takes the one pass lease, keeps it while it works and fences its commits:
N runners of any kind (schedulers, `lethe run`, `Memory.run_due()`) apply each pass once.

Issue 12, findings 1 and 2. The slow model is the fake OpenAI server on 127.0.0.1; the
clocks here are real where a lease must run out in real time, injected elsewhere.
"""

from __future__ import annotations

import datetime as dt
import shutil
import subprocess
import sys
import threading
import time

import pytest
from click.testing import CliRunner

from engine import FixedClock, Memory, Scheduler
from engine.base.errors import LeaseBusy, LeaseLost
from engine.cli import main
from engine.run.leasing import LeaseTerms, hold
from engine.store import is_dsn, open_store
from engine.store.sqlite.sqlite_lease import SqliteLease
from tests.helpers import ROOT, START, context_of, pg_server, run_sql, store_of
from tests.helpers.fake_openai import FakeOpenAI

pytestmark = pytest.mark.both_backends  # SQLite and PostgreSQL; see conftest.py

# compression asks a (slow) model, then a decay that is not idempotent: applied twice,
# a row shows 0.81 instead of 0.9
SLOW_THEN_DECAY = """name: slow-then-decay
models:
  slow: {{provider: openai, model: m-slow, base_url: "{url}", timeout: 30, max_retries: 0}}
passes:
  compression:
    every: 1h
    cluster: {{model: slow, prompt: cluster.j2,
               candidates: {{where: "status = 'active'", limit: 10, min: 2}}}}
    merge: {{model: slow, prompt: merge.j2}}
  decay:
    every: 1h
    rules:
      - {{when: "status = 'active'", set: {{decay_score: "decay_score * 0.9"}}}}
"""

# a batched, non-idempotent pass over many rows: a second runner that resumed a live run
# from its cursor would decay some rows twice
BATCHED = """name: batched
models:
  offline: {provider: rules}
passes:
  decay:
    every: 1h
    batch: 500
    rules:
      - {when: "status = 'active'", set: {decay_score: "decay_score * 0.9"}, event: decayed}
"""


def decay_scores(db_path) -> list[float]:
    with Memory(db_path, policy="archive", offline=True) as mem:
        return [
            round(r[0], 6) for r in run_sql(store_of(mem), "SELECT decay_score FROM memories ORDER BY id")
        ]


def other_lease(db_path, clock, holder: str):
    """Another runner's lease on the namespace, on a connection of its own (on a server,
    its store's lease connection: the store stays open as long as the lease is used)."""
    if is_dsn(db_path):
        return open_store(db_path, clock).lease("default", dt.timedelta(minutes=15), holder)
    return SqliteLease(db_path, "default", clock, dt.timedelta(minutes=15), holder)


def seed(db_path, policy, n: int, clock=None, texts: list[str] | None = None) -> None:
    with Memory(db_path, policy=policy, offline=True, clock=clock or FixedClock(START)) as mem:
        with store_of(mem).transaction():
            for i in range(n):
                content = texts[i] if texts else f"fact {i}"
                store_of(mem).insert_memory(
                    {"content": content, "namespace": "default", "decay_score": 1.0, "status": "active"}
                )


# one thing said three ways: a cluster the engine lets a merge judge merge ('fact 0' and
# 'fact 1' are two numbered things, which it refuses to merge before any judge is asked)
ONE_THING = ["User drinks green tea.", "User likes green tea.", "User drinks green tea daily."]


# ---- finding 1: the lease holds while its holder waits on a model ----------------------
def test_a_lease_outlives_a_model_call_longer_than_its_ttl(tmp_path, db_path):
    """Two schedulers, a 2 s lease and a model that takes 3 s: the second one finds the
    lease held all along (renewed by the first one's heartbeat), and the decay is applied
    once. Before: the lease ran out during the model call and both applied it (0.81)."""
    with FakeOpenAI(responder=lambda request: "[]", delay=3) as fake:
        policy = tmp_path / "slow.yaml"
        policy.write_text(SLOW_THEN_DECAY.format(url=fake.base_url))
        seed(db_path, str(policy), 5)
        first_mem = Memory(db_path, policy=str(policy))  # the real clock: leases run out
        second_mem = Memory(db_path, policy=str(policy))
        first = Scheduler(first_mem, lease_ttl="2s")
        second = Scheduler(second_mem, lease_ttl="2s")
        outcome = {}
        worker = threading.Thread(target=lambda: outcome.setdefault("first", first.tick()))
        worker.start()
        time.sleep(2.5)  # the first one is waiting on the cluster model, its ttl long gone
        outcome["second"] = second.tick()
        worker.join(10)
        first.stop(), second.stop()
        first_mem.close(), second_mem.close()
    assert outcome["second"] is None
    assert [r.name for r in outcome["first"]] == ["compression", "decay"]
    assert decay_scores(db_path) == [0.9] * 5


COMPRESS_THEN_DECAY = """name: compress-then-decay
models:
  offline: {provider: rules}
passes:
  compression:
    every: 1h
    cluster: {model: offline, prompt: cluster.j2, candidates: {where: "status = 'active'", limit: 10, min: 2}}
    merge: {model: offline, prompt: merge.j2}
  decay:
    every: 1h
    rules:
      - {when: "status = 'active'", set: {decay_score: "decay_score * 0.9"}}
"""


class StealDuringMerge:
    """Scripted answers: one cluster of the first two memories; while the merge model
    "thinks", another runner takes the lease over (as one that found it expired would)."""

    def __init__(self, db_path):
        self.db_path = db_path

    def take(self, step):
        if step == "cluster":
            return [[1, 2]]
        if step == "merge":
            with open_store(self.db_path) as store:
                run_sql(store, "UPDATE leases SET holder = 'thief:1'")
                store.db.commit()
            return {"content": "User drinks green tea daily.", "summary": "green tea", "tags": []}
        return None


def test_a_holder_whose_lease_was_taken_over_commits_nothing(tmp_path, db_path):
    """Fencing: the merge a runner commits after losing its lease is rolled back with
    LeaseLost, and nothing after it runs. Before: the merge and the decay were applied by
    a runner that no longer held the lease."""
    policy = tmp_path / "compress.yaml"
    policy.write_text(COMPRESS_THEN_DECAY)
    seed(db_path, str(policy), 3, texts=ONE_THING)
    mem = Memory(
        db_path, policy=str(policy), offline=True, clock=FixedClock(START), scripted=StealDuringMerge(db_path)
    )
    with pytest.raises(LeaseLost, match="another runner took over"):
        mem.run_due()
    assert mem.counts() == {"active": 3}
    assert decay_scores(db_path) == [1.0] * 3
    assert mem.due() == ["compression", "decay"]
    mem.close()


# ---- finding 2: every runner takes the same lease -----------------------------------
def test_run_due_takes_the_lease_and_says_who_holds_it(tmp_path, db_path):
    policy = tmp_path / "batched.yaml"
    policy.write_text(BATCHED)
    seed(db_path, str(policy), 10)
    clock = FixedClock(START)
    other = other_lease(db_path, clock, "daemon:42")
    assert other.acquire()
    with Memory(db_path, policy=str(policy), offline=True, clock=clock) as mem:
        with pytest.raises(
            LeaseBusy,
            match=r"another runner holds the passes of namespace "
            r"'default' until 2026-01-05T09:15:00 \(daemon:42\)",
        ):
            mem.run_due()
        with pytest.raises(LeaseBusy):
            mem.run(["decay"])
        assert decay_scores(db_path) == [1.0] * 10
        started = time.monotonic()
        threading.Timer(0.5, other.release).start()  # the daemon finishes in half a second
        assert [r.name for r in mem.run_due(wait=5)] == ["decay"]
        assert 0.4 < time.monotonic() - started < 3
    assert decay_scores(db_path) == [0.9] * 10
    other.close()


def test_an_idle_run_due_takes_no_lease(tmp_path, db_path):
    """Nothing pending and nothing due: run_due reads that without the lease (no write
    lock, no server round trips), so an idle tick neither waits on nor fails behind a
    runner holding it; once a pass is due it asks for the lease as before."""
    policy = tmp_path / "batched.yaml"
    policy.write_text(BATCHED)
    seed(db_path, str(policy), 10)
    clock = FixedClock(START)
    with Memory(db_path, policy=str(policy), offline=True, clock=clock) as mem:
        assert [r.name for r in mem.run_due()] == ["decay"]
        # another runner holds the lease until START + 1h15m
        other = other_lease(db_path, FixedClock(START + dt.timedelta(hours=1)), "daemon:42")
        assert other.acquire()
        clock.advance(dt.timedelta(minutes=10))
        assert mem.run_due() == []  # idle: not LeaseBusy
        clock.advance(dt.timedelta(minutes=55))  # decay (every 1h) is due again
        with pytest.raises(LeaseBusy):
            mem.run_due()
    other.close()


def test_pending_counts_the_turns_this_run_judged_while_others_queue_more(db_path, monkeypatch):
    """Parallel `lethe remember`s queue turns while a daemon judges the queue: the daemon
    reported `pending: -16 changed (20 still pending)`, the queue's shrinkage, which the
    new turns pushed below zero. It reports the turns it judged, never a negative."""
    from engine.run.write import Writer

    with Memory(db_path, offline=True, clock=FixedClock(START)) as mem:
        for i in range(3):
            store_of(mem).add_turn(mem.namespace, f"I use tool{i} for builds.", "")
        process = Writer.process

        def busy_neighbours(self, turn_id, **kw):  # two more turns arrive per turn judged
            for _ in range(2):
                self.ctx.store.add_turn(self.ctx.namespace, "I use make for builds.", "")
            return process(self, turn_id, **kw)

        monkeypatch.setattr(Writer, "process", busy_neighbours)
        [pending, *_] = mem.run_due()
        assert (pending.name, pending.changed, pending.notes) == ("pending", 3, ["6 still pending"])


def test_lethe_run_behind_another_runner_says_so_and_exits_0(tmp_path, db_path):
    policy = tmp_path / "batched.yaml"
    policy.write_text(BATCHED)
    seed(db_path, str(policy), 10)
    other = other_lease(db_path, FixedClock(START), "daemon:42")
    assert other.acquire()
    out = CliRunner().invoke(
        main, ["run", "--db", db_path, "--policy", str(policy), "--offline", "--now", "2026-01-05T09:00:00"]
    )
    assert out.exit_code == 0, out.output
    assert "another runner holds the passes of namespace 'default' until 2026-01-05T09:15:00" in out.output
    assert "error" not in out.output and decay_scores(db_path) == [1.0] * 10
    other.close()


def test_a_batched_run_is_resumed_only_once_its_runner_is_gone(tmp_path, db_path):
    """A live batched run's cursor is not "interrupted": a second runner waits for the
    lease (or gives up) instead of resuming it; once the first is gone, it finishes it."""
    clock = FixedClock(START)
    policy = tmp_path / "batched.yaml"
    policy.write_text(BATCHED)
    seed(db_path, str(policy), 2000)
    first = Memory(db_path, policy=str(policy), offline=True, clock=clock)
    second = Memory(db_path, policy=str(policy), offline=True, clock=clock)
    seen = []

    def meanwhile(label):  # inside the first run, between batches: the second one tries
        seen.append(label)
        if len(seen) == 2:
            with pytest.raises(LeaseBusy):
                second.run_due()

    first.run_due(progress=meanwhile)
    assert decay_scores(db_path) == [0.9] * 2000
    assert second.run_due() == []  # done, and recorded: nothing due
    # a runner that died mid-run: its lease runs out, then the next runner resumes
    with hold(context_of(first), LeaseTerms(holder="dead:1")) as held:
        held.store.save_progress("default", "decay", 1001, "2026-01-05T10:00:00", 0)
    clock.advance(dt.timedelta(hours=1))
    [result] = second.run_due()
    assert result.notes == ["resumed an interrupted run"]
    scores = decay_scores(db_path)
    assert scores.count(0.81) == 1000 and scores.count(0.9) == 1000  # ids 1001.. once more
    first.close(), second.close()


def _runs(db_path, policy, how: str, n: int) -> list[subprocess.Popen]:
    if how == "cli":
        argv = [
            sys.executable,
            "-m",
            "engine.cli",
            "run",
            "--db",
            db_path,
            "--policy",
            policy,
            "--offline",
            "--now",
            "2026-01-05T10:00:00",
            "--wait",
            "60",
        ]
    else:
        code = (
            "import sys; from engine import Memory, FixedClock; "
            "m = Memory(sys.argv[1], policy=sys.argv[2], offline=True, "
            "clock=FixedClock('2026-01-05T10:00:00')); m.run_due(wait=60); m.close()"
        )
        argv = [sys.executable, "-c", code, db_path, policy]
    return [
        subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(n)
    ]


@pytest.fixture(scope="module")
def batched_20k(tmp_path_factory):
    """The batched policy's file and, per backend, a store seeded with 20,000 active rows
    once: a test gets a copy (a file copied, a database made from a template)."""
    base = tmp_path_factory.mktemp("batched-20k")
    policy = base / "batched.yaml"
    policy.write_text(BATCHED)
    sqlite = str(base / "seeded.db")
    seed(sqlite, str(policy), 20_000)
    return str(policy), sqlite, {}


@pytest.fixture
def seeded_20k(batched_20k, backend, tmp_path, request):
    """A copy of the seeded store on the test's backend, and the policy's file."""
    policy, sqlite, templates = batched_20k
    if backend == "postgres":
        if "pg" not in templates:
            templates["pg"] = pg_server.Template(
                request.getfixturevalue("pg_dsn"), lambda dsn: seed(dsn, policy, 20_000)
            )
        return templates["pg"].copy(), policy
    path = str(tmp_path / "memory.db")
    shutil.copyfile(sqlite, path)
    return path, policy


@pytest.mark.parametrize("how", ["cli", "api"])
def test_runners_in_separate_processes_apply_a_batched_pass_once(seeded_20k, how):
    """Three `lethe run`s (or three processes calling run_due) at once on a batched x0.9
    decay: each row decays once. Before: some rows decayed twice or three times."""
    db_path, policy = seeded_20k
    procs = _runs(db_path, policy, how, 3)
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
    assert set(decay_scores(db_path)) == {0.9}
