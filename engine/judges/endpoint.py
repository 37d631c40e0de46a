"""Where a model's requests go, which credentials go with them, and how the address is shown.

The rule for keys: `OPENAI_API_KEY` (and the rest of the openai client's ambient settings:
`OPENAI_ORG_ID`, `OPENAI_PROJECT_ID`, `OPENAI_CUSTOM_HEADERS`) belongs to `OPENAI_BASE_URL`,
or to the official endpoint when that is unset. A model entry with a `base_url` of its own
gets the key its policy names in `api_key_env` only when the user paired that variable with
that endpoint in $LETHE_MODEL_KEYS, else none at all: a policy cannot send the developer's
OpenAI key, or any other variable, to a server the policy chose. A redirect to another
origin carries nothing of ours.

A base URL may carry a user, a password or a query string (`?key=...`); every message
shows it as `https://***:***@host/v1?***`.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

from engine.base.errors import LetheError

DEFAULT_BASE_URL = "https://api.openai.com/v1"
OPENAI_HOST = "api.openai.com"
PLACEHOLDER_KEY = "not-needed"  # local servers ignore the key; the client wants one
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
        """The key to send; a placeholder when this endpoint gets none. Raises NoKey, also
        for a key a policy names for a base_url of its own that the user has not paired
        with that endpoint in LETHE_MODEL_KEYS (`paired`)."""
        if self.key_env is None:
            return PLACEHOLDER_KEY
        key = os.environ.get(self.key_env)
        if key and not self.ambient and not paired(self.key_env, self.base_url):
            raise NoKey(
                f"the policy names {self.key_env} as the key of {self.shown} (model "
                f"{model!r}); a key a policy names goes only where you paired it: "
                f"set {PAIRS}='{self.key_env}={self.shown}' to send it there"
            )
        if key:
            return key
        if not official(self.base_url):
            return PLACEHOLDER_KEY  # a local server, no key set: it says so if it needs one
        raise NoKey(
            f"no API key: set {self.key_env}, or point base_url / OPENAI_BASE_URL "
            f"at an OpenAI-compatible server (model {model!r})"
        )


PAIRS = "LETHE_MODEL_KEYS"


def paired(key_env: str, base_url: str) -> bool:
    """Whether the user paired the variable `key_env` with `base_url`'s origin in
    $LETHE_MODEL_KEYS ("VAR=URL" items, separated by commas or spaces). A policy is
    hostile input: it may name any variable of the environment (a cloud key, a token)
    and any server, so which key goes where is the user's to say, not the policy's."""
    home = origin(base_url)
    for item in re.split(r"[,\s]+", os.environ.get(PAIRS) or ""):
        name, _, url = item.partition("=")
        if name == key_env and url and origin(url) == home:
            return True
    return False


def resolve(base_url: str | None, api_key_env: str | None) -> Endpoint:
    """The endpoint for a model entry's `base_url` and `api_key_env`."""
    env_url = os.environ.get("OPENAI_BASE_URL") or None
    if base_url is None or official(base_url) or (env_url and _same(base_url, env_url)):
        return Endpoint(
            base_url or env_url or DEFAULT_BASE_URL, api_key_env or "OPENAI_API_KEY", ambient=True
        )
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


def request_hook(endpoint: Endpoint, api_key: str, own_headers: dict[str, str]):
    """An httpx request hook for every request a model's client sends. At the endpoint's own
    origin: an endpoint that is not OpenAI's loses the headers the openai client took from
    the environment and gets its own key and headers. Anywhere else (a redirect, which the
    client follows, and this hook sees again) nothing of ours goes with it: no key, none of
    the entry's headers, none of the environment's."""
    own = {k.lower() for k in own_headers}
    strip = ambient_header_names() - own
    home = origin(endpoint.base_url)

    def hook(request) -> None:
        if origin(str(request.url)) != home:
            for name in {"authorization", *own, *ambient_header_names()}:
                if name in request.headers:
                    del request.headers[name]
            return
        if endpoint.ambient:
            return
        for name in strip:
            if name in request.headers:
                del request.headers[name]
        if "authorization" not in own:
            request.headers["authorization"] = f"Bearer {api_key}"
        for name, value in own_headers.items():
            request.headers[name] = value

    return hook


def origin(url: str) -> tuple:
    """(scheme, host, port) of `url`, the port its scheme's when none is written."""
    try:
        parts = urlsplit(url)
        port = parts.port or {"http": 80, "https": 443}.get(parts.scheme.lower())
        return parts.scheme.lower(), (parts.hostname or "").rstrip(".").lower(), port
    except ValueError:
        return ("", url, None)


def openai_client(
    endpoint: Endpoint, model: str, *, timeout: float, max_retries: int, headers: dict[str, str] | None = None
):
    """The openai client for `endpoint`: its key (raises NoKey), and `request_hook` on every
    request it sends. Chat models and embedding models are built here alike."""
    import openai

    key = endpoint.api_key(model)
    hook = request_hook(endpoint, key, dict(headers or {}))
    return openai.OpenAI(
        api_key=key,
        base_url=endpoint.base_url,
        timeout=timeout,
        max_retries=max_retries,
        default_headers=headers or None,
        http_client=openai.DefaultHttpxClient(event_hooks={"request": [hook]}),
    )
