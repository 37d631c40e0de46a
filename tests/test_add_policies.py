"""`Memory.add` under every shipped policy: a stored memory is given, not judged from a turn,
so steps that run after a turn's memories are stored (a scene's summary) run after it, with
the memory's own scene, and never see a turn's variables."""

import importlib.util

import pytest

from engine.base.resources import shipped_policy, shipped_policy_names
from engine.memory import Memory
from engine.policy import load

# a policy with a local embedding model needs the `local` extra (tests/test_local_model.py)
LOCAL_MODEL = importlib.util.find_spec("sentence_transformers") is not None
RUNNABLE = [n for n in shipped_policy_names() if LOCAL_MODEL or not load(shipped_policy(n)).embed]


@pytest.mark.parametrize("policy", RUNNABLE)
def test_add_stores_under_every_shipped_policy(tmp_path, policy):
    mem = Memory(str(tmp_path / "m.db"), policy=policy, offline=True)
    first = mem.add("We deploy on Fridays after the standup")
    second = mem.add("Ana prefers green tea", scene="home", importance=7)
    assert mem.get(first).status == "active"
    record = mem.get(second)
    assert (record.content, record.importance, record.scene) == ("Ana prefers green tea", 7.0, "home")


def test_add_with_a_scene_keeps_that_scene_summarised(tmp_path):
    mem = Memory(str(tmp_path / "m.db"), policy="scenes", offline=True)
    standup = mem.add("The standup moved to 10am", scene="work")
    mem.add("Retro is on Thursdays", scene="work")
    lunch = mem.add("Lunch with Ana on Sunday", scene="family")
    work = mem.get(standup).scene_summary
    assert "Retro" in work and "standup" in work and "Ana" not in work
    assert "Ana" in mem.get(lunch).scene_summary
