"""A tiny OpenAI-compatible HTTP server for tests, demos and benchmarks (stdlib only).

Serves ``POST /v1/chat/completions`` (non-streaming), ``POST /v1/embeddings`` and
``GET /v1/models`` on 127.0.0.1. Answers are scriptable per test::

    with FakeOpenAI(responder=lambda req: '{"keep": true}') as fake:
        fake.script(Reply(status=500), Reply(content='{"ok": 1}'))
        ...  # point a client at fake.base_url
        assert fake.requests[0]["model"] == "gpt-4o-mini"

It behaves like the servers Lethe meets: it validates every request as OpenAI does
(message shapes, parameter types, a strict json_schema's rules; problems are answered
with a 400 and listed in ``invalid``) and can be told to refuse json_schema, any
response_format or temperature, to send no ``usage``, to answer with ``<think>`` text or
a separate reasoning field first, or to drip its answer a byte at a time.

Standalone (for benchmarks)::

    python -m tests.helpers.fake_openai --port 8099 --delay 0.3 --answer '{}'
"""

from __future__ import annotations

import argparse
import collections
import json
import re
import signal
import socket
import sys
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Collection, Union

# A fixed timestamp: the fake never reads the wall clock, so its answers are reproducible.
CREATED = 1_700_000_000
DEFAULT_MODELS = ("gpt-4o-mini", "gpt-4o")
_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    429: "rate_limit_error",
}
DEFAULT = object()  # Reply.usage: the usage this server computes
REFUSALS = ("json_schema", "json_schema_500", "response_format", "temperature")
TEMPERATURE_REFUSED = (
    "Unsupported value: 'temperature' does not support {value} with this "
    "model. Only the default (1) value is supported."
)


@dataclass
class Reply:
    """One scripted answer from the fake server."""

    content: str | None = ""  # assistant message content (the error message when status != 200)
    status: int = 200  # e.g. 500, 429 -> an OpenAI-style error JSON body
    delay: float = 0.0  # seconds to sleep before answering (added to the server's delay)
    drop: bool = False  # close the connection without answering
    # Sent as ``retry-after-ms`` on error replies. openai v3 ignores ``retry-after: 0``
    # (it only honours delays > 0) and would back off ~0.5 s; 1 ms keeps retries fast.
    retry_after_ms: int | None = 1
    finish_reason: str = "stop"
    refusal: str | None = None
    reasoning: str | None = None  # sent as message.reasoning_content (vLLM, DeepSeek, llama.cpp)
    usage: Any = DEFAULT  # None: no usage at all; anything else is sent as it is
    body: Any = None  # the whole response body, sent as it is (``choices: [null]``...)
    drip: float = 0.0  # seconds between the bytes of the response (added to the server's)
    param: str | None = None  # ``error.param`` of an error reply


Responder = Callable[[dict], Union[Reply, str]]
Embedder = Callable[[str], list]  # one input text -> its vector


def word_vector(text: str, dim: int = 64) -> list[float]:
    """The default embedding: a bag of words hashed into `dim` buckets (stable across
    runs: crc32, not hash()), so texts sharing words have similar vectors."""
    import re
    import zlib

    out = [0.0] * dim
    for word in re.findall(r"[a-z0-9]+", text.lower()):
        h = zlib.crc32(word.encode())
        out[h % dim] += 1.0 if (h >> 16) & 1 else -1.0
    return out


def estimate_tokens(text: str) -> int:
    """Rough token count used for ``usage``: ``len(text) // 4 + 1``."""
    return len(text) // 4 + 1


def _message_text(content: Any) -> str:
    """Text of a chat message's content (a string, or a list of content parts)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


def prompt_text(request: dict) -> str:
    """All message texts of a chat request, joined by newlines."""
    messages = request.get("messages") or []
    return "\n".join(_message_text(m.get("content")) for m in messages if isinstance(m, dict))


def completion_body(request: dict, content: str | None, seq: int, reply: Reply | None = None) -> dict:
    """The ``chat.completion`` JSON answering ``request`` with ``content``."""
    reply = reply or Reply(content=content)
    message = {"role": "assistant", "content": content, "refusal": reply.refusal}
    if reply.reasoning is not None:
        message["reasoning_content"] = reply.reasoning
    prompt_tokens = estimate_tokens(prompt_text(request))
    completion_tokens = estimate_tokens((content or "") + (reply.reasoning or ""))
    body = {
        "id": f"chatcmpl-fake-{seq}",
        "object": "chat.completion",
        "created": CREATED,
        "model": request.get("model", "fake"),
        "system_fingerprint": "fake_openai",
        "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": reply.finish_reason}],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }
    if reply.usage is None:
        del body["usage"]
    elif reply.usage is not DEFAULT:
        body["usage"] = reply.usage
    return body


def error_body(status: int, message: str | None, param: str | None = None, code: str | None = None) -> dict:
    """An OpenAI-style error body."""
    kind = _ERROR_TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error")
    return {
        "error": {"message": message or f"fake error {status}", "type": kind, "param": param, "code": code}
    }


# ---- what OpenAI accepts ------------------------------------------------------------------
ROLES = {"system", "developer", "user", "assistant", "tool"}
EFFORTS = {"none", "minimal", "low", "medium", "high", "xhigh"}
SCHEMA_WORDS = {
    "type",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "enum",
    "anyOf",
    "description",
    "title",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "pattern",
    "format",
    "minItems",
    "maxItems",
    "const",
    "$ref",
    "$defs",
}
SCHEMA_TYPES = {"string", "number", "integer", "boolean", "object", "array", "null"}
MAX_SCHEMA_DEPTH = 10


def request_problems(request: Any) -> list[str]:
    """What OpenAI would refuse in a chat request (empty: nothing)."""
    if not isinstance(request, dict):
        return ["the body must be a JSON object"]
    out = []
    if not isinstance(request.get("model"), str) or not request["model"]:
        out.append("model: a model name is required")
    out += _message_problems(request.get("messages"))
    t = request.get("temperature")
    if "temperature" in request and (not _is_number(t) or not 0 <= t <= 2):
        out.append(f"temperature: must be a number from 0 to 2, got {t!r}")
    for k in ("max_tokens", "max_completion_tokens", "seed"):
        v = request.get(k)
        if k in request and (not isinstance(v, int) or isinstance(v, bool) or (k != "seed" and v < 1)):
            out.append(f"{k}: must be a whole number, got {v!r}")
    if "max_tokens" in request and "max_completion_tokens" in request:
        out.append("max_tokens and max_completion_tokens cannot both be given")
    if "reasoning_effort" in request and request["reasoning_effort"] not in EFFORTS:
        out.append(f"reasoning_effort: unknown value {request['reasoning_effort']!r}")
    if request.get("stream"):
        out.append("stream: this server does not stream")
    if "response_format" in request:
        out += _format_problems(request["response_format"])
    return out


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _message_problems(messages: Any) -> list[str]:
    if not isinstance(messages, list) or not messages:
        return ["messages: a non-empty list is required"]
    out = []
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or m.get("role") not in ROLES:
            out.append(f"messages[{i}]: needs a role, one of {', '.join(sorted(ROLES))}")
            continue
        content = m.get("content")
        if not (isinstance(content, (str, list)) or (content is None and m["role"] == "assistant")):
            out.append(f"messages[{i}].content: must be text, got {type(content).__name__}")
    return out


def _format_problems(fmt: Any) -> list[str]:
    if not isinstance(fmt, dict) or fmt.get("type") not in ("text", "json_object", "json_schema"):
        return [f"response_format: type must be text, json_object or json_schema, got {fmt!r}"]
    if fmt["type"] != "json_schema":
        return []
    spec = fmt.get("json_schema")
    if not isinstance(spec, dict):
        return ["response_format.json_schema: an object with name and schema is required"]
    out = []
    if not isinstance(spec.get("name"), str) or not re.fullmatch(r"[A-Za-z0-9_-]{1,64}", spec["name"]):
        out.append(f"response_format.json_schema.name: invalid name {spec.get('name')!r}")
    schema = spec.get("schema")
    if not isinstance(schema, dict):
        return out + ["response_format.json_schema.schema: a JSON schema object is required"]
    if spec.get("strict") is True:
        if schema.get("type") != "object":
            out.append("response_format.json_schema.schema: the root of a strict schema must be an object")
        out += strict_schema_problems(schema, "schema", 1)
    return out


def strict_schema_problems(schema: Any, path: str, depth: int) -> list[str]:
    """Where a schema breaks the rules of OpenAI's strict structured outputs."""
    if depth > MAX_SCHEMA_DEPTH:
        return [f"{path}: nested deeper than {MAX_SCHEMA_DEPTH} levels"]
    if not isinstance(schema, dict):
        return [f"{path}: must be a schema object"]
    out = [f"{path}: '{w}' is not supported in strict mode" for w in schema if w not in SCHEMA_WORDS]
    types = schema.get("type")
    for t in types if isinstance(types, list) else ([types] if types is not None else []):
        if t not in SCHEMA_TYPES:
            out.append(f"{path}.type: unknown type {t!r}")
    if "anyOf" in schema:
        for i, sub in enumerate(schema["anyOf"] if isinstance(schema["anyOf"], list) else [None]):
            out += strict_schema_problems(sub, f"{path}.anyOf[{i}]", depth + 1)
    elif types is None and "$ref" not in schema and "enum" not in schema and "const" not in schema:
        out.append(f"{path}: needs a type")
    if types == "object" or (isinstance(types, list) and "object" in types):
        out += _object_rules(schema, path, depth)
    if "items" in schema:
        out += strict_schema_problems(schema["items"], f"{path}.items", depth + 1)
    return out


def _object_rules(schema: dict, path: str, depth: int) -> list[str]:
    props = schema.get("properties")
    if not isinstance(props, dict):
        return [f"{path}: an object needs 'properties'"]
    out = []
    if schema.get("additionalProperties") is not False:
        out.append(f"{path}: 'additionalProperties' must be false")
    required = schema.get("required")
    if not isinstance(required, list) or set(required) != set(props) or len(required) != len(props):
        out.append(f"{path}: 'required' must list every property ({', '.join(props)})")
    for name, sub in props.items():
        out += strict_schema_problems(sub, f"{path}.properties.{name}", depth + 1)
    return out


class FakeOpenAI:
    """An OpenAI-compatible server on 127.0.0.1 whose answers a test scripts.

    ``responder(request_json) -> Reply | str`` answers every request not covered by
    :meth:`script`; by default it answers ``"{}"``. ``delay`` (seconds) is added to
    every answer. ``requests`` records every chat request body received, in order, and
    ``invalid`` every problem found in one (each answered with a 400).

    ``refuse`` (any of "json_schema", "response_format", "temperature") makes the server
    answer such requests with the 400 real servers send; "json_schema_500" with the HTTP
    500 llama-cpp-python's server sends. ``omit_usage`` leaves ``usage``
    out; ``think`` puts ``<think>THINK</think>`` before every answer, ``reasoning`` sends a
    separate ``reasoning_content``; ``drip`` sends every response one byte each ``drip``
    seconds. ``schemas`` ({name: schema}) makes every json_schema request carry exactly
    the schema of its name, and ``step_of(request)`` says which name each request needs.
    """

    def __init__(
        self,
        responder: Responder | None = None,
        delay: float = 0.0,
        *,
        port: int = 0,
        models: tuple[str, ...] = DEFAULT_MODELS,
        refuse: Collection[str] = (),
        omit_usage: bool = False,
        think: str | None = None,
        reasoning: str | None = None,
        drip: float = 0.0,
        schemas: dict | None = None,
        step_of: Callable[[dict], str | None] | None = None,
        embedder: Embedder | None = None,
    ):
        unknown = set(refuse) - set(REFUSALS)
        if unknown:
            raise ValueError(f"refuse: unknown {sorted(unknown)}; known: {', '.join(REFUSALS)}")
        self.responder = responder or (lambda request: "{}")
        self.embedder = embedder or word_vector  # answers /v1/embeddings, text by text
        self.embedding_requests: list[dict] = []
        self.embedding_headers: list[dict] = []  # each one's headers, lower-cased
        self.embeddings_down = False  # True: /v1/embeddings answers 503
        self.embeddings_empty = False  # True: /v1/embeddings answers 200 with no vectors
        self.embed_delay = 0.0  # seconds /v1/embeddings waits before answering
        self.spans: list[tuple[str, float, float]] = []  # (path, start, end): every POST, monotonic
        self.delay = delay
        self.models = models
        self.refuse, self.omit_usage, self.think, self.reasoning = set(refuse), omit_usage, think, reasoning
        self.drip, self.schemas, self.step_of = drip, schemas, step_of
        self.requests: list[dict] = []
        self.headers: list[dict[str, str]] = []  # lower-cased request headers, parallel to ``requests``
        self.invalid: list[str] = []  # problems found in requests, "#seq: problem"
        self.refused: list[str] = []  # what each refused request was refused for
        self._port = port
        self._script: collections.deque[Reply | str] = collections.deque()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle -------------------------------------------------------------------
    def start(self) -> "FakeOpenAI":
        """Bind and serve in a daemon thread; returns ``self``."""
        self._stopping.clear()
        self._server = _Server(("127.0.0.1", self._port), _Handler)
        self._server.fake = self
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.02},
            name=f"fake-openai-{self.port}",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving promptly; answers still sleeping are dropped."""
        if self._server is None:
            return
        self._stopping.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=1)
        self._server = self._thread = None

    def __enter__(self) -> "FakeOpenAI":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def port(self) -> int:
        """The bound port (after :meth:`start`)."""
        return self._server.server_address[1] if self._server else self._port

    @property
    def base_url(self) -> str:
        """E.g. ``http://127.0.0.1:PORT/v1``."""
        return f"http://127.0.0.1:{self.port}/v1"

    # -- scripting -------------------------------------------------------------------
    def script(self, *replies: Reply | str) -> None:
        """Queue replies consumed in order by the next requests, then the responder answers."""
        with self._lock:
            self._script.extend(replies)

    def _record(self, request: dict, headers: dict[str, str]) -> int:
        with self._lock:
            self.requests.append(request)
            self.headers.append(headers)
            return len(self.requests)

    def _next_reply(self, request: dict) -> Reply:
        with self._lock:
            scripted = self._script.popleft() if self._script else None
        reply = scripted if scripted is not None else self.responder(request)
        return Reply(content=reply) if isinstance(reply, str) else reply

    # -- judging a request ------------------------------------------------------------
    def problems(self, request: dict) -> list[str]:
        """What is wrong with a request: OpenAI's rules, then the schema it must carry."""
        out = request_problems(request)
        fmt = request.get("response_format") if isinstance(request, dict) else None
        if out or self.schemas is None or not isinstance(fmt, dict) or fmt.get("type") != "json_schema":
            return out
        name, schema = fmt["json_schema"].get("name"), fmt["json_schema"].get("schema")
        wanted = self.step_of(request) if self.step_of else name
        if name != wanted:
            out.append(f"json_schema named {name!r}, but this is a {wanted!r} request")
        elif name not in self.schemas:
            out.append(f"json_schema {name!r} is not a known schema")
        elif schema != self.schemas[name]:
            out.append(f"json_schema {name!r} differs from the schema of that name")
        return out

    def refusal(self, request: dict) -> Reply | None:
        """The 400 this server answers a request with, if it refuses something in it."""
        fmt = request.get("response_format")
        kind = fmt.get("type") if isinstance(fmt, dict) else None
        if "response_format" in self.refuse and kind in ("json_object", "json_schema"):
            return self._refused(
                "response_format",
                f"'response_format' of type '{kind}' is not supported by this server",
                "response_format",
            )
        if "json_schema" in self.refuse and kind == "json_schema":
            return self._refused(
                "json_schema",
                "response_format type 'json_schema' is not supported with this model",
                "response_format",
            )
        if "json_schema_500" in self.refuse and kind == "json_schema":  # llama-cpp-python's server
            with self._lock:
                self.refused.append("json_schema_500")
            return Reply(status=500, content="Unsupported response_format type: json_schema")
        if "temperature" in self.refuse and "temperature" in request and request["temperature"] != 1:
            return self._refused(
                "temperature", TEMPERATURE_REFUSED.format(value=request["temperature"]), "temperature"
            )
        return None

    def _refused(self, what: str, message: str, param: str) -> Reply:
        with self._lock:
            self.refused.append(what)
        return Reply(status=400, content=message, param=param)

    def dress(self, reply: Reply) -> Reply:
        """A reply as this server sends it: thinking first, reasoning beside, usage or not."""
        if reply.status != 200 or reply.body is not None:
            return reply
        content = reply.content
        if self.think is not None and content is not None:
            content = f"<think>{self.think}</think>\n{content}"
        return Reply(
            **{
                **reply.__dict__,
                "content": content,
                "reasoning": reply.reasoning if reply.reasoning is not None else self.reasoning,
                "usage": None if self.omit_usage else reply.usage,
            }
        )


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    fake: FakeOpenAI


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.0"  # one request per connection: nothing lingers after stop()

    def log_message(self, format: str, *args: Any) -> None:  # quiet by default
        pass

    def _route(self) -> str:
        path = self.path.split("?", 1)[0].rstrip("/")
        return path[3:] if path.startswith("/v1/") else path

    def do_GET(self) -> None:
        if self._route() != "/models":
            return self._send_json(404, error_body(404, f"unknown path {self.path}"))
        data = [
            {"id": m, "object": "model", "created": CREATED, "owned_by": "fake_openai"}
            for m in self.server.fake.models
        ]
        self._send_json(200, {"object": "list", "data": data})

    def do_POST(self) -> None:
        start = time.monotonic()
        try:
            self._post()
        finally:
            with self.server.fake._lock:
                self.server.fake.spans.append((self._route(), start, time.monotonic()))

    def _post(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self._route() == "/embeddings":
            return self._embeddings(body)
        if self._route() != "/chat/completions":
            return self._send_json(404, error_body(404, f"unknown path {self.path}"))
        try:
            request = json.loads(body or b"{}")
        except ValueError:
            return self._send_json(400, error_body(400, "body is not valid JSON"))
        fake = self.server.fake
        seq = fake._record(request, {k.lower(): v for k, v in self.headers.items()})
        problems = fake.problems(request)
        if problems:
            with fake._lock:
                fake.invalid += [f"#{seq}: {p}" for p in problems]
            return self._send_json(
                400, error_body(400, "fake_openai: invalid request: " + "; ".join(problems))
            )
        try:
            reply = fake.refusal(request) or fake._next_reply(request)
        except Exception as err:  # a broken responder is a test bug: say so, don't invite retries
            message = error_body(500, f"responder raised {err!r}")
            return self._send_json(500, message, {"x-should-retry": "false"})
        self._answer(fake.dress(reply), request, seq)

    def _embeddings(self, body: bytes) -> None:
        fake = self.server.fake
        try:
            request = json.loads(body or b"{}")
        except ValueError:
            return self._send_json(400, error_body(400, "body is not valid JSON"))
        with fake._lock:
            fake.embedding_requests.append(request)
            fake.embedding_headers.append({k.lower(): v for k, v in self.headers.items()})
        if fake.embed_delay > 0 and fake._stopping.wait(fake.embed_delay):
            return
        if fake.embeddings_down:
            return self._send_json(
                503,
                error_body(503, "embeddings are down"),
                {"retry-after-ms": "1", "x-should-retry": "false"},
            )
        texts = request.get("input")
        texts = [texts] if isinstance(texts, str) else list(texts or [])
        data = (
            [
                {"object": "embedding", "index": i, "embedding": list(fake.embedder(t))}
                for i, t in enumerate(texts)
            ]
            if not fake.embeddings_empty
            else []
        )
        tokens = sum(estimate_tokens(t) for t in texts)
        self._send_json(
            200,
            {
                "object": "list",
                "data": data,
                "model": request.get("model"),
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
            },
        )

    def _answer(self, reply: Reply, request: dict, seq: int) -> None:
        fake = self.server.fake
        delay = fake.delay + reply.delay
        if delay > 0 and fake._stopping.wait(delay):
            reply = Reply(drop=True)  # server stopping: don't answer
        if reply.drop:
            self.close_connection = True
            return
        drip = fake.drip + reply.drip
        if reply.status != 200:
            headers = {} if reply.retry_after_ms is None else {"retry-after-ms": str(reply.retry_after_ms)}
            return self._send_json(
                reply.status, error_body(reply.status, reply.content, reply.param), headers, drip
            )
        body = reply.body if reply.body is not None else completion_body(request, reply.content, seq, reply)
        self._send_json(200, body, drip=drip)

    def _send_json(
        self, status: int, payload: Any, headers: dict[str, str] | None = None, drip: float = 0.0
    ) -> None:
        data = json.dumps(payload).encode()
        try:
            if drip > 0:
                return self._drip(status, data, headers or {}, drip)
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.send_header("x-request-id", "req_fake")
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (e.g. timed out)

    def _drip(self, status: int, data: bytes, headers: dict[str, str], every: float) -> None:
        """The whole response, status line and headers included, one byte at a time."""
        head = [
            f"HTTP/1.0 {status} {self.responses.get(status, ('',))[0]}",
            "Content-Type: application/json",
            f"Content-Length: {len(data)}",
            *(f"{k}: {v}" for k, v in headers.items()),
        ]
        raw = ("\r\n".join(head) + "\r\n\r\n").encode() + data
        for i in range(len(raw)):
            if self.server.fake._stopping.wait(every):
                return
            self.wfile.write(raw[i : i + 1])
            self.wfile.flush()


def closed_port_url() -> str:
    """A base URL on 127.0.0.1 where nothing listens (connections are refused)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def main(argv: list[str] | None = None) -> int:
    """Run a FakeOpenAI until SIGINT/SIGTERM; prints its base URL on the first line."""
    parser = argparse.ArgumentParser(
        prog="python -m tests.helpers.fake_openai", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--port", type=int, default=0, help="port to bind on 127.0.0.1 (0 = random)")
    parser.add_argument("--delay", type=float, default=0.0, help="seconds to wait before every answer")
    parser.add_argument("--answer", default="{}", help="assistant content of every answer")
    args = parser.parse_args(argv)
    fake = FakeOpenAI(responder=lambda request: args.answer, delay=args.delay, port=args.port).start()
    print(fake.base_url, flush=True)
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        fake.stop()
    return 0


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


if __name__ == "__main__":
    sys.exit(main())
