"""The shipped policies with a local embedding model (lifecycle-local) played through
every shipped scenario and the recall store, like test_policy_scenarios.py and
test_recall.py do for the others. A module of its own so that, without the `local` extra,
it is skipped in one line and its snapshots are not reported unused."""

import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the model ships in a package: no hub, ever
pytest.importorskip("sentence_transformers", reason="the local extra is not installed")


from tests.helpers import shipped_policies, shipped_scenarios
from tests.helpers.recall import QUERIES, seed_store, stable
from tests.helpers.scenarios import path_id

LOCAL = [p for p in shipped_policies() if p.endswith("-local.yaml")]


@pytest.mark.parametrize("policy", LOCAL, ids=path_id)
@pytest.mark.parametrize("scenario", shipped_scenarios(), ids=path_id)
def test_local_policy_under_scenario(lethe_scenario, json_snapshot, scenario, policy):
    assert lethe_scenario(scenario, policy) == json_snapshot


@pytest.mark.parametrize("policy", [os.path.basename(p)[:-5] for p in LOCAL])
def test_local_recall_order_and_filtering(policy, memory, clock, json_snapshot):
    mem = memory(policy)
    seed_store(mem, clock)
    seen = {}
    for query in QUERIES:
        ex = mem.explain(query).as_dict()
        got = mem.recall(query)
        assert [m.id for m in got] == ex["chosen"], "explain shows what recall returns"
        seen[query] = {"explain": stable(ex), "recalled": [m.content for m in got]}
    assert seen == json_snapshot
