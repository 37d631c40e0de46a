"""The openai judge provider, driven through the real openai client against FakeOpenAI."""

from __future__ import annotations

import json
import threading
import time
import urllib.request

import pytest

from engine.fake_openai import FakeOpenAI, Reply, estimate_tokens
from engine.judges.openai import Completion, JudgeUnavailable, OpenAIProvider
from tests.fake_server import closed_port_url, fake_openai  # noqa: F401  (fixture)


@pytest.fixture(autouse=True)
def _no_ambient_openai_env(monkeypatch):
    """Tests never see a developer's real key or endpoint."""
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_ADMIN_KEY", "OPENAI_CUSTOM_HEADERS",
                 "OPENAI_ORG_ID", "OPENAI_PROJECT_ID"):
        monkeypatch.delenv(name, raising=False)


def provider(fake: FakeOpenAI, **kwargs) -> OpenAIProvider:
    kwargs.setdefault("timeout", 5.0)
    kwargs.setdefault("max_retries", 0)
    return OpenAIProvider("gpt-4o-mini", base_url=fake.base_url, **kwargs)


# -- happy path ----------------------------------------------------------------------

def test_happy_path_returns_text_tokens_and_latency(fake_openai):
    fake_openai.script('{"keep": ["m1"]}')
    result = provider(fake_openai, temperature=0.2).complete("Which memories matter?", system="Be terse.")

    assert isinstance(result, Completion)
    assert result.text == '{"keep": ["m1"]}'
    assert result.model == "gpt-4o-mini"
    assert result.prompt_tokens == estimate_tokens("Be terse.\nWhich memories matter?")
    assert result.completion_tokens == estimate_tokens('{"keep": ["m1"]}')
    assert result.latency_ms > 0

    [request] = fake_openai.requests
    assert request["model"] == "gpt-4o-mini"
    assert request["temperature"] == 0.2
    assert request["messages"] == [{"role": "system", "content": "Be terse."},
                                   {"role": "user", "content": "Which memories matter?"}]
    assert request["response_format"] == {"type": "json_object"}
    assert request.get("stream") in (None, False)


def test_without_system_and_json_mode_off(fake_openai):
    provider(fake_openai, json_mode=False).complete("hi")
    [request] = fake_openai.requests
    assert request["messages"] == [{"role": "user", "content": "hi"}]
    assert "response_format" not in request


def test_local_server_without_key_gets_placeholder(fake_openai):
    provider(fake_openai).complete("hi")
    assert fake_openai.headers[0]["authorization"] == "Bearer not-needed"


def test_key_comes_from_api_key_env(fake_openai, monkeypatch):
    monkeypatch.setenv("MY_JUDGE_KEY", "sk-test-123")
    provider(fake_openai, api_key_env="MY_JUDGE_KEY").complete("hi")
    assert fake_openai.headers[0]["authorization"] == "Bearer sk-test-123"


def test_base_url_from_env(fake_openai, monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", fake_openai.base_url)
    judge = OpenAIProvider("gpt-4o", max_retries=0)
    assert judge.complete("hi").text == "{}"
    assert fake_openai.requests[0]["model"] == "gpt-4o"


def test_client_is_built_lazily_and_reused(fake_openai):
    judge = provider(fake_openai)
    assert judge._client is None
    judge.complete("a")
    client = judge._client
    judge.complete("b")
    assert judge._client is client
    judge.close()
    assert judge._client is None


# -- failures ------------------------------------------------------------------------

def test_connection_refused_is_unavailable():
    judge = OpenAIProvider("gpt-4o-mini", base_url=closed_port_url(), max_retries=0, timeout=2)
    with pytest.raises(JudgeUnavailable, match="cannot reach"):
        judge.complete("hi")


def test_http_500_is_retried_then_unavailable(fake_openai):
    fake_openai.responder = lambda request: Reply(status=500, content="boom")
    with pytest.raises(JudgeUnavailable, match=r"HTTP 500 \(max_retries=2\)"):
        provider(fake_openai, max_retries=2).complete("hi")
    assert len(fake_openai.requests) == 3


def test_http_429_is_retried_then_unavailable(fake_openai):
    fake_openai.responder = lambda request: Reply(status=429, content="slow down")
    with pytest.raises(JudgeUnavailable, match="rate limiting"):
        provider(fake_openai, max_retries=1).complete("hi")
    assert len(fake_openai.requests) == 2


def test_transient_500_recovers(fake_openai):
    fake_openai.script(Reply(status=503), '{"ok": true}')
    assert provider(fake_openai, max_retries=1).complete("hi").text == '{"ok": true}'
    assert len(fake_openai.requests) == 2


def test_timeout_is_retried_then_unavailable(fake_openai):
    fake_openai.responder = lambda request: Reply(delay=2)
    started = time.perf_counter()
    with pytest.raises(JudgeUnavailable, match="timed out"):
        provider(fake_openai, timeout=0.5, max_retries=1).complete("hi")
    assert len(fake_openai.requests) == 2            # the client retries timeouts too
    assert time.perf_counter() - started < 2.0       # 2 x 0.5 s + one backoff (<= 0.5 s)


def test_dropped_connection_is_unavailable(fake_openai):
    fake_openai.script(Reply(drop=True))
    with pytest.raises(JudgeUnavailable, match="RemoteProtocolError"):
        provider(fake_openai).complete("hi")


def test_dropped_connection_is_retried(fake_openai):
    fake_openai.script(Reply(drop=True), "{}")
    assert provider(fake_openai, max_retries=1).complete("hi").text == "{}"
    assert len(fake_openai.requests) == 2


def test_response_format_rejected_falls_back_without_it(fake_openai):
    def responder(request):
        if "response_format" in request:
            return Reply(status=400, content="response_format is not supported")
        return '{"ok": true}'

    fake_openai.responder = responder
    judge = provider(fake_openai, max_retries=2)
    assert judge.complete("hi").text == '{"ok": true}'
    first, second = fake_openai.requests             # a 400 is not retried by the client
    assert "response_format" in first and "response_format" not in second

    judge.complete("again")                          # remembered: no doomed request
    assert len(fake_openai.requests) == 3
    assert "response_format" not in fake_openai.requests[2]


def test_other_400_is_unavailable_with_status(fake_openai):
    fake_openai.responder = lambda request: Reply(status=400, content="context too long")
    with pytest.raises(JudgeUnavailable, match="HTTP 400: context too long"):
        provider(fake_openai).complete("hi")
    assert len(fake_openai.requests) == 2            # with, then once without response_format


def test_401_is_unavailable_with_status(fake_openai):
    fake_openai.responder = lambda request: Reply(status=401, content="bad key")
    with pytest.raises(JudgeUnavailable, match="HTTP 401: bad key"):
        provider(fake_openai, json_mode=False, max_retries=2).complete("hi")
    assert len(fake_openai.requests) == 1


def test_no_key_and_no_base_url_fails_helpfully_at_call_time():
    judge = OpenAIProvider("gpt-4o-mini")            # constructing never fails
    with pytest.raises(JudgeUnavailable, match="no API key: set OPENAI_API_KEY"):
        judge.complete("hi")


def test_no_key_for_official_api_url_fails_too():
    judge = OpenAIProvider("gpt-4o-mini", base_url="https://api.openai.com/v1", api_key_env="NOPE_KEY")
    with pytest.raises(JudgeUnavailable, match="set NOPE_KEY"):
        judge.complete("hi")


# -- the fake server itself ----------------------------------------------------------

def test_fake_lists_models(fake_openai):
    with urllib.request.urlopen(fake_openai.base_url + "/models", timeout=2) as response:
        body = json.load(response)
    assert [m["id"] for m in body["data"]] == ["gpt-4o-mini", "gpt-4o"]


def test_fake_script_then_responder_and_server_delay():
    with FakeOpenAI(responder=lambda request: "from responder", delay=0.05) as fake:
        fake.script("first")
        judge = provider(fake)
        assert [judge.complete("x").text for _ in range(2)] == ["first", "from responder"]
        assert judge.complete("x").latency_ms >= 50


def test_fake_stop_is_prompt_even_with_a_sleeping_answer():
    fake = FakeOpenAI(responder=lambda request: Reply(delay=10)).start()
    judge = provider(fake, timeout=10)
    started = time.perf_counter()
    threading.Timer(0.2, fake.stop).start()
    with pytest.raises(JudgeUnavailable, match="cannot reach"):
        judge.complete("hi")
    assert time.perf_counter() - started < 2.0
