"""Namespaces: two agents, two policies, one file. One agent's passes, recall and remember
never read or change the other agent's memories, events, runs or inbox."""

from __future__ import annotations

import datetime as dt

import pytest

from tests.helpers import run_sql, store_of

pytestmark = pytest.mark.both_backends  # SQLite and PostgreSQL; see conftest.py

SHARED = [
    "I use PostgreSQL for the billing service.",
    "The deadline for the study tracker is March 15.",
    "I prefer tabs over spaces in Python code.",
]
CLUSTER = [
    "The billing service stores invoices in PostgreSQL",
    "Billing service invoices are stored in PostgreSQL",
    "Invoices of the billing service live in PostgreSQL",
]
FILLER = ["User runs nightly reports at 2am", "The CLI is written in Go"]


@pytest.fixture
def agents(memory):
    """alice runs the lifecycle policy (30-day half-life), bob the coding-agent policy
    (90 days), in the same file, with the same memories."""
    alice = memory("lifecycle", namespace="alice")
    bob = memory("coding-agent", namespace="bob")
    for mem in (alice, bob):
        for text in SHARED:
            assert mem.remember(text, "Noted.")
        for text in CLUSTER + FILLER:
            mem.add(text, judged=False)
    return alice, bob


def rows(mem, namespace: str) -> dict:
    """Everything stored for a namespace, as plain tuples."""
    q = lambda sql: [tuple(r) for r in run_sql(store_of(mem), sql, (namespace,))]  # noqa: E731
    return {
        "memories": q("SELECT * FROM memories WHERE namespace = ? ORDER BY id"),
        "events": q(
            "SELECT * FROM memory_events WHERE memory_id IN "
            "(SELECT id FROM memories WHERE namespace = ?) ORDER BY id"
        ),
        "pass_runs": q("SELECT * FROM pass_runs WHERE namespace = ? ORDER BY pass"),
        "inbox": q("SELECT * FROM inbox WHERE namespace = ? ORDER BY id"),
        "policy_state": q("SELECT * FROM policy_state WHERE namespace = ?"),
    }


def test_the_two_agents_share_one_file(agents):
    alice, bob = agents
    assert store_of(alice).path == store_of(bob).path
    assert alice.counts() == bob.counts() == {"active": len(SHARED) + len(CLUSTER) + len(FILLER)}
    assert {r[0] for r in run_sql(store_of(alice), "SELECT namespace FROM policy_state")} == {"alice", "bob"}


def test_passes_of_one_agent_never_touch_the_other(agents, clock):
    alice, bob = agents
    total = len(SHARED) + len(CLUSTER) + len(FILLER)
    clock.advance(dt.timedelta(days=1))
    before = rows(bob, "bob")
    results = {r.name: r for r in alice.run_due()}
    assert results["compression"].events.get("compressed", 0) >= len(CLUSTER)  # alice merged...
    clock.advance(dt.timedelta(days=120))
    results = {r.name: r for r in alice.run_due()}
    assert results["decay"].events.get("archived", 0) > 0  # ...and forgot
    assert results["expiry"].events.get("expired", 0) > 0
    assert rows(bob, "bob") == before  # bob: untouched
    assert bob.counts() == {"active": total}

    before = rows(alice, "alice")
    results = {r.name: r for r in bob.run_due()}
    assert rows(alice, "alice") == before
    merged = results["compression"].events.get("compressed", 0)
    assert merged >= len(CLUSTER)
    # bob's own policy: a 90-day half-life keeps 121-day-old memories (0.39 > 0.1)
    assert results["decay"].events.get("archived", 0) == 0
    counts = bob.counts()
    assert counts.get("archived", 0) == 0 and counts["expired"] == 1
    assert counts["compressed"] == merged and sum(counts.values()) == total + 1


def test_named_passes_and_the_cli_respect_the_namespace(agents, clock):
    from click.testing import CliRunner

    from engine.cli import main
    from tests.helpers import POLICIES

    alice, bob = agents
    before = rows(bob, "bob")
    clock.advance(dt.timedelta(days=200))
    alice.run(["expiry", "decay"])
    result = CliRunner().invoke(
        main,
        [
            "run",
            "--db",
            store_of(alice).path,
            "--policy",
            f"{POLICIES}/lifecycle.yaml",
            "--namespace",
            "alice",
            "--now",
            clock().isoformat(),
            "--offline",
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    assert rows(bob, "bob") == before


def test_recall_reads_only_its_own_namespace(agents):
    alice, bob = agents
    before = rows(bob, "bob")
    for query in (
        "which database does billing use?",
        "tabs or spaces?",
        "study tracker deadline",
        "PostgreSQL invoices billing",
    ):
        got = alice.recall(query)
        assert got and {m.namespace for m in got} == {"alice"}
        assert {m.namespace for m in alice.candidates(query, scored=True)} == {"alice"}
        assert {m.namespace for m in alice.candidates(query)} <= {"alice"}
    assert rows(bob, "bob") == before  # bob's access counts and last_accessed unchanged
    assert any(m.access_count for m in alice.candidates(None, limit=100))


def test_a_contradiction_supersedes_only_the_agents_own_memory(agents):
    alice, bob = agents
    before = rows(alice, "alice")
    ids = bob.remember("We migrated the billing service from PostgreSQL to MySQL.", "Got it.")
    assert ids
    old = run_sql(
        store_of(bob),
        "SELECT id, status, contradicted_by FROM memories WHERE "
        "namespace = 'bob' AND content LIKE '%uses PostgreSQL%'",
    ).fetchone()
    assert old["status"] == "superseded" and old["contradicted_by"] == ids[0]
    assert rows(alice, "alice") == before
    mine = run_sql(
        store_of(alice),
        "SELECT status FROM memories WHERE namespace = 'alice' AND content LIKE '%uses PostgreSQL%'",
    ).fetchall()
    assert [r[0] for r in mine] == ["active"]


def test_a_restatement_reinforces_only_the_agents_own_memory(memory, agents):
    alice, bob = agents
    only_alice = alice.add("User deploys the docs site every Tuesday", judged=False)
    before = rows(alice, "alice")
    ids = bob.add("User deploys the docs site every Tuesday")
    assert ids != only_alice and bob.get(ids).namespace == "bob"
    assert rows(alice, "alice") == before


def test_pending_turns_belong_to_their_agent(agents):
    alice, bob = agents
    with store_of(alice).transaction():  # a turn alice saved while her model was down
        run_sql(
            store_of(alice),
            "INSERT INTO inbox (namespace, user_text, assistant_text, created_at, updated_at) "
            "VALUES ('alice', 'I use Redis for caching.', 'ok', ?, ?)",
            (store_of(alice).now(), store_of(alice).now()),
        )
    assert bob.pending() == [] and len(alice.pending()) == 1
    bob.run_due()
    assert len(alice.pending()) == 1  # bob's run_due does not judge alice's turns
    alice.run_due()
    assert alice.pending() == []
    assert any("Redis" in m.content for m in alice.recall("Redis caching"))
    assert not any("Redis" in m.content for m in bob.candidates("Redis caching", limit=50))


def test_a_different_rank_formula_is_synced_only_for_its_namespace(memory, agents):
    alice, bob = agents
    before = rows(alice, "alice")
    carol = memory("archive", namespace="bob")  # a policy with rank = importance * confidence
    assert rows(alice, "alice") == before
    r = run_sql(
        store_of(carol),
        "SELECT count(*) FROM memories WHERE namespace = 'bob' AND "
        "abs(rank - importance * confidence) > 1e-9",
    ).fetchone()[0]
    assert r == 0


def test_get_and_history_do_not_read_another_namespace(agents):
    alice, bob = agents
    bob_id = bob.candidates(None, limit=1)[0].id
    assert alice.get(bob_id) is None


def test_the_store_counts_every_namespaces_memories_of_any_status(agents, memory):
    alice, bob = agents
    held = len(SHARED) + len(CLUSTER) + len(FILLER)
    assert store_of(alice).namespace_counts() == {"alice": held, "bob": held}
    alice.forget(alice.candidates(None, limit=1)[0].id, "done")  # archived: still held
    assert store_of(bob).namespace_counts() == {"alice": held, "bob": held}
    assert store_of(memory("lifecycle", namespace="o'brien")).namespace_counts() == {
        "alice": held,
        "bob": held,
    }  # a name with a quote is a bound value, never SQL text


def test_an_empty_namespace_says_which_namespaces_the_database_holds(agents, memory):
    """A mistyped namespace listed and recalled nothing, and said nothing about it."""
    alice, _ = agents
    typo = memory("lifecycle", namespace="alcie")
    assert typo.memories("all") == [] and typo.recall("billing") == []
    held = len(SHARED) + len(CLUSTER) + len(FILLER)
    assert typo.why_empty() == (
        f"namespace 'alcie' holds nothing; this database holds: alice ({held} memories), bob ({held})"
    )
    assert alice.why_empty() is None  # it holds memories
    counted = []  # and says so from one index probe, not a count of every namespace
    store_of(alice).namespace_counts = lambda: counted.append(1) or {}
    assert alice.why_empty() is None and counted == []
    waiting = memory("lifecycle", namespace="carol")
    store_of(waiting).add_turn("carol", "We use uv.", "")  # a turn not yet judged: not nothing
    assert waiting.why_empty() is None


def test_a_store_with_nothing_in_it_has_nothing_to_point_at(memory):
    assert memory("lifecycle", namespace="new").why_empty() is None
