"""What a caller gives is never dropped, and what recall records lands on live memories
(issue 12, findings 3 and 4)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from engine import FixedClock, Memory
from engine.cli import main
from tests.helpers import POLICIES, START, store_of

pytestmark = pytest.mark.both_backends  # SQLite and PostgreSQL; see conftest.py

DEADLINE = "The deadline for the billing service is March 15"


# ---- finding 3: add() of something already known --------------------------------------
def test_add_that_confirms_a_memory_gives_it_the_values_given(memory):
    """The judge answers "confirms": the confirmed memory takes importance, tags (joined
    with its own) and expiry, with an `updated` event, and add() returns it carrying
    them. Before: add returned the old memory with its old values, the given ones lost."""
    mem = memory("lifecycle")
    old = mem.add(DEADLINE, importance=3, tags=["billing"], judged=False)
    got = mem.add(
        DEADLINE, importance=9, tags=["deadline", "billing"], expires_at="2026-03-15", confidence=0.7
    )
    assert got == old
    m = mem.get(got)
    assert (m.importance, m.confidence, m.expires_at) == (9.0, 0.7, "2026-03-15T23:59:59")
    assert m.tags == ["billing", "deadline"]
    assert m.access_count == 1  # reinforced as well
    assert m.rank == 9.0 * 0.7 * 1.0  # the stored rank follows the new values
    [updated] = [json.loads(e["detail"]) for e in store_of(mem).events(got) if e["event_type"] == "updated"]
    assert updated["fields"]["importance"] == {"from": 3.0, "to": 9.0}
    assert updated["fields"]["expires_at"] == {"from": None, "to": "2026-03-15T23:59:59"}
    assert mem.counts() == {"active": 1}


def test_lethe_add_prints_the_confirmed_memory_with_the_given_expiry(db_path):
    args = [
        "--db",
        db_path,
        "--policy",
        f"{POLICIES}/lifecycle.yaml",
        "--offline",
        "--now",
        "2026-01-05T09:00:00",
    ]
    assert CliRunner().invoke(main, ["add", DEADLINE, *args, "--raw"]).exit_code == 0
    out = CliRunner().invoke(
        main,
        [
            "add",
            DEADLINE,
            *args,
            "--importance",
            "9",
            "--tags",
            "a,b",
            "--expires-at",
            "2026-03-15",
            "--json",
        ],
    )
    assert out.exit_code == 0, out.output
    shown = json.loads(out.output)
    assert (shown["id"], shown["importance"], shown["tags"], shown["expires_at"]) == (
        1,
        9.0,
        ["a", "b"],
        "2026-03-15T23:59:59",
    )


# ---- finding 4: recall while a merge absorbs its candidates -----------------------------
MERGING = f"""name: merging
extends: {POLICIES}/lifecycle.yaml
passes:
  compression:
    every: 6d
    cluster: {{model: offline, prompt: cluster.j2,
               candidates: {{where: "status = 'active'", limit: 10, min: 2}}}}
    merge: {{model: offline, prompt: merge.j2, result: {{access_count: "max(access_count)"}}}}
"""


class Script:
    def __init__(self, answers, before=None):
        self.answers, self.before = answers, before

    def take(self, step):
        if self.before and step in self.before:
            self.before.pop(step)()
        return self.answers.get(step)


def test_recall_racing_a_merge_records_access_on_the_merged_memory(tmp_path, db_path):
    """While recall's select model thinks, another process merges the two candidates it
    is about to pick. Recall returns the merged memory, once, and bumps its access; the
    compressed originals are left as they are. Before: recall returned the compressed
    memories and bumped their access counts, and the merged one got none."""
    policy = tmp_path / "merging.yaml"
    policy.write_text(MERGING)
    clock = FixedClock(START)
    merger = Memory(
        db_path,
        policy=str(policy),
        offline=True,
        clock=clock,
        scripted=Script(
            {
                "cluster": [[1, 2]],
                "merge": {
                    "content": "User uses PostgreSQL for billing",
                    "summary": "PostgreSQL for billing",
                    "tags": [],
                },
            }
        ),
    )
    a = merger.add("User uses PostgreSQL for billing", judged=False)
    b = merger.add("Billing runs on PostgreSQL", judged=False)
    merge_now = {"select": lambda: merger.run(["compression"])}
    reader = Memory(
        db_path,
        policy=str(policy),
        offline=True,
        clock=clock,
        scripted=Script({"select": [1, 2]}, before=merge_now),
    )
    got = reader.recall("postgresql billing")
    [merged] = [m for m in merger.memories("active")]
    assert [m.id for m in got] == [merged.id]
    assert merger.get(merged.id).access_count == 1
    for old in (a, b):
        m = merger.get(old)
        assert (m.status, m.merged_into, m.access_count, m.last_accessed) == (
            "compressed",
            merged.id,
            0,
            None,
        )
    reader.close(), merger.close()
