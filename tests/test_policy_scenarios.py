"""Every shipped policy played through every shipped scenario, pinned with the
`lethe_scenario` fixture users get from the plugin (engine/apps/testing.py)."""

import os

import pytest
from syrupy.extensions.json import JSONSnapshotExtension

from engine.apps.testing import play
from tests.conftest import POLICIES, ROOT, shipped_policies, shipped_scenarios

SCENARIOS = shipped_scenarios()
# a policy with a local embedding model is pinned in test_local_scenarios.py, which runs
# only where the `local` extra is installed
SHIPPED = [p for p in shipped_policies() if not p.endswith("-local.yaml")]


def name(path):
    path = getattr(path, "values", [path])[0]
    return os.path.relpath(path, ROOT).replace(os.sep, "/")[:-5]


@pytest.fixture
def json_snapshot(snapshot):
    return snapshot.use_extension(JSONSnapshotExtension)


# What each pair's play on SQLite gave in this run: test_postgres.py compares its plays on a
# server with these instead of playing each pair on SQLite a second time.
PLAYED: dict[tuple[str, str], dict] = {}


def played_on_sqlite(scenario: str, policy: str, path: str) -> dict:
    """This run's SQLite play of the pair (played at `path` when it has not been yet)."""
    if (scenario, policy) not in PLAYED:
        PLAYED[scenario, policy] = play(scenario, policy, path)
    return PLAYED[scenario, policy]


@pytest.mark.parametrize("policy", SHIPPED, ids=name)
@pytest.mark.parametrize("scenario", SCENARIOS, ids=name)
def test_policy_under_scenario(lethe_scenario, json_snapshot, scenario, policy):
    dump = lethe_scenario(scenario, policy)
    assert dump == json_snapshot
    PLAYED[scenario, policy] = dump


def test_the_plugin_is_registered_through_its_entry_point(pytestconfig):
    assert pytestconfig.pluginmanager.has_plugin("lethe")


def test_the_dump_has_no_ids_and_changes_with_behaviour(lethe_scenario):
    scenario = os.path.join(ROOT, "scenarios", "postgres-to-mysql.yaml")
    lifecycle = lethe_scenario(scenario, os.path.join(POLICIES, "lifecycle.yaml"))
    archive = lethe_scenario(scenario, os.path.join(POLICIES, "archive.yaml"))
    assert lifecycle != archive
    superseded = [m for _, m in lifecycle["memories"] if m["status"] == "superseded"]
    assert superseded and all("MySQL" in m["superseded_by"] for m in superseded)
    assert "#" not in repr([e for _, m in lifecycle["memories"] for e in m["events"]])
    assert lethe_scenario(scenario, os.path.join(POLICIES, "lifecycle.yaml")) == lifecycle
