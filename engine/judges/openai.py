"""The ``openai`` judge provider: any OpenAI-compatible chat-completions endpoint.

A request carries the model, the system and user messages (on a retry, also the refused
answer and why it was refused), ``temperature`` unless the entry sets it to null, the
entry's ``max_completion_tokens`` / ``max_tokens`` / ``reasoning_effort`` / ``seed`` /
``headers`` / ``extra_body``, and the step's JSON schema as ``response_format``.

Servers differ, so two refusals are learned: a 400 (or a 5xx, as llama-cpp-python's server
sends) that names ``response_format`` or ``json_schema`` steps down once (json_schema ->
json_object -> none), a 400 "Unsupported value: 'temperature'" (reasoning models) drops
the temperature; either is retried at once, remembered for that model at that endpoint
for the rest of the process, and said in the completion's ``notes`` (so the call's log
says why it was sent as it was).

``timeout`` is a wall-clock bound on the whole call, the client's retries included: a
server that drips one byte a second cannot hold a judgment longer than that. With a
``concurrency`` of N, at most N calls to that model at that endpoint are in flight from
this process; a call waiting for a slot (queued behind Lethe's own calls) starts its
clock only once it is sent.

``import openai`` below is the real package (absolute import); it is imported lazily so
that ``import engine`` stays fast and works without touching the network stack.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any, Callable

from engine.base.errors import LetheError
from engine.judges import endpoint as E
from engine.steps.answers import BadAnswer

PLACEHOLDER_KEY = E.PLACEHOLDER_KEY
OPENAI_HOST = E.OPENAI_HOST
RESPONSE_FORMATS = ("json_schema", "json_object", "none")
MAX_TOKENS = 10**9  # a token count above this is not a count


class JudgeUnavailable(LetheError):
    """The model is unreachable or kept failing (connection refused, timeout, 5xx, 429 after retries)."""


class KeyMissing(JudgeUnavailable):
    """The model needs an API key that is not set (`env` names it): an outage to the
    caller, which `Memory` tells the user about, since no retry will cure it."""

    def __init__(self, message: str, env: str | None):
        self.env = env
        super().__init__(message)


@dataclass
class Completion:
    """One model answer with its cost and latency."""

    text: str
    model: str
    prompt_tokens: int
    completion_tokens: int
    latency_ms: float
    finish_reason: str | None = None
    refusal: str | None = None
    reasoning: str | None = None  # a separate reasoning field (reasoning_content, reasoning)
    estimated: bool = False  # the server sent no usable usage: tokens are estimates
    notes: tuple = ()  # step-downs made on the way, each with the server's words
    learned: dict | None = None  # what this call found the server does not accept


# What servers refused, per (base URL, model), for the life of the process.
_LEARNED: dict[tuple[str, str], dict] = {}
_LEARNED_LOCK = threading.Lock()


def _learned(key: tuple[str, str]) -> dict:
    with _LEARNED_LOCK:
        return dict(_LEARNED.get(key, {}))


def _learn(key: tuple[str, str], **facts) -> None:
    with _LEARNED_LOCK:
        _LEARNED.setdefault(key, {}).update(facts)


_SLOTS: dict[tuple[str, str, int], threading.BoundedSemaphore] = {}  # (base URL, model, n)


def _slots(key: tuple[str, str], n: int | None) -> threading.BoundedSemaphore | None:
    """The process's slots for one model at one endpoint (None: no bound)."""
    if n is None:
        return None
    with _LEARNED_LOCK:
        return _SLOTS.setdefault((*key, n), threading.BoundedSemaphore(n))


def known_refusals(base_url: str, model: str, facts: dict) -> None:
    """What a store remembered a model at an endpoint refusing, for this process too (the
    process's own findings win)."""
    allowed = {
        k: v
        for k, v in facts.items()
        if (k == "response_format" and v in RESPONSE_FORMATS) or (k == "drop_temperature" and v is True)
    }
    with _LEARNED_LOCK:
        _LEARNED[(base_url, model)] = {**allowed, **_LEARNED.get((base_url, model), {})}


def forget_refusals() -> None:
    """Forget what servers refused, so the next call tries the configured settings again."""
    with _LEARNED_LOCK:
        _LEARNED.clear()


def estimate_tokens(text: str) -> int:
    """About four characters a token: the estimate used when a server sends no usage."""
    return len(text) // 4 + 1


class OpenAIProvider:
    """Asks an OpenAI-compatible chat model; every failure surfaces as :class:`JudgeUnavailable`,
    an answer that is no answer (no choices, a null message) as ``BadAnswer``.

    Keys follow :mod:`engine.judges.endpoint`: ``$OPENAI_API_KEY`` goes only to
    ``$OPENAI_BASE_URL`` or the official endpoint; a ``base_url`` of the entry's own gets
    ``$<api_key_env>`` when named, else no key.
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key_env: str | None = None,
        timeout: float = 30.0,
        max_retries: int = 2,
        temperature: float | None = 0.0,
        response_format: str = "json_schema",
        json_mode: bool = True,
        max_completion_tokens: int | None = None,
        max_tokens: int | None = None,
        reasoning_effort: str | None = None,
        seed: int | None = None,
        headers: dict[str, str] | None = None,
        extra_body: dict | None = None,
        concurrency: int | None = None,
    ):
        self.model = model
        self.endpoint = E.resolve(base_url, api_key_env)
        self.base_url = self.endpoint.base_url
        self.timeout, self.max_retries = timeout, max_retries
        self.temperature = temperature
        self.response_format = response_format if json_mode else "none"
        self.options = {
            k: v
            for k, v in (
                ("max_completion_tokens", max_completion_tokens),
                ("max_tokens", max_tokens),
                ("reasoning_effort", reasoning_effort),
                ("seed", seed),
            )
            if v is not None
        }
        self.headers = dict(headers or {})
        self.extra_body = dict(extra_body) if extra_body else None
        self.slots = _slots(self._key, concurrency)
        self._client: Any = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"OpenAIProvider(model={self.model!r}, base_url={self.endpoint.shown!r})"

    @property
    def _key(self) -> tuple[str, str]:
        """(base URL, model): what refusals are remembered by."""
        return (self.base_url, self.model)

    key = _key

    def complete(
        self,
        prompt: str,
        *,
        system: str | None = None,
        schema: dict | None = None,
        name: str = "answer",
        retry: list[dict] | tuple = (),
    ) -> Completion:
        """Send one chat completion and return its text, token counts and latency.

        ``schema`` (with ``name``) is sent as a strict json_schema response format;
        ``retry`` messages follow the prompt. Raises :class:`JudgeUnavailable` when the
        model cannot answer, ``BadAnswer`` when the response holds no answer at all."""
        messages = [{"role": "system", "content": system}] if system is not None else []
        messages += [{"role": "user", "content": prompt}, *retry]
        started = time.perf_counter()
        notes: list[str] = []
        response = self._within_deadline(lambda client: self._create(client, messages, schema, name, notes))
        latency_ms = (time.perf_counter() - started) * 1000.0
        try:
            done = self._to_completion(response, latency_ms, messages)
            done.notes = tuple(E.scrub(n, self.base_url) for n in notes)
            done.learned = _learned(self._key) if notes else None
            return done
        except BadAnswer as exc:
            raise BadAnswer(E.scrub(str(exc), self.base_url)) from None

    def close(self) -> None:
        """Close the underlying HTTP client (it is rebuilt on the next call)."""
        with self._lock:
            client, self._client = self._client, None
        if client is not None:
            client.close()

    # -- the call, bounded ------------------------------------------------------------
    def _within_deadline(self, call: Callable[[Any], Any]) -> Any:
        """Run ``call(client)`` in a worker thread and wait at most ``timeout`` seconds.

        httpx bounds each read, not the whole response, so a server that sends a byte a
        second would hold the call for ever. On the deadline the client is closed (which
        ends the worker's connection) and the next call builds a new one."""
        import openai

        client = self._get_client()
        box: dict = {}
        done = threading.Event()

        def work() -> None:
            try:
                box["response"] = call(client)
            except BaseException as exc:  # handed to the caller's thread
                box["error"] = exc
            finally:
                if self.slots is not None:
                    self.slots.release()  # when the server is done with it, not at our deadline
                done.set()

        if self.slots is not None:
            self.slots.acquire()  # queued behind our own calls: not yet on the clock
        threading.Thread(target=work, name=f"lethe-judge-{self.model}", daemon=True).start()
        if not done.wait(self.timeout):
            self._abandon(client)
            raise JudgeUnavailable(
                f"{self._where()} timed out after {self.timeout:g}s "
                f"(wall clock, max_retries={self.max_retries})"
            )
        err = box.get("error")
        if err is None:
            return box["response"]
        if isinstance(err, openai.OpenAIError):
            raise JudgeUnavailable(E.scrub(self._describe(err), self.base_url)) from err
        if isinstance(err, Exception):
            raise JudgeUnavailable(
                E.scrub(f"{self._where()}: {type(err).__name__}: {err}"[:500], self.base_url)
            ) from err
        raise err

    def _abandon(self, client: Any) -> None:
        with self._lock:
            if self._client is client:
                self._client = None
        try:
            client.close()
        except Exception:  # closing a client mid-request may complain
            pass

    def _get_client(self) -> Any:
        with self._lock:
            if self._client is None:
                self._client = self._build_client()
            return self._client

    def _build_client(self) -> Any:
        try:  # the key, and the environment's OpenAI settings kept at home (endpoint.py)
            return E.openai_client(
                self.endpoint,
                self.model,
                timeout=self.timeout,
                max_retries=self.max_retries,
                headers=self.headers,
            )
        except E.NoKey as exc:
            raise KeyMissing(str(exc), self.endpoint.key_env) from None

    # -- one request, adapted to what the server accepts --------------------------------
    def _create(
        self, client: Any, messages: list[dict], schema: dict | None, name: str, notes: list[str]
    ) -> Any:
        """One create call; a refused response_format steps down, a refused temperature is
        dropped, each retried at once, remembered, and noted in `notes`."""
        import openai

        learned = _learned(self._key)
        mode = max(
            self.response_format, learned.get("response_format", "json_schema"), key=RESPONSE_FORMATS.index
        )
        drop_temperature = learned.get("drop_temperature", False)
        while True:
            kwargs = self._request(messages, mode, schema, name, drop_temperature)
            try:
                return client.chat.completions.create(**kwargs)
            except (
                openai.BadRequestError,
                openai.UnprocessableEntityError,
                openai.InternalServerError,
            ) as err:
                message = _error_message(err).lower()
                said = f"HTTP {getattr(err, 'status_code', '?')}: {_error_message(err)[:160]}"
                sent = "json_object" if mode == "json_schema" and not schema else mode
                if mode != "none" and _names(
                    err, message, "response_format", "json_schema", "json_object", "response format"
                ):
                    mode = RESPONSE_FORMATS[RESPONSE_FORMATS.index(sent) + 1]
                    _learn(self._key, response_format=mode)
                    notes.append(
                        f"the server refused response_format {sent} ({said}): stepped down to {mode}"
                    )
                elif (
                    "temperature" in kwargs
                    and _names(err, message, "temperature")
                    and ("unsupported" in message or "not support" in message)
                ):
                    drop_temperature = True
                    _learn(self._key, drop_temperature=True)
                    notes.append(f"the server refused temperature ({said}): sent without it")
                else:
                    raise

    def _request(self, messages, mode: str, schema: dict | None, name: str, drop_temperature: bool) -> dict:
        kwargs: dict = {"model": self.model, "messages": messages, **self.options}
        if self.temperature is not None and not drop_temperature:
            kwargs["temperature"] = self.temperature
        if mode == "json_schema" and schema:
            kwargs["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": name, "strict": True, "schema": schema},
            }
        elif mode in ("json_schema", "json_object"):
            kwargs["response_format"] = {"type": "json_object"}
        if self.extra_body:
            kwargs["extra_body"] = dict(self.extra_body)
        return kwargs

    # -- reading the response ---------------------------------------------------------
    def _to_completion(self, response: Any, latency_ms: float, messages: list[dict]) -> Completion:
        message, choice = _message(response, self._where())
        text = _content(getattr(message, "content", None), self._where())
        reasoning = _first_text(message, "reasoning_content", "reasoning")
        refusal = getattr(message, "refusal", None)
        finish = getattr(choice, "finish_reason", None)
        usage = getattr(response, "usage", None)
        prompt_tokens, completion_tokens = _count(usage, "prompt_tokens"), _count(usage, "completion_tokens")
        estimated = prompt_tokens is None or completion_tokens is None
        if prompt_tokens is None:
            prompt_tokens = estimate_tokens("\n".join(str(m.get("content") or "") for m in messages))
        if completion_tokens is None:
            completion_tokens = estimate_tokens(text + (reasoning or ""))
        model = getattr(response, "model", None)
        return Completion(
            text=text,
            model=model if isinstance(model, str) and model else self.model,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            latency_ms=latency_ms,
            finish_reason=finish if isinstance(finish, str) else None,
            refusal=refusal if isinstance(refusal, str) else None,
            reasoning=reasoning,
            estimated=estimated,
        )

    def _where(self) -> str:
        return f"{self.model} at {self.endpoint.shown}"

    def _describe(self, err: Exception) -> str:
        """A short, human message for an openai exception."""
        import openai

        tries = f"max_retries={self.max_retries}"
        if isinstance(err, openai.APITimeoutError):
            return f"{self._where()} timed out after {self.timeout:g}s (wall clock, {tries})"
        if isinstance(err, openai.APIConnectionError):
            return f"cannot reach {self._where()} ({_cause(err)}, {tries})"
        if isinstance(err, openai.RateLimitError):
            return f"{self._where()} is rate limiting (HTTP 429, {tries})"
        if isinstance(err, openai.APIStatusError) and err.status_code >= 500:
            return f"{self._where()} failed with HTTP {err.status_code} ({tries}): {_error_message(err)}"
        if isinstance(err, openai.APIStatusError):
            return f"{self._where()} refused the request: HTTP {err.status_code}: {_error_message(err)}"
        return f"{self._where()}: {type(err).__name__}: {str(err)[:300]}"


def _message(response: Any, where: str) -> tuple[Any, Any]:
    """The first choice's message; a response without one is a bad answer."""
    choices = getattr(response, "choices", None)
    if not isinstance(choices, list) or not choices:
        raise BadAnswer(f"malformed response from {where}: no choices")
    choice = choices[0]
    message = getattr(choice, "message", None) if choice is not None else None
    if message is None:
        what = "choices[0]" if choice is None else "choices[0].message"
        raise BadAnswer(f"malformed response from {where}: {what} is null")
    return message, choice


def _content(content: Any, where: str) -> str:
    if content is None or isinstance(content, str):
        return content or ""
    if isinstance(content, list):  # content parts, as some servers send them
        parts = [p.get("text") if isinstance(p, dict) else getattr(p, "text", None) for p in content]
        return "".join(p for p in parts if isinstance(p, str))
    raise BadAnswer(f"malformed response from {where}: content is {type(content).__name__}")


def _first_text(obj: Any, *names: str) -> str | None:
    for name in names:
        v = getattr(obj, name, None)
        if isinstance(v, str) and v:
            return v
    return None


def _count(usage: Any, name: str) -> int | None:
    """A token count from ``usage``, or None when it is missing or is not a count."""
    v = usage.get(name) if isinstance(usage, dict) else getattr(usage, name, None)
    if isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= MAX_TOKENS:
        return v
    return None


def _names(err: Any, message: str, *words: str) -> bool:
    """Whether a refusal is about one of ``words``: its ``param`` or its message."""
    body = getattr(err, "body", None)
    inner = body.get("error", body) if isinstance(body, dict) else None
    param = inner.get("param") if isinstance(inner, dict) else None
    return (isinstance(param, str) and param.lower() in words) or any(w in message for w in words)


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
