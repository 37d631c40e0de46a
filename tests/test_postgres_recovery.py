"""PostgreSQL under faults (issue 42, finding 3): turns a runner claimed are given back
when it stops early (tests/test_postgres_restart.py: after a server restart)."""

from __future__ import annotations

import pytest

from engine import FixedClock, Memory
from tests.helpers import pg_server

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
