"""Shared fixtures: a fixed clock, a fresh store on a tmp path, and a Memory factory."""
from __future__ import annotations

import datetime as dt
import os

import pytest

from engine import FixedClock, Memory
from engine.judges.openai import forget_refusals

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
POLICIES = os.path.join(ROOT, "policies")
START = dt.datetime(2026, 1, 5, 9, 0, 0)

# The scenarios that ship, by name. Tests pin these and only these: a user's own file in
# scenarios/ (where the README's experiment reads) is theirs to play, not a test's to pin.
SHIPPED_SCENARIOS = (
    "additive-and-progression", "bun-curiosity", "deadline-moved", "editor-switch",
    "poetry-to-uv", "postgres-to-mysql", "preference-in-use", "python-upgrade",
    "readability-merge", "small-talk", "standup-moved", "temporary-workaround",
    "waiting-on-alice", "scenes/agent-build",
)

# The policies that ship, by name, for the same reason: `policies/my-agent.yaml` (the
# README's "Pin your own policy") must not need a snapshot in this suite.
SHIPPED_POLICIES = ("archive", "coding-agent", "fused", "lifecycle", "lifecycle-local", "scenes",
                    "scenes-decay", "scheduled-sql")


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


@pytest.fixture
def db_path(tmp_path):
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
        mem = Memory(kw.pop("db", db_path), policy=path, namespace=namespace, offline=offline,
                     clock=clock, **kw)
        opened.append(mem)
        return mem

    yield make
    for mem in opened:
        mem.close()
