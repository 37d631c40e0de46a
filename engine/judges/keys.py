"""Which of a policy's models cannot be asked for want of an API key.

An openai model needs its key (`api_key_env`, default OPENAI_API_KEY) unless it talks to
a server of its own (`base_url`, or $OPENAI_BASE_URL, that is not api.openai.com). The
experiment refuses to start without one; a `Memory` asked to judge without one warns
once, saying what happened instead: the turn is pending (remember), the built-in rules
judged (add, recall), or the passes left the model's part undone (run).
"""

from __future__ import annotations

import os

from engine.judges.endpoint import official, resolve
from engine.policy import Model, Policy


def needs_key(model: Model) -> bool:
    """True when `model` would be refused for want of a key in the environment (the rule
    of engine/judges/endpoint.py: the official endpoint needs one, a server of its own not)."""
    if model.provider != "openai":
        return False
    endpoint = resolve(model.base_url, model.api_key_env)
    if endpoint.key_env is None or os.environ.get(endpoint.key_env):
        return False
    return official(endpoint.base_url)


def missing_key(policy: Policy, names=None) -> Model | None:
    """The first of the policy's models (or of those `names`) that cannot be asked without
    a key, or None."""
    return next(
        (m for name, m in policy.models.items() if (names is None or name in names) and needs_key(m)), None
    )


class NoApiKeyWarning(UserWarning):
    """A turn was left pending because no API key is set: `remember()` says so once. The
    base of every warning that a model was asked without its key (filter on this one)."""

    instead = "the turn is pending"

    def __init__(self, env: str = "OPENAI_API_KEY"):
        self.env = env
        super().__init__(self._advice("offline=True"))

    def _advice(self, offline: str) -> str:
        if os.environ.get(self.env):  # set, so not paired with a server of its own
            return (
                f"{self.env} is set but not paired with its model's server: "
                f"{self.instead}; pass {offline}, or pair it in LETHE_MODEL_KEYS "
                "(VAR=URL: docs/models.md, Keys)"
            )
        return f"no API key: {self.instead}; pass {offline} or set {self.env}"

    def for_cli(self) -> str:
        """The same advice in the words of the command line."""
        return self._advice("--offline")


class RulesJudgedWarning(NoApiKeyWarning):
    """A judgment fell back to the built-in rules because no API key is set (`add()`,
    `recall()`, `explain()`): the answer looks like the model's, so say whose it is."""

    instead = "the built-in rules judged instead"


class PassesUndoneWarning(NoApiKeyWarning):
    """`run()` / `run_due()` asked a model that has no API key: the turns it would judge
    stay pending and compression merges nothing."""

    instead = "the passes left the model's part undone (pending turns, merges)"
