"""A remember waits for at most two model round trips, one after the other (one with the
fused policy), whatever else it asks: counted from when each request to a real HTTP fake
server started and ended, not from the wall clock (issue 44)."""

from __future__ import annotations

import json

import pytest

from bench.write import RealLike, Responder
from engine import FixedClock, Memory
from engine.judges.embeddings import pack
from tests.helpers import store_of
from tests.helpers.fake_openai import FakeOpenAI, word_vector

pytest.importorskip("sqlite_vec", reason="the embed extra (sqlite-vec) is not installed")

DELAY = 0.4  # every request takes at least this long, so one wave's requests overlap
EMBED = "openai:text-embedding-3-small"


def waves(spans) -> int:
    """The round trips a turn waited for one after another: the longest chain of requests
    each started after the one before it ended. (Counting the requests that started after
    every earlier one had ended read 1 on a loaded machine, where the embedding request
    asked beside the gate started late and was still running when the second wave began.)"""
    spans = sorted(spans, key=lambda s: s[1])
    chain: list[int] = []
    for _, start, _ in spans:
        chain.append(1 + max((n for n, (_, _, stop) in zip(chain, spans) if stop <= start), default=0))
    return max(chain, default=0)


class Rewriting(Responder):
    """The gate and the fused step store the user's words in their own: "Noted: ..."."""

    def __call__(self, request: dict) -> str:
        out = super().__call__(request)
        if self.step_of(request["messages"][-1]["content"]) in ("gate", "fused"):
            found = json.loads(out)
            return json.dumps({**found, "content": "Noted: " + found["content"]})
        return out


@pytest.fixture
def fake():
    with FakeOpenAI(responder=Responder(), delay=DELAY) as server:
        server.embed_delay = DELAY
        yield server


def memory(tmp_path, fake, parent: str, embed: bool = True) -> Memory:
    path = tmp_path / f"waves-{parent}.yaml"
    model = (
        f"{{provider: openai, model: gpt-4o-mini, temperature: 0, base_url: "
        f"'{fake.base_url}', timeout: 10, max_retries: 0}}"
    )
    path.write_text(
        f"extends: {parent}\nmodels:\n  cheap: {model}\n  strong: {model}\n"
        + (
            f"embed: {{provider: openai, model: text-embedding-3-small, base_url: "
            f"'{fake.base_url}', max_retries: 0, timeout: 10}}\n"
            if embed
            else ""
        ),
        encoding="utf-8",
    )
    return Memory(str(tmp_path / f"{parent}.db"), policy=str(path), clock=FixedClock("2026-03-02T09:00:00"))


def remember(mem, fake, user: str) -> tuple[int, list]:
    fake.spans.clear()
    written = mem.remember(user, "Noted.")
    assert written.stored, written.pending
    return written.stored[0], list(fake.spans)


def stored_vector(mem, memory_id: int) -> bytes:
    return store_of(mem).vectors_of("default", EMBED, [memory_id])[memory_id]


@pytest.mark.parametrize("parent, most", [("lifecycle", 2), ("fused", 2)])
def test_a_remember_with_an_embedding_model_is_two_waves(tmp_path, fake, parent, most):
    """Before: lifecycle asked the gate, then embedded its content for the contradiction
    step's candidates, then asked the three steps (three waves); fused embedded the turn,
    asked, then embedded the memory it stores (three). The embeddings are now asked
    beside the gate, in one request."""
    with memory(tmp_path, fake, parent) as mem:
        remember(mem, fake, "We run CI on Jenkins for the billing service.")
        user = "We moved CI for the billing service from Jenkins to GitHub Actions."
        new, spans = remember(mem, fake, user)
        assert waves(spans) <= most, spans
        assert {path for path, _, _ in spans} == {"/embeddings", "/chat/completions"}
        assert stored_vector(mem, new) == pack(word_vector(user))  # what is stored: unchanged


def test_a_remember_without_an_embedding_model_is_two_waves(tmp_path, fake):
    with memory(tmp_path, fake, "lifecycle", embed=False) as mem:
        remember(mem, fake, "We run CI on Jenkins for the billing service.")
        _, spans = remember(mem, fake, "We moved CI from Jenkins to GitHub Actions.")
        assert len(spans) == 4 and waves(spans) == 2, spans


@pytest.mark.parametrize("parent", ["lifecycle", "fused"])
def test_a_rewritten_memory_stores_the_vector_of_its_own_words(tmp_path, fake, parent):
    """When the gate or fused step rewrites the words, the guess embedded beside it is
    not used: the memory's vector is its stored content's, asked for after."""
    fake.responder = Rewriting()
    with memory(tmp_path, fake, parent) as mem:
        remember(mem, fake, "We run CI on Jenkins for the billing service.")
        new, _ = remember(mem, fake, "We moved CI from Jenkins to GitHub Actions.")
        content = store_of(mem).get(new, "default")["content"]
        assert content.startswith("Noted: ")
        assert stored_vector(mem, new) == pack(word_vector(content))


@pytest.mark.parametrize("responder", [Rewriting, RealLike], ids=["rewritten", "two-memories"])
def test_a_rewritten_or_split_turn_is_two_waves(tmp_path, fake, responder):
    """Before: the contradiction step waited for the rewritten words' vector (a third
    wave), and a turn the gate split into two memories asked the three steps for one,
    then for the other (a third). Now every memory's questions go in one wave, the turn's
    vector (asked beside the gate) finds the candidates, and each memory's own vector is
    asked beside that wave, and stored."""
    fake.responder = responder()
    with memory(tmp_path, fake, "lifecycle") as mem:
        remember(mem, fake, "We run CI on Jenkins for the billing service.")
        fake.spans.clear()
        written = mem.remember("We moved CI for the billing service from Jenkins to GitHub Actions.", "Ok.")
        spans = list(fake.spans)
        assert written.stored, written.pending
        assert waves(spans) == 2, spans
        store = store_of(mem)
        for new in written.stored:
            content = store.get(new, "default")["content"]
            assert content.startswith(("Noted: ", "The user says: ", "Noted from the user: "))
            assert stored_vector(mem, new) == pack(word_vector(content))
        calls = store.db.execute(
            "SELECT step, count(*) FROM model_calls WHERE outcome = 'ok' GROUP BY step"
        ).fetchall()
        asked = dict(map(tuple, calls))
        # the old memory is a candidate of each new one: contradiction asked for each
        assert asked.get("contradiction", 0) >= len(written.stored), asked
