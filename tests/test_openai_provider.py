"""The openai judge provider, driven through the real openai client against FakeOpenAI."""

from __future__ import annotations

import json
import re
import threading
import time
import urllib.request

import pytest

from engine.judges.endpoint import redact, scrub
from engine.judges.openai import Completion, JudgeUnavailable, OpenAIProvider, forget_refusals
from engine.steps import kinds as steps
from engine.steps.answers import BadAnswer
from tests.helpers.fake_openai import (
    FakeOpenAI,
    Reply,
    closed_port_url,
    estimate_tokens,
    request_problems,
    strict_schema_problems,
)


@pytest.fixture(autouse=True)
def _no_ambient_openai_env(monkeypatch):
    """Tests never see a developer's real key or endpoint."""
    for name in (
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL",
        "OPENAI_ADMIN_KEY",
        "OPENAI_CUSTOM_HEADERS",
        "OPENAI_ORG_ID",
        "OPENAI_PROJECT_ID",
    ):
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
    assert request["messages"] == [
        {"role": "system", "content": "Be terse."},
        {"role": "user", "content": "Which memories matter?"},
    ]
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
    monkeypatch.setenv("LETHE_MODEL_KEYS", f"MY_JUDGE_KEY={fake_openai.base_url}")
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


def test_timeout_bounds_the_whole_call_retries_included(fake_openai):
    fake_openai.responder = lambda request: Reply(delay=2)
    with pytest.raises(JudgeUnavailable, match=r"timed out after 0.5s \(wall clock, max_retries=1\)"):
        provider(fake_openai, timeout=0.5, max_retries=1).complete("hi")
    assert len(fake_openai.requests) == 1  # one bound for the call: no second try began


def test_a_server_dripping_a_byte_a_second_cannot_hang_the_call():
    """issue 12, item 7: each read gets its byte within the read timeout, so only a
    wall-clock bound on the whole call ends it."""
    with FakeOpenAI(drip=1.0) as fake:
        judge = provider(fake, timeout=1.5, max_retries=0)
        started = time.perf_counter()
        with pytest.raises(JudgeUnavailable, match="timed out after 1.5s"):
            judge.complete("hi")
        assert time.perf_counter() - started < 2.0
        fake.drip = 0.0  # the server recovers: a new client answers
        assert judge.complete("again").text == "{}"


def test_a_slow_drip_that_finishes_in_time_is_an_answer():
    with FakeOpenAI(drip=0.0005) as fake:
        assert provider(fake, timeout=5).complete("hi").text == "{}"


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
    first, second = fake_openai.requests  # a 400 is not retried by the client
    assert "response_format" in first and "response_format" not in second

    judge.complete("again")  # remembered: no doomed request
    assert len(fake_openai.requests) == 3
    assert "response_format" not in fake_openai.requests[2]


def test_other_400_is_unavailable_with_status(fake_openai):
    fake_openai.responder = lambda request: Reply(status=400, content="context too long")
    with pytest.raises(JudgeUnavailable, match="HTTP 400: context too long"):
        provider(fake_openai).complete("hi")
    assert len(fake_openai.requests) == 1  # nothing to step down: not retried


def test_401_is_unavailable_with_status(fake_openai):
    fake_openai.responder = lambda request: Reply(status=401, content="bad key")
    with pytest.raises(JudgeUnavailable, match="HTTP 401: bad key"):
        provider(fake_openai, json_mode=False, max_retries=2).complete("hi")
    assert len(fake_openai.requests) == 1


def test_no_key_and_no_base_url_fails_helpfully_at_call_time():
    judge = OpenAIProvider("gpt-4o-mini")  # constructing never fails
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


# -- what a request carries ------------------------------------------------------------

SCHEMA = steps.schema("confidence")


def test_a_step_schema_is_sent_as_a_strict_json_schema():
    with FakeOpenAI(schemas=steps.SCHEMAS) as fake:
        provider(fake).complete("How sure?", schema=SCHEMA, name="confidence")
        [request] = fake.requests
        assert request["response_format"] == {
            "type": "json_schema",
            "json_schema": {"name": "confidence", "strict": True, "schema": SCHEMA},
        }
        assert fake.invalid == []


def test_every_step_schema_follows_the_strict_rules():
    for name, schema in steps.SCHEMAS.items():
        assert strict_schema_problems(schema, name, 1) == [], name
        assert schema["type"] == "object" and schema["additionalProperties"] is False


def test_the_fake_refuses_what_openai_refuses():
    loose = {"type": "object", "properties": {"a": {"type": "integer"}}}
    assert "'additionalProperties' must be false" in " ".join(strict_schema_problems(loose, "s", 1))
    assert "'required' must list every property" in " ".join(
        strict_schema_problems({**loose, "additionalProperties": False, "required": []}, "s", 1)
    )
    assert request_problems({"model": "m", "messages": [], "temperature": 3}) == [
        "messages: a non-empty list is required",
        "temperature: must be a number from 0 to 2, got 3",
    ]
    assert request_problems(
        {
            "model": "m",
            "messages": [{"role": "user", "content": "x"}],
            "max_tokens": 5,
            "max_completion_tokens": 5,
            "reasoning_effort": "max",
        }
    ) == [
        "max_tokens and max_completion_tokens cannot both be given",
        "reasoning_effort: unknown value 'max'",
    ]


def test_a_schema_that_differs_from_the_steps_is_an_invalid_request():
    """The fake answers it with a 400 naming json_schema, as OpenAI answers a schema it
    cannot use; the provider steps down, and `invalid` keeps the record tests assert on."""
    with FakeOpenAI(schemas=steps.SCHEMAS) as fake:
        provider(fake).complete("x", schema={**SCHEMA, "description": "mine"}, name="confidence")
        assert fake.invalid == ["#1: json_schema 'confidence' differs from the schema of that name"]
        assert fake.requests[-1]["response_format"] == {"type": "json_object"}


def test_json_schema_refused_steps_down_to_json_object_and_is_remembered():
    with FakeOpenAI(refuse=("json_schema",)) as fake:
        assert provider(fake).complete("x", schema=SCHEMA, name="confidence").text == "{}"
        assert [r["response_format"]["type"] for r in fake.requests] == ["json_schema", "json_object"]
        assert fake.refused == ["json_schema"]
        other = provider(fake)  # another provider, same model and endpoint
        other.complete("y", schema=SCHEMA, name="confidence")
        assert fake.requests[-1]["response_format"] == {"type": "json_object"}
        assert len(fake.requests) == 3
        forget_refusals()
        other.complete("z", schema=SCHEMA, name="confidence")
        assert [r["response_format"]["type"] for r in fake.requests[3:]] == ["json_schema", "json_object"]


def test_a_server_refusing_any_response_format_ends_with_none():
    with FakeOpenAI(refuse=("response_format",)) as fake:
        judge = provider(fake)
        assert judge.complete("x", schema=SCHEMA, name="confidence").text == "{}"
        assert [r.get("response_format", {}).get("type") for r in fake.requests] == [
            "json_schema",
            "json_object",
            None,
        ]
        judge.complete("again", schema=SCHEMA, name="confidence")
        assert "response_format" not in fake.requests[-1] and len(fake.requests) == 4


@pytest.mark.parametrize("mode,sent", [("json_object", {"type": "json_object"}), ("none", None)])
def test_the_response_format_setting_chooses(fake_openai, mode, sent):
    provider(fake_openai, response_format=mode).complete("x", schema=SCHEMA, name="confidence")
    assert fake_openai.requests[0].get("response_format") == sent


def test_temperature_refused_is_dropped_and_remembered():
    with FakeOpenAI(refuse=("temperature",)) as fake:
        judge = provider(fake, temperature=0)
        assert judge.complete("x", schema=SCHEMA, name="confidence").text == "{}"
        first, second = fake.requests
        assert first["temperature"] == 0 and "temperature" not in second
        assert second["response_format"]["type"] == "json_schema"  # only the temperature went
        judge.complete("again")
        assert "temperature" not in fake.requests[-1] and len(fake.requests) == 3


def test_both_refusals_at_once_cost_one_request_each():
    with FakeOpenAI(refuse=("json_schema", "temperature")) as fake:
        assert provider(fake).complete("x", schema=SCHEMA, name="confidence").text == "{}"
        assert fake.refused == ["json_schema", "temperature"] and len(fake.requests) == 3


def test_temperature_null_is_not_sent(fake_openai):
    provider(fake_openai, temperature=None).complete("x")
    assert "temperature" not in fake_openai.requests[0]


def test_model_settings_pass_through(fake_openai):
    provider(
        fake_openai,
        max_completion_tokens=300,
        reasoning_effort="low",
        seed=7,
        headers={"X-Team": "memory"},
        extra_body={"chat_template_kwargs": {"enable_thinking": False}},
    ).complete("x", schema=SCHEMA, name="confidence")
    [request] = fake_openai.requests
    assert (request["max_completion_tokens"], request["reasoning_effort"], request["seed"]) == (300, "low", 7)
    assert request["chat_template_kwargs"] == {"enable_thinking": False}
    assert fake_openai.headers[0]["x-team"] == "memory"
    assert "max_tokens" not in request and fake_openai.invalid == []


def test_max_tokens_for_servers_that_want_it(fake_openai):
    provider(fake_openai, max_tokens=200).complete("x")
    assert fake_openai.requests[0]["max_tokens"] == 200
    assert "max_completion_tokens" not in fake_openai.requests[0]


def test_a_retry_sends_the_refused_answer_and_the_reason(fake_openai):
    retry = [
        {"role": "assistant", "content": "sure!"},
        {"role": "user", "content": "That answer was refused: not JSON."},
    ]
    provider(fake_openai).complete("How sure?", system="S", retry=retry)
    assert fake_openai.requests[0]["messages"] == [
        {"role": "system", "content": "S"},
        {"role": "user", "content": "How sure?"},
        *retry,
    ]


# -- reading the response ---------------------------------------------------------------


def test_no_usage_means_estimated_tokens():
    with FakeOpenAI(omit_usage=True) as fake:
        fake.script('{"confidence": 0.5}')
        c = provider(fake).complete("How sure can we be?", system="Be terse.")
        assert c.estimated is True
        assert c.prompt_tokens == estimate_tokens("Be terse.\nHow sure can we be?")
        assert c.completion_tokens == estimate_tokens('{"confidence": 0.5}')


@pytest.mark.parametrize(
    "usage",
    [
        {"prompt_tokens": {"a": 1}, "completion_tokens": 3},
        "lots",
        {"prompt_tokens": -4, "completion_tokens": True},
        [1, 2],
        {"prompt_tokens": 10**30, "completion_tokens": 1.5},
    ],
)
def test_usage_that_is_not_counts_is_estimated(fake_openai, usage):
    fake_openai.script(Reply(content="{}", usage=usage))
    c = provider(fake_openai).complete("hi")
    assert c.estimated is True and c.prompt_tokens > 0 and c.completion_tokens > 0


def test_usage_counts_are_taken_as_sent(fake_openai):
    fake_openai.script(Reply(content="{}", usage={"prompt_tokens": 11, "completion_tokens": 3}))
    c = provider(fake_openai).complete("hi")
    assert (c.prompt_tokens, c.completion_tokens, c.estimated) == (11, 3, False)


@pytest.mark.parametrize(
    "body,problem",
    [
        ({"choices": [None]}, "choices[0] is null"),
        ({"choices": [{"index": 0, "message": None, "finish_reason": "stop"}]}, "choices[0].message is null"),
        ({"choices": []}, "no choices"),
        ({"choices": "many"}, "no choices"),
        ({"id": "x"}, "no choices"),
        ([1, 2, 3], "no choices"),
        ({"choices": [{"message": {"role": "assistant", "content": {"a": 1}}}]}, "content is dict"),
    ],
)
def test_a_response_without_an_answer_is_a_bad_answer(fake_openai, body, problem):
    fake_openai.script(Reply(body=body))
    with pytest.raises(BadAnswer, match=re.escape(problem)):
        provider(fake_openai).complete("hi")


def test_content_parts_are_joined(fake_openai):
    parts = [{"type": "text", "text": '{"confidence": '}, {"type": "text", "text": "0.5}"}]
    fake_openai.script(
        Reply(
            body={"choices": [{"message": {"role": "assistant", "content": parts}, "finish_reason": "stop"}]}
        )
    )
    c = provider(fake_openai).complete("hi")
    assert c.text == '{"confidence": 0.5}' and c.estimated is True


def test_finish_reason_refusal_and_reasoning_are_read(fake_openai):
    fake_openai.script(
        Reply(content='{"conf', finish_reason="length", reasoning="Let me think."),
        Reply(content=None, refusal="I can't help with that."),
    )
    cut = provider(fake_openai).complete("hi")
    assert (cut.text, cut.finish_reason, cut.reasoning) == ('{"conf', "length", "Let me think.")
    refused = provider(fake_openai).complete("hi")
    assert (refused.text, refused.refusal) == ("", "I can't help with that.")


def test_think_text_before_the_answer_reaches_the_checker_as_sent():
    with FakeOpenAI(think="The user hedges.") as fake:
        fake.script('{"confidence": 0.3}')
        assert provider(fake).complete("hi").text == '<think>The user hedges.</think>\n{"confidence": 0.3}'


# -- keys go only where they belong (issue 12, item 11) ------------------------------------

AMBIENT = {
    "OPENAI_API_KEY": "sk-developer",
    "OPENAI_ORG_ID": "org-dev",
    "OPENAI_PROJECT_ID": "proj-dev",
    "OPENAI_CUSTOM_HEADERS": "Authorization: Bearer sk-custom\nX-Dev-Secret: s3cret",
}


def _ambient(monkeypatch, **extra):
    for k, v in {**AMBIENT, **extra}.items():
        monkeypatch.setenv(k, v)


def test_a_base_url_of_its_own_never_gets_the_developers_openai_settings(fake_openai, monkeypatch):
    _ambient(monkeypatch)
    provider(fake_openai).complete("hi")
    headers = fake_openai.headers[0]
    assert headers["authorization"] == "Bearer not-needed"
    for name in ("openai-organization", "openai-project", "x-dev-secret"):
        assert name not in headers
    assert "sk-developer" not in json.dumps(headers) and "sk-custom" not in json.dumps(headers)


def test_a_base_url_of_its_own_gets_the_key_its_entry_names_where_the_user_paired_it(
    fake_openai, monkeypatch
):
    _ambient(
        monkeypatch,
        LOCAL_KEY="sk-local",
        LETHE_MODEL_KEYS=f"OTHER=http://x.test, LOCAL_KEY={fake_openai.base_url}/",
    )
    provider(fake_openai, api_key_env="LOCAL_KEY", headers={"X-Team": "a"}).complete("hi")
    headers = fake_openai.headers[0]
    assert headers["authorization"] == "Bearer sk-local" and headers["x-team"] == "a"
    assert "x-dev-secret" not in headers


@pytest.mark.parametrize("named", ["OPENAI_API_KEY", "AWS_SECRET_ACCESS_KEY"])
@pytest.mark.parametrize(
    "pairs", [None, "AWS_SECRET_ACCESS_KEY=http://127.0.0.1:1/v1", "OPENAI_API_KEY=https://api.openai.com/v1"]
)
def test_a_key_a_policy_names_for_its_own_server_goes_nowhere_unpaired(
    fake_openai, monkeypatch, named, pairs
):
    """Before: a policy naming OPENAI_API_KEY (or any variable: a cloud key, a token) beside
    a base_url of its choosing was sent it. A policy is hostile input: the user pairs a
    variable with a server in LETHE_MODEL_KEYS, or nothing goes."""
    _ambient(monkeypatch, AWS_SECRET_ACCESS_KEY="aws-secret")
    if pairs:
        monkeypatch.setenv("LETHE_MODEL_KEYS", pairs)
    with pytest.raises(JudgeUnavailable, match=f"LETHE_MODEL_KEYS='{named}="):
        provider(fake_openai, api_key_env=named).complete("hi")
    assert fake_openai.requests == []


def test_naming_openai_api_key_sends_it_where_the_user_paired_it(fake_openai, monkeypatch):
    _ambient(monkeypatch, LETHE_MODEL_KEYS=f"OPENAI_API_KEY={fake_openai.base_url}")
    provider(fake_openai, api_key_env="OPENAI_API_KEY").complete("hi")
    assert fake_openai.headers[0]["authorization"] == "Bearer sk-developer"


def test_openai_base_url_gets_the_openai_settings(fake_openai, monkeypatch):
    monkeypatch.delenv("OPENAI_CUSTOM_HEADERS", raising=False)
    _ambient(monkeypatch, OPENAI_CUSTOM_HEADERS="X-Dev-Tag: t", OPENAI_BASE_URL=fake_openai.base_url)
    OpenAIProvider("gpt-4o", max_retries=0, timeout=5).complete("hi")  # no base_url
    OpenAIProvider("gpt-4o", base_url=fake_openai.base_url + "/", max_retries=0, timeout=5).complete("hi")
    for headers in fake_openai.headers:
        assert headers["authorization"] == "Bearer sk-developer"
        assert (headers["openai-organization"], headers["x-dev-tag"]) == ("org-dev", "t")


def test_the_official_endpoint_without_a_key_fails_before_sending(monkeypatch):
    monkeypatch.setenv("LOCAL_KEY", "sk-local")
    judge = OpenAIProvider("gpt-4o-mini", base_url="https://api.openai.com/v1")
    with pytest.raises(JudgeUnavailable, match="no API key: set OPENAI_API_KEY"):
        judge.complete("hi")


def test_user_password_and_query_of_a_base_url_never_appear_in_messages():
    url = closed_port_url().replace("http://", "http://alice:pa55word@") + "?api-key=qu3ry-secret"
    judge = OpenAIProvider("gpt-4o-mini", base_url=url, max_retries=0, timeout=2)
    with pytest.raises(JudgeUnavailable) as err:
        judge.complete("hi")
    message = str(err.value)
    assert "cannot reach gpt-4o-mini at http://***:***@127.0.0.1:" in message and "/v1?***" in message
    for secret in ("alice", "pa55word", "qu3ry-secret"):
        assert secret not in message and secret not in repr(judge)


def test_redaction_of_every_part(fake_openai):
    assert redact("https://u:p@host:8443/v1?key=s#frag") == "https://***:***@host:8443/v1?***"
    assert redact("https://token@host/v1") == "https://***@host/v1"
    assert redact("http://127.0.0.1:8000/v1") == "http://127.0.0.1:8000/v1"
    assert (
        scrub("failed at https://u:p4ss@h/v1?k=zzz (p4ss)", "https://u:p4ss@h/v1?k=zzz")
        == "failed at https://***:***@h/v1?*** (***)"
    )


def test_a_redirect_to_another_origin_carries_no_key_and_no_headers(fake_openai, monkeypatch):
    """Before: httpx dropped the key on a redirect to another origin, and the request hook,
    which sees the redirected request too, put it back."""
    import http.server

    class Redirect(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            self.send_response(307)
            self.send_header("Location", fake_openai.base_url + self.path[len("/v1") :])
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Redirect)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        here = f"http://127.0.0.1:{server.server_address[1]}/v1"
        _ambient(monkeypatch, LOCAL_KEY="sk-local", LETHE_MODEL_KEYS=f"LOCAL_KEY={here}")
        judge = OpenAIProvider(
            "gpt-4o-mini",
            base_url=here,
            api_key_env="LOCAL_KEY",
            headers={"X-Team": "secret-team"},
            timeout=5.0,
            max_retries=0,
        )
        judge.complete("hi")
    finally:
        server.shutdown()
    [headers] = fake_openai.headers
    assert "sk-local" not in json.dumps(headers) and "x-team" not in headers
    assert "authorization" not in headers and "openai-organization" not in headers


def test_the_warning_for_a_key_set_but_not_paired_says_to_pair_it(tmp_path, monkeypatch):
    """A named key that is set but not paired: the warning says so, not 'set MY_KEY'."""
    import warnings as w

    from engine import Memory
    from engine.judges.keys import NoApiKeyWarning

    monkeypatch.setenv("MY_KEY", "abc")
    monkeypatch.delenv("LETHE_MODEL_KEYS", raising=False)
    policy = tmp_path / "k.yaml"
    policy.write_text(
        "name: k\nextends: lifecycle\nmodels:\n"
        "  cheap: {provider: openai, model: m, base_url: 'http://127.0.0.1:9/v1', "
        "api_key_env: MY_KEY, max_retries: 0, timeout: 2}\n"
        "  strong: {provider: openai, model: m, base_url: 'http://127.0.0.1:9/v1', "
        "api_key_env: MY_KEY, max_retries: 0, timeout: 2}\n"
    )
    with w.catch_warnings(record=True) as said, Memory(str(tmp_path / "m.db"), policy=str(policy)) as mem:
        w.simplefilter("always")
        mem.remember("We use Postgres now.")
    [warning] = [x.message for x in said if isinstance(x.message, NoApiKeyWarning)]
    assert "MY_KEY is set but not paired" in str(warning) and "LETHE_MODEL_KEYS" in str(warning)
