"""Shipped scenarios played under shipped policies: ids for the pairs, and each pair's
SQLite play kept for this run, so tests/test_postgres.py compares with it instead of playing it
again."""

from __future__ import annotations

import os

from engine.apps.testing import play
from tests.helpers import ROOT, shipped_policies

# a policy with a local embedding model is pinned in test_local_scenarios.py, which runs
# only where the `local` extra is installed
POLICIES_WITHOUT_LOCAL_MODEL = [p for p in shipped_policies() if not p.endswith("-local.yaml")]


def path_id(path):
    """A scenario's or policy's test id: its path from the repository, without .yaml."""
    path = getattr(path, "values", [path])[0]
    return os.path.relpath(path, ROOT).replace(os.sep, "/")[:-5]


# What each pair's play on SQLite gave in this run: test_postgres.py compares its plays on a
# server with these instead of playing each pair on SQLite a second time.
PLAYED: dict[tuple[str, str], dict] = {}


def played_on_sqlite(scenario: str, policy: str, path: str) -> dict:
    """This run's SQLite play of the pair (played at `path` when it has not been yet)."""
    if (scenario, policy) not in PLAYED:
        PLAYED[scenario, policy] = play(scenario, policy, path)
    return PLAYED[scenario, policy]
