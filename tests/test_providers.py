"""The provider registry: a policy's `provider:` name -> what answers its prompts."""

from __future__ import annotations

import pytest

from engine.base.errors import LetheError
from engine.judges import PROVIDERS, Judges, register_provider, registered
from engine.judges.providers import RULES, Answer, ReplayProvider
from engine.policy import PROVIDERS as POLICY_PROVIDERS
from engine.policy import Model, load
from tests.helpers import POLICIES


def test_every_provider_a_policy_may_name_is_registered_and_none_other():
    assert sorted(PROVIDERS) == sorted(POLICY_PROVIDERS)


def test_an_unknown_provider_is_an_error_naming_the_known_ones():
    with pytest.raises(LetheError) as caught:
        registered("antropic")
    assert "'antropic'" in str(caught.value)
    assert "known providers: openai, replay, rules" in str(caught.value)


def test_judges_make_a_model_through_the_registry(monkeypatch, tmp_path):
    policy = load(f"{POLICIES}/lifecycle.yaml")
    judges = Judges(policy, store=None, namespace="default")
    assert judges._make(Model("offline", "rules")) is RULES
    (tmp_path / "answers.jsonl").write_text("")
    assert isinstance(
        judges._make(Model("r", "replay", file=str(tmp_path / "answers.jsonl"))), ReplayProvider
    )
    with pytest.raises(LetheError, match="unknown model provider 'nowhere'"):
        judges._make(Model("x", "nowhere"))

    class Echo:
        name = "echo"

        def ask(self, step, prompt, variables, retry=()):
            return Answer(prompt, "echo", "echo")

    monkeypatch.setitem(PROVIDERS, "echo", PROVIDERS["rules"])  # restored after the test
    register_provider("echo", remote=True)(lambda spec, policy, store: Echo())
    made = judges._make(Model("e", "echo"))
    assert made.ask("gate", "the prompt", {}).value == "the prompt"
    assert registered("echo").remote
