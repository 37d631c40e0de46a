"""PostgreSQL under faults (issue 42, finding 3): turns a runner claimed are given back
when it stops early (tests/test_postgres_restart.py: after a server restart), and a turn
claimed by a process that was killed is taken at once by a runner on the same host."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import pytest

from engine import FixedClock, Memory
from tests.helpers import ROOT, pg_server
from tests.helpers.fake_openai import FakeOpenAI

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
