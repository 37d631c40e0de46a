"""Invariants the engine keeps whatever a judge answers (engine/judges/invariants.py): a `confirms`
of a memory that says something else stores the new memory; a supersession between
memories about different identified things is refused; candidate matching ignores the
words the pipeline writes into every memory; a merge keeps the earliest expiry of its
members (and never merges a dated memory with an undated one); an answer that copies an
example the prompt shows is refused and asked again. Each refusal is an event.

Models are reached over HTTP with the real `openai` client (FakeOpenAI; the scripted Judge
is in tests/helpers/judge.py).
"""

from __future__ import annotations

import datetime as dt
import json

import pytest

from engine.judges import invariants as guards
from engine.run.matching import distinctive_query
from tests.helpers import context_of, store_of, writer_of
from tests.helpers.judge import Judge, pick, served, shown
from tests.helpers.rows import calls, event_types, events, memories, outcomes, seed

pytestmark = pytest.mark.both_backends


def gate_says(content):
    return lambda p: {"save": True, "content": content, "summary": None, "tags": [], "importance": 5}


def refused(mem, memory_id):
    return [e[2] for e in events(mem, memory_id) if e[1] == "refused"]


# ---- a confirms of a memory that says something else ----------------------------------------
@pytest.mark.parametrize(
    "old, new",
    [
        ("We deploy with Terraform for this kind of work", "We deploy with Pulumi for this kind of work"),
        ("The meeting with Alice is on Tuesday", "The meeting with Bob is on Tuesday"),
        ("User prefers tabs for indentation", "User switched to spaces for indentation"),
        ("Staging runs Ubuntu 22.04", "Staging might be Ubuntu 20.04"),
        ("User uses tabs", "User does not use tabs"),
    ],
)
def test_a_confirms_of_a_memory_that_says_something_else_stores_the_new_one(fake_openai, lethe, old, new):
    judge = Judge(gate=gate_says(new), contradiction=lambda p: {"supersedes": [], "confirms": [1]})
    mem = lethe(served(fake_openai, judge).base_url)
    old_id = seed(mem, old, confidence=0.5)
    written = mem.remember(new, "ok")
    rows = memories(mem)
    assert written.stored and rows[written.stored[0]]["content"] == new
    assert rows[old_id]["confidence"] == 0.5 and "reinforced" not in event_types(mem, old_id)
    [why] = refused(mem, written.stored[0])
    assert why.startswith(f"confirms #{old_id} refused: ")
    assert written.refused == [{"id": written.stored[0], "confirms": old_id, "why": why.split(": ", 1)[1]}]


@pytest.mark.parametrize(
    "old, new",
    [
        ("User prefers tabs for indentation", "I prefer tabs for indentation."),
        ("User says order 1003 is delayed", "Order 1003 is delayed"),
        ("The meeting with Bob is on Tuesday at 10", "Meeting with Bob on Tuesday"),
    ],
)
def test_a_confirms_of_a_memory_that_says_the_same_reinforces_it(fake_openai, lethe, old, new):
    judge = Judge(gate=gate_says(new), contradiction=lambda p: {"supersedes": [], "confirms": [1]})
    mem = lethe(served(fake_openai, judge).base_url)
    old_id = seed(mem, old, confidence=0.5)
    written = mem.remember(new, "ok")
    assert written.reinforced == [old_id] and written.stored == []
    assert memories(mem)[old_id]["confidence"] == pytest.approx(0.6)


# ---- a supersession between different identified things -----------------------------------
DIFFERENT_THINGS = [
    ("Order 1001 is delayed", "Order 1003 is delayed"),
    ("Room A holds 12 people", "Room B holds 30 people"),
    ("The March invoice is due on April 5", "The April invoice is due on May 5"),
    ("The meeting with Alice is on Tuesday", "The meeting with Bob is on Wednesday"),
    ("User says ticket #4411 is blocked on QA", "User says ticket #4412 is blocked on design"),
]
REAL_UPDATES = [
    ("The deadline is March 15", "The deadline moved from March 15 to April 1"),
    ("We use PostgreSQL for the main database", "We migrated from PostgreSQL to MySQL"),
    ("User has completed 4 projects", "User just finished their 5th project"),
    ("User prefers tabs for indentation", "User switched to spaces for indentation"),
    ("Order 1001 is delayed", "Order 1001 shipped on Monday"),
    ("Order 1001 is handled by Alice", "Order 1001 was replaced by order 1003"),
]


@pytest.mark.parametrize("old, new", DIFFERENT_THINGS)
def test_a_supersession_between_different_identified_things_is_refused(fake_openai, lethe, old, new):
    judge = Judge(
        gate=gate_says(new),
        contradiction=lambda p: {
            "supersedes": [{"n": 1, "reason": "the deadline moved from March 15 to April 1"}],
            "confirms": [],
        },
    )
    mem = lethe(served(fake_openai, judge).base_url)
    old_id = seed(mem, old)
    written = mem.remember(new, "ok")
    rows = memories(mem)
    assert rows[old_id]["status"] == "active" and written.superseded == []
    [why] = refused(mem, written.stored[0])
    assert why.startswith(f"supersedes #{old_id} refused: they are about different things")


@pytest.mark.parametrize("old, new", REAL_UPDATES)
def test_a_real_update_still_supersedes(fake_openai, lethe, old, new):
    judge = Judge(gate=gate_says(new), contradiction=lambda p: {"supersedes": [1], "confirms": []})
    mem = lethe(served(fake_openai, judge).base_url)
    old_id = seed(mem, old)
    written = mem.remember(new, "ok")
    assert memories(mem)[old_id]["status"] == "superseded"
    assert written.superseded == [(old_id, written.stored[0])] and refused(mem, written.stored[0]) == []


# ---- candidate matching --------------------------------------------------------------------
@pytest.mark.sqlite_only
def test_candidates_are_not_matched_by_the_words_the_pipeline_writes(memory):
    mem = memory("lifecycle")
    query = distinctive_query(context_of(mem), "User says the user's staging server runs Ubuntu")
    assert query.startswith('"staging" OR "server" OR "runs" OR "ubuntu"')
    assert '"user"' not in query and '"says"' not in query
    assert distinctive_query(context_of(mem), "User thinks so") is None


def test_an_unrelated_memory_written_by_the_gate_is_no_candidate(fake_openai, lethe):
    judge = Judge(gate=gate_says("User deploys with Pulumi"))
    mem = lethe(served(fake_openai, judge).base_url)
    seed(mem, "User prefers tabs for indentation")
    seed(mem, "User deploys with Terraform")
    mem.remember("We deploy with Pulumi now.", "ok")
    assert list(shown(judge.last("contradiction")).values()) == ["User deploys with Terraform"]


# ---- compression and expiry ----------------------------------------------------------------
def _five(mem, expiries):
    ids = [seed(mem, f"The board report is due soon ({i})", expires_at=at) for i, at in enumerate(expiries)]
    for text in ("User lives in Lisbon", "User's cat is called Miso", "User likes tea", "User runs"):
        seed(mem, text)
    return ids


def test_a_merge_keeps_the_earliest_expiry_of_its_members(fake_openai, lethe, clock):
    judge = Judge(
        cluster=lambda p: {"clusters": [pick(p, "board report")]},
        merge=lambda p: {"content": "The board report is due", "summary": "board", "tags": []},
    )
    mem = lethe(served(fake_openai, judge).base_url)
    ids = _five(mem, ["2026-09-20T23:59:59", "2026-08-01T23:59:59"])
    clock.advance(dt.timedelta(days=7))
    mem.run(["compression"])
    [merged] = [r for r in memories(mem).values() if r["content"] == "The board report is due"]
    assert merged["expires_at"] == "2026-08-01T23:59:59"
    assert {memories(mem)[i]["status"] for i in ids} == {"compressed"}


def test_a_dated_memory_never_merges_with_an_undated_one(fake_openai, lethe, clock):
    judge = Judge(
        cluster=lambda p: {"clusters": [pick(p, "board report", "tea")]},
        merge=lambda p: {
            "content": "The board report is due. User likes tea.",
            "summary": "board",
            "tags": [],
        },
    )
    mem = lethe(served(fake_openai, judge).base_url)
    [dated] = _five(mem, ["2026-08-01T23:59:59"])
    clock.advance(dt.timedelta(days=7))
    [result] = mem.run(["compression"])
    rows = memories(mem)
    assert all(r["status"] == "active" for r in rows.values()) and len(rows) == 5
    assert any("never expires" in n for n in result.notes)
    assert "never expires" in refused(mem, dated)[0]


# ---- an answer that copies the prompt's example ----------------------------------------------
def test_an_answer_equal_to_the_prompts_example_is_refused_and_asked_again(fake_openai, lethe, tmp_path):
    (tmp_path / "prompts").mkdir()
    (tmp_path / "prompts" / "expiry.j2").write_text(
        "Does this memory have a natural end date?\nMemory: {{ memory.content | tojson }}\n"
        'Answer like this: {"expires_at": "2027-03-15"}\n'
    )
    judge = Judge(expiry=[{"expires_at": "2027-03-15"}, {"expires_at": None}])
    mem = lethe(served(fake_openai, judge).base_url, extra="prompts: prompts\n")
    written = mem.remember("I like green tea.", "ok")
    assert memories(mem)[written.stored[0]]["expires_at"] is None
    assert outcomes(mem, "expiry") == ["bad_answer", "ok"]
    [retry] = [r for r in fake_openai.requests if "example answer" in json.dumps(r["messages"])]
    assert "not a judgment of this input" in retry["messages"][-1]["content"]


def test_a_copied_example_that_changes_nothing_is_accepted(fake_openai, lethe, tmp_path):
    (tmp_path / "prompts").mkdir()
    (tmp_path / "prompts" / "expiry.j2").write_text(
        "Does this memory have a natural end date?\nMemory: {{ memory.content | tojson }}\n"
        'With none: {"expires_at": null}\n'
    )
    judge = Judge(expiry={"expires_at": None})
    mem = lethe(served(fake_openai, judge).base_url, extra="prompts: prompts\n")
    mem.remember("I like green tea.", "ok")
    assert outcomes(mem, "expiry") == ["ok"]


# ---- the guards on their own ---------------------------------------------------------------
def test_example_answers_are_the_json_objects_a_prompt_shows():
    assert guards.example_answers('Answer: {"a": [1, 2]} or {"b": null}; not {this}') == [
        {"a": [1, 2]},
        {"b": None},
    ]


def test_shipped_prompts_show_no_example_answer():
    """A prompt may describe the fields; an answer to copy is what a small model copies."""
    import pathlib

    for path in sorted(pathlib.Path(__file__).resolve().parent.parent.joinpath("prompts").glob("*.j2")):
        text = path.read_text(encoding="utf-8")
        assert guards.example_answers(text) == [], path.name


# ---- an end date the turn does not give ----------------------------------------------------
def test_an_end_date_for_a_turn_that_names_no_time_is_refused(fake_openai, lethe):
    """A small model gave lasting facts today's date as their end: they expired at once."""
    judge = Judge(expiry={"expires_at": "2026-03-20"})
    mem = lethe(served(fake_openai, judge).base_url)
    [mid] = mem.remember("I prefer tabs for indentation.", "ok")
    assert memories(mem)[mid]["expires_at"] is None
    assert outcomes(mem, "expiry") == ["bad_answer", "bad_answer", "fallback"]
    [mid] = mem.remember("The board report is due on March 20.", "ok")
    assert memories(mem)[mid]["expires_at"] == "2026-03-20T23:59:59"


def test_a_gate_content_that_is_not_what_the_user_said_is_refused(fake_openai, lethe):
    """The 1.5B wrote the assistant's "Noted." as the memory of "We migrated the main
    database from PostgreSQL to MySQL": the fact was lost."""
    judge = Judge(gate=gate_says("Noted."))
    mem = lethe(served(fake_openai, judge).base_url)
    [mid] = mem.remember("We migrated the main database from PostgreSQL to MySQL.", "Noted.")
    assert "MySQL" in memories(mem)[mid]["content"]
    assert outcomes(mem, "gate") == ["bad_answer", "bad_answer", "fallback"]


# ---- several memories a turn ------------------------------------------------------------------
PASSPORT = "User keeps the passport in the desk drawer"
DENTIST = "User has a dentist appointment on March 3"
TWO_FACTS = (
    "By the way, my passport is in the desk drawer, and my dentist appointment is on March 3. "
    "Anyway, which varnish should I use for the shelf?"
)


def gate_lists(*items):
    return lambda p: {"save": True, "memories": list(items)}


def test_a_turn_with_two_facts_stores_both_each_judged_on_its_own(fake_openai, lethe):
    judge = Judge(
        gate=gate_lists({"content": PASSPORT, "importance": 6}, {"content": DENTIST, "importance": 6}),
        expiry=lambda p: {"expires_at": "2026-03-03" if "dentist" in p.split("Memory")[-1] else None},
    )
    mem = lethe(served(fake_openai, judge).base_url)
    written = mem.remember(TWO_FACTS, "Oil-based polyurethane.")
    rows = memories(mem)
    assert [rows[i]["content"] for i in written.stored] == [PASSPORT, DENTIST]
    assert [rows[i]["expires_at"] for i in written.stored] == [None, "2026-03-03T23:59:59"]
    assert outcomes(mem).count(("expiry", "ok")) == 2  # each memory asked about its own end


def test_a_hostile_list_keeps_each_fact_and_says_what_it_dropped(fake_openai, lethe):
    judge = Judge(gate=gate_lists("junk", {"content": ""}, {"content": "Noted."}, {"content": PASSPORT}))
    mem = lethe(served(fake_openai, judge).base_url)
    written = mem.remember(TWO_FACTS, "Noted.")
    assert [memories(mem)[i]["content"] for i in written.stored] == [PASSPORT]
    [call] = calls(mem, "gate")
    assert call["outcome"] == "repaired"
    assert "dropped 2 of 4 memories" in call["detail"]
    assert "'Noted.'" in call["detail"] and "shares no word" in call["detail"]


def test_a_list_whose_every_memory_is_refused_is_asked_again_then_the_rules_keep_the_facts(
    fake_openai, lethe
):
    judge = Judge(gate=gate_lists({"content": "Noted."}, {"content": "Sure thing."}))
    mem = lethe(served(fake_openai, judge).base_url)
    written = mem.remember(TWO_FACTS, "Noted.")
    assert outcomes(mem, "gate") == ["bad_answer", "bad_answer", "fallback"]
    stored = " ".join(memories(mem)[i]["content"] for i in written.stored)
    assert "passport" in stored and "dentist" in stored


def test_a_memory_copied_from_the_prompts_example_is_dropped(fake_openai, lethe, tmp_path):
    (tmp_path / "prompts").mkdir()
    (tmp_path / "prompts" / "gate.j2").write_text(
        "Decide whether this conversation turn holds something worth remembering.\n"
        "User said: {{ user | tojson }}\n"
        'An item looks like {"content": "User keeps the passport in the desk drawer", "importance": 6}\n'
        "Answer with save and memories.\n"
    )
    judge = Judge(gate=gate_lists({"content": PASSPORT, "importance": 6}, {"content": DENTIST}))
    mem = lethe(served(fake_openai, judge).base_url, extra="prompts: prompts\n")
    written = mem.remember(TWO_FACTS, "ok")
    assert [memories(mem)[i]["content"] for i in written.stored] == [DENTIST]
    assert "example answer" in calls(mem, "gate")[0]["detail"]


@pytest.mark.parametrize(
    "turn",
    ["Order 1003 is delayed at customs.", "Room B holds 30 people.", "The main database is PostgreSQL 15."],
)
def test_an_id_or_an_amount_is_no_end_date(fake_openai, lethe, turn):
    judge = Judge(expiry={"expires_at": "2026-01-05"})
    mem = lethe(served(fake_openai, judge).base_url)
    [mid] = mem.remember(turn, "ok")
    assert memories(mem)[mid]["expires_at"] is None


def test_an_end_date_of_today_needs_a_turn_that_says_today(fake_openai, lethe):
    judge = Judge(expiry={"expires_at": "2026-01-05"})  # the test clock's today
    mem = lethe(served(fake_openai, judge).base_url)
    [mid] = mem.remember("The API freeze lasts until the end of the quarter.", "ok")
    assert memories(mem)[mid]["expires_at"] == "2026-03-31T23:59:59"  # the rules read the quarter
    [mid] = mem.remember("The office is closed today.", "ok")
    assert memories(mem)[mid]["expires_at"] == "2026-01-05T23:59:59"


# ---- a turn judged late --------------------------------------------------------------------
@pytest.mark.parametrize("ask", ["its own question", "the other way round"])
def test_a_late_turn_is_never_retired_by_a_later_memory_about_another_thing(fake_openai, lethe, clock, ask):
    """A turn judged after memories said later is stored superseded by the one that replaces
    it (engine/run/timeline.py); the judge saying so about a memory of another identified
    thing (order 1003 for order 1001) is refused, with an event, whichever way it was asked."""

    def contradiction(prompt):
        if ask == "its own question" and "Order 1001" in prompt.split("Existing memories", 1)[0]:
            return {"supersedes": pick(prompt, "1003"), "confirms": []}
        if ask == "the other way round" and pick(prompt, "1001"):
            return {"supersedes": pick(prompt, "1001"), "confirms": []}
        return {"supersedes": [], "confirms": []}

    judge = Judge(contradiction=contradiction)
    mem = lethe(served(fake_openai, judge).base_url)
    later = mem.remember("Order 1003 is delayed.", "ok", said_at=clock() - dt.timedelta(days=5))
    late = store_of(mem).add_turn(
        mem.namespace, "Order 1001 is delayed.", "", (clock() - dt.timedelta(days=14)).isoformat()
    )
    written = writer_of(mem).process(late)
    [new_id] = written.stored
    rows = memories(mem)
    assert rows[new_id]["status"] == "active" and rows[later[0]]["status"] == "active"
    assert written.superseded == []
    [why] = refused(mem, new_id)
    assert why.startswith(f"superseded_by #{later[0]} refused: they are about different things"), why


def test_a_cluster_of_different_identified_things_is_never_merged(fake_openai, lethe, clock):
    """A cluster judge grouping memories about different things (order 1001 and order
    1003) would have them written as one memory that blurs them: the merge is refused,
    the originals stay active, each with an event, and the merge model is not asked."""
    judge = Judge(
        cluster=lambda p: {"clusters": [pick(p, "Order 10")]},
        merge=lambda p: {"content": "Order 1003 is delayed", "summary": "order", "tags": []},
    )
    mem = lethe(served(fake_openai, judge).base_url)
    ids = [seed(mem, "Order 1001 is delayed"), seed(mem, "Order 1003 is delayed")]
    for text in ("User lives in Lisbon", "User's cat is called Miso", "User likes tea"):
        seed(mem, text)
    clock.advance(dt.timedelta(days=7))
    [result] = mem.run(["compression"])
    rows = memories(mem)
    assert all(r["status"] == "active" for r in rows.values()) and len(rows) == 5
    assert any("different things" in n for n in result.notes), result.notes
    assert all("different things" in refused(mem, i)[0] for i in ids)
    assert judge.prompts.get("merge", []) == []


def test_an_undecided_gate_is_not_asked_again_and_the_rules_keep_the_facts(fake_openai, lethe):
    """`save: false` beside memories with content (Qwen2.5-Coder 0.5B's answer to 45 of 46
    turns): taking the `false` lost the fact, and asked again the model only empties its
    list; the rules judge the turn instead, at once."""
    judge = Judge(
        gate=lambda p: {"save": False, "memories": [{"content": "Order 1001 is delayed.", "importance": 8}]}
    )
    mem = lethe(served(fake_openai, judge).base_url)
    written = mem.remember(TWO_FACTS, "Noted.")
    assert outcomes(mem, "gate") == ["bad_answer", "fallback"]
    stored = " ".join(memories(mem)[i]["content"] for i in written.stored)
    assert "passport" in stored and "dentist" in stored
