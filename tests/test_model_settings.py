"""Model entries: the per-model settings a policy may give, how they are validated, and
that each one reaches the server (through the real openai client, at FakeOpenAI)."""

from __future__ import annotations

import os

import pytest

from engine import Memory
from engine import policy as policy_mod
from engine.base.errors import PolicyError
from tests.helpers import POLICIES, store_of
from tests.helpers.fake_openai import FakeOpenAI

LIFECYCLE = os.path.join(POLICIES, "lifecycle.yaml")


def write_policy(tmp_path, model: str, name: str = "p.yaml") -> str:
    path = tmp_path / name
    path.write_text(f"name: settings\nextends: {LIFECYCLE}\nmodels:\n  cheap: {model}\n")
    return str(path)


def test_every_setting_is_read_into_the_model_entry(tmp_path):
    path = write_policy(
        tmp_path,
        (
            "{provider: openai, model: o4-mini, base_url: 'http://127.0.0.1:9/v1', temperature: null,"
            " max_completion_tokens: 2000, reasoning_effort: low, seed: 42, retries: 2,"
            " response_format: json_object, headers: {X-Team: memory},"
            " extra_body: {chat_template_kwargs: {enable_thinking: false}}, timeout: 12.5}"
        ),
    )
    m = policy_mod.load(path).models["cheap"]
    assert (m.temperature, m.max_completion_tokens, m.max_tokens, m.reasoning_effort, m.seed) == (
        None,
        2000,
        None,
        "low",
        42,
    )
    assert (m.retries, m.response_format, m.headers, m.timeout) == (
        2,
        "json_object",
        {"X-Team": "memory"},
        12.5,
    )
    assert m.extra_body == {"chat_template_kwargs": {"enable_thinking": False}}
    assert m.api_key_env is None


def test_the_defaults():
    m = policy_mod.load(LIFECYCLE).models["cheap"]
    assert (m.temperature, m.retries, m.response_format, m.api_key_env, m.timeout) == (
        0,
        1,
        "json_schema",
        None,
        30.0,
    )
    assert (m.max_completion_tokens, m.max_tokens, m.reasoning_effort, m.seed, m.headers, m.extra_body) == (
        None,
    ) * 6


@pytest.mark.parametrize(
    "setting,problem",
    [
        ("response_format: xml", "must be one of json_schema, json_object, none, got 'xml'"),
        ("retries: -1", "must be a whole number from 0 to 5, got -1"),
        ("retries: 9", "must be a whole number from 0 to 5, got 9"),
        ("retries: 1.5", "must be a whole number"),
        ("max_completion_tokens: 100, max_tokens: 100", "give max_completion_tokens or max_tokens, not both"),
        ("max_tokens: big", "must be a whole number"),
        ("seed: true", "must be a whole number"),
        ("temperature: hot", "must be a number or null"),
        ("timeout: 0", "must be more than 0 and less than a day"),
        ("timeout: .nan", "must be more than 0 and less than a day"),
        ("reasoning_effort: 3", "must be text"),
        ("headers: {X-Count: 3}", "headers are names and values, both text"),
        ("headers: [a]", "must be a mapping"),
        ("extra_body: 5", "must be a mapping"),
        ("reasoning: high", "unknown key 'reasoning'"),
    ],
)
def test_a_bad_setting_is_refused_at_load_time_with_its_place(tmp_path, setting, problem):
    path = write_policy(tmp_path, f"{{provider: openai, model: m, {setting}}}")
    with pytest.raises(PolicyError) as err:
        policy_mod.load(path)
    text = str(err.value)
    assert problem in text and "p.yaml:4:" in text


def test_settings_reach_the_server(tmp_path, clock):
    with FakeOpenAI(responder=lambda r: '{"save": false}') as fake:
        path = write_policy(
            tmp_path,
            (
                f"{{provider: openai, model: o4-mini, base_url: '{fake.base_url}', temperature: null,"
                " max_completion_tokens: 800, reasoning_effort: high, seed: 3, headers: {X-Team: memory},"
                " extra_body: {user: lethe-tests}}"
            ),
        )
        with Memory(str(tmp_path / "m.db"), policy=path, clock=clock) as mem:
            assert mem.remember("hello!", "hi") == []
        [request] = fake.requests
        assert "temperature" not in request
        assert (
            request["max_completion_tokens"],
            request["reasoning_effort"],
            request["seed"],
            request["user"],
        ) == (800, "high", 3, "lethe-tests")
        assert request["response_format"]["json_schema"]["name"] == "gate"
        assert fake.headers[0]["x-team"] == "memory" and fake.invalid == []


@pytest.mark.parametrize("retries,asked", [(0, 1), (1, 2), (3, 4)])
def test_retries_is_how_often_a_refused_answer_is_asked_again(tmp_path, clock, retries, asked):
    with FakeOpenAI(responder=lambda r: "sure!") as fake:
        path = write_policy(
            tmp_path,
            f"{{provider: openai, model: m, base_url: '{fake.base_url}', "
            f"retries: {retries}, max_retries: 0}}",
        )
        with Memory(str(tmp_path / "m.db"), policy=path, clock=clock) as mem:
            mem.remember("I always use uv for Python projects.", "ok")
            outcomes = [
                r[0]
                for r in store_of(mem).db.execute(
                    "SELECT outcome FROM model_calls WHERE step = 'gate' ORDER BY id"
                )
            ]
            attempts = [
                r[0]
                for r in store_of(mem).db.execute(
                    "SELECT attempt FROM model_calls "
                    "WHERE step = 'gate' AND outcome = 'bad_answer' ORDER BY id"
                )
            ]
        assert outcomes == ["bad_answer"] * asked + ["fallback"]
        assert attempts == list(range(asked))
        gate_requests = [r for r in fake.requests if "worth remembering" in r["messages"][1]["content"]]
        assert len(gate_requests) == asked
