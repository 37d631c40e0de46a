"""PostgreSQL under faults (issue 42, finding 3): turns a runner claimed are given back
when it stops early (tests/test_postgres_restart.py: after a server restart), and a turn
claimed by a process that was killed is taken at once by a runner on the same host."""

from __future__ import annotations

import datetime as dt
import signal
import subprocess
import sys
import threading
import time

import pytest

from engine import FixedClock, Memory, StoreError
from tests.helpers import ROOT, pg_server, store_of
from tests.helpers.fake_openai import FakeOpenAI
from tests.helpers.judge import Judge, policy_file

pytestmark = pytest.mark.skipif(not pg_server.available(), reason=pg_server.HOW_TO_ENABLE)
NOW = "2026-03-02T09:00:00"


def test_turns_claimed_by_a_round_that_met_an_outage_are_given_back(tmp_path, pg_dsn):
    """Before: retry_pending claimed up to 100 turns, stopped at the first outage and kept
    the others claimed for 5 minutes: `pending: 1 changed (4 still pending)`."""
    dsn = pg_server.fresh_schema(pg_dsn)
    down = tmp_path / "down.yaml"
    down.write_text(
        "name: down\nextends: lifecycle\nmodels:\n  cheap: {provider: openai, "
        "model: m, base_url: 'http://127.0.0.1:9/v1', timeout: 1, max_retries: 0}\n"
    )
    clock = FixedClock(NOW)
    with Memory(dsn, policy=str(down), clock=clock) as a:
        for i in range(5):
            a.remember(f"I moved project {i} to Fly.io.", "Noted.")
        assert len(a.pending()) == 5
        a.run_due()  # the model is still down: the round stops at the first turn
    with Memory(dsn, clock=clock, offline=True) as b:  # the model is back (rules)
        b.run_due()
        assert b.pending() == [], b.pending()


def test_a_turn_claimed_by_a_process_that_was_killed_is_judged_at_once(tmp_path, pg_dsn):
    """`remember` saves its turn claimed by its own process for 5 minutes, then asks the
    model. Before: an agent killed while it waited left the turn claimed for those 5
    minutes (the soak found 2 turns still pending a minute after its faults ended). Now a
    runner on the same host sees that the claimant's process is gone and takes the turn."""
    dsn = pg_server.fresh_schema(pg_dsn)
    with FakeOpenAI(delay=60) as hung:  # a model that does not answer in time
        slow = tmp_path / "slow.yaml"
        slow.write_text(
            "name: slow\nextends: lifecycle\nmodels:\n  cheap: {provider: openai, "
            f"model: m, base_url: '{hung.base_url}', timeout: 60, max_retries: 0}}\n"
        )
        agent = subprocess.Popen(
            [
                sys.executable,
                "-c",
                "import sys; from engine import Memory; "
                "Memory(sys.argv[1], policy=sys.argv[2]).remember('I moved the API to Fly.io.', 'Noted.')",
                dsn,
                str(slow),
            ],
            cwd=ROOT,
        )
        try:
            with Memory(dsn, offline=True) as watcher:
                deadline = time.monotonic() + 120
                while not watcher.pending() and time.monotonic() < deadline:
                    time.sleep(0.2)  # until the agent has saved its turn and waits on the model
                assert watcher.pending(), "the agent never saved its turn"
        finally:
            agent.send_signal(signal.SIGKILL)
            agent.wait()
    with Memory(dsn, offline=True) as runner:  # the rules judge: the model is back
        runner.run_due()
        assert runner.pending() == [], runner.pending()


def _slow_policy(tmp_path, url: str):
    policy = tmp_path / "slow.yaml"
    policy.write_text(
        "name: slow\nextends: lifecycle\nmodels:\n  cheap: {provider: openai, "
        f"model: m, base_url: '{url}', timeout: 30, max_retries: 0}}\n"
    )
    return str(policy)


def test_a_turn_whose_remember_met_a_dropped_connection_is_claimable_at_once(tmp_path, pg_dsn):
    """`remember` saves its turn claimed by its process, then judges it. Before: when the
    connection dropped meanwhile (a server restart), the call raised and the turn stayed
    claimed by a process still alive for the claim's 5 minutes: in the soak, turns still
    claimed a minute after the faults. Now whatever stops a judging gives its claim back."""
    import psycopg

    dsn = pg_server.fresh_schema(pg_dsn)
    with FakeOpenAI(delay=1.5) as slow, Memory(dsn, policy=_slow_policy(tmp_path, slow.base_url)) as agent:
        failed = []

        def remember():
            try:
                agent.remember("I moved the API to Fly.io.", "Noted.")
            except StoreError as exc:
                failed.append(exc)

        thread = threading.Thread(target=remember)
        thread.start()
        deadline = time.monotonic() + 60
        while not slow.requests and time.monotonic() < deadline:
            time.sleep(0.05)  # until the turn is saved and the model asked
        with psycopg.connect(pg_dsn, autocommit=True) as admin:  # the server drops it
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE application_name = 'lethe' AND pid <> pg_backend_pid()"
            )
        thread.join(60)
        assert failed, "the remember did not meet the drop"
        with Memory(dsn, offline=True) as runner:  # the agent lives on; a runner retries
            runner.run_due()
            assert runner.pending() == [], runner.pending()


def test_a_claim_its_holder_could_not_give_back_runs_out_within_a_minute(pg_dsn):
    """A claim whose holder is alive but could not give it back (the server was down when
    it tried) runs out a minute after it was taken. Before: 5 minutes, longer than the soak
    gives a backlog to be judged once the faults end."""
    dsn = pg_server.fresh_schema(pg_dsn)
    clock = FixedClock(NOW)
    with Memory(dsn, clock=clock, offline=True) as agent, Memory(dsn, clock=clock, offline=True) as runner:
        store_of(agent).add_turn("default", "I moved the API to Fly.io.", "Noted.")  # claimed, alive
        runner.run_due()
        assert len(runner.pending()) == 1  # claimed: not judged twice at once
        clock.advance(dt.timedelta(seconds=61))
        runner.run_due()
        assert runner.pending() == [], runner.pending()


def test_a_round_of_pending_turns_claims_only_the_turn_it_is_judging(tmp_path, pg_dsn):
    """Before: a round claimed its whole batch (up to 100 turns) for 5 minutes before
    judging the first; a round stopped where it could not give them back (the server
    restarting under it) left them all claimed. Now it claims each turn as it judges it."""
    import psycopg

    dsn = pg_server.fresh_schema(pg_dsn)
    with Memory(dsn, offline=True) as agent:
        turns = [store_of(agent).add_turn("default", f"I use tool{i} for builds.", "") for i in range(4)]
        store_of(agent).release_turns(turns)  # queued, nobody judging them
    with (
        FakeOpenAI(Judge(), delay=1.0) as slow,
        Memory(dsn, policy=policy_file(tmp_path, slow.base_url)) as runner,
    ):
        thread = threading.Thread(target=runner.run_due)
        thread.start()
        try:
            deadline = time.monotonic() + 60
            while not slow.requests and time.monotonic() < deadline:
                time.sleep(0.05)  # the round has started judging its first turn
            with psycopg.connect(dsn, autocommit=True) as db:
                claimed = db.execute("SELECT count(*) FROM inbox WHERE claimed_by IS NOT NULL").fetchone()[0]
        finally:
            thread.join(120)
        assert claimed == 1, claimed
        assert runner.pending() == []


def release_with_the_server_gone(store, turn: int) -> None:
    """The store gives `turn` back while the server is gone (every statement fails), so
    the claim stays with a holder that could not return it."""
    real = type(store).db

    class Gone:
        def execute(self, *args):
            raise StoreError("PostgreSQL dropped the connection")

    type(store).db = property(lambda self: Gone())
    try:
        store.release_turns([turn])
    finally:
        type(store).db = real


def test_a_claim_its_living_holder_could_not_give_back_is_given_back_at_its_next_call(pg_dsn):
    """A give-back that met the server down (a restart) is made by the holder's next
    inbox call that reaches the server: an agent that lives on gives its turn back at its
    next `remember`, and a runner judges it at once. Before: it ran out only after the
    claim's minute, and in the soak the daemon waited ~50 s of its minute for it."""
    dsn = pg_server.fresh_schema(pg_dsn)
    clock = FixedClock(NOW)
    with Memory(dsn, clock=clock, offline=True) as agent, Memory(dsn, clock=clock, offline=True) as runner:
        store = store_of(agent)
        turn = store.add_turn("default", "I moved the API to Fly.io.", "Noted.")  # claimed, alive
        release_with_the_server_gone(store, turn)
        store.add_turn("default", "I moved the docs to Netlify.", "Noted.")  # its next call
        runner.run_due()
        assert [t["user_text"] for t in runner.pending()] == ["I moved the docs to Netlify."], (
            runner.pending()
        )


def test_a_claim_its_holder_could_not_give_back_is_given_back_when_it_closes(pg_dsn):
    """An agent that met a restart and then stops (closes its Memory) gives back what it
    could not, instead of leaving it claimed for the rest of its minute."""
    dsn = pg_server.fresh_schema(pg_dsn)
    clock = FixedClock(NOW)
    with Memory(dsn, clock=clock, offline=True) as runner:
        agent = Memory(dsn, clock=clock, offline=True)
        store = store_of(agent)
        turn = store.add_turn("default", "I moved the API to Fly.io.", "Noted.")
        release_with_the_server_gone(store, turn)
        agent.close()
        runner.run_due()
        assert runner.pending() == [], runner.pending()
