"""The ``openai`` judge provider: any OpenAI-compatible chat-completions endpoint.

``import openai`` below is the real package (absolute import); it is imported lazily
so that ``import engine`` stays fast and works without touching the network stack.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

from engine.errors import LetheError

PLACEHOLDER_KEY = "not-needed"      # local/custom servers usually ignore the key
OPENAI_HOST = "api.openai.com"


class JudgeUnavailable(LetheError):
    """The model is unreachable or kept failing (connection refused, timeout, 5xx, 429 after retries)."""


@dataclass
class Completion:
    """One model answer with its cost and latency."""

    text: str
    model: str
    prompt_tokens: int
    completion_tokens: int
    latency_ms: float


class OpenAIProvider:
    """Asks an OpenAI-compatible chat model; every failure surfaces as :class:`JudgeUnavailable`.

    ``base_url`` defaults to ``$OPENAI_BASE_URL``, then the client's default (api.openai.com).
    The key comes from ``$<api_key_env>``; a custom ``base_url`` without a key gets a
    placeholder key, the official API without a key fails at :meth:`complete` time.
    ``timeout`` (seconds, per attempt) and ``max_retries`` are handed to the openai client,
    which retries connection errors, timeouts, 408/409/429 and 5xx with backoff.
    """

    def __init__(self, model: str, *, temperature: float = 0.0, base_url: str | None = None,
                 api_key_env: str = "OPENAI_API_KEY", timeout: float = 30.0, max_retries: int = 2,
                 json_mode: bool = True):
        self.model = model
        self.temperature = temperature
        self.base_url = base_url or os.environ.get("OPENAI_BASE_URL") or None
        self.api_key_env = api_key_env
        self.timeout = timeout
        self.max_retries = max_retries
        self.json_mode = json_mode
        self._json_rejected = False      # set once the server refused response_format
        self._client: Any = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"OpenAIProvider(model={self.model!r}, base_url={self.base_url!r})"

    def complete(self, prompt: str, *, system: str | None = None) -> Completion:
        """Send one chat completion and return its text, token counts and latency.

        Raises :class:`JudgeUnavailable` when the model cannot answer.
        """
        import openai

        messages = ([{"role": "system", "content": system}] if system is not None else [])
        messages.append({"role": "user", "content": prompt})
        started = time.perf_counter()
        try:
            response = self._create(self._get_client(), messages)
        except openai.OpenAIError as err:
            raise JudgeUnavailable(self._describe(err)) from err
        latency_ms = (time.perf_counter() - started) * 1000.0
        return self._to_completion(response, latency_ms)

    def close(self) -> None:
        """Close the underlying HTTP client (it is rebuilt on the next call)."""
        with self._lock:
            client, self._client = self._client, None
        if client is not None:
            client.close()

    # -- internals -------------------------------------------------------------------
    def _api_key(self) -> str:
        key = os.environ.get(self.api_key_env)
        if key:
            return key
        if self.base_url and urlparse(self.base_url).hostname != OPENAI_HOST:
            return PLACEHOLDER_KEY
        raise JudgeUnavailable(
            f"no API key: set {self.api_key_env}, or point base_url / OPENAI_BASE_URL "
            f"at an OpenAI-compatible server (model {self.model!r})")

    def _get_client(self) -> Any:
        with self._lock:
            if self._client is None:
                import openai

                self._client = openai.OpenAI(api_key=self._api_key(), base_url=self.base_url,
                                             timeout=self.timeout, max_retries=self.max_retries)
            return self._client

    def _create(self, client: Any, messages: list[dict]) -> Any:
        """One create call; if the server rejects ``response_format`` (400/422), once more without it."""
        import openai

        kwargs = {"model": self.model, "messages": messages, "temperature": self.temperature}
        if not self.json_mode or self._json_rejected:
            return client.chat.completions.create(**kwargs)
        try:
            return client.chat.completions.create(**kwargs, response_format={"type": "json_object"})
        except (openai.BadRequestError, openai.UnprocessableEntityError):
            response = client.chat.completions.create(**kwargs)
            self._json_rejected = True   # worked without it: don't send it again
            return response

    def _to_completion(self, response: Any, latency_ms: float) -> Completion:
        choices = getattr(response, "choices", None)
        if not choices:
            raise JudgeUnavailable(f"malformed answer from {self._where()}: no choices")
        usage = getattr(response, "usage", None)   # some local servers omit it -> 0
        return Completion(
            text=choices[0].message.content or "",
            model=getattr(response, "model", None) or self.model,
            prompt_tokens=getattr(usage, "prompt_tokens", 0) or 0,
            completion_tokens=getattr(usage, "completion_tokens", 0) or 0,
            latency_ms=latency_ms,
        )

    def _where(self) -> str:
        return f"{self.model} at {self.base_url or 'the OpenAI API'}"

    def _describe(self, err: Exception) -> str:
        """A short, human message for an openai exception."""
        import openai

        tries = f"max_retries={self.max_retries}"
        if isinstance(err, openai.APITimeoutError):
            return f"{self._where()} timed out ({self.timeout:g}s per attempt, {tries})"
        if isinstance(err, openai.APIConnectionError):
            return f"cannot reach {self._where()} ({_cause(err)}, {tries})"
        if isinstance(err, openai.RateLimitError):
            return f"{self._where()} is rate limiting (HTTP 429, {tries})"
        if isinstance(err, openai.APIStatusError) and err.status_code >= 500:
            return f"{self._where()} failed with HTTP {err.status_code} ({tries})"
        if isinstance(err, openai.APIStatusError):
            return f"{self._where()} refused the request: HTTP {err.status_code}: {_error_message(err)}"
        return f"{self._where()}: {type(err).__name__}: {err}"


def _cause(err: BaseException) -> str:
    """The innermost cause's type name, e.g. ``ConnectError`` or ``RemoteProtocolError``."""
    while err.__cause__ is not None:
        err = err.__cause__
    return type(err).__name__


def _error_message(err: Any) -> str:
    """The ``error.message`` of an OpenAI-style error body, else the exception text."""
    body = getattr(err, "body", None)
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            return str(inner["message"])[:200]
    return str(err)[:200]
