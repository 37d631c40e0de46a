"""What tests share that is not a fixture: the repository's paths, the fixed start time,
the shipped policies and scenarios, and SQL on either backend. Fixtures live in
tests/conftest.py; test modules import helpers from here, never from one another."""

from __future__ import annotations

import datetime as dt
import os

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
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


def run_sql(store, text: str, params=()):
    """Run a test's own SQL, written with `?` placeholders, on either backend's connection
    (a cursor: fetchone/fetchall). SQLite-only SQL (PRAGMA, FTS5) stays in sqlite_only tests."""
    if store.dialect == "postgres":
        text = text.replace("%", "%%").replace("?", "%s")
    return store.db.execute(text, params)


# `Memory` keeps its parts (store, plan, judges, writer) to itself: apps use its methods.
# Tests and benchmarks that check what lies behind it (their own SQL, a transaction held
# open, the steps it drives) reach them through these, and only these.
def context_of(mem):
    """Test-only: the Context behind a Memory (store, plan, judges, policy, clock)."""
    return mem._context


def store_of(mem):
    """Test-only: the store behind a Memory."""
    return mem._context.store


def writer_of(mem):
    """Test-only: the write pipeline behind a Memory."""
    return mem._writer
