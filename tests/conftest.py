"""Shared fixtures: a fixed clock, a fresh store, and a Memory factory.

A test module marked `pytestmark = pytest.mark.both_backends` runs each of its tests that
use `db_path` (or `memory`) twice: on a SQLite file and on a fresh schema of a real
PostgreSQL server (tests/pg_server.py), unless the test is marked `sqlite_only` (it pokes
SQLite directly). Without PostgreSQL binaries the PostgreSQL half is left out, and one line
at the end of the run says so; with LETHE_REQUIRE_PG=1 (CI) that is an error instead."""

from __future__ import annotations

import datetime as dt
import os

import pytest

from engine import FixedClock, Memory
from engine.judges.openai import forget_refusals
from tests import browser, pg_server

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
POLICIES = os.path.join(ROOT, "policies")
START = dt.datetime(2026, 1, 5, 9, 0, 0)

# The scenarios that ship, by name. Tests pin these and only these: a user's own file in
# scenarios/ (where the README's experiment reads) is theirs to play, not a test's to pin.
SHIPPED_SCENARIOS = (
    "additive-and-progression",
    "bun-curiosity",
    "deadline-moved",
    "editor-switch",
    "poetry-to-uv",
    "postgres-to-mysql",
    "preference-in-use",
    "python-upgrade",
    "readability-merge",
    "small-talk",
    "standup-moved",
    "temporary-workaround",
    "waiting-on-alice",
    "scenes/agent-build",
)

# The policies that ship, by name, for the same reason: `policies/my-agent.yaml` (the
# README's "Pin your own policy") must not need a snapshot in this suite.
SHIPPED_POLICIES = (
    "archive",
    "coding-agent",
    "fused",
    "lifecycle",
    "lifecycle-local",
    "scenes",
    "scenes-decay",
    "scheduled-sql",
)


def shipped_policies() -> list[str]:
    """Paths of the shipped policies, sorted."""
    return sorted(os.path.join(POLICIES, n + ".yaml") for n in SHIPPED_POLICIES)


def shipped_scenarios(top_level_only: bool = False) -> list[str]:
    """Paths of the shipped scenarios, sorted; `top_level_only` leaves out scenarios/scenes/."""
    names = [n for n in SHIPPED_SCENARIOS if not (top_level_only and "/" in n)]
    return sorted(os.path.join(ROOT, "scenarios", *n.split("/")) + ".yaml" for n in names)


@pytest.fixture(autouse=True)
def _no_real_model(monkeypatch):
    # no test may reach a real endpoint with a developer's real settings
    for var in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "LETHE_DB", "LETHE_POLICY", "LETHE_NAMESPACE"):
        monkeypatch.delenv(var, raising=False)


@pytest.fixture(autouse=True)
def _fresh_model_servers():
    # what servers refused is remembered per process; a port reused by a later test's
    # fake server must not inherit it
    forget_refusals()
    yield
    forget_refusals()


@pytest.fixture
def clock():
    return FixedClock(START)


def pytest_configure(config):
    if os.environ.get("LETHE_REQUIRE_PG") and not pg_server.available():
        raise pytest.UsageError("LETHE_REQUIRE_PG is set but PostgreSQL is not: " + pg_server.HOW_TO_ENABLE)
    if os.environ.get(browser.REQUIRE) and browser.missing():
        raise pytest.UsageError(
            f"{browser.REQUIRE} is set but the inspector's browser tests "
            f"cannot run ({browser.missing()}): {browser.HOW_TO_ENABLE}"
        )


def pytest_generate_tests(metafunc):
    if "backend" not in metafunc.fixturenames or metafunc.definition.get_closest_marker("sqlite_only"):
        return
    if metafunc.definition.get_closest_marker("both_backends"):
        postgres = pytest.param("postgres", marks=pytest.mark.slow)  # the parity half
        metafunc.parametrize(
            "backend", ["sqlite", postgres] if pg_server.available() else ["sqlite"], indirect=True
        )


# Modules whose tests start processes, browsers, local models or big stores: `make
# test-quick` (-m "not slow") leaves them out, `make test` and CI run everything.
# (test_give_way and test_sqlite_wait together took 4 min 47 s at a load of 13.)
SLOW_MODULES = {
    "test_give_way",
    "test_write_races",
    "test_reliability",
    "test_soak",
    "test_local_model",
    "test_local_scenarios",
    "test_sqlite_wait",
    "test_bench_longmemeval",
    "test_inspector_browser",
}


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.module.__name__.rpartition(".")[2] in SLOW_MODULES:
            item.add_marker(pytest.mark.slow)


def pytest_terminal_summary(terminalreporter):
    if not pg_server.available():
        terminalreporter.write_line(
            "PostgreSQL: not found, the PostgreSQL half of the tests "
            "was skipped; to run it, " + pg_server.HOW_TO_ENABLE
        )
    if browser.missing():
        terminalreporter.write_line(
            f"Browser: {browser.missing()}, the inspector's browser "
            "tests were skipped; to run them, " + browser.HOW_TO_ENABLE
        )


@pytest.fixture(scope="session")
def pg_dsn():
    """A PostgreSQL server for the whole run: LETHE_TEST_PG, else one started here (over
    its Unix socket: tests/pg_server.py)."""
    if os.environ.get(pg_server.ENV_DSN):
        yield os.environ[pg_server.ENV_DSN]
        return
    if not pg_server.available():
        pytest.skip("PostgreSQL is not installed: " + pg_server.HOW_TO_ENABLE)
    server = pg_server.LocalServer()
    yield server.socket_dsn
    server.stop()


@pytest.fixture
def backend(request):
    return getattr(request, "param", "sqlite")


@pytest.fixture
def db_path(tmp_path, backend, request):
    """Where the test's store lives: a SQLite file, or a DSN to an empty PostgreSQL schema."""
    if backend == "postgres":
        return pg_server.fresh_schema(request.getfixturevalue("pg_dsn"))
    return str(tmp_path / "memory.db")


@pytest.fixture
def memory(db_path, clock):
    """A factory: memory("lifecycle") opens the shipped policy of that name, offline."""
    opened = []

    def make(policy="lifecycle", namespace="default", offline=None, **kw):
        """A policy given as a path (a test's own, pointing at the fake server) runs with its
        models; a shipped policy given by name runs offline unless told otherwise."""
        remote = policy.endswith(".yaml")
        path = policy if remote else os.path.join(POLICIES, policy + ".yaml")
        offline = (not remote) if offline is None else offline
        mem = Memory(
            kw.pop("db", db_path), policy=path, namespace=namespace, offline=offline, clock=clock, **kw
        )
        opened.append(mem)
        return mem

    yield make
    for mem in opened:
        mem.close()


def run_sql(store, text: str, params=()):
    """Run a test's own SQL, written with `?` placeholders, on either backend's connection
    (a cursor: fetchone/fetchall). SQLite-only SQL (PRAGMA, FTS5) stays in sqlite_only tests."""
    if store.dialect == "postgres":
        text = text.replace("%", "%%").replace("?", "%s")
    return store.db.execute(text, params)
