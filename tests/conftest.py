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
