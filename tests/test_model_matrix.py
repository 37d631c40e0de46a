"""Every judge step, through the real `openai` client, against a server that answers the
way real models do: for each answer shape, the engine accepts it, repairs it (and the
model_calls row says so), or refuses it and lets the rules judge answer. Never silently
wrong: a refused shape stores exactly what a plainly unusable answer ("sure!") would.

The server checks every request as OpenAI would and that each carries its step's JSON
schema as a strict `response_format` (`fake.invalid` stays empty). The second half runs
the whole lifecycle (remember, recall, compression) against servers that refuse
json_schema, refuse temperature, send no usage, or think out loud before answering.
"""

from __future__ import annotations

import datetime as dt
import json
import os
from dataclasses import dataclass

import pytest
from click.testing import CliRunner

from engine import FixedClock, Memory
from engine.cli import main as cli
from engine.steps import kinds as steps
from tests.helpers import POLICIES, START, store_of
from tests.helpers.fake_openai import FakeOpenAI, Reply, prompt_text
from tests.helpers.judge import DEFAULTS, FUSED, LIFECYCLE, Judge, pick, policy_file
from tests.helpers.matrix import EXPECTED, MERGED, lifecycle_round, server, step_of
from tests.helpers.rows import calls, events, memories, seed

SCENES = os.path.join(POLICIES, "scenes.yaml")
UNUSABLE = "sure!"  # refused by every step: the rules judge answers instead


@dataclass
class Run:
    """What one turn (or pass, or recall) left behind."""

    mem: Memory
    fake: FakeOpenAI
    value: object  # the step's effect, read back from the store
    outcomes: list[str]  # the step's model_calls outcomes, in order
    details: list[str | None]
    events: list[tuple] = ()  # every memory event, (memory_id, type, detail)
    count: int = 0  # memories stored


# ---- the write steps, one turn each ------------------------------------------------------
TURN = ("I think the project deadline moved to April 1.", "Noted.")
OLD = "The project deadline is March 15"


def effect(step: str, mem: Memory, old: int, ids: list[int]):
    rows = memories(mem)
    new = rows.get(ids[0]) if ids and ids[0] != old else None
    if step == "gate":
        return None if not ids else (new["content"], new["importance"], json.loads(new["tags"]))
    if step == "confidence":
        return new["confidence"]
    if step == "expiry":
        return new["expires_at"]
    if step == "contradiction":
        return (rows[old]["status"], rows[old]["confidence"], sorted(ids))
    if step == "fused":
        return (
            None if not ids else (rows[old]["status"], new and new["confidence"], new and new["expires_at"])
        )
    raise AssertionError(step)


def run_write(tmp_path, clock, step: str, answer, base=LIFECYCLE, **options) -> Run:
    judge = Judge(**{step: answer})
    name = f"db-{len(list(tmp_path.iterdir()))}"
    with server(judge, **options) as fake:
        path = policy_file(tmp_path, fake.base_url, base=base, name=f"{name}.yaml")
        mem = Memory(str(tmp_path / f"{name}.db"), policy=path, clock=clock)
        old = seed(mem, OLD, confidence=0.6)
        clock.advance(dt.timedelta(hours=1))
        ids = mem.remember(*TURN)
        logged = calls(mem, step)
        run = Run(
            mem,
            fake,
            effect(step, mem, old, ids),
            [c["outcome"] for c in logged],
            [c["detail"] for c in logged],
            events(mem),
            len(memories(mem)),
        )
    mem.close()
    assert fake.invalid == [], fake.invalid
    for request in fake.requests:  # each request carried its own step's schema
        assert request["response_format"]["json_schema"]["name"] == step_of(request)
    return run


GATE = {
    "save": True,
    "content": "User thinks the deadline moved to April 1",
    "summary": "deadline: April 1",
    "tags": ["deadline"],
    "importance": 7,
}
GATE_TEXT = json.dumps(GATE)
GATE_STORED = ("User thinks the deadline moved to April 1", 7.0, ["deadline"])
REFUSED = ["bad_answer", "bad_answer", "fallback"]
UNDECIDED = ["bad_answer", "fallback"]

# (step, the model's answer, expected outcomes, the stored effect or REFUSED_EFFECT, repair mark)
REFUSED_EFFECT = object()  # whatever the rules judge decides for an unusable answer
WRITE_MATRIX = [
    ("gate", GATE_TEXT, ["ok"], GATE_STORED, None),
    ("gate", f"```json\n{GATE_TEXT}\n```", ["repaired"], GATE_STORED, "removed a code fence"),
    (
        "gate",
        f"Here is my judgment:\n```json\n{GATE_TEXT}\n```",
        ["repaired"],
        GATE_STORED,
        "code block in prose",
    ),
    ("gate", f"Sure, here it is: {GATE_TEXT}", ["repaired"], GATE_STORED, "ignored the prose before"),
    ("gate", f"<think>A deadline: durable.</think>\n{GATE_TEXT}", ["ok"], GATE_STORED, "reasoning set aside"),
    (
        "gate",
        Reply(content=GATE_TEXT, reasoning="A deadline, so durable."),
        ["ok"],
        GATE_STORED,
        "reasoning field set aside",
    ),
    ("gate", json.dumps({"save": "false"}), ["repaired"], None, "save 'false' read as false"),
    # keeps nothing and gives a memory: not asked again, the rules judge the turn
    ("gate", json.dumps({**GATE, "save": False}), UNDECIDED, REFUSED_EFFECT, "memories with content"),
    ("gate", json.dumps({**GATE, "save": "true"}), ["repaired"], GATE_STORED, "save 'true' read as true"),
    ("gate", json.dumps({**GATE, "importance": "7"}), ["repaired"], GATE_STORED, "importance '7'"),
    ("gate", json.dumps({**GATE, "tags": "deadline"}), ["repaired"], GATE_STORED, "tags given as text"),
    ("gate", json.dumps({**GATE, "importance": 0.8}), REFUSED, REFUSED_EFFECT, "0-1 scale"),
    ("gate", GATE_TEXT.replace('"importance": 7', '"importance": NaN'), REFUSED, REFUSED_EFFECT, "NaN"),
    ("gate", GATE_TEXT.replace('"importance": 7', '"importance": 1e999'), REFUSED, REFUSED_EFFECT, "inf"),
    ("gate", json.dumps({**GATE, "save": "yes"}), REFUSED, REFUSED_EFFECT, "true or false"),
    (
        "gate",
        json.dumps({"keep": True, "content": GATE["content"]}),
        REFUSED,
        REFUSED_EFFECT,
        "unknown key 'keep'",
    ),
    ("gate", json.dumps({**GATE, "reason": "a deadline"}), REFUSED, REFUSED_EFFECT, "unknown key 'reason'"),
    ("gate", Reply(content=GATE_TEXT[:40], finish_reason="length"), REFUSED, REFUSED_EFFECT, "cut off"),
    (
        "gate",
        Reply(content=None, refusal="I can't help with that."),
        REFUSED,
        REFUSED_EFFECT,
        "model refused",
    ),
    ("gate", "", REFUSED, REFUSED_EFFECT, "empty answer"),
    ("gate", "<think>The user mentions a deadline, which", REFUSED, REFUSED_EFFECT, "never closed"),
    ("gate", Reply(body={"choices": [None]}), REFUSED, REFUSED_EFFECT, "choices[0] is null"),
    (
        "gate",
        Reply(body={"choices": [{"index": 0, "message": None}]}),
        REFUSED,
        REFUSED_EFFECT,
        "message is null",
    ),
    ("gate", "[" * 60_000 + "]" * 60_000, REFUSED, REFUSED_EFFECT, "characters long"),
    ("gate", "[" * 20_000 + "]" * 20_000, REFUSED, REFUSED_EFFECT, "nested too deeply"),
    ("confidence", '{"confidence": 0.5}', ["ok"], 0.5, None),
    ("confidence", "0.5", ["repaired"], 0.5, "a bare number"),
    ("confidence", '{"confidence": "0.5"}', ["repaired"], 0.5, "read as a number"),
    ("confidence", '```json\n{"confidence": 0.5}\n```', ["repaired"], 0.5, "code fence"),
    ("confidence", '{"confidence": 7}', REFUSED, REFUSED_EFFECT, "from 0 to 1"),
    ("confidence", '{"confidence": "high"}', REFUSED, REFUSED_EFFECT, "not a number"),
    ("confidence", '{"confidence": NaN}', REFUSED, REFUSED_EFFECT, "NaN"),
    ("confidence", '{"confidence": Infinity}', REFUSED, REFUSED_EFFECT, "Infinity"),
    ("confidence", '{"certainty": 0.5}', REFUSED, REFUSED_EFFECT, "unknown key 'certainty'"),
    ("contradiction", '{"supersedes": [1], "confirms": []}', ["ok"], ("superseded", 0.6, [2]), None),
    (
        "contradiction",
        '{"supersedes": [{"n": 1, "reason": "the deadline moved"}], "confirms": []}',
        ["ok"],
        ("superseded", 0.6, [2]),
        None,
    ),
    (
        "contradiction",
        '{"supersedes": ["#1"], "confirms": []}',
        ["repaired"],
        ("superseded", 0.6, [2]),
        "'#1' read as 1",
    ),
    ("contradiction", '{"supersedes": ["1"]}', ["repaired"], ("superseded", 0.6, [2]), "'1' read as 1"),
    ("contradiction", "[1]", ["repaired"], ("superseded", 0.6, [2]), "a bare list read as supersedes"),
    # a confirms of a memory that says something else: refused, the new memory stored
    ("contradiction", '{"supersedes": [], "confirms": [1]}', ["ok"], ("active", 0.6, [2]), None),
    ("contradiction", '{"supersedes": [], "confirms": []}', ["ok"], ("active", 0.6, [2]), None),
    (
        "contradiction",
        "Memory [1] is merely related, it does not change.",
        REFUSED,
        REFUSED_EFFECT,
        "not JSON",
    ),
    ("contradiction", '{"confirms":[1],"supersedes":[', REFUSED, REFUSED_EFFECT, "not JSON"),
    (
        "contradiction",
        Reply(content='{"confirms":[1],"supersedes":[', finish_reason="length"),
        REFUSED,
        REFUSED_EFFECT,
        "cut off",
    ),
    ("contradiction", '{"contradicts": [1]}', REFUSED, REFUSED_EFFECT, "unknown key 'contradicts'"),
    ("contradiction", '{"supersedes": [2]}', REFUSED, REFUSED_EFFECT, "[2] was not shown"),
    ("contradiction", '{"supersedes": [NaN]}', REFUSED, REFUSED_EFFECT, "NaN"),
    ("contradiction", '{"supersedes": [1e999]}', REFUSED, REFUSED_EFFECT, "whole numbers"),
    ("contradiction", '{"supersedes": ["[1]"]}', REFUSED, REFUSED_EFFECT, "numbers shown"),
    ("contradiction", '{"supersedes": [1], "confirms": [1]}', REFUSED, REFUSED_EFFECT, "both superseded"),
    ("contradiction", "{}", REFUSED, REFUSED_EFFECT, "empty"),
    ("expiry", '{"expires_at": "2026-04-01"}', ["ok"], "2026-04-01T23:59:59", None),
    ("expiry", '{"expires_at": "2026-04-01T00:00:00Z"}', ["ok"], "2026-04-01T23:59:59", None),
    ("expiry", '{"expires_at": "2026-04-01T17:00:00+02:00"}', ["ok"], "2026-04-01T15:00:00", None),
    ("expiry", '{"expires_at": null}', ["ok"], None, None),
    ("expiry", '{"expires_at": "none"}', ["repaired"], None, "read as null"),
    ("expiry", '"2026-04-01"', ["repaired"], "2026-04-01T23:59:59", "a bare date"),
    ("expiry", '{"expires_at": "1970-01-01"}', REFUSED, REFUSED_EFFECT, "before today"),
    ("expiry", '{"expires_at": "2026-01-04T23:00:00"}', REFUSED, REFUSED_EFFECT, "before today"),
    ("expiry", '{"expires_at": "9999-12-31T23:59:59-05:00"}', REFUSED, REFUSED_EFFECT, "not a real date"),
    ("expiry", '{"expires_at": "2026-02-30"}', REFUSED, REFUSED_EFFECT, "not a real date"),
    ("expiry", '{"expires_at": "April 1"}', REFUSED, REFUSED_EFFECT, "ISO date"),
    ("expiry", '{"expiry_date": "2026-04-01"}', REFUSED, REFUSED_EFFECT, "unknown key 'expiry_date'"),
    ("expiry", "null", REFUSED, REFUSED_EFFECT, "must be a JSON object"),
]


@pytest.fixture
def fallback_effects(tmp_path_factory):
    """What the rules judge stores for each write step when the model answers UNUSABLE."""
    cache: dict[str, object] = {}

    def get(step: str, clock_start=START):
        if step not in cache:
            run = run_write(
                tmp_path_factory.mktemp(f"baseline-{step}"), FixedClock(clock_start), step, UNUSABLE
            )
            assert run.outcomes == REFUSED
            cache[step] = run.value
        return cache[step]

    return get


@pytest.mark.parametrize(
    "step,answer,outcomes,stored,mark",
    WRITE_MATRIX,
    ids=[f"{s}-{i}" for i, (s, *_rest) in enumerate(WRITE_MATRIX)],
)
def test_write_steps_over_http(tmp_path, clock, fallback_effects, step, answer, outcomes, stored, mark):
    run = run_write(tmp_path, clock, step, answer)
    assert run.outcomes == outcomes
    if stored is REFUSED_EFFECT:
        assert run.value == fallback_effects(step)
        assert mark in run.details[0]
        retries = [r for r in run.fake.requests if step_of(r) == step][1:]
        if outcomes == UNDECIDED:
            assert not retries  # not asked again: the rules judged at once
        else:  # the retry told the model why its answer was refused
            assert retries and mark in retries[0]["messages"][-1]["content"]
        noted = [e[2] for e in run.events if e[1] == "judge_fallback"]
        stored_any = run.count > 1 or [e for e in run.events if e[0] == 1][-1][1] != "created"
        assert not stored_any or any(n.startswith(f"{step}: ") for n in noted)  # said so
    else:
        assert run.value == stored
        if mark:
            assert mark in (run.details[-1] or "")


# ---- fused: the whole write in one call ---------------------------------------------------
FUSED_OK = {
    **GATE,
    "confidence": 0.7,
    "supersedes": [{"n": 1, "reason": "moved to April 1"}],
    "confirms": [],
    "expires_at": "2026-04-01",
}
FUSED_MATRIX = [
    (json.dumps(FUSED_OK), ["ok"], ("superseded", 0.7, "2026-04-01T23:59:59"), None),
    (
        json.dumps({**FUSED_OK, "save": "true", "supersedes": ["#1"]}),
        ["repaired"],
        ("superseded", 0.7, "2026-04-01T23:59:59"),
        "'#1' read as 1",
    ),
    (json.dumps({"save": "false"}), ["repaired"], None, "save 'false'"),
    (json.dumps({**FUSED_OK, "save": False}), UNDECIDED, REFUSED_EFFECT, "memories with content"),
    (
        json.dumps({k: v for k, v in FUSED_OK.items() if k != "expires_at"}),
        ["repaired"],
        ("superseded", 0.7, None),
        "expires_at missing",
    ),
    (json.dumps({**FUSED_OK, "importance": 0.7}), REFUSED, REFUSED_EFFECT, "0-1 scale"),
    (json.dumps({**FUSED_OK, "supersedes": [3]}), REFUSED, REFUSED_EFFECT, "not shown"),
    (json.dumps({**FUSED_OK, "expires_at": "1970-01-01"}), REFUSED, REFUSED_EFFECT, "before today"),
    (
        json.dumps({k: v for k, v in FUSED_OK.items() if k != "confidence"}),
        REFUSED,
        REFUSED_EFFECT,
        "missing 'confidence'",
    ),
    (json.dumps({**FUSED_OK, "contradicts": [1]}), REFUSED, REFUSED_EFFECT, "unknown key"),
]


@pytest.mark.parametrize(
    "answer,outcomes,stored,mark", FUSED_MATRIX, ids=[f"fused-{i}" for i in range(len(FUSED_MATRIX))]
)
def test_the_fused_step_over_http(tmp_path, clock, answer, outcomes, stored, mark):
    run = run_write(tmp_path, clock, "fused", answer, base=FUSED)
    assert run.outcomes == outcomes
    if stored is REFUSED_EFFECT:
        baseline = run_write(tmp_path, clock, "fused", UNUSABLE, base=FUSED)
        assert run.value == baseline.value and mark in run.details[0]
    else:
        assert run.value == stored
        assert mark is None or mark in run.details[-1]


# ---- recall's select ---------------------------------------------------------------------------
def run_select(tmp_path, clock, answer, **options) -> Run:
    judge = Judge(select=answer)
    with server(judge, **options) as fake:
        path = policy_file(tmp_path, fake.base_url, name=f"s{len(list(tmp_path.iterdir()))}.yaml")
        mem = Memory(str(tmp_path / f"s{len(list(tmp_path.iterdir()))}.db"), policy=path, clock=clock)
        for text in ("The main database is MySQL", "Database backups run nightly", "User likes green tea"):
            seed(mem, text)
        got = [m.id for m in mem.recall("which database and backups do we use?")]
        logged = calls(mem, "select")
    mem.close()
    assert fake.invalid == []
    return Run(mem, fake, got, [c["outcome"] for c in logged], [c["detail"] for c in logged])


SELECT_MATRIX = [
    ('{"ids": [2, 1]}', ["ok"], "shown", None),
    ('{"ids": []}', ["ok"], [], None),
    ('{"ids": ["#2", "1"]}', ["repaired"], "shown", "read as 2"),
    ('```json\n{"ids": [2, 1]}\n```', ["repaired"], "shown", "code fence"),
    ("[2, 1]", ["repaired"], "shown", "bare list"),
    ('{"selected_ids": [2, 1]}', REFUSED, REFUSED_EFFECT, "unknown key 'selected_ids'"),
    ('{"relevant_memories": [2, 1]}', REFUSED, REFUSED_EFFECT, "unknown key 'relevant_memories'"),
    ('{"ids": [9]}', REFUSED, REFUSED_EFFECT, "not shown"),
    ("I would pick [2] and [1].", REFUSED, REFUSED_EFFECT, "not JSON"),
    ('{"ids": [NaN]}', REFUSED, REFUSED_EFFECT, "NaN"),
]


@pytest.mark.parametrize(
    "answer,outcomes,picked,mark", SELECT_MATRIX, ids=[f"select-{i}" for i in range(len(SELECT_MATRIX))]
)
def test_select_over_http(tmp_path, clock, answer, outcomes, picked, mark):
    run = run_select(tmp_path, clock, answer)
    assert run.outcomes == outcomes
    if picked is REFUSED_EFFECT:
        assert run.value == run_select(tmp_path, clock, UNUSABLE).value
        assert mark in run.details[0]
    elif picked == "shown":
        assert len(run.value) == 2 and set(run.value) <= {1, 2, 3}
        assert mark is None or mark in run.details[-1]
    else:
        assert run.value == picked


# ---- compression: cluster and merge ---------------------------------------------------------
def run_compression(tmp_path, clock, **answers) -> Run:
    judge = Judge(**answers)
    with server(judge) as fake:
        tag = len(list(tmp_path.iterdir()))
        path = policy_file(tmp_path, fake.base_url, name=f"c{tag}.yaml")
        mem = Memory(str(tmp_path / f"c{tag}.db"), policy=path, clock=clock)
        for text in (
            "User wants code kept readable",
            "Readable code matters to the user",
            "User prefers readable code over clever code",
            "User lives in Lisbon",
            "User's cat is called Miso",
        ):
            seed(mem, text)
        mem.run(["compression"])
        rows = memories(mem)
        merged = sorted(r["content"] for r in rows.values() if r["id"] > 5)
        compressed = sorted(i for i, r in rows.items() if r["status"] == "compressed")
        logged = calls(mem)
    mem.close()
    assert fake.invalid == []
    return Run(
        mem,
        fake,
        (merged, compressed),
        [(c["step"], c["outcome"]) for c in logged],
        [c["detail"] for c in logged],
    )


def _readable(p):
    return {"clusters": [pick(p, "readable")]}


@pytest.mark.parametrize(
    "cluster,merge,outcomes,value",
    [
        (
            _readable,
            MERGED,
            [("cluster", "ok"), ("merge", "ok")],
            (["User wants readable code over clever code"], [1, 2, 3]),
        ),
        (
            lambda p: "```json\n" + json.dumps(_readable(p)) + "\n```",
            MERGED,
            [("cluster", "repaired"), ("merge", "ok")],
            (["User wants readable code over clever code"], [1, 2, 3]),
        ),
        (
            lambda p: {"groups": _readable(p)["clusters"]},
            MERGED,
            [("cluster", "bad_answer"), ("cluster", "bad_answer"), ("cluster", "fallback")],
            "rules",
        ),
        (
            lambda p: {"clusters": [[1, 99]]},
            MERGED,
            [("cluster", "bad_answer"), ("cluster", "bad_answer"), ("cluster", "fallback")],
            "rules",
        ),
        (
            _readable,
            {"summary": "no content"},
            [("cluster", "ok"), ("merge", "bad_answer"), ("merge", "bad_answer"), ("merge", "fallback")],
            "merged by rules",
        ),
    ],
)
def test_compression_over_http(tmp_path, clock, cluster, merge, outcomes, value):
    run = run_compression(tmp_path, clock, cluster=cluster, merge=merge)
    assert run.outcomes[: len(outcomes)] == outcomes
    if value == "rules":
        baseline = run_compression(tmp_path, clock, cluster=UNUSABLE, merge=MERGED)
        assert run.value == baseline.value
    elif value == "merged by rules":
        merged, compressed = run.value
        assert compressed == [1, 2, 3] and len(merged) == 1 and merged[0] != MERGED["content"]
    else:
        assert run.value == value


# ---- scenes: extract and summarise ---------------------------------------------------------
def run_scenes(tmp_path, clock, extract, summarise) -> Run:
    judge = Judge(extract=extract, summarise=summarise)
    with server(judge) as fake:
        tag = len(list(tmp_path.iterdir()))
        path = policy_file(tmp_path, fake.base_url, base=SCENES, name=f"x{tag}.yaml")
        mem = Memory(str(tmp_path / f"x{tag}.db"), policy=path, clock=clock)
        mem.remember("We decided to use SQLite with full-text search.", "Simple and fast.")
        cells = [tuple(r) for r in store_of(mem).db.execute("SELECT kind, scene, content FROM memories")]
        scenes = dict(store_of(mem).db.execute("SELECT scene, summary FROM scenes").fetchall())
        logged = calls(mem)
    mem.close()
    assert fake.invalid == []
    return Run(
        mem, fake, (cells, scenes), [(c["step"], c["outcome"]) for c in logged], [c["detail"] for c in logged]
    )


CELL = {"scene": "storage", "kind": "decision", "salience": 0.9, "content": "The team uses SQLite with FTS."}


@pytest.mark.parametrize(
    "extract,summarise,outcomes,value",
    [
        (
            {"cells": [CELL]},
            {"summary": "SQLite with FTS."},
            [("extract", "ok"), ("summarise", "ok")],
            ([("decision", "storage", CELL["content"])], {"storage": "SQLite with FTS."}),
        ),
        (
            {"cells": [CELL, {"kind": "gossip", "content": "x"}]},
            '"SQLite with FTS."',
            [("extract", "repaired"), ("summarise", "repaired")],
            ([("decision", "storage", CELL["content"])], {"storage": "SQLite with FTS."}),
        ),
        (
            {"cells": [{"kind": "gossip", "content": "x"}]},
            {"summary": "x"},
            [("extract", "bad_answer"), ("extract", "bad_answer"), ("extract", "failed")],
            ([], {}),
        ),
        (
            {"cells": [CELL]},
            {"text": "x"},
            [
                ("extract", "ok"),
                ("summarise", "bad_answer"),
                ("summarise", "bad_answer"),
                ("summarise", "fallback"),
            ],
            "rules summary",
        ),
    ],
)
def test_scene_steps_over_http(tmp_path, clock, extract, summarise, outcomes, value):
    run = run_scenes(tmp_path, clock, extract, summarise)
    assert run.outcomes == outcomes
    if value == "rules summary":
        cells, scenes = run.value
        assert cells == [("decision", "storage", CELL["content"])] and scenes["storage"] != "x"
    else:
        assert run.value == value


# ---- whole servers, end to end ---------------------------------------------------------------
ALL_STEPS = ["gate", "confidence", "contradiction", "expiry", "select", "cluster", "merge"]


def _outcomes(mem) -> list[tuple[str, str]]:
    # steps asked at once (confidence, contradiction, expiry) log in the order they finish
    return sorted(((c["step"], c["outcome"]) for c in calls(mem)), key=lambda p: ALL_STEPS.index(p[0]))


def test_a_server_that_follows_schemas(tmp_path, clock):
    mem, fake, facts = lifecycle_round(tmp_path, clock)
    assert facts == EXPECTED and fake.invalid == []
    assert _outcomes(mem) == [(s, "ok") for s in ALL_STEPS]
    assert (
        sorted((r["response_format"]["json_schema"]["name"] for r in fake.requests), key=ALL_STEPS.index)
        == ALL_STEPS
    )
    assert all(
        r["response_format"]["json_schema"]["schema"]
        == steps.schema(r["response_format"]["json_schema"]["name"])
        for r in fake.requests
    )
    mem.close()


def test_a_server_that_refuses_json_schema(tmp_path, clock):
    mem, fake, facts = lifecycle_round(tmp_path, clock, refuse=("json_schema",))
    assert facts == EXPECTED and fake.invalid == []
    assert _outcomes(mem) == [(s, "ok") for s in ALL_STEPS]
    # once per model (cheap at the gate, strong at the merge), then remembered
    assert fake.refused == ["json_schema", "json_schema"]
    assert [r["response_format"]["type"] for r in fake.requests] == ["json_schema"] + ["json_object"] * 6 + [
        "json_schema",
        "json_object",
    ]
    mem.close()


def test_a_server_that_refuses_temperature(tmp_path, clock):
    mem, fake, facts = lifecycle_round(tmp_path, clock, refuse=("temperature",))
    assert facts == EXPECTED and fake.invalid == []
    assert _outcomes(mem) == [(s, "ok") for s in ALL_STEPS]
    # once per model: the cheap one at the first call, the strong one at the merge
    assert fake.refused == ["temperature", "temperature"]
    assert ["temperature" in r for r in fake.requests] == [
        True,
        False,
        False,
        False,
        False,
        False,
        False,
        True,
        False,
    ]
    mem.close()


def test_a_server_without_usage_is_costed_by_estimate(tmp_path, clock, db_path):
    mem, fake, facts = lifecycle_round(tmp_path, clock, omit_usage=True)
    assert facts == EXPECTED
    rows = calls(mem)
    assert {r["tokens_estimated"] for r in rows} == {1}
    assert all(r["prompt_tokens"] > 0 and r["completion_tokens"] > 0 for r in rows)
    policy = str(tmp_path / "round.yaml")
    data = json.loads(
        CliRunner().invoke(cli, ["costs", "--db", store_of(mem).path, "--policy", policy, "--json"]).output
    )
    assert {r["step"]: r["estimated"] for r in data} == {s: 1 for s in ALL_STEPS}
    text = CliRunner().invoke(cli, ["costs", "--db", store_of(mem).path, "--policy", policy]).output
    assert "out* " in text and "(*1 estimated)" in text
    mem.close()


def test_a_server_that_thinks_out_loud_first(tmp_path, clock):
    mem, fake, facts = lifecycle_round(tmp_path, clock, think="Let me weigh this carefully.")
    assert facts == EXPECTED and fake.invalid == []
    assert _outcomes(mem) == [(s, "ok") for s in ALL_STEPS]
    assert {c["detail"] for c in calls(mem)} == {"reasoning set aside (43 characters)"}
    mem.close()


def test_a_server_with_a_separate_reasoning_field(tmp_path, clock):
    mem, fake, facts = lifecycle_round(tmp_path, clock, reasoning="The user moved databases.")
    assert facts == EXPECTED
    assert _outcomes(mem) == [(s, "ok") for s in ALL_STEPS]
    assert {c["detail"] for c in calls(mem)} == {"reasoning field set aside (25 characters)"}
    mem.close()


def test_costs_per_step_count_repairs_retries_fallbacks_and_failures(tmp_path, clock):
    judge = Judge(
        gate=[lambda p: "```json\n" + json.dumps(DEFAULTS["gate"](p)) + "\n```"],
        confidence=["sure!", {"confidence": 0.4}],
        contradiction=UNUSABLE,
    )
    with server(judge) as fake:
        path = policy_file(tmp_path, fake.base_url, name="costs.yaml")
        mem = Memory(str(tmp_path / "costs.db"), policy=path, clock=clock)
        seed(mem, OLD)
        mem.remember(*TURN)
    out = CliRunner().invoke(cli, ["costs", "--db", str(tmp_path / "costs.db"), "--policy", path, "--json"])
    rows = {(r["step"], r["model"]): r for r in json.loads(out.output)}
    pick_ = ("ok", "repaired", "retried", "refused", "fell_back", "failed")
    assert {k: tuple(v[c] for c in pick_) for k, v in rows.items()} == {
        ("gate", "m-cheap"): (0, 1, 0, 0, 0, 0),
        ("confidence", "m-cheap"): (1, 0, 1, 1, 0, 0),
        ("contradiction", "m-cheap"): (0, 0, 1, 2, 0, 0),
        ("contradiction", "rules"): (0, 0, 0, 0, 1, 0),  # the rules answered: fell back, not failed
        ("expiry", "m-cheap"): (1, 0, 0, 0, 0, 0),
    }
    mem.close()


def test_unavailability_and_credentials_in_errors_are_redacted(tmp_path, clock):
    with server(Judge(gate=Reply(status=500, content="upstream"))) as fake:
        url = fake.base_url.replace("http://", "http://ops:hunter22@") + "?token=t0psecret"
        path = policy_file(tmp_path, url, name="secret.yaml")
        mem = Memory(str(tmp_path / "secret.db"), policy=path, clock=clock)
        assert mem.remember(*TURN) == []
        [turn] = [dict(r) for r in store_of(mem).db.execute("SELECT * FROM inbox")]
        details = " ".join(c["detail"] or "" for c in calls(mem))
        for secret in ("ops", "hunter22", "t0psecret"):
            assert secret not in turn["last_error"] and secret not in details
        assert "http://***:***@127.0.0.1:" in turn["last_error"]
        mem.close()


def test_every_request_is_a_valid_openai_request_with_its_steps_schema(tmp_path, clock):
    judge = Judge()
    with server(judge) as fake:
        path = policy_file(tmp_path, fake.base_url, name="v.yaml")
        with Memory(str(tmp_path / "v.db"), policy=path, clock=clock) as mem:
            seed(mem, OLD)
            mem.remember(*TURN)
        for request in fake.requests:
            rf = request["response_format"]
            assert rf["type"] == "json_schema" and rf["json_schema"]["strict"] is True
            assert rf["json_schema"]["schema"] == steps.schema(step_of(request))
            assert request["temperature"] == 0
            assert "Answer with JSON only" in prompt_text(request)
        assert fake.invalid == []
