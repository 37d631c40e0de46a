"""The remember pipeline loses nothing: outages leave the turn pending in the inbox and
`run_due()` judges it later; the offline rules judges handle the seed article's examples;
`--record` / `--replay` reproduce the same memories with no server at all.

Models are reached over HTTP with the real `openai` client (FakeOpenAI; the scripted Judge
is in tests/helpers/judge.py).
"""

from __future__ import annotations

import datetime as dt
import json
import sqlite3
import threading
from urllib.parse import urlparse

import pytest
from click.testing import CliRunner

from engine import Memory
from engine.cli import main
from engine.run.write import Judged
from engine.store import open_store
from tests.helpers import POLICIES, START, context_of, run_sql, store_of, writer_of
from tests.helpers.fake_openai import FakeOpenAI, Reply, closed_port_url
from tests.helpers.judge import DEFAULTS, Judge, pick, policy_file, served
from tests.helpers.rows import calls, event_types, events, inbox, memories, outcomes, seed

pytestmark = pytest.mark.both_backends  # SQLite and PostgreSQL; see conftest.py

TURN = ("We moved the main database from PostgreSQL to MySQL.", "Noted, MySQL it is.")
TEA = ("I drink green tea every morning.", "Nice.")


def supersede_postgres():
    return Judge(contradiction=lambda p: {"supersedes": pick(p, "PostgreSQL"), "confirms": []})


def port_of(url: str) -> int:
    return urlparse(url).port


def assert_pending_turn(mem, attempts: int, error: str):
    [turn] = mem.pending()
    assert (turn["user_text"], turn["assistant_text"]) == TURN
    assert turn["attempts"] == attempts
    assert error in turn["last_error"]
    return turn


# =======================================================================================
# outages: the turn is kept, judged later, and nothing half-applied


def test_connection_refused_keeps_the_turn_pending_until_the_server_is_back(lethe):
    url = closed_port_url()
    mem = lethe(url)
    old = seed(mem, "User uses PostgreSQL for the main database")
    before = memories(mem)

    assert mem.remember(*TURN) == []

    assert memories(mem) == before
    turn = assert_pending_turn(mem, 1, "cannot reach m-cheap")
    assert outcomes(mem) == [("gate", "unavailable")]
    assert "ConnectError" in calls(mem)[0]["detail"]
    assert mem.remember(*TEA) == []  # a second turn queues behind it
    assert len(mem.pending()) == 2

    # still down: run_due retries the oldest (and stops there: the model is down); both
    # turns stay pending
    mem.run_due()
    assert [t["user_text"] for t in mem.pending()] == [TURN[0], TEA[0]]
    assert mem.pending()[0]["attempts"] == 2
    assert memories(mem) == before

    judge = supersede_postgres()
    with FakeOpenAI(responder=judge, port=port_of(url)):
        results = mem.run_due()
    assert mem.pending() == []
    rows = memories(mem)
    new = [r for r in rows.values() if r["content"] == TURN[0]]
    assert len(new) == 1 and new[0]["status"] == "active"
    assert rows[old]["status"] == "superseded" and rows[old]["contradicted_by"] == new[0]["id"]
    assert {r["content"] for r in rows.values() if r["status"] == "active"} == {TURN[0], TEA[0]}
    assert results[0].name == "pending" and results[0].changed == 2
    statuses = {t["id"]: t["status"] for t in inbox(mem)}
    assert statuses[turn["id"]] == "done"
    assert json.loads(inbox(mem)[0]["memory_ids"]) == [new[0]["id"]]


def test_the_turn_is_written_before_any_model_is_called(fake_openai, lethe, db_path):
    """While the gate request is in flight, another connection already sees the turn."""
    seen = []

    def gate(prompt):
        with open_store(db_path) as other:
            seen.extend(tuple(r) for r in run_sql(other, "SELECT user_text, status FROM inbox").fetchall())
        return DEFAULTS["gate"](prompt)

    mem = lethe(served(fake_openai, Judge(gate=gate)).base_url)
    mem.remember(*TURN)
    assert seen == [(TURN[0], "pending")]
    assert inbox(mem)[0]["status"] == "done"


@pytest.mark.parametrize("step", ["gate", "confidence", "contradiction", "expiry"])
def test_http_500_at_any_step_stores_nothing_then_run_due_finishes(fake_openai, lethe, step):
    judge = supersede_postgres()
    good = judge.answers[step]
    judge.answers[step] = Reply(status=500, content="upstream exploded")
    mem = lethe(served(fake_openai, judge).base_url)
    old = seed(mem, "User uses PostgreSQL for the main database")
    before = memories(mem)

    assert mem.remember(*TURN) == []

    assert memories(mem) == before  # no half-applied turn
    assert event_types(mem, old) == ["created"]
    assert_pending_turn(mem, 1, "failed with HTTP 500")
    assert outcomes(mem, step) == ["unavailable"]

    judge.answers[step] = good
    mem.run_due()
    assert mem.pending() == []
    rows = memories(mem)
    [new] = [i for i in rows if i not in before]
    assert rows[new]["content"] == TURN[0]
    assert rows[old]["status"] == "superseded" and rows[old]["contradicted_by"] == new


def test_http_500_is_retried_by_the_client_within_max_retries(fake_openai, lethe):
    judge = Judge()
    mem = lethe(served(fake_openai, judge).base_url, max_retries=1)
    fake_openai.script(Reply(status=500))
    [mid] = mem.remember(*TURN)
    # the gate was sent twice; confidence and expiry once; no contradiction (nothing stored)
    assert len(fake_openai.requests) == 4
    assert outcomes(mem, "gate") == ["ok"]
    assert memories(mem)[mid]["content"] == TURN[0]


def test_http_429_leaves_the_turn_pending(fake_openai, lethe):
    judge = Judge(gate=Reply(status=429, content="slow down"))
    mem = lethe(served(fake_openai, judge).base_url)
    assert mem.remember(*TURN) == []
    assert memories(mem) == {}
    assert_pending_turn(mem, 1, "rate limiting (HTTP 429")
    judge.answers["gate"] = DEFAULTS["gate"]
    mem.run_due()
    assert mem.pending() == [] and len(memories(mem)) == 1


def test_http_429_once_is_absorbed_by_a_client_retry(fake_openai, lethe):
    mem = lethe(served(fake_openai, Judge()).base_url, max_retries=1)
    fake_openai.script(Reply(status=429))
    assert len(mem.remember(*TURN)) == 1
    assert len(fake_openai.requests) == 4 and mem.pending() == []


def test_timeout_leaves_the_turn_pending(fake_openai, lethe):
    judge = Judge(contradiction=[Reply(delay=1.5, content="{}"), {"supersedes": [], "confirms": []}])
    mem = lethe(served(fake_openai, judge).base_url, timeout=0.3)
    old = seed(mem, "User uses PostgreSQL for the main database")
    before = memories(mem)

    assert mem.remember(*TURN) == []

    assert memories(mem) == before
    assert_pending_turn(mem, 1, "timed out after 0.3s (wall clock")
    assert sorted(outcomes(mem)) == [
        ("confidence", "ok"),
        ("contradiction", "unavailable"),
        ("expiry", "ok"),
        ("gate", "ok"),
    ]
    asked = len(fake_openai.requests)
    mem.run_due()
    assert mem.pending() == []
    # what the first attempt paid for is kept: the retry asks only the contradiction again
    assert [r["response_format"]["json_schema"]["name"] for r in fake_openai.requests[asked:]] == [
        "contradiction"
    ]
    assert len(memories(mem)) == 2 and memories(mem)[old]["status"] == "active"


def test_a_dropped_connection_leaves_the_turn_pending(fake_openai, lethe):
    mem = lethe(served(fake_openai, Judge(gate=Reply(drop=True))).base_url)
    assert mem.remember(*TURN) == []
    assert_pending_turn(mem, 1, "m-cheap")


def test_pending_turns_survive_a_restart_and_show_in_the_cli(lethe, tmp_path, db_path):
    url = closed_port_url()
    mem = lethe(url)
    mem.remember(*TURN)
    mem.close()
    policy = policy_file(tmp_path, url)

    out = CliRunner().invoke(main, ["pending", "--db", db_path, "--policy", policy])
    assert out.exit_code == 0, out.output
    assert "turn 1 (1 attempts, last error: cannot reach m-cheap" in out.output
    assert TURN[0] in out.output
    data = json.loads(
        CliRunner().invoke(main, ["pending", "--db", db_path, "--policy", policy, "--json"]).output
    )
    assert [(t["user_text"], t["assistant_text"], t["attempts"]) for t in data] == [(*TURN, 1)]

    again = Memory(db_path, policy=policy)
    try:
        assert [t["user_text"] for t in again.pending()] == [TURN[0]]
        with FakeOpenAI(responder=Judge(), port=port_of(url)):
            again.run_due()
        assert again.pending() == []
        assert [m["content"] for m in memories(again).values()] == [TURN[0]]
    finally:
        again.close()
    out = CliRunner().invoke(main, ["pending", "--db", db_path, "--policy", policy])
    assert out.output.strip() == "nothing pending"


def test_cli_remember_reports_a_pending_turn(tmp_path, db_path):
    policy = policy_file(tmp_path, closed_port_url())
    out = CliRunner().invoke(main, ["remember", "--db", db_path, "--policy", policy, *TURN])
    assert out.exit_code == 0, out.output
    assert "nothing stored" in out.output and "1 turn(s) pending" in out.output


def test_garbage_from_every_step_still_stores_the_turn_by_rules(fake_openai, lethe):
    judge = Judge(**{step: "sure!" for step in ("gate", "confidence", "contradiction", "expiry")})
    mem = lethe(served(fake_openai, judge).base_url)
    old = seed(mem, "User uses PostgreSQL for the main database")
    ids = mem.remember(*TURN)
    assert mem.pending() == [] and inbox(mem)[0]["status"] == "done"
    [new] = ids
    assert new != old
    notes = [e[2].split(":")[0] for e in events(mem, new) if e[1] == "judge_fallback"]
    assert notes == ["gate", "confidence", "contradiction", "expiry"]
    for step in ("gate", "confidence", "contradiction", "expiry"):
        assert outcomes(mem, step) == ["bad_answer", "bad_answer", "fallback"]
    # the rules judge reads this turn as a replacement of the database
    assert memories(mem)[old]["status"] == "superseded"
    assert memories(mem)[old]["contradicted_by"] == new


def test_add_with_the_model_down_stores_the_memory_by_rules(lethe):
    mem = lethe(closed_port_url())
    old = seed(mem, "The project deadline is March 15")
    new = mem.add("The project deadline was pushed to April 1")
    rows = memories(mem)
    assert rows[new]["content"] == "The project deadline was pushed to April 1"
    assert rows[new]["expires_at"] == "2026-04-01T23:59:59"
    assert rows[old]["status"] == "superseded" and rows[old]["contradicted_by"] == new
    notes = [e[2] for e in events(mem, new) if e[1] == "judge_fallback"]
    assert notes == [
        f"{s}: model unreachable, rules answered" for s in ("confidence", "contradiction", "expiry")
    ]
    assert outcomes(mem) == [
        (s, o) for s in ("confidence", "contradiction", "expiry") for o in ("unavailable", "fallback")
    ]
    assert mem.pending() == []


def test_add_skips_the_gate_and_keeps_the_callers_values(fake_openai, lethe):
    judge = Judge(confidence={"confidence": 0.3}, expiry={"expires_at": "2026-03-01"})
    mem = lethe(served(fake_openai, judge).base_url)
    mid = mem.add(
        "User prefers tabs until March",
        summary="tabs",
        tags=["style"],
        importance=7,
        confidence=0.9,
        kind="preference",
    )
    assert judge.asked == ["expiry"]  # no gate, no confidence, nothing to contradict
    row = memories(mem)[mid]
    assert (row["summary"], json.loads(row["tags"]), row["importance"], row["confidence"], row["kind"]) == (
        "tabs",
        ["style"],
        7.0,
        0.9,
        "preference",
    )
    assert row["expires_at"] == "2026-03-01T23:59:59"
    mid2 = mem.add("User prefers dark mode", expires_at="2026-05-01")
    # expiry given: not asked; "prefers" is shared with the first memory: compared
    assert sorted(judge.asked[1:]) == ["confidence", "contradiction"]
    assert memories(mem)[mid2]["confidence"] == 0.3
    assert memories(mem)[mid2]["expires_at"] == "2026-05-01T23:59:59"  # a bare date: its whole day


def test_add_keeps_an_importance_of_zero(fake_openai, lethe):
    mem = lethe(served(fake_openai, Judge()).base_url)
    mid = mem.add("A passing curiosity about eels", importance=0)
    assert memories(mem)[mid]["importance"] == 0.0


def test_a_memory_changed_meanwhile_is_not_superseded_again(fake_openai, lethe, db_path):
    """Another writer archives the memory while the model judges: the late supersession
    leaves it as the other writer left it (no overwritten status, no second event)."""

    def archive_meanwhile(prompt):
        with open_store(db_path) as other:
            run_sql(other, "UPDATE memories SET status = 'archived' WHERE id = 1")
        return {"supersedes": [1], "confirms": []}

    mem = lethe(served(fake_openai, Judge(contradiction=archive_meanwhile)).base_url)
    old = seed(mem, "User uses PostgreSQL for the main database")
    [new] = mem.remember(*TURN)
    rows = memories(mem)
    assert rows[old]["status"] == "archived" and rows[old]["contradicted_by"] is None
    assert event_types(mem, old) == ["created"]
    assert rows[new]["status"] == "active"


def test_a_confirmation_of_a_memory_superseded_meanwhile_keeps_the_turn(fake_openai, lethe, db_path):
    """Judging happens outside the write transaction. If another writer supersedes the
    memory the model confirms while the model is thinking, the turn must not vanish into a
    superseded memory."""

    def confirm_while_another_writer_supersedes(prompt):
        with open_store(db_path) as other:
            run_sql(other, "UPDATE memories SET status = 'superseded' WHERE id = 1")
        return {"supersedes": [], "confirms": [1]}

    judge = Judge(contradiction=confirm_while_another_writer_supersedes)
    mem = lethe(served(fake_openai, judge).base_url)
    old = seed(mem, "User prefers tabs for indentation", confidence=0.5)
    mem.remember("I prefer tabs for indentation.", "ok")
    rows = memories(mem)
    assert rows[old]["confidence"] == 0.5 and "reinforced" not in event_types(mem, old)
    assert any(r["status"] == "active" and "tabs" in r["content"] for r in rows.values())


# =======================================================================================
# offline: the rules judges on the seed article's examples, through remember / add


@pytest.fixture
def offline(memory):
    return memory("lifecycle")


def active(mem) -> list[dict]:
    return [r for r in memories(mem).values() if r["status"] == "active"]


def test_offline_makes_no_request_and_logs_rules_calls(offline, fake_openai, monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", fake_openai.base_url)
    offline.remember("I use PostgreSQL for the app database.", "ok")
    assert fake_openai.requests == []
    assert {c["provider"] for c in calls(offline)} == {"rules"}
    assert {c["outcome"] for c in calls(offline)} == {"ok"}


def test_offline_postgresql_to_mysql_supersedes(offline):
    [old] = offline.remember("Our app uses PostgreSQL as its database.", "Good choice.")
    [new] = offline.remember("We migrated the app's database to MySQL last week.", "Noted.")
    rows = memories(offline)
    assert rows[old]["status"] == "superseded" and rows[old]["contradicted_by"] == new
    assert events(offline, old)[-1][1:] == (
        "superseded",
        f"superseded by #{new}: {rows[new]['content'][:100]}",
    )
    assert [r["id"] for r in active(offline)] == [new]


def test_offline_moved_deadline_supersedes(offline):
    old = offline.add("The project deadline is March 15.")
    [new] = offline.remember("The deadline got pushed to April 1.", "OK, noted.")
    rows = memories(offline)
    assert rows[old]["status"] == "superseded" and rows[old]["contradicted_by"] == new
    assert rows[new]["expires_at"] == "2026-04-01T23:59:59"


@pytest.mark.parametrize(
    "first,second",
    [
        ("I like Python.", "I also use JavaScript."),
        ("I'm working on the study tracker.", "I added auth to the study tracker."),
        ("I'm working on the study tracker.", "I added auth to it."),
    ],
)
def test_offline_additions_and_progress_supersede_nothing(offline, first, second):
    [a] = offline.remember(first, "ok")
    b = offline.add(second)
    rows = memories(offline)
    assert b != a
    assert rows[a]["status"] == "active" and rows[a]["contradicted_by"] is None
    assert rows[b]["status"] == "active"
    assert event_types(offline, a) == ["created"]


def test_offline_gate_keeps_progress_on_a_project(offline):
    offline.remember("I'm working on the study tracker.", "Cool")
    assert offline.remember("I added auth to the study tracker.", "Nice") != []


def test_offline_waiting_on_someone_gets_an_end_date(offline):
    [mid] = offline.remember("I'm waiting to hear back from Alice about the API spec.", "OK")
    row = memories(offline)[mid]
    assert row["expires_at"] is not None and row["expires_at"] > START.isoformat()
    assert "Alice" in row["content"]
    assert memories(offline)[mid]["status"] == "active"


def test_offline_three_readable_code_preferences_become_one(offline):
    for text in ("User uses vim as their editor.", "User's laptop runs Linux.", "The team meets on Mondays."):
        offline.add(text)
    wordings = [
        "User prefers to keep code readable.",
        "Readable code matters more than clever code.",
        "Always write code that is easy to read.",
    ]
    for text in wordings:
        offline.add(text, importance=6)
    offline.run(["compression"])

    readable = [r for r in active(offline) if "read" in r["content"].lower()]
    assert len(readable) == 1
    assert len(active(offline)) == 4  # the three others untouched
    # nothing lost: every wording is either the survivor, compressed into it, or reinforced it
    rows = memories(offline)
    survivor = readable[0]
    for r in rows.values():
        if r["id"] == survivor["id"] or "read" not in r["content"].lower():
            continue
        assert r["status"] == "compressed"
        assert events(offline, r["id"])[-1][2] == f"merged into #{survivor['id']}"


def test_offline_restating_a_preference_reinforces_it(offline, clock):
    [mid] = offline.remember("I prefer to keep code readable.", "OK")
    clock.advance(dt.timedelta(days=1))
    before = memories(offline)[mid]
    assert offline.remember("Please keep my code readable, always.", "OK") == [mid]
    after = memories(offline)[mid]
    assert len(memories(offline)) == 1
    assert after["access_count"] == before["access_count"] + 1
    assert after["confidence"] == pytest.approx(min(1.0, before["confidence"] + 0.1))
    assert after["last_accessed"] == clock().isoformat(timespec="seconds")
    assert event_types(offline, mid) == ["created", "reinforced"]


def test_offline_flag_overrides_an_openai_policy(tmp_path, db_path, clock):
    policy = policy_file(tmp_path, closed_port_url())
    with Memory(db_path, policy=policy, offline=True, clock=clock) as mem:
        assert len(mem.remember("I use PostgreSQL for the app database.", "ok")) == 1
        assert mem.pending() == []
        assert {c["outcome"] for c in calls(mem)} == {"ok"}


# =======================================================================================
# --record, then --replay with the server stopped: the same memories


def _cli(*args):
    out = CliRunner().invoke(main, [str(a) for a in args])
    assert out.exit_code == 0, out.output
    return out


TURNS = [
    ("We use PostgreSQL for the main database.", "Noted."),
    ("We migrated the main database to MySQL.", "OK, MySQL."),
    ("Waiting on Alice for the API spec until Jan 20.", "Got it."),
]


def _lifecycle_judge():
    return Judge(
        gate=lambda p: {**DEFAULTS["gate"](p), "importance": 7, "tags": ["db"]},
        confidence={"confidence": 0.9},
        contradiction=lambda p: {
            "supersedes": pick(p, "PostgreSQL") if "MySQL" in p.split("Existing")[0] else [],
            "confirms": [],
        },
        expiry=lambda p: {"expires_at": "2026-01-20" if "Alice" in p else None},
    )


def _state(db):
    with sqlite3.connect(db) as conn:
        conn.row_factory = sqlite3.Row
        mems = [
            dict(r)
            for r in conn.execute(
                "SELECT id, content, summary, tags, importance, confidence, status, contradicted_by, "
                "expires_at, created_at FROM memories ORDER BY id"
            )
        ]
        evs = [
            tuple(r)
            for r in conn.execute("SELECT memory_id, event_type, detail FROM memory_events ORDER BY id")
        ]
    return mems, evs


def test_record_then_replay_reproduces_the_memories_without_a_server(tmp_path):
    rec = tmp_path / "answers.jsonl"
    db1, db2 = tmp_path / "recorded.db", tmp_path / "replayed.db"
    now = ("--now", "2026-01-05T09:00:00")
    with FakeOpenAI(responder=_lifecycle_judge()) as fake:
        policy = policy_file(tmp_path, fake.base_url)
        for user, assistant in TURNS:
            _cli("remember", user, assistant, "--db", db1, "--policy", policy, "--record", rec, *now)
        _cli("recall", "which database?", "--db", db1, "--policy", policy, "--record", rec, *now)
        n_requests = len(fake.requests)
    # the first and the third turn share no distinctive word with what is stored: nothing
    # to contradict, so no contradiction call
    assert n_requests == 3 + 4 + 3 + 1
    lines = [json.loads(line) for line in rec.read_text().splitlines()]
    assert sorted(r["step"] for r in lines) == sorted(
        ["gate", "confidence", "expiry"] * 3 + ["contradiction", "select"]
    )
    assert all(set(r) == {"step", "prompt_sha", "answer"} for r in lines)

    # the server is stopped: the policy's base_url refuses connections now
    for user, assistant in TURNS:
        out = _cli(
            "remember", user, assistant, "--db", db2, "--policy", policy, "--replay", rec, *now, "--json"
        )
        assert json.loads(out.output)["pending"] == 0
    recalled = _cli(
        "recall", "which database?", "--db", db2, "--policy", policy, "--replay", rec, *now, "--json"
    )

    mems1, events1 = _state(db1)
    mems2, events2 = _state(db2)
    assert mems2 == mems1 and events2 == events1
    assert [m["status"] for m in mems1] == ["superseded", "active", "active"]
    assert mems1[0]["contradicted_by"] == mems1[1]["id"]
    assert mems1[2]["expires_at"] == "2026-01-20T23:59:59"
    assert sorted(m["id"] for m in json.loads(recalled.output)) == [2, 3]
    assert _cli("pending", "--db", db2, "--policy", policy).output.strip() == "nothing pending"
    with sqlite3.connect(db2) as conn:
        assert {r[0] for r in conn.execute("SELECT provider FROM model_calls")} == {"replay"}
        assert {r[0] for r in conn.execute("SELECT outcome FROM model_calls")} == {"ok"}

    # a turn that was never recorded cannot be answered: it waits, it is not lost
    out = _cli(
        "remember",
        "I switched editors to helix.",
        "ok",
        "--db",
        db2,
        "--policy",
        policy,
        "--replay",
        rec,
        *now,
    )
    assert "1 turn(s) pending" in out.output
    out = _cli("pending", "--db", db2, "--policy", policy)
    assert "no recorded answer for step 'gate'" in out.output and "helix" in out.output


def test_costs_sums_model_calls_per_step_and_model(fake_openai, lethe, db_path, tmp_path):
    judge = Judge(confidence=["sure!", {"confidence": 0.5}])
    mem = lethe(served(fake_openai, judge).base_url)
    mem.remember(*TURN)
    mem.remember("We also cache the main database with Redis.", "ok")  # shares words: compared
    policy = policy_file(tmp_path, fake_openai.base_url)
    data = json.loads(_cli("costs", "--db", db_path, "--policy", policy, "--json").output)
    by_step = {r["step"]: r for r in data}
    assert set(by_step) == {"gate", "confidence", "contradiction", "expiry"}
    assert {r["model"] for r in data} == {"m-cheap"}
    assert by_step["gate"]["calls"] == 2 and by_step["gate"]["failed"] == 0
    conf = by_step["confidence"]
    assert (conf["calls"], conf["ok"], conf["refused"], conf["retried"], conf["failed"]) == (3, 2, 1, 1, 0)
    expected = sum(c["prompt_tokens"] for c in calls(mem, "gate"))
    assert by_step["gate"]["prompt_tokens"] == expected > 0
    text = _cli("costs", "--db", db_path, "--policy", policy).output
    assert "confidence" in text and "3 calls" in text and "1 retried" in text and "0 failed" in text


def test_a_fallback_that_reinforces_still_leaves_an_event(fake_openai, lethe):
    judge = Judge(contradiction="sure!")
    mem = lethe(served(fake_openai, judge).base_url)
    old = seed(mem, "User prefers to keep code readable.")
    assert mem.remember("Please keep my code readable, always.", "OK") == [old]  # rules: a restatement
    assert outcomes(mem, "contradiction") == ["bad_answer", "bad_answer", "fallback"]
    assert "reinforced" in event_types(mem, old)
    assert "judge_fallback" in event_types(mem, old)


def test_candidates_bring_in_the_other_members_of_a_slot_and_skip_common_words(tmp_path):
    """A replacement rarely repeats the old words: "MySQL" must still be compared with
    "PostgreSQL". And a word in thousands of memories must not pick candidates, so the
    query stays small at any store size."""
    from engine import Memory
    from engine.run.matching import RARE, distinctive_query
    from engine.run.write import store_memory

    mem = Memory(str(tmp_path / "m.db"), policy=f"{POLICIES}/lifecycle.yaml", offline=True)
    with store_of(mem).transaction():
        for i in range(RARE + 5):
            store_memory(context_of(mem), f"note {i} about the project")
        old = store_memory(context_of(mem), "Our app stores everything in PostgreSQL.")
    query = distinctive_query(context_of(mem), "We moved the project to MySQL.")
    assert '"postgresql"' in query and '"project"' not in query
    rows = writer_of(mem).judging.candidates(
        mem.policy.write[2], Judged(content="We moved the project to MySQL."), {}
    )
    assert [r["id"] for r in rows] == [old]
    assert distinctive_query(context_of(mem), "the project notes") == '"project" AND "notes"'
    mem.close()


def test_the_candidate_query_keeps_the_rarest_words_within_its_budget(tmp_path, monkeypatch):
    """bm25 costs a few microseconds a matching row: when a turn's words match more than
    MATCHED memories (here 12) together, the words kept are the rarest, until their counts
    would pass it, so a long turn of uncommon words stays bounded too; the rarest word is
    kept even when it alone passes the budget; words under the budget together all stay."""
    from engine import Memory
    from engine.run import matching
    from engine.run.write import store_memory

    monkeypatch.setattr(matching, "MATCHED", 12)
    mem = Memory(str(tmp_path / "m.db"), policy=f"{POLICIES}/lifecycle.yaml", offline=True)
    with store_of(mem).transaction():
        for word, n in (("kestrel", 2), ("osprey", 5), ("heron", 9)):
            for i in range(n):
                store_memory(context_of(mem), f"Saw a {word} at site {i}.")
        for i in range(7):  # 7 + 7 by their counts, but 7 memories match them together
            store_memory(context_of(mem), f"A grebe and a coot on pond {i}.")
    query = matching.distinctive_query(context_of(mem), "A heron, an osprey and a kestrel.")
    assert query == '"osprey" OR "kestrel"'  # 2 + 5 kept; with heron's 9 it would be 16
    assert (
        matching.distinctive_query(context_of(mem), "The grebe and the coot.") == '"grebe" OR "coot"'
    )  # under the budget together: nothing left out
    monkeypatch.setattr(matching, "MATCHED", 1)
    assert matching.distinctive_query(context_of(mem), "A heron and an osprey.") == '"osprey"'
    mem.close()


@pytest.mark.parametrize("archived", [0, 3, 12, 40])
def test_candidates_read_from_the_best_matches_give_what_reading_every_match_gives(tmp_path, archived):
    """The candidate statement reads the rows of the 4 x K best-scored matches only, and
    every match when fewer than K of those pass the policy's where (here: best matches
    archived). Its answer must be the plain statement's, ties at the cut included."""
    from engine import Memory
    from engine.plan import DEFAULT_CANDIDATES, candidates_statement, write_candidates_statement
    from engine.plan.dialect import DIALECTS
    from engine.policy import Candidates
    from engine.policy import expr as X
    from engine.run.write import store_memory

    mem = Memory(str(tmp_path / "m.db"), policy=f"{POLICIES}/lifecycle.yaml", offline=True)
    with store_of(mem).transaction():
        ids = [store_memory(context_of(mem), "Kestrel nest.", importance=9) for _ in range(archived)]
        for i in range(12):  # equal scores: the cut falls among ties
            store_memory(
                context_of(mem), f"A kestrel over the field, seen on walk {i % 3}.", importance=i % 4
            )
        store_memory(
            context_of(mem),
            "The kestrel we saw at the old quarry, long before the new road was built there by the council.",
            importance=5,
        )
    store_of(mem).db.execute(
        "UPDATE memories SET status = 'archived' WHERE id IN (SELECT value FROM json_each(?))",
        (json.dumps(ids),),
    )
    c = DEFAULT_CANDIDATES()
    d = DIALECTS["sqlite"]
    best = write_candidates_statement("contradiction", c, d)
    assert "best AS MATERIALIZED" in best.sql
    plain = candidates_statement(
        "plain",
        Candidates(c.where, [(X.Relevance(X.NUM), True), *c.order], c.limit, c.min, c.k),
        d,
        query=True,
    )
    for k in (1, 2, 3, 5, 20):
        got = store_of(mem).fetch(best, "default", query='"kestrel"', limit=k)
        want = store_of(mem).fetch(plain, "default", query='"kestrel"', limit=k)
        assert [tuple(r) for r in got] == [tuple(r) for r in want]
        assert len(want) == min(k, 13)
    mem.close()


def test_candidates_bring_in_the_words_of_a_synonym_group(tmp_path):
    """A replacement worded with a synonym the judges know ("a new job" for "works as")
    must be shown to them: the full-text search reads the same synonym groups."""
    from engine import Memory
    from engine.run.write import store_memory

    mem = Memory(str(tmp_path / "m.db"), policy=f"{POLICIES}/lifecycle.yaml", offline=True)
    with store_of(mem).transaction():
        old = store_memory(context_of(mem), "User works as a pharmacist in Leith.")
        store_memory(context_of(mem), "User's sister plays the cello.")
    new = Judged(content="Started a new job as a baker at Crumb.")
    rows = writer_of(mem).judging.candidates(mem.policy.write[2], new, {})
    assert [r["id"] for r in rows] == [old]
    mem.close()


def test_confidence_contradiction_and_expiry_are_asked_at_once(fake_openai, lethe):
    """After the gate, the three steps that read only its answer are in flight together:
    each answer waits at a barrier the other two must reach, which sequential calls never
    would (the barrier would time out and the turn stay pending)."""
    barrier = threading.Barrier(3, timeout=5)

    def together(answer):
        def wait(prompt):
            barrier.wait()
            return answer

        return wait

    judge = Judge(
        confidence=together({"confidence": 0.8}),
        contradiction=together({"supersedes": [], "confirms": []}),
        expiry=together({"expires_at": None}),
    )
    mem = lethe(served(fake_openai, judge).base_url, timeout=10)
    seed(mem, "User uses PostgreSQL for the main database")  # something to compare with
    ids = mem.remember(*TURN)
    assert ids and mem.pending() == [] and not barrier.broken
    assert judge.asked[0] == "gate"
    assert sorted(judge.asked[1:]) == ["confidence", "contradiction", "expiry"]
    assert memories(mem)[ids[0]]["confidence"] == 0.8
