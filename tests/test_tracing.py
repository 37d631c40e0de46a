"""OpenTelemetry (the `otel` extra, issue 43): one remember, one recall and one pass make
the expected spans, judge calls under them with the GenAI conventions' attributes and
their token counts, read with the SDK's in-memory exporter. Without a program that set up
tracing, nothing is imported (tests/test_startup.py checks start-up)."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from engine import FixedClock, Memory
from tests.helpers import ROOT
from tests.helpers.fake_openai import FakeOpenAI

EXPORTER = InMemorySpanExporter()


@pytest.fixture
def spans():
    """The spans finished during the test (the provider is the process's, set once)."""
    if not isinstance(trace.get_tracer_provider(), TracerProvider):
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(EXPORTER))
        trace.set_tracer_provider(provider)
    EXPORTER.clear()
    yield EXPORTER.get_finished_spans
    EXPORTER.clear()


ANSWERS = {
    "ids": '{"ids": [1]}',
    "supersedes": '{"supersedes": [], "confirms": []}',
    "save": '{"save": true, "content": "User lives in Lisbon.", "importance": 5}',
    "confidence": '{"confidence": 0.8}',
    "expires_at": '{"expires_at": null}',
}


def responder(request):
    """Each step's answer, by the keys its json_schema asks for (else by its prompt)."""
    schema = (request.get("response_format") or {}).get("json_schema", {}).get("schema", {})
    keys = list(schema.get("properties", {}))
    prompt = json.dumps(request["messages"])
    for key, answer in ANSWERS.items():
        if key in keys or (not keys and f'\\"{key}\\"' in prompt):
            return answer
    return "{}"


@pytest.fixture
def served(tmp_path):
    with FakeOpenAI(responder=responder) as fake:
        policy = tmp_path / "p.yaml"
        model = (
            f'{{provider: openai, model: tiny-model, base_url: "{fake.base_url}", '
            "max_retries: 0, timeout: 5}"
        )
        policy.write_text(f"name: p\nextends: lifecycle\nmodels: {{cheap: {model}, strong: {model}}}\n")
        yield str(policy)


def test_remember_recall_and_a_pass_make_spans_with_token_counts(served, db_path, spans):
    clock = FixedClock("2026-01-05T09:00:00")
    with Memory(db_path, policy=served, clock=clock, namespace="alice") as mem:
        written = mem.remember("I moved to Lisbon last month.", "Noted.")
        found = mem.recall("where do I live?")
        clock.advance(dt.timedelta(days=3))
        mem.run(["decay"])
    by_name = {}
    for s in spans():
        by_name.setdefault(s.name, []).append(s)
    [remember], [recall], [decay] = (
        by_name["lethe.remember"],
        by_name["lethe.recall"],
        by_name["lethe.pass decay"],
    )
    assert remember.attributes["lethe.namespace"] == "alice"
    assert list(remember.attributes["lethe.memory_ids"]) == list(written) == [1]
    assert list(remember.attributes["lethe.stored"]) == [1]
    assert list(recall.attributes["lethe.memory_ids"]) == [m.id for m in found] == [1]
    assert decay.attributes["lethe.pass"] == "decay" and decay.attributes["lethe.changed"] == 1
    calls = by_name["chat tiny-model"]
    under = {c.attributes["lethe.step"]: c.parent.span_id for c in calls}
    assert under["gate"] == remember.context.span_id  # judge calls under their write
    assert under["select"] == recall.context.span_id
    for call in calls:
        a = call.attributes
        assert a["gen_ai.operation.name"] == "chat" and a["gen_ai.request.model"] == "tiny-model"
        assert a["gen_ai.provider.name"] == "openai" and a["lethe.outcome"] == "ok"
        assert a["gen_ai.usage.input_tokens"] > 10 and a["gen_ai.usage.output_tokens"] > 0
        assert call.kind == trace.SpanKind.CLIENT and call.end_time > call.start_time
    assert {c.attributes["lethe.step"] for c in calls} >= {"gate", "confidence", "select"}


def test_passes_run_together_each_get_a_span(db_path, spans):
    with Memory(db_path, clock=FixedClock("2026-01-05T09:00:00"), offline=True) as mem:
        mem.add("The beta launches on 2026-01-06.")
        mem.clock.advance(dt.timedelta(days=3))
        mem.run(["expiry", "decay"])
    passes = {s.name: s.attributes for s in spans() if s.name.startswith("lethe.pass")}
    assert set(passes) == {"lethe.pass expiry", "lethe.pass decay"}
    assert passes["lethe.pass expiry"]["lethe.events.expired"] == 1


def test_a_failed_judge_call_is_an_error_span(tmp_path, db_path, spans):
    policy = tmp_path / "p.yaml"
    model = '{provider: openai, model: gone, base_url: "http://127.0.0.1:9/v1", max_retries: 0, timeout: 2}'
    policy.write_text(f"name: p\nextends: lifecycle\nmodels: {{cheap: {model}, strong: {model}}}\n")
    with Memory(db_path, policy=str(policy), clock=FixedClock("2026-01-05T09:00:00")) as mem:
        assert mem.remember("I moved to Lisbon.").pending
    [call] = [s for s in spans() if s.name == "chat gone"]
    assert call.attributes["error.type"] == "unavailable"
    assert call.status.status_code == trace.StatusCode.ERROR


def test_without_tracing_set_up_lethe_imports_no_opentelemetry(tmp_path):
    code = (
        "import sys\nfrom engine import Memory\n"
        "m = Memory('m.db', offline=True)\nm.remember('I live in Porto.')\n"
        "m.recall('where?')\nm.run(['decay'])\n"
        "print(sorted(n for n in sys.modules if n.startswith('opentelemetry')))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": ROOT},
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
