"""Which of a policy's models cannot be asked for want of an API key.

An openai model needs its key (`api_key_env`, default OPENAI_API_KEY) unless it talks to
a server of its own (`base_url`, or $OPENAI_BASE_URL, that is not api.openai.com). The
experiment refuses to start without one; `remember()` warns once when a turn is left
pending for this reason.
"""
from __future__ import annotations

import os

from .judges.endpoint import official, resolve
from .policy import Model, Policy


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
    return next((m for name, m in policy.models.items()
                 if (names is None or name in names) and needs_key(m)), None)


class NoApiKeyWarning(UserWarning):
    """A turn was left pending because no API key is set: `remember()` says so once."""

    def __init__(self, env: str = "OPENAI_API_KEY"):
        self.env = env
        super().__init__(f"no API key: the turn is pending; pass offline=True or set {env}")

    def for_cli(self) -> str:
        """The same advice in the words of the command line."""
        return f"no API key: the turn is pending; pass --offline or set {self.env}"
