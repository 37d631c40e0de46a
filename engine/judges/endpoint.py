"""Where a model's requests go, which credentials go with them, and how the address is shown.

The rule for keys: `OPENAI_API_KEY` (and the rest of the openai client's ambient settings:
`OPENAI_ORG_ID`, `OPENAI_PROJECT_ID`, `OPENAI_CUSTOM_HEADERS`) belongs to `OPENAI_BASE_URL`,
or to the official endpoint when that is unset. A model entry with a `base_url` of its own
gets only the key its policy names in `api_key_env`, or none at all: a policy cannot send
the developer's OpenAI key to a server the policy chose.

A base URL may carry a user, a password or a query string (`?key=...`); every message
shows it as `https://***:***@host/v1?***`.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

from ..errors import LetheError

DEFAULT_BASE_URL = "https://api.openai.com/v1"
OPENAI_HOST = "api.openai.com"
PLACEHOLDER_KEY = "not-needed"      # local servers ignore the key; the client wants one
AMBIENT_HEADERS = ("openai-organization", "openai-project")


class NoKey(LetheError):
    """A model needs a key that is not set."""


@dataclass(frozen=True)
class Endpoint:
    """One model's destination: its URL, the variable its key comes from (None: no key),
    and whether the openai client's ambient environment settings may go there."""

    base_url: str
    key_env: str | None
    ambient: bool

    @property
    def shown(self) -> str:
        return redact(self.base_url)

    def api_key(self, model: str) -> str:
        """The key to send; a placeholder when this endpoint gets none. Raises NoKey."""
        if self.key_env is None:
            return PLACEHOLDER_KEY
        key = os.environ.get(self.key_env)
        if key:
            return key
        if not official(self.base_url):
            return PLACEHOLDER_KEY      # a local server, no key set: it says so if it needs one
        raise NoKey(f"no API key: set {self.key_env}, or point base_url / OPENAI_BASE_URL "
                    f"at an OpenAI-compatible server (model {model!r})")


def resolve(base_url: str | None, api_key_env: str | None) -> Endpoint:
    """The endpoint for a model entry's `base_url` and `api_key_env`."""
    env_url = os.environ.get("OPENAI_BASE_URL") or None
    if base_url is None or official(base_url) or (env_url and _same(base_url, env_url)):
        return Endpoint(base_url or env_url or DEFAULT_BASE_URL,
                        api_key_env or "OPENAI_API_KEY", ambient=True)
    return Endpoint(base_url, api_key_env, ambient=False)


def official(url: str) -> bool:
    parts = urlsplit(url)
    return parts.scheme == "https" and parts.hostname == OPENAI_HOST


def _same(a: str, b: str) -> bool:
    return a.rstrip("/") == b.rstrip("/")


def redact(url: str) -> str:
    """`url` without its user, password and query string (each shown as ***)."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        return "(an unreadable base URL)"
    if parts.username is not None or parts.password is not None:
        cred = "***" if parts.password is None else "***:***"
        host = f"{cred}@{host}"
    return urlunsplit((parts.scheme, host + port, parts.path, "***" if parts.query else "", ""))


def scrub(text: str, url: str | None) -> str:
    """`text` with the secret parts of `url` (user, password, query) replaced by ***."""
    if not url:
        return text
    text = text.replace(url, redact(url))
    try:
        parts = urlsplit(url)
        secrets = [parts.username, parts.password, parts.query]
    except ValueError:
        return text
    for secret in sorted({s for s in secrets if s and len(s) >= 3}, key=len, reverse=True):
        text = text.replace(secret, "***")
    return text


def ambient_header_names() -> set[str]:
    """Headers the openai client adds from the environment (lower-cased)."""
    names = set(AMBIENT_HEADERS)
    for line in (os.environ.get("OPENAI_CUSTOM_HEADERS") or "").split("\n"):
        if ":" in line:
            names.add(line.split(":", 1)[0].strip().lower())
    return names


def foreign_request_hook(api_key: str, own_headers: dict[str, str]):
    """An httpx request hook for an endpoint that is not OpenAI's: removes the headers the
    openai client took from the environment and sends this endpoint's own key."""
    own = {k.lower() for k in own_headers}
    strip = ambient_header_names() - own

    def hook(request) -> None:
        for name in strip:
            if name in request.headers:
                del request.headers[name]
        if "authorization" not in own:
            request.headers["authorization"] = f"Bearer {api_key}"
        for name, value in own_headers.items():
            request.headers[name] = value

    return hook
