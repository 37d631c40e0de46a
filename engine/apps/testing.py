"""A pytest plugin for policy authors: pin what a policy does to a scenario.

Installed with Lethe (entry point `pytest11`), it gives every test the fixture
`lethe_scenario`, which plays a scenario file under a policy on a fresh store, offline,
and returns a stable dump of the store to compare with syrupy's `snapshot`:

    def test_my_policy(lethe_scenario, snapshot):
        dump = lethe_scenario("scenarios/poetry-to-uv.yaml", "policies/my-agent.yaml")
        assert [c for c in dump["checks"] if not c.startswith("ok")] == []
        assert dump == snapshot

The dump lists memories in the order they were written, each as [content, fields]: the
content comes first, so a snapshot diff shows which memory changed, then its status,
rounded scores and events; database ids are replaced by the content they point at, so the
dump changes only when what the policy does changes. `checks` has one line per
expectation of the scenario ("ok   ..." or "MISS ...: what happened instead"); a run that
stopped says so there too.
"""

from __future__ import annotations

import json
import os
import re

import pytest

from engine.apps.experiment import run_one
from engine.apps.scenario import load as load_scenario
from engine.memory import Memory
from engine.policy import load as load_policy


def dump(mem: Memory, digits: int = 4) -> dict:
    """The store of one namespace as reviewable data: no ids, no wall times."""
    rows = mem.dump()
    content = {r["id"]: r["content"] for r in rows}
    memories = []
    for r in rows:
        events = r["events"]
        memories.append(
            [
                r["content"],
                {
                    "status": r["status"],
                    "kind": r["kind"],
                    "scene": r["scene"],
                    "importance": _round(r["importance"], digits),
                    "confidence": _round(r["confidence"], digits),
                    "decay_score": _round(r["decay_score"], digits),
                    "access_count": r["access_count"],
                    "created_at": r["created_at"],
                    "expires_at": r["expires_at"],
                    "superseded_by": content.get(r["contradicted_by"]),
                    "events": [
                        [e["occurred_at"], e["event_type"], _detail(e["detail"], content, digits)]
                        for e in events
                    ],
                },
            ]
        )
    scenes = mem.scenes()
    return {"memories": memories, "scenes": scenes} if scenes else {"memories": memories}


def _round(value, digits):
    return round(value, digits) if isinstance(value, float) else value


def _detail(detail, content: dict, digits: int):
    if detail is None:
        return None
    try:
        data = json.loads(detail)
    except ValueError:
        return re.sub(r"#(\d+)", lambda m: f"«{content.get(int(m.group(1)), m.group(0))[:60]}»", detail)
    return _scrub(data, content, digits)


def _scrub(value, content: dict, digits: int):
    if isinstance(value, float):
        return round(value, digits)
    if isinstance(value, dict):
        return {
            k: _scrub(v, content, digits) for k, v in value.items() if k not in ("turn",)
        }  # inbox row ids are volatile
    if isinstance(value, list):
        return [_scrub(v, content, digits) for v in value]
    return value


def play(scenario_path: str, policy: str, db_path: str, offline: bool = True) -> dict:
    """Play a scenario under a policy on a fresh store; the store's dump plus the checks."""
    run = run_one(load_scenario(scenario_path), load_policy(policy), db_path, offline)
    with Memory(db_path, policy=run.policy, offline=True) as mem:
        out = dump(mem)
    out["checks"] = [check_line(c.as_dict()) for c in run.playback.checks]
    if run.error:
        out["checks"].append(f"MISS the run stopped: {run.error}")
    return out


def check_line(check: dict) -> str:
    """One expectation as a line: "ok   what" or "MISS what: what happened instead"."""
    if check["ok"]:
        return f"ok   {check['what']}"
    return f"MISS {check['what']}" + (f": {check['detail']}" if check.get("detail") else "")


def beside(path: str, folder: str) -> str:
    """A relative file name as given when it is there from the working directory, else the
    one in `folder` (the test file's) when that is there: pytest run from a project's root
    finds the scenario and policy copied beside the test. Anything else (a policy's bare
    name, a file in neither place) is left as given."""
    path = os.fspath(path)
    if os.path.isabs(path) or os.path.exists(path):
        return path
    near = os.path.join(folder, path)
    return near if os.path.exists(near) else path


@pytest.fixture
def lethe_scenario(tmp_path, request):
    """`lethe_scenario(scenario_file, policy)` -> a stable dump of the store afterwards.
    Relative file names are found from the working directory, else beside the test file."""
    count = {"n": 0}
    folder = os.path.dirname(str(request.path))

    def run(scenario_path: str, policy: str, offline: bool = True) -> dict:
        count["n"] += 1
        return play(
            beside(scenario_path, folder),
            beside(policy, folder),
            os.path.join(tmp_path, f"scenario-{count['n']}.db"),
            offline,
        )

    return run
