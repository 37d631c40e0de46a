"""Step-down on real servers: llama-cpp-python's server answers a json_schema request with
an HTTP 500 whose message names response_format. That is a refusal of the format, not an
outage: the request is sent again without it, the call's log says so with the server's
words, and a 5xx that is an outage keeps the server's message on the pending turn.

Over HTTP with the real `openai` client (FakeOpenAI)."""

from __future__ import annotations

import pytest

from engine.judges.openai import forget_refusals
from tests.helpers.fake_openai import Reply
from tests.helpers.judge import Judge, policy_file
from tests.helpers.matrix import EXPECTED, lifecycle_round, server
from tests.helpers.rows import calls, memories


@pytest.fixture(autouse=True)
def _forget():
    forget_refusals()
    yield
    forget_refusals()


def test_a_500_that_names_json_schema_steps_down_and_says_so(tmp_path, clock):
    mem, fake, facts = lifecycle_round(tmp_path, clock, refuse=("json_schema_500",))
    assert facts == EXPECTED and fake.invalid == []
    # once per model (cheap at the gate, strong at the merge), then remembered
    assert fake.refused == ["json_schema_500", "json_schema_500"]
    stepped = [c for c in calls(mem) if "stepped down" in (c["detail"] or "")]
    assert [(c["step"], c["outcome"]) for c in stepped] == [("gate", "ok"), ("merge", "ok")]
    assert "HTTP 500: Unsupported response_format type: json_schema" in stepped[0]["detail"]
    assert "stepped down to json_object" in stepped[0]["detail"]
    mem.close()


def test_a_500_that_is_an_outage_keeps_the_servers_words_on_the_pending_turn(tmp_path, clock, db_path):
    from engine import Memory

    judge = Judge(gate=Reply(status=500, content="CUDA out of memory"))
    fake = server(judge).start()
    mem = Memory(db_path, policy=policy_file(tmp_path, fake.base_url), clock=clock)
    written = mem.remember("I use uv for Python packaging.", "ok")
    [turn] = mem.pending()
    assert written.outage and "HTTP 500" in turn["last_error"] and "CUDA out of memory" in turn["last_error"]
    assert memories(mem) == {}
    mem.close()
    fake.stop()


@pytest.mark.both_backends
def test_what_a_server_refused_is_remembered_by_the_store_for_the_next_process(tmp_path, clock, db_path):
    from engine import Memory

    fake = server(Judge(), refuse=("json_schema_500",)).start()
    path = policy_file(tmp_path, fake.base_url)
    mem = Memory(db_path, policy=path, clock=clock)
    mem.remember("I use uv for Python packaging.", "ok")
    mem.close()
    assert fake.refused == ["json_schema_500"]
    forget_refusals()  # a new process knows nothing of its own
    mem = Memory(db_path, policy=path, clock=clock)
    mem.remember("I use ruff for linting.", "ok")
    assert fake.refused == ["json_schema_500"]  # not paid again
    assert {r["response_format"]["type"] for r in fake.requests[4:]} == {"json_object"}
    mem.close()
    fake.stop()


def test_a_recall_the_rules_answer_is_logged_with_its_reason_and_warned_once(tmp_path, clock, db_path):
    import warnings

    from engine import Memory
    from engine.base.errors import RulesFallbackWarning
    from tests.helpers.fake_openai import closed_port_url

    mem = Memory(db_path, policy=policy_file(tmp_path, closed_port_url()), clock=clock)
    mem.add("User uses PostgreSQL for the main database", judged=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert [m.content for m in mem.recall("which database?")] == [
            "User uses PostgreSQL for the main database"
        ]
        mem.recall("which database again?")
    said = [w for w in caught if issubclass(w.category, RulesFallbackWarning)]
    assert len(said) == 1 and "cannot reach" in str(said[0].message)
    fallbacks = [c for c in calls(mem) if c["outcome"] == "fallback"]
    assert [c["step"] for c in fallbacks] == ["select", "select"]
    assert all("model unreachable: cannot reach" in c["detail"] for c in fallbacks)
    mem.close()


def test_a_model_with_concurrency_1_gets_one_call_at_a_time_and_queueing_is_not_timed(
    tmp_path, clock, db_path
):
    """On a server that runs one request at a time, the three calls Lethe sends together
    queued there and the timeout counted the queue. With `concurrency: 1` they queue here,
    and each call's clock starts when it is sent."""
    import threading
    import time

    from engine import Memory
    from tests.helpers.judge import LIFECYCLE

    active, most = [0], [0]
    lock = threading.Lock()

    def slow(answer):
        def respond(prompt):
            with lock:
                active[0] += 1
                most[0] = max(most[0], active[0])
            time.sleep(0.6)
            with lock:
                active[0] -= 1
            return answer

        return respond

    judge = Judge(
        confidence=slow({"confidence": 0.7}),
        expiry=slow({"expires_at": None}),
        contradiction=slow({"supersedes": [], "confirms": []}),
    )
    fake = server(judge).start()
    model = (
        f'{{provider: openai, model: m, base_url: "{fake.base_url}", '
        "max_retries: 0, timeout: 1.0, concurrency: 1}"
    )
    path = tmp_path / "one-at-a-time.yaml"
    path.write_text(
        f"name: one-at-a-time\nextends: {LIFECYCLE}\nmodels:\n  cheap: {model}\n  strong: {model}\n"
    )
    mem = Memory(db_path, policy=str(path), clock=clock)
    mem.add("User deploys on Fridays", judged=False)
    [mid] = mem.remember("I deploy the billing service on Fridays.", "ok")
    assert most[0] == 1
    assert memories(mem)[mid]["confidence"] == 0.7
    assert {c["outcome"] for c in calls(mem)} == {"ok"}
    mem.close()
    fake.stop()
