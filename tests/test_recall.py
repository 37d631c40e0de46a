"""Recall: order and filtering per shipped policy (snapshots), relevance, access, --explain."""

import glob
import json
import os

import pytest
from click.testing import CliRunner

from engine.base.clock import iso
from engine.cli import main
from tests.helpers import POLICIES, context_of, run_sql, store_of
from tests.helpers.recall import DAY, QUERIES, add, seed_store, stable

pytestmark = pytest.mark.both_backends  # SQLite and PostgreSQL; see conftest.py

# a policy with a local embedding model is pinned in test_local_scenarios.py (it needs the
# `local` extra)
SHIPPED = sorted(
    os.path.basename(p)[:-5] for p in glob.glob(f"{POLICIES}/*.yaml") if not p.endswith("-local.yaml")
)


@pytest.mark.sqlite_only
@pytest.mark.parametrize("name", SHIPPED)
def test_recall_order_and_filtering_per_policy(name, memory, clock, json_snapshot):
    mem = memory(name)
    seed_store(mem, clock)
    seen = {}
    for query in QUERIES:
        ex = mem.explain(query).as_dict()
        got = mem.recall(query)
        assert [m.id for m in got] == ex["chosen"], "explain shows what recall returns"
        assert all(m.status == "active" for m in got)
        seen[query] = {"explain": stable(ex), "recalled": [m.content for m in got]}
    assert seen == json_snapshot


def test_recall_never_returns_what_is_gone(memory, clock, tmp_path):
    mem = memory("lifecycle")
    ids = seed_store(mem, clock)
    statuses = {k: mem.get(i).status for k, i in ids.items()}
    assert statuses == {
        "weather": "archived",
        "poetry": "superseded",
        "editor": "active",
        "database": "active",
        "tabs": "active",
        "blocked": "expired",
        "uv": "active",
    }
    asked = (
        "weather in Lisbon",
        "what did I ask about the weather in Lisbon?",
        "is the release blocked by the security review?",
        "what blocked the release?",
        "editor Neovim",
        "poetry dependencies",
        "which dependency manager did we use before?",
    )
    got = {q: [(m.id, m.status) for m in mem.recall(q)] for q in asked}
    assert got == {
        "weather in Lisbon": [],
        # a question about what was, and nothing current fits: recall.fallback finds the
        # archived and the expired memory, each with its status
        "what did I ask about the weather in Lisbon?": [(ids["weather"], "archived")],
        "is the release blocked by the security review?": [],  # what is now: not the past
        "what blocked the release?": [(ids["blocked"], "expired")],
        "editor Neovim": [],  # faded below the recall floor, not yet archived
        "poetry dependencies": [(ids["uv"], "active")],  # what replaced it
        # never the superseded memory: it was replaced, not forgotten
        "which dependency manager did we use before?": [(ids["uv"], "active")],
    }
    without = memory(write_policy(tmp_path, "no-fallback", "recall:\n  fallback: null\n"), offline=True)
    assert without.policy.recall.past is None


def test_recalled_memory_lives_120_days_unrecalled_one_is_archived(memory, clock):
    mem = memory("lifecycle")
    kept = add(mem, "The favourite editor of the user is Neovim", importance=6)
    dropped = add(mem, "User asked about the weather in Lisbon", importance=6)
    for day in range(1, 121):
        clock.advance(DAY)
        mem.run_due()
        if day % 21 == 0:  # every three weeks the agent needs its editor
            assert [m.id for m in mem.recall("which editor do I use?")] == [kept]
        # what recall would pick (explain records no access, so the weather stays unrecalled)
        assert all(c.memory.status == "active" for c in mem.explain("weather in Lisbon").chosen)
    assert mem.get(kept).status == "active" and mem.get(kept).access_count == 5
    assert mem.get(dropped).status == "archived"
    assert [m.id for m in mem.recall("weather in Lisbon")] == []
    # asked about what was, with nothing current fitting: recall.fallback finds it, as
    # archived, and it stays so: no access is recorded for the past (a look back at what
    # faded does not make it fresh)
    asked = "what did I want to know about the weather in Lisbon?"
    assert [(m.id, m.status) for m in mem.recall(asked)] == [(dropped, "archived")]
    assert mem.get(dropped).status == "archived" and mem.get(dropped).access_count == 0


def write_policy(tmp_path, name, body) -> str:
    path = tmp_path / f"{name}.yaml"
    path.write_text(f"name: {name}\nextends: {POLICIES}/lifecycle.yaml\n{body}")
    return str(path)


def test_relevance_is_bm25_between_0_and_1(memory, clock):
    mem = memory("lifecycle")
    db_id = add(mem, "The project database is PostgreSQL", importance=5)
    others = [add(mem, f"Unrelated note number {i} about green tea", importance=8) for i in range(8)]
    scored = {m.id: m.relevance for m in mem.candidates("which database?", scored=True)}
    assert set(scored) == {db_id, *others}
    # bm25 on SQLite, ts_rank on PostgreSQL: both onto 0..1, on scales of their own
    assert (0.3 if store_of(mem).dialect == "sqlite" else 0.1) < scored[db_id] < 1.0
    assert all(scored[o] == 0.0 for o in others)
    assert [m.id for m in mem.candidates("which database?")] == [db_id]  # unscored: matches only


def test_relevance_in_the_order_formula(memory, clock, tmp_path):
    plain = memory("lifecycle")
    db_id = add(plain, "The project database is PostgreSQL", importance=5)
    for i in range(8):
        add(plain, f"Unrelated note number {i} about green tea", importance=8)
    assert plain.candidates("database", scored=True)[0].id != db_id  # rank alone: importance 8 first
    relevant = memory(
        write_policy(tmp_path, "relevant", 'recall:\n  order: "rank * (0.5 + relevance)"\n'), offline=True
    )
    first = relevant.candidates("database", scored=True)[0]
    assert first.id == db_id
    assert relevant.explain("database").candidates[0].order_keys == [
        pytest.approx(first.rank * (0.5 + first.relevance))
    ]


def test_recall_records_access_of_the_chosen_only(memory, clock):
    mem = memory("lifecycle")
    db_id = add(mem, "The project uses PostgreSQL 16 for its main database", importance=8)
    tea = add(mem, "User drinks green tea in the morning", importance=8)
    clock.advance(3 * DAY)
    mem.explain("which database?")  # explaining records nothing
    assert mem.get(db_id).access_count == 0
    assert [m.id for m in mem.recall("which database?")] == [db_id]
    assert [m.id for m in mem.recall("what database again?")] == [db_id]
    chosen, other = mem.get(db_id), mem.get(tea)
    assert (chosen.access_count, chosen.last_accessed) == (2, iso(clock()))
    assert (other.access_count, other.last_accessed) == (0, None)


def test_without_a_select_step_the_top_n_are_recalled_and_accessed(memory, clock):
    mem = memory("scheduled-sql")  # no select step: the first top_n in rank order
    ids = [add(mem, f"note {i}", importance=i) for i in range(1, 9)]
    got = mem.recall("anything", top_n=3)
    assert [m.id for m in got] == ids[::-1][:3]
    assert [mem.get(i).access_count for i in ids] == [0] * 5 + [1] * 3


def test_explain_counts_every_reason_with_one_group_by(memory, clock):
    mem = memory("lifecycle")
    ids = [add(mem, f"fact number {i} about databases", importance=5) for i in range(12)]
    run_sql(store_of(mem), "UPDATE memories SET status = 'compressed' WHERE id IN (?, ?)", ids[:2])
    run_sql(store_of(mem), "UPDATE memories SET status = 'archived' WHERE id = ?", (ids[2],))
    run_sql(store_of(mem), "UPDATE memories SET status = 'superseded' WHERE id = ?", (ids[3],))
    run_sql(store_of(mem), "UPDATE memories SET status = 'expired' WHERE id IN (?, ?, ?)", ids[4:7])
    run_sql(store_of(mem), "UPDATE memories SET decay_score = 0.12 WHERE id = ?", (ids[7],))
    run_sql(store_of(mem), "UPDATE memories SET status = 'parked' WHERE id = ?", (ids[8],))
    ex = mem.explain("databases")
    assert ex.filtered == {
        "archived": 1,
        "superseded": 1,
        "expired": 3,
        "compressed": 2,
        "below_floor": 1,
        "parked": 1,
    }
    assert ex.eligible == len(ex.candidates) == 3
    st = context_of(mem).plan.explain_reasons[True]
    assert st.sql.count("SELECT") == 1 and "GROUP BY reason" in st.sql


def test_explain_counts_what_the_limit_cut(memory, clock, tmp_path):
    mem = memory(write_policy(tmp_path, "short", "recall:\n  limit: 2\n"), offline=True)
    for i, colour in enumerate(["red", "green", "blue", "amber", "violet"]):
        add(mem, f"fact number {i} is {colour}", importance=i + 1)
    ex = mem.explain("anything else")  # no word of it matches: the head of the order only
    assert (ex.eligible, len(ex.candidates), ex.beyond_limit) == (5, 2, 3)
    assert [c.memory.importance for c in ex.candidates] == [5, 4]
    ex = mem.explain("which one is green?")  # its best full-text matches join the head
    assert [c.memory.importance for c in ex.candidates] == [5, 4, 2]


def test_a_memory_below_the_head_of_the_order_is_recalled_when_it_matches(memory, clock, tmp_path):
    """Without embeddings recall read only the first `limit` memories by rank: a fact
    that ranks lower (one of ~500 in a long history) was never shown to the select judge.
    The best full-text matches of the query's distinctive words join them."""
    mem = memory(write_policy(tmp_path, "short", "recall:\n  limit: 5\n"), offline=True)
    passport = add(mem, "User keeps the passport in the blue folder of the desk drawer", importance=2)
    for i in range(10):
        add(mem, f"Project {i} deploys with tool {i} on its own cluster", importance=8)
    assert [m.id for m in mem.recall("Where do I keep my passport?")] == [passport]
    assert mem.get(passport).access_count == 1
    st = context_of(mem).plan.recall_matches
    assert st.sql.count("LIMIT") >= 1  # bounded, one set-based statement


def test_recall_explain_on_the_command_line(db_path, memory, clock):
    mem = memory("lifecycle", db=db_path)
    seed_store(mem, clock)
    base = [
        "recall",
        "which database does the project use?",
        "--db",
        db_path,
        "--policy",
        f"{POLICIES}/lifecycle.yaml",
        "--offline",
        "--now",
        iso(clock()),
        "--explain",
    ]
    text = CliRunner().invoke(main, base)
    assert text.exit_code == 0, text.output
    assert "PostgreSQL 16" in text.output
    assert (
        "left out: 1 archived, 1 superseded, 1 expired, 0 compressed, 1 below the recall floor" in text.output
    )
    data = json.loads(CliRunner().invoke(main, base + ["--json"]).output)
    assert data["filtered"]["below_floor"] == 1
    chosen = {c["summary"]: c for c in data["candidates"] if c["chosen"]}
    pg = chosen["The project uses PostgreSQL 16 for its main database"]
    assert (pg["importance"], pg["confidence"]) == (8.0, 0.9)
    assert pg["decay"] == pytest.approx(0.7937, abs=1e-4)  # ten idle days, half-life 30
    assert pg["rank"] == pytest.approx(8.0 * 0.9 * pg["decay"])
    assert 0 < pg["relevance"] < 1
    assert mem.get(pg["id"]).access_count == 0  # --explain records no access


def test_of_two_picks_about_the_same_thing_the_newer_ranks_first():
    """A select judge ranks by fit; of two picks sharing a word of the query, the older
    value above the newer would hand the agent what was true rather than what is."""
    from engine.base.records import MemoryRecord
    from engine.run.recall import newest_first

    at = {1: "2026-01-11T08:00:00", 2: "2026-03-15T12:00:00", 3: "2026-02-01T09:00:00"}
    text = {
        1: "We have 30 dozen eggs in the fridge.",
        2: "We have 20 dozen eggs in the fridge now.",
        3: "User likes tea.",
    }
    records = {i: MemoryRecord(i, text[i], created_at=at[i]) for i in at}
    assert newest_first("How many dozen eggs do we have?", [1, 3, 2], records) == [2, 3, 1]
    # nothing shared with the query: the judge's order stands
    assert newest_first("What does the user drink?", [1, 3, 2], records) == [1, 3, 2]
