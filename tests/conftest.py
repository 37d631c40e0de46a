"""Shared fixtures: a fixed clock, a fresh store, Memory factories and a local model server.
Plain helpers (paths, readers, scripted judges) are in tests/helpers/.

A test module marked `pytestmark = pytest.mark.both_backends` runs each of its tests that
use `db_path` (or `memory`) twice: on a SQLite file and on a fresh schema of a real
PostgreSQL server (tests/helpers/pg_server.py), unless the test is marked `sqlite_only`
(it pokes SQLite directly). Without PostgreSQL binaries the PostgreSQL half is left out, and one line
at the end of the run says so; with LETHE_REQUIRE_PG=1 (CI) that is an error instead."""

from __future__ import annotations

import os

import pytest
from syrupy.extensions.json import JSONSnapshotExtension

from engine import FixedClock, Memory
from engine.judges.openai import forget_refusals
from tests.helpers import POLICIES, START, browser, pg_server
from tests.helpers.fake_openai import FakeOpenAI
from tests.helpers.judge import policy_file


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


@pytest.fixture
def json_snapshot(snapshot):
    """syrupy's snapshot, kept as JSON."""
    return snapshot.use_extension(JSONSnapshotExtension)


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
    its Unix socket: tests/helpers/pg_server.py)."""
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


@pytest.fixture
def fake_openai():
    """A started FakeOpenAI (answers ``"{}"``); script it with ``.script(...)`` or set ``.responder``."""
    with FakeOpenAI() as fake:
        yield fake


@pytest.fixture
def lethe(tmp_path, db_path, clock):
    """lethe(base_url, **policy_options) -> a Memory on the test's database and clock whose
    models are at base_url (tests/helpers/judge.py: policy_file). `namespace=` opens another
    namespace of the same database."""
    opened = []

    def make(base_url: str, namespace: str = "default", policy: str | None = None, **kw) -> Memory:
        path = policy or policy_file(tmp_path, base_url, **kw)
        mem = Memory(db_path, policy=path, namespace=namespace, clock=clock)
        opened.append(mem)
        return mem

    yield make
    for mem in opened:
        mem.close()


@pytest.fixture
def served_mcp(memory):
    """served_mcp(namespace) -> (Memory, MCPServer): an in-process MCP server over a fresh
    store (offline, the test clock)."""
    from engine.integrations.mcp import build_server  # the mcp extra: only where it is used

    def make(namespace="default"):
        mem = memory("lifecycle", namespace=namespace)
        return mem, build_server(mem)

    return make
