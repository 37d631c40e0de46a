"""The Python API's answers about what happened: what a remember did, forgetting, and
listing memories by status."""

from __future__ import annotations

import pytest

from engine import LetheError
from engine.judges import Answer

pytestmark = pytest.mark.both_backends  # SQLite and PostgreSQL; see conftest.py


def test_remember_says_what_it_stored_and_superseded(memory):
    mem = memory("lifecycle")
    first = mem.remember("We run CI on Jenkins.", "Noted.")
    assert first == first.stored and first.superseded == [] and first.pending is None
    second = mem.remember("We moved CI from Jenkins to GitHub Actions.", "Got it.")
    assert second.superseded == [(first[0], second[0])]
    assert second.as_dict()["superseded"] == [{"id": first[0], "by": second[0]}]
    assert second.stored == [second[0]] and second.reinforced == []


def test_remember_says_why_a_turn_is_pending(memory, tmp_path):
    policy = tmp_path / "down.yaml"
    policy.write_text(
        "name: down\nextends: lifecycle\nmodels:\n  cheap: {provider: openai, "
        "model: m, base_url: 'http://127.0.0.1:9/v1', timeout: 1, max_retries: 0}\n"
    )
    mem = memory(str(policy), offline=False)
    out = mem.remember("We run CI on Jenkins.", "Noted.")
    assert out == [] and out.pending and len(mem.pending()) == 1


def test_forget_archives_with_the_reason_and_lists_it(memory):
    mem = memory("lifecycle")
    mid = mem.add("The office wifi password is hunter2", judged=False)
    forgotten = mem.forget(mid, "the user asked")
    assert forgotten.status == "archived"
    assert [m.id for m in mem.memories("archived")] == [mid]
    assert mid not in [m.id for m in mem.memories("active")]
    assert [m.id for m in mem.memories("all")] == [mid]
    last = mem.history(mid).events[-1]
    assert last["event_type"] == "forgotten" and "the user asked" in last["detail"]
    with pytest.raises(LetheError, match="archived, not active"):
        mem.forget(mid, "twice")
    with pytest.raises(LetheError, match="no memory #999 in namespace 'default'"):
        mem.forget(999, "absent")


def test_forget_reaches_only_its_own_namespace(memory):
    alice, bob = memory("lifecycle", namespace="alice"), memory("lifecycle", namespace="bob")
    mid = alice.add("Alice's note", judged=False)
    with pytest.raises(LetheError, match="no memory"):
        bob.forget(mid, "not mine")
    assert alice.get(mid).status == "active"


def test_another_namespace_is_never_named_and_namespace_of_says_where(memory):
    alice, bob = memory("lifecycle", namespace="alice"), memory("lifecycle", namespace="bob")
    mid = alice.add("Alice's note", judged=False)
    for call in (lambda: bob.forget(mid, "not mine"), lambda: bob.history(mid)):
        with pytest.raises(LetheError) as refused:
            call()
        assert str(refused.value) == f"no memory #{mid} in namespace 'bob' (it holds 0 memories)"
    assert bob.namespace_of(mid) == "alice" and bob.namespace_of(mid + 1) is None


@pytest.mark.parametrize("huge", [2**63, 2**64, 10**30, 0, -1])
def test_an_id_no_row_can_have_is_no_memory(memory, huge):
    """Past SQLite's 64-bit INTEGER (binding it raised OverflowError), or below 1."""
    mem = memory("lifecycle")
    mem.add("A note", judged=False)
    assert mem.get(huge) is None and mem.namespace_of(huge) is None
    for call in (lambda: mem.forget(huge, "x"), lambda: mem.history(huge)):
        with pytest.raises(LetheError, match=f"no memory #{huge} in namespace 'default'"):
            call()
    assert mem.retry_turns([huge]) == 0


@pytest.mark.parametrize("odd", ["1", 1.0, True, None])
def test_an_id_that_is_not_a_whole_number_is_refused(memory, odd):
    mem = memory("lifecycle")
    mem.add("A note", judged=False)
    with pytest.raises(LetheError, match="an id is a whole number"):
        mem.get(odd)


@pytest.mark.parametrize("call", ["memories", "candidates", "recall", "explain", "recall_context"])
def test_a_limit_is_a_whole_number_from_1_and_a_huge_one_means_no_limit(memory, call):
    mem = memory("lifecycle")
    for text in ("The uv lockfile is committed", "We pin uv in CI"):
        mem.add(text, judged=False)
    args = ("all",) if call == "memories" else ("uv",)
    fn = getattr(mem, call)

    def seen(out):  # what was returned, not the access counts recall records
        if isinstance(out, str):
            return out
        return out.picks if call == "explain" else [m.id for m in out]

    huge = seen(fn(*args, 2**64))  # past SQLite's INTEGER: it raised OverflowError binding it
    assert huge == seen(fn(*args, 2**63 - 1)) and huge
    for bad in (0, -1, 1.5, "3", True):  # -1 was SQLite's "no limit"; 0 an empty answer
        with pytest.raises(LetheError, match=r"(limit|top_n) must be a whole number from 1"):
            fn(*args, bad)


def test_memories_refuses_an_unknown_status(memory):
    with pytest.raises(LetheError, match="unknown status 'gone'"):
        memory("lifecycle").memories("gone")


def test_remember_takes_the_assistant_answer_as_optional(memory):
    """The CLI and the MCP tool make it optional; Memory.remember(user) raised TypeError."""
    mem = memory("lifecycle")
    out = mem.remember("We run CI on Jenkins.")
    assert len(out) == 1 and mem.get(out[0]).content.endswith("CI on Jenkins.")


@pytest.mark.parametrize("clock", [lambda: "2026-01-01", "2026-01-01", lambda: None])
def test_a_clock_that_is_not_one_is_refused_when_the_memory_is_made(tmp_path, clock):
    """`Memory(clock=lambda: "2026-01-01")` raised a bare AttributeError at the first time
    the engine read."""
    from engine import Memory

    with pytest.raises(
        LetheError,
        match=r"clock must (return a datetime|be a zero-argument)"
        r".*FixedClock",
    ):
        Memory(str(tmp_path / "a.db"), offline=True, clock=clock)


def test_the_facade_is_the_only_door(memory):
    """`Memory` keeps its store, plan, judges and writer to itself: what apps needed from
    them are its methods."""
    mem = memory("lifecycle")
    for part in ("store", "plan", "judges", "writer", "context"):
        assert not hasattr(mem, part), part


def test_what_apps_read_through_the_facade(memory, clock):
    mem = memory("lifecycle")
    old = mem.add("User uses poetry.", judged=False)
    new = mem.add("User uses uv.", judged=False)
    mem.correct(old, "User uses uv now.", "switched")
    assert mem.database.endswith("memory.db") or mem.database.startswith("postgres")
    changed = mem.changes()
    assert [(c["id"], c["status"], c["replaced_by"]) for c in changed] == [
        (old, "superseded", "User uses uv now.")
    ]
    dumped = mem.dump()
    assert [d["id"] for d in dumped] == sorted(d["id"] for d in dumped) and len(dumped) == 3
    assert dumped[0]["content"] == "User uses poetry." and dumped[0]["events"][0]["event_type"] == "created"
    assert new in [d["id"] for d in dumped] and mem.scenes() == {}
    assert mem.last_runs() == {} and mem.last_wall_run() is None
    assert "-- pass decay" in mem.compiled_sql()
    assert mem.statements(["decay"]) >= 1 and mem.statements([]) == 0


def test_start_schedules_counts_never_run_passes_as_run_now(memory, clock):
    mem = memory("lifecycle")
    started = mem.start_schedules()
    scheduled = [n for n, p in mem.policy.passes.items() if p.every]
    assert started == scheduled and set(mem.last_runs()) == set(scheduled)
    assert mem.due() == [] and mem.start_schedules() == []


def test_an_apps_own_model_call_is_logged_beside_the_judges(memory):
    mem = memory("lifecycle")
    mem.log_model_call("answer", "chat-model", 0.0, Answer("hi", "chat-model", "openai", 12, 3, 40.0))
    mem.log_model_call("answer", "chat-model", 0.0, problem="connection refused")
    rows = {r["step"]: r for r in mem.costs()}
    assert rows["answer"]["calls"] == 2 and rows["answer"]["unavailable"] == 1
    assert mem.model_use()["calls"] == 2
