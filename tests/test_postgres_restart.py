"""PostgreSQL restarts (issue 42, finding 4): a long-lived Memory, Scheduler or daemon goes
on after the server restarts; the call that met the drop gets a one-line StoreError."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from engine import Memory, StoreError
from engine.run.scheduler import Scheduler
from tests.helpers import ROOT, pg_server

pytestmark = pytest.mark.skipif(not pg_server.available(), reason=pg_server.HOW_TO_ENABLE)


def _server():
    if os.environ.get(pg_server.ENV_DSN):
        pytest.skip("restarts need a server of the test's own")
    return pg_server.LocalServer()


def test_a_long_lived_memory_goes_on_after_the_server_restarts(tmp_path):
    """Before: every call raised `psycopg.OperationalError: the connection is closed`, for
    ever. Now the call that met the drop gets a one-line StoreError and the next works."""
    server = _server()
    try:
        dsn = pg_server.fresh_schema(server.socket_dsn)
        with Memory(dsn, offline=True) as mem:
            first = mem.add("User prefers tabs.", judged=False)
            scheduler = Scheduler(mem)
            server.restart()
            errors = []
            for attempt in range(5):  # each connection (the Memory's, the scheduler's own,
                try:  # its lease's) meets the drop once
                    mem.add(f"User likes tea {attempt}.", judged=False)
                    assert mem.get(first).content == "User prefers tabs."
                    assert [r.content for r in mem.recall("tea")]
                    scheduler.tick()
                    break
                except StoreError as exc:
                    errors.append(str(exc))
            else:
                pytest.fail(f"still failing after the restart: {errors}")
            assert len(errors) <= 3 and all("\n" not in e for e in errors), errors
            server.restart()
            for _ in range(4):
                try:
                    scheduler.tick()
                    break
                except StoreError as exc:
                    assert "\n" not in str(exc)
            else:
                pytest.fail("the scheduler never recovered")
            scheduler.close()
    finally:
        server.stop()


def test_the_daemon_goes_on_after_the_server_restarts(tmp_path):
    """Before: the daemon printed 19 tracebacks in 30 s and ran no pass, for ever. Now a
    failed tick is one line, and a turn left pending after the restart is judged."""
    server = _server()
    try:
        dsn = pg_server.fresh_schema(server.socket_dsn)
        with Memory(dsn, offline=True) as mem:
            mem.add("User prefers tabs.", judged=False)
        proc = subprocess.Popen(
            [sys.executable, "-m", "engine.cli", "daemon", "--db", dsn, "--offline", "--interval", "0.5"],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            time.sleep(3)
            server.restart()
            time.sleep(2)
            down = tmp_path / "down.yaml"
            down.write_text(
                "name: down\nextends: lifecycle\nmodels:\n  cheap: {provider: "
                "openai, model: m, base_url: 'http://127.0.0.1:9/v1', timeout: 1, "
                "max_retries: 0}\n"
            )
            with Memory(dsn, policy=str(down)) as mem:
                mem.remember("I moved the API to Fly.io.", "Noted.")
                assert len(mem.pending()) == 1
                deadline = time.monotonic() + 30
                while mem.pending() and time.monotonic() < deadline:
                    time.sleep(0.5)
                assert mem.pending() == [], "the daemon judged nothing after the restart"
            assert proc.poll() is None
        finally:
            proc.terminate()
            out, err = proc.communicate(timeout=30)
        assert "Traceback" not in err, err
    finally:
        server.stop()
