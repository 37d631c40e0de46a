"""Every shipped policy played through every shipped scenario, pinned with the
`lethe_scenario` fixture users get from the plugin (engine/apps/testing.py)."""

import os

import pytest

from tests.helpers import POLICIES, ROOT, shipped_scenarios
from tests.helpers.scenarios import PLAYED, POLICIES_WITHOUT_LOCAL_MODEL, path_id

SCENARIOS = shipped_scenarios()
SHIPPED = POLICIES_WITHOUT_LOCAL_MODEL


@pytest.mark.parametrize("policy", SHIPPED, ids=path_id)
@pytest.mark.parametrize("scenario", SCENARIOS, ids=path_id)
def test_policy_under_scenario(lethe_scenario, json_snapshot, scenario, policy):
    dump = lethe_scenario(scenario, policy)
    assert dump == json_snapshot
    PLAYED[scenario, policy] = dump


def test_the_plugin_is_registered_through_its_entry_point(pytestconfig):
    assert pytestconfig.pluginmanager.has_plugin("lethe")


def test_the_dump_has_no_ids_and_changes_with_behaviour(lethe_scenario):
    scenario = os.path.join(ROOT, "scenarios", "standup-moved.yaml")  # 10 days: played thrice
    lifecycle = lethe_scenario(scenario, os.path.join(POLICIES, "lifecycle.yaml"))
    archive = lethe_scenario(scenario, os.path.join(POLICIES, "archive.yaml"))
    assert lifecycle != archive
    superseded = [m for _, m in lifecycle["memories"] if m["status"] == "superseded"]
    assert superseded and all("10am" in m["superseded_by"] for m in superseded)
    assert "#" not in repr([e for _, m in lifecycle["memories"] for e in m["events"]])
    assert lethe_scenario(scenario, os.path.join(POLICIES, "lifecycle.yaml")) == lifecycle
