"""A tiny OpenAI-compatible HTTP server for tests, demos and benchmarks (stdlib only).

Serves ``POST /v1/chat/completions`` (non-streaming), ``POST /v1/embeddings`` and
``GET /v1/models`` on 127.0.0.1. Answers are scriptable per test::

    with FakeOpenAI(responder=lambda req: '{"keep": true}') as fake:
        fake.script(Reply(status=500), Reply(content='{"ok": 1}'))
        ...  # point a client at fake.base_url
        assert fake.requests[0]["model"] == "gpt-4o-mini"

Standalone (for benchmarks)::

    python -m engine.fake_openai --port 8099 --delay 0.3 --answer '{}'
"""

from __future__ import annotations

import argparse
import collections
import json
import signal
import sys
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Union

# A fixed timestamp: the fake never reads the wall clock, so its answers are reproducible.
CREATED = 1_700_000_000
DEFAULT_MODELS = ("gpt-4o-mini", "gpt-4o")
_ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error",
                403: "permission_error", 404: "not_found_error", 429: "rate_limit_error"}


@dataclass
class Reply:
    """One scripted answer from the fake server."""

    content: str = ""      # assistant message content (or the error message when status != 200)
    status: int = 200      # e.g. 500, 429 -> an OpenAI-style error JSON body
    delay: float = 0.0     # seconds to sleep before answering (added to the server's delay)
    drop: bool = False     # close the connection without answering
    # Sent as ``retry-after-ms`` on error replies. openai v3 ignores ``retry-after: 0``
    # (it only honours delays > 0) and would back off ~0.5 s; 1 ms keeps retries fast.
    retry_after_ms: int | None = 1


Responder = Callable[[dict], Union[Reply, str]]
Embedder = Callable[[str], list]   # one input text -> its vector


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


def completion_body(request: dict, content: str, seq: int) -> dict:
    """The ``chat.completion`` JSON answering ``request`` with ``content``."""
    prompt_tokens, completion_tokens = estimate_tokens(prompt_text(request)), estimate_tokens(content)
    return {
        "id": f"chatcmpl-fake-{seq}",
        "object": "chat.completion",
        "created": CREATED,
        "model": request.get("model", "fake"),
        "system_fingerprint": "fake_openai",
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": content, "refusal": None},
            "logprobs": None,
            "finish_reason": "stop",
        }],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                  "total_tokens": prompt_tokens + completion_tokens},
    }


def error_body(status: int, message: str) -> dict:
    """An OpenAI-style error body."""
    kind = _ERROR_TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error")
    return {"error": {"message": message or f"fake error {status}", "type": kind,
                      "param": None, "code": None}}


class FakeOpenAI:
    """An OpenAI-compatible server on 127.0.0.1 whose answers a test scripts.

    ``responder(request_json) -> Reply | str`` answers every request not covered by
    :meth:`script`; by default it answers ``"{}"``. ``delay`` (seconds) is added to
    every answer. ``requests`` records every chat request body received, in order.
    """

    def __init__(self, responder: Responder | None = None, delay: float = 0.0, *,
                 port: int = 0, models: tuple[str, ...] = DEFAULT_MODELS,
                 embedder: Embedder | None = None):
        self.responder = responder or (lambda request: "{}")
        self.embedder = embedder or word_vector  # answers /v1/embeddings, text by text
        self.embedding_requests: list[dict] = []
        self.embeddings_down = False   # True: /v1/embeddings answers 503
        self.delay = delay
        self.models = models
        self.requests: list[dict] = []
        self.headers: list[dict[str, str]] = []   # lower-cased request headers, parallel to ``requests``
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
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.02},
                                        name=f"fake-openai-{self.port}", daemon=True)
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


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    fake: FakeOpenAI


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.0"   # one request per connection: nothing lingers after stop()

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet by default
        pass

    def _route(self) -> str:
        path = self.path.split("?", 1)[0].rstrip("/")
        return path[3:] if path.startswith("/v1/") else path

    def do_GET(self) -> None:
        if self._route() != "/models":
            return self._send_json(404, error_body(404, f"unknown path {self.path}"))
        data = [{"id": m, "object": "model", "created": CREATED, "owned_by": "fake_openai"}
                for m in self.server.fake.models]
        self._send_json(200, {"object": "list", "data": data})

    def do_POST(self) -> None:
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
        try:
            reply = fake._next_reply(request)
        except Exception as err:  # a broken responder is a test bug: say so, don't invite retries
            message = error_body(500, f"responder raised {err!r}")
            return self._send_json(500, message, {"x-should-retry": "false"})
        self._answer(reply, request, seq)

    def _embeddings(self, body: bytes) -> None:
        fake = self.server.fake
        try:
            request = json.loads(body or b"{}")
        except ValueError:
            return self._send_json(400, error_body(400, "body is not valid JSON"))
        with fake._lock:
            fake.embedding_requests.append(request)
        if fake.embeddings_down:
            return self._send_json(503, error_body(503, "embeddings are down"),
                                   {"retry-after-ms": "1", "x-should-retry": "false"})
        texts = request.get("input")
        texts = [texts] if isinstance(texts, str) else list(texts or [])
        data = [{"object": "embedding", "index": i, "embedding": list(fake.embedder(t))}
                for i, t in enumerate(texts)]
        tokens = sum(estimate_tokens(t) for t in texts)
        self._send_json(200, {"object": "list", "data": data, "model": request.get("model"),
                              "usage": {"prompt_tokens": tokens, "total_tokens": tokens}})

    def _answer(self, reply: Reply, request: dict, seq: int) -> None:
        fake = self.server.fake
        delay = fake.delay + reply.delay
        if delay > 0 and fake._stopping.wait(delay):
            reply = Reply(drop=True)            # server stopping: don't answer
        if reply.drop:
            self.close_connection = True
            return
        if reply.status != 200:
            headers = {} if reply.retry_after_ms is None else {"retry-after-ms": str(reply.retry_after_ms)}
            return self._send_json(reply.status, error_body(reply.status, reply.content), headers)
        self._send_json(200, completion_body(request, reply.content, seq))

    def _send_json(self, status: int, payload: dict, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.send_header("x-request-id", "req_fake")
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass                                # the client gave up (e.g. timed out)


def main(argv: list[str] | None = None) -> int:
    """Run a FakeOpenAI until SIGINT/SIGTERM; prints its base URL on the first line."""
    parser = argparse.ArgumentParser(prog="python -m engine.fake_openai", description=__doc__.splitlines()[0])
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
