"""What a PostgreSQL server refuses reaches the caller as one line (issue 42, finding 13):
a role without the right to write, a read-only server, a statement timeout while another
session holds a lock. Before, each came out as a raw psycopg exception (a
`ProgrammingError`, `InternalError`, `QueryCanceled`); now it is a StoreError (a
LetheError) saying `the database failed: ...`, and `lethe` says it in one line, exit 1,
as it does for a SQLite file that fails. It is still the psycopg error it was, so what
tells a busy server from a turn's fault still does. And a `keyed` event that is not JSON,
from before values were checked, no longer breaks every keyed read of its namespace."""

from __future__ import annotations

import subprocess
import sys
import uuid

import psycopg
import pytest

from engine import LetheError, Memory, StoreError
from tests.helpers import ROOT, pg_server, store_of

pytestmark = pytest.mark.skipif(not pg_server.available(), reason=pg_server.HOW_TO_ENABLE)


def with_settings(dsn: str, **settings) -> str:
    """The DSN with server settings added to its `options` (as a DBA's role or a replica's
    configuration would set them)."""
    more = "".join(f"%20-c{k}%3D{v}" for k, v in settings.items())
    return dsn.replace("options=-csearch_path", f"options={more[3:]}%20-csearch_path", 1)


@pytest.fixture
def store_dsn(pg_dsn):
    dsn = pg_server.fresh_schema(pg_dsn)
    with Memory(dsn, offline=True) as mem:
        mem.add("User prefers tabs.", judged=False)
    return dsn


def one_line(exc: BaseException) -> str:
    said = str(exc)
    assert "\n" not in said and said.startswith("the database failed: "), said
    assert isinstance(exc, StoreError) and isinstance(exc, LetheError)
    return said


def lethe(*args) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "engine.cli", *args], cwd=ROOT, capture_output=True, text=True, timeout=120
    )


def test_a_role_that_may_only_read_gets_one_line(store_dsn):
    role = "reader_" + uuid.uuid4().hex[:8]
    schema = store_dsn.rsplit("%3D", 1)[1]
    with psycopg.connect(store_dsn, autocommit=True) as conn:
        conn.execute(f"CREATE ROLE {role} LOGIN")
        conn.execute(f'GRANT USAGE ON SCHEMA "{schema}" TO {role}')
        conn.execute(f'GRANT SELECT ON ALL TABLES IN SCHEMA "{schema}" TO {role}')
    dsn = store_dsn.replace("lethe@", f"{role}@", 1)
    assert f"{role}@" in dsn
    with pytest.raises(StoreError) as err:
        with Memory(dsn, offline=True) as mem:
            mem.add("User likes tea.", judged=False)
    assert "permission denied" in one_line(err.value)
    assert isinstance(err.value, psycopg.ProgrammingError)  # still what psycopg said
    done = lethe("add", "User likes tea.", "--raw", "--db", dsn)
    assert done.returncode == 1, done.stderr
    assert done.stderr.startswith("error: the database failed: permission denied"), done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_a_read_only_server_gets_one_line(store_dsn):
    dsn = with_settings(store_dsn, default_transaction_read_only="on")  # as a replica answers
    with pytest.raises(StoreError) as err:
        with Memory(dsn, offline=True) as mem:
            mem.add("User likes tea.", judged=False)
    assert "read-only transaction" in one_line(err.value)
    done = lethe("add", "User likes tea.", "--raw", "--db", dsn)
    assert done.returncode == 1 and "internal error" not in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_a_statement_timeout_behind_a_lock_gets_one_line_and_stays_busy(store_dsn):
    """A timeout is still an OperationalError (the store's busy errors), so a turn it
    interrupts stays pending instead of counting as the turn's failure."""
    dsn = with_settings(store_dsn, statement_timeout="300")
    with Memory(dsn, offline=True) as mem, psycopg.connect(store_dsn) as holder:
        holder.execute("LOCK TABLE memories IN ACCESS EXCLUSIVE MODE")  # until the rollback
        with pytest.raises(StoreError) as err:
            mem.add("User likes tea.", judged=False)
        holder.rollback()
        assert "statement timeout" in one_line(err.value)
        assert isinstance(err.value, store_of(mem).busy_errors)
        assert mem.add("User likes green tea.", judged=False)  # and the next call works


def test_a_keyed_event_that_is_not_json_is_left_out_with_a_warning(store_dsn):
    """A store written before keyed values were checked (NaN in a `keyed` event): before,
    every keyed()/put() of the namespace raised `invalid input syntax for type json` on
    PostgreSQL (SQLite's json_valid already left the row out). Now the rest of the
    namespace is read, the bad key reads as having no value, and a warning names the row."""
    from engine.base.errors import StoreWarning

    with Memory(store_dsn, offline=True) as mem:
        good = mem.put("good", "User prefers dark mode.", {"theme": "dark"})
        other = mem.add("User likes tea.", judged=False)
        with store_of(mem).transaction():  # as json.dumps wrote it before the check
            store_of(mem).event(other, "keyed", '{"key": "bad", "value": NaN}')
        with pytest.warns(StoreWarning, match=f"memory #{other}: its keyed event .* is not JSON"):
            assert mem.keyed("bad") is None
        assert mem.keyed("good").memory.id == good
        mem.put("later", "User likes green tea.", {"n": 1})
        assert mem.keyed("later").value == {"n": 1}
        with pytest.warns(StoreWarning):  # the put looks the key up first
            mem.put("bad", "User scored well.", {"score": 9})
        assert mem.keyed("bad").value == {"score": 9}  # the key works again
