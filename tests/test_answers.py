"""Answer checking, step by step: every shape a real model sends is accepted as it is,
repaired with the repair written down, or refused with a reason. Never read wrongly.

The shapes come from what small and large models, local servers and reasoning models
answer: fences, prose around the JSON, `<think>` preambles, numbers and ids as strings,
alternative key names, truncation, time zones, NaN, deep nesting.
"""

from __future__ import annotations

import datetime as dt
import json

import pytest

from engine.steps import answers
from engine.steps import kinds as steps
from engine.steps.answers import BadAnswer, Check, end_of, finished

NOW = dt.datetime(2026, 1, 5, 9, 0, 0)
SHOWN = frozenset({1, 2, 3})
GATE_OK = (
    '{"save": true, "content": "User manages Python deps with uv", "summary": "deps: uv", '
    '"tags": ["python"], "importance": 7}'
)


def listed(**memory) -> dict:
    """A gate's checked answer that saves these memory fields: a list of one."""
    return {"save": True, "memories": [memory]}


GATE_VALUE = listed(
    content="User manages Python deps with uv", summary="deps: uv", tags=["python"], importance=7.0
)


def check_for(step: str, **kw) -> Check:
    shown = SHOWN if steps.kind(step).shows_candidates else None
    return Check(shown=kw.pop("shown", shown), now=kw.pop("now", NOW), **kw)


def judged(step: str, text, **kw):
    """(value, repairs) for an answer, or raises BadAnswer."""
    found = check_for(step, **kw)
    value = steps.parse(step, text, found)
    return value, found.repairs


# (step, answer text, expected value, a word of the repair or None)
ACCEPTED = [
    ("gate", GATE_OK, GATE_VALUE, None),
    ("gate", "```json\n" + GATE_OK + "\n```", GATE_VALUE, "removed a code fence"),
    ("gate", "```\n" + GATE_OK + "\n```", GATE_VALUE, "removed a code fence"),
    (
        "gate",
        "Here is my judgment:\n```json\n" + GATE_OK + "\n```\nHope that helps!",
        GATE_VALUE,
        "took the JSON out of the one code block",
    ),
    ("gate", "Sure! Here it is: " + GATE_OK, GATE_VALUE, "ignored the prose before"),
    (
        "gate",
        GATE_OK + "\nI saved it because it is a lasting tool choice.",
        GATE_VALUE,
        "ignored the prose after",
    ),
    ("gate", "  \n" + GATE_OK + "\n\n", GATE_VALUE, None),
    ("gate", '{"save": false}', {"save": False}, None),
    ("gate", '{"save": "false", "content": ""}', {"save": False}, "save 'false' read as false"),
    ("gate", '{"save": false, "memories": [{"content": "  "}]}', {"save": False}, None),
    (
        "gate",
        '{"save": " TRUE ", "content": "User uses uv", "importance": 5}',
        listed(content="User uses uv", summary="User uses uv", tags=[], importance=5.0),
        "read as true",
    ),
    (
        "gate",
        '{"save": true, "content": "User uses uv", "importance": "7"}',
        listed(content="User uses uv", summary="User uses uv", tags=[], importance=7.0),
        "importance '7' read as a number",
    ),
    (
        "gate",
        '{"save": true, "content": "User uses uv", "tags": "python, deps", "importance": 6}',
        listed(content="User uses uv", summary="User uses uv", tags=["python", "deps"], importance=6.0),
        "tags given as text",
    ),
    (
        "gate",
        '{"save": true, "content": "User uses uv"}',
        listed(content="User uses uv", summary="User uses uv", tags=[], importance=5.0),
        "importance missing, 5 assumed",
    ),
    ("gate", "<think>The user states a tool. Durable.</think>\n" + GATE_OK, GATE_VALUE, None),
    ("gate", "The user states a tool, so save.</think>" + GATE_OK, GATE_VALUE, None),
    (
        "gate",
        '{"save": true, "memories": [{"content": "User uses uv", "importance": 6}, '
        '{"content": "User deploys on Fridays", "summary": "deploys", "tags": ["ci"], "importance": 5}]}',
        {
            "save": True,
            "memories": [
                {"content": "User uses uv", "summary": "User uses uv", "tags": [], "importance": 6.0},
                {
                    "content": "User deploys on Fridays",
                    "summary": "deploys",
                    "tags": ["ci"],
                    "importance": 5.0,
                },
            ],
        },
        None,
    ),
    (  # junk items among the facts: each dropped and said, the fact kept
        "gate",
        '{"save": true, "memories": [{"content": ""}, "junk", null, '
        '{"content": "User uses uv", "importance": 5}, '
        '{"content": "user uses UV", "importance": 5}, {"content": "x", "why": "y"}]}',
        listed(content="User uses uv", summary="User uses uv", tags=[], importance=5.0),
        "dropped 5 of 6 memories",
    ),
    (  # both shapes at once: the one beside `memories` is a memory too
        "gate",
        '{"save": true, "content": "User uses uv", "importance": 5, '
        '"memories": [{"content": "User deploys on Fridays", "importance": 5}]}',
        {
            "save": True,
            "memories": [
                {"content": "User uses uv", "summary": "User uses uv", "tags": [], "importance": 5.0},
                {
                    "content": "User deploys on Fridays",
                    "summary": "User deploys on Fridays",
                    "tags": [],
                    "importance": 5.0,
                },
            ],
        },
        "content beside memories",
    ),
    ("gate", '{"save": false, "memories": []}', {"save": False}, None),
    ("confidence", '{"confidence": 0.7}', 0.7, None),
    ("confidence", '{"confidence": 1}', 1.0, None),
    ("confidence", "0.3", 0.3, "a bare number read as the confidence"),
    ("confidence", '{"confidence": "0.9"}', 0.9, "confidence '0.9' read as a number"),
    (
        "contradiction",
        '{"supersedes": [2], "confirms": []}',
        {"supersedes": [2], "confirms": [], "reasons": {}},
        None,
    ),
    (
        "contradiction",
        '{"supersedes": [{"n": 2, "reason": "the date moved to April 1"}], "confirms": [3]}',
        {"supersedes": [2], "confirms": [3], "reasons": {2: "the date moved to April 1"}},
        None,
    ),
    (
        "contradiction",
        '{"supersedes": [{"n": 1}], "confirms": []}',
        {"supersedes": [1], "confirms": [], "reasons": {}},
        None,
    ),
    (
        "contradiction",
        '{"supersedes": ["#2"], "confirms": ["3"]}',
        {"supersedes": [2], "confirms": [3], "reasons": {}},
        "supersedes '#2' read as 2",
    ),
    (
        "contradiction",
        '{"supersedes": [2.0]}',
        {"supersedes": [2], "confirms": [], "reasons": {}},
        "supersedes 2.0 read as 2",
    ),
    ("contradiction", '{"confirms": [1]}', {"supersedes": [], "confirms": [1], "reasons": {}}, None),
    (
        "contradiction",
        '{"supersedes": null, "confirms": [1]}',
        {"supersedes": [], "confirms": [1], "reasons": {}},
        "supersedes null read as []",
    ),
    (
        "contradiction",
        "[2]",
        {"supersedes": [2], "confirms": [], "reasons": {}},
        "a bare list read as supersedes",
    ),
    (
        "contradiction",
        '{"supersedes": [2, 2]}',
        {"supersedes": [2], "confirms": [], "reasons": {}},
        "dropped repeated numbers",
    ),
    ("expiry", '{"expires_at": "2026-03-15"}', "2026-03-15T23:59:59", None),
    ("expiry", '{"expires_at": "2026-03-15T00:00:00Z"}', "2026-03-15T23:59:59", None),
    ("expiry", '{"expires_at": "2026-03-15T00:00:00+05:00"}', "2026-03-15T23:59:59", None),
    ("expiry", '{"expires_at": "2026-03-15T17:30:00+02:00"}', "2026-03-15T15:30:00", None),
    ("expiry", '{"expires_at": "2026-03-15T10:00:00"}', "2026-03-15T10:00:00", None),
    ("expiry", '{"expires_at": "2026-03-15 10:00"}', "2026-03-15T10:00:00", None),
    ("expiry", '{"expires_at": "2026-01-05"}', "2026-01-05T23:59:59", None),
    ("expiry", '{"expires_at": "2026-01-05T09:30:00"}', "2026-01-05T09:30:00", None),
    ("expiry", '{"expires_at": null}', None, None),
    ("expiry", '{"expires_at": "null"}', None, "expires_at 'null' read as null"),
    ("expiry", '"2026-03-15"', "2026-03-15T23:59:59", "a bare date read as expires_at"),
    ("select", '{"ids": [3, 1]}', [3, 1], None),
    ("select", '{"ids": []}', [], None),
    ("select", "[1, 2]", [1, 2], "a bare list read as ids"),
    ("select", '{"ids": ["#1", " 2 "]}', [1, 2], "ids '#1' read as 1"),
    ("cluster", '{"clusters": [[1, 2], [3, 1]]}', [[1, 2], [3, 1]], None),
    ("cluster", '{"clusters": []}', [], None),
    ("cluster", '{"clusters": [[1, 2], [3]]}', [[1, 2]], "dropped a group of 1"),
    (
        "merge",
        '{"content": "User indents with spaces", "summary": "spaces", "tags": ["style"]}',
        {"content": "User indents with spaces", "summary": "spaces", "tags": ["style"]},
        None,
    ),
    (
        "merge",
        '{"content": "User indents with spaces", "summary": "' + "s" * 130 + '", "tags": []}',
        {"content": "User indents with spaces", "summary": "s" * 120, "tags": []},
        "summary cut to 120",
    ),
    ("summarise", '{"summary": "The team uses MySQL."}', "The team uses MySQL.", None),
    ("summarise", '"The team uses MySQL."', "The team uses MySQL.", "a bare string read as the summary"),
    (
        "summarise",
        json.dumps({"summary": " ".join(["word"] * 130)}),
        " ".join(["word"] * 100),
        "summary cut from 130 to 100 words",
    ),
    (
        "extract",
        '{"cells": [{"scene": "db", "kind": "decision", "salience": 0.9, "content": "MySQL now."}]}',
        [{"scene": "db", "kind": "decision", "salience": 0.9, "content": "MySQL now."}],
        None,
    ),
    ("extract", '{"cells": []}', [], None),
    (
        "extract",
        '{"cells": [{"scene": "db", "kind": "fact", "salience": 0.5, "content": "MySQL."}, '
        '{"kind": "gossip", "content": "x"}]}',
        [{"scene": "db", "kind": "fact", "salience": 0.5, "content": "MySQL."}],
        "dropped 1 bad cell",
    ),
]


@pytest.mark.parametrize(
    "step,text,value,repair", ACCEPTED, ids=[f"{s}-{i}" for i, (s, *_rest) in enumerate(ACCEPTED)]
)
def test_accepted_answers_and_their_repairs(step, text, value, repair):
    got, repairs = judged(step, text, top_n=6)
    assert got == value
    if repair is None:
        assert repairs == []
    else:
        assert any(repair in r for r in repairs), repairs


FUSED_OK = {
    "save": True,
    "content": "User moved to MySQL",
    "summary": "MySQL",
    "tags": ["db"],
    "importance": 7,
    "confidence": 0.9,
    "supersedes": [{"n": 1, "reason": "db changed"}],
    "confirms": [],
    "expires_at": None,
}


def test_a_fused_answer_is_each_of_its_parts():
    value, repairs = judged("fused", json.dumps(FUSED_OK))
    assert value == {
        "save": True,
        "content": "User moved to MySQL",
        "summary": "MySQL",
        "tags": ["db"],
        "importance": 7.0,
        "confidence": 0.9,
        "supersedes": [1],
        "confirms": [],
        "reasons": {1: "db changed"},
        "expires_at": None,
    }
    assert repairs == []
    assert judged("fused", '{"save": false, "content": "", "supersedes": []}')[0] == {"save": False}
    value, repairs = judged("fused", json.dumps({**FUSED_OK, "save": "true", "expires_at": "2026-02-01"}))
    assert value["save"] is True and value["expires_at"] == "2026-02-01T23:59:59"
    assert repairs == ["save 'true' read as true"]


# (step, answer text, words of the refusal)
REFUSED = [
    # keeps nothing, and gives memories (a 0.5B answered so to 45 of 46 turns)
    ("gate", '{"save": "false", "content": "hi there"}', "save is false but memories with content"),
    (
        "gate",
        '{"save": false, "memories": [{"content": "Order 1001 is delayed.", "importance": 8}]}',
        "save is false but memories with content",
    ),
    ("gate", '{"save": 1, "content": "x"}', "save must be true or false"),
    ("gate", '{"save": "no"}', "save must be true or false"),
    ("gate", '{"save": null}', "save must be true or false"),
    ("gate", '{"keep": true}', "unknown key 'keep' in the gate answer"),
    ("gate", '{"save": true, "content": "x", "importance": 7, "reason": "durable"}', "unknown key 'reason'"),
    ("gate", '{"content": "x"}', "missing 'save'"),
    ("gate", '{"save": true, "content": "User uses uv", "importance": 0.8}', "looks like a 0-1 scale"),
    ("gate", '{"save": true, "content": "User uses uv", "importance": 0}', "from 1 to 10"),
    ("gate", '{"save": true, "content": "User uses uv", "importance": 11}', "from 1 to 10"),
    ("gate", '{"save": true, "content": "User uses uv", "importance": "high"}', "importance is not a number"),
    ("gate", '{"save": true, "content": "User uses uv", "importance": NaN}', "NaN is not a number"),
    ("gate", '{"save": true, "content": "User uses uv", "importance": 1e999}', "got inf"),
    (
        "gate",
        '{"save": true, "content": "User uses uv", "importance": -Infinity}',
        "-Infinity is not a number",
    ),
    ("gate", '{"save": true, "content": "User uses uv", "importance": true}', "importance must be a number"),
    ("gate", '{"save": true, "content": "", "importance": 5}', "content must be non-empty text"),
    (
        "gate",
        '{"save": true, "content": "x", "tags": [1, 2], "importance": 5}',
        "tags must be a list of words",
    ),
    ("gate", '{"save": true, "content": "User uses uv", "importance": 5', "not JSON"),
    ("gate", '{"save": true, "memories": []}', "no usable memory"),
    ("gate", '{"save": true}', "missing 'content'"),
    ("gate", '{"save": true, "memories": "User uses uv"}', "memories must be a list"),
    ("gate", '{"save": true, "memories": [{"content": " "}, {"importance": 5}]}', "no usable memory"),
    ("gate", "true", "must be a JSON object"),
    ("gate", "", "empty answer"),
    ("gate", "   \n ", "empty answer"),
    ("gate", "<think>Let me weigh this. The user", "never closed"),
    ("gate", "<think>done</think>", "empty answer"),
    ("gate", "I think [1] fits: " + GATE_OK, "not JSON"),
    ("gate", '```json\n{"save": false}\n```\nor\n```json\n{"save": true}\n```', "several code blocks"),
    ("gate", "[" * 100_000 + "]" * 100_000, "characters long"),
    ("gate", "[" * 20_000 + "]" * 20_000, "nested too deeply"),
    ("confidence", '{"confidence": 7}', "from 0 to 1, got 7"),
    ("confidence", '{"confidence": -0.1}', "from 0 to 1"),
    ("confidence", '{"confidence": "70%"}', "not a number"),
    ("confidence", '{"confidence": Infinity}', "Infinity is not a number"),
    ("confidence", '{"certainty": 0.7}', "unknown key 'certainty'"),
    ("confidence", '{"confidence": true}', "must be a number"),
    ("confidence", "sure!", "not JSON"),
    ("contradiction", '{"contradicts": [1]}', "unknown key 'contradicts'"),
    ("contradiction", '{"superseded": [1]}', "unknown key 'superseded'"),
    ("contradiction", "{}", "empty"),
    ("contradiction", '{"supersedes": [7]}', "[7] was not shown"),
    ("contradiction", '{"supersedes": [0, -1]}', "were not shown"),
    ("contradiction", '{"supersedes": ["[2]"]}', "must hold the numbers shown"),
    ("contradiction", '{"supersedes": ["two"]}', "must hold the numbers shown"),
    ("contradiction", '{"supersedes": [NaN]}', "NaN is not a number"),
    ("contradiction", '{"supersedes": [1e999]}', "whole numbers, got Infinity"),
    ("contradiction", '{"supersedes": [1.5]}', "whole numbers"),
    ("contradiction", '{"supersedes": [true]}', "whole numbers"),
    ("contradiction", '{"supersedes": "2"}', "must be a list of numbers"),
    ("contradiction", '{"supersedes": [{"id": 2}]}', "unknown key 'id'"),
    ("contradiction", '{"supersedes": [2], "confirms": [2]}', "both superseded and confirmed"),
    ("contradiction", "memory [2] is merely related", "not JSON"),
    ("contradiction", 'Memory [2] is merely related: {"supersedes": [], "confirms": []}', "not JSON"),
    ("contradiction", '{"confirms":[2],"supersedes":[', "not JSON"),
    ("contradiction", '{"supersedes": [99999999999999999999999]}', "not shown"),
    ("expiry", '{"expires_at": "2026-01-04"}', "is before today (2026-01-05)"),
    ("expiry", '{"expires_at": "1970-01-01"}', "is before today"),
    ("expiry", '{"expires_at": "2026-01-05T08:00:00"}', "has already passed"),
    ("expiry", '{"expires_at": "2026-01-05T07:30:00Z"}', "has already passed"),
    ("expiry", '{"expires_at": "9999-12-31T23:59:59-05:00"}', "is not a real date"),
    ("expiry", '{"expires_at": "2026-02-30"}', "is not a real date"),
    ("expiry", '{"expires_at": "2026-03-15T25:00:00"}', "is not a real date"),
    ("expiry", '{"expires_at": "next tuesday"}', "ISO date (YYYY-MM-DD) or null"),
    ("expiry", '{"expires_at": "March 15"}', "ISO date"),
    ("expiry", '{"expires_at": "20260315"}', "ISO date"),
    ("expiry", '{"expires_at": 20260315}', "ISO date"),
    ("expiry", '{"expiry_date": "2026-03-15"}', "unknown key 'expiry_date'"),
    ("expiry", '{"expires_at": "2026-03-15", "reason": "deadline"}', "unknown key 'reason'"),
    ("expiry", "null", "must be a JSON object"),
    ("expiry", "{}", "missing 'expires_at'"),
    ("select", '{"selected_ids": [1]}', "unknown key 'selected_ids'"),
    ("select", '{"relevant_memories": [1]}', "unknown key 'relevant_memories'"),
    ("select", '{"ids": [9]}', "[9] was not shown"),
    ("select", '{"ids": "1, 2"}', "must be a list"),
    ("select", "{}", "missing 'ids'"),
    ("cluster", '{"clusters": [[1, 9]]}', "[9] was not shown"),
    ("cluster", '{"groups": [[1, 2]]}', "unknown key 'groups'"),
    ("cluster", '{"clusters": [[1, 2], "x"]}', "must be a list of numbers"),
    ("merge", '{"summary": "no content"}', "missing 'content'"),
    ("merge", '{"content": "x", "text": "y"}', "unknown key 'text'"),
    ("fused", json.dumps({k: v for k, v in FUSED_OK.items() if k != "confidence"}), "missing 'confidence'"),
    ("fused", json.dumps({**FUSED_OK, "supersedes": [5]}), "[5] was not shown"),
    ("fused", json.dumps({**FUSED_OK, "expires_at": "2025-12-31"}), "before today"),
    ("fused", json.dumps({**FUSED_OK, "mood": "ok"}), "unknown key 'mood'"),
    ("extract", '{"cells": [{"kind": "gossip", "content": "x"}]}', "no usable cell"),
    ("extract", '{"facts": []}', "unknown key 'facts'"),
    ("summarise", '{"text": "x"}', "unknown key 'text'"),
    ("summarise", '{"summary": ""}', "non-empty text"),
]


@pytest.mark.parametrize(
    "step,text,problem", REFUSED, ids=[f"{s}-{i}" for i, (s, *_rest) in enumerate(REFUSED)]
)
def test_refused_answers_say_why(step, text, problem):
    with pytest.raises(BadAnswer) as err:
        judged(step, text)
    assert problem in str(err.value)


def test_a_gate_list_longer_than_the_cap_is_cut_and_says_so():
    items = ", ".join(f'{{"content": "User owns plant number {i}", "importance": 5}}' for i in range(20))
    got, repairs = judged("gate", '{"save": true, "memories": [' + items + "]}")
    assert len(got["memories"]) == answers.MAX_MEMORIES
    assert any(f"first {answers.MAX_MEMORIES} of 20" in r for r in repairs)


def test_a_cap_on_supersessions_is_enforced_when_given():
    text = '{"supersedes": [1, 2, 3], "confirms": []}'
    assert judged("contradiction", text)[0]["supersedes"] == [1, 2, 3]
    with pytest.raises(BadAnswer, match="at most 2 may be superseded"):
        judged("contradiction", text, max_supersedes=2)


def test_select_keeps_top_n_as_a_repair():
    value, repairs = judged("select", '{"ids": [3, 2, 1]}', top_n=2)
    assert value == [3, 2] and repairs == ["kept the first 2 of 3 ids"]


def test_without_a_shown_set_ids_are_only_checked_to_be_numbers():
    assert judged("select", '{"ids": [40, 41]}', shown=None)[0] == [40, 41]
    assert judged("select", '{"ids": []}', shown=frozenset())[0] == []
    with pytest.raises(BadAnswer, match="none were shown"):
        judged("select", '{"ids": [1]}', shown=frozenset())


def test_reasoning_is_set_aside_and_noted_not_repaired():
    found = check_for("confidence")
    assert steps.parse("confidence", '<think>hedged: maybe</think>\n{"confidence": 0.3}', found) == 0.3
    assert found.repairs == [] and found.notes == ["reasoning set aside (28 characters)"]
    # a </think> inside the JSON is data, not the end of a preamble
    found = check_for("merge")
    value = steps.parse("merge", '{"content": "The tag </think> closes thoughts", "tags": []}', found)
    assert value["content"] == "The tag </think> closes thoughts" and found.notes == []


def test_the_rules_judges_answers_pass_through_as_objects():
    assert steps.parse("confidence", {"confidence": 0.5}) == 0.5
    assert steps.parse(
        "gate", {"save": False, "content": "", "summary": "", "tags": [], "importance": 1}
    ) == {"save": False}


@pytest.mark.parametrize(
    "finish,refusal,problem",
    [
        ("length", None, "cut off"),
        ("content_filter", None, "content filter"),
        ("stop", "I can't help with that.", "the model refused: I can't help with that."),
    ],
)
def test_unfinished_or_refused_completions_are_bad_answers(finish, refusal, problem):
    with pytest.raises(BadAnswer, match=problem):
        finished(finish, refusal)


def test_finished_completions_pass():
    finished("stop", None)
    finished(None, "")
    finished("tool_calls", None)


def test_end_of_a_day_and_time_zones():
    assert end_of("2026-03-15") == dt.datetime(2026, 3, 15, 23, 59, 59)
    assert end_of("2026-03-15T00:00:00Z") == dt.datetime(2026, 3, 15, 23, 59, 59)
    assert end_of("2026-03-15T00:00") == dt.datetime(2026, 3, 15, 23, 59, 59)
    assert end_of("2026-03-15T23:30:00-05:00") == dt.datetime(2026, 3, 16, 4, 30)
    assert end_of("2026-03-15T12:00:00.123456") == dt.datetime(2026, 3, 15, 12, 0)


def test_check_of_reads_the_template_variables():
    variables = {"candidates": [{"n": 1}, {"n": 2}, {"x": 3}], "now": NOW, "top_n": 4}
    found = Check.of(variables, shows_candidates=True)
    assert (found.shown, found.now, found.top_n, found.max_supersedes) == (frozenset({1, 2}), NOW, 4, None)
    assert Check.of(variables, shows_candidates=False).shown is None
    assert Check.of({"now": "2026-01-05", "top_n": True}, True).now is None


@pytest.mark.parametrize("written", ["2030-01-01", "20300101", " 2030-01-01 ", "2030-W01-2"])
def test_a_bare_date_in_any_iso_spelling_lasts_through_that_day(written, tmp_path):
    """Before: '20300101' (ISO's basic form) expired at midnight, a day early, where
    '2030-01-01' lasted through it: the rule looked at the text's length."""
    from engine import Memory
    from engine.base.clock import until_end_of_day

    assert until_end_of_day(written) == dt.datetime(2030, 1, 1, 23, 59, 59)
    with Memory(str(tmp_path / "m.db"), offline=True) as mem:
        mid = mem.add("The trial ends then.", expires_at=written, judged=False)
        assert mem.get(mid).expires_at.startswith("2030-01-01T23:59:59")
    assert until_end_of_day("2030-01-01T00:00:00") == dt.datetime(2030, 1, 1)  # a moment
