"""Servers that answer the way real models do, strict about every request (each carries
its step's JSON schema as a strict `response_format`), and one month of the lifecycle
against such a server: `lifecycle_round` and the facts it should leave, `EXPECTED`."""

from __future__ import annotations

import datetime as dt

from engine import Memory
from engine.steps import kinds as steps
from tests.helpers.fake_openai import FakeOpenAI
from tests.helpers.judge import DEFAULTS, MARKS, Judge, pick, policy_file, shown
from tests.helpers.rows import memories, seed


def step_of(request: dict) -> str | None:
    """The step a request is for, read from its first user message (None unless exactly one
    step's wording is there)."""
    first = next(m["content"] for m in request["messages"] if m["role"] == "user")
    found = [s for s, mark in MARKS.items() if mark in first]
    return found[0] if len(found) == 1 else None


def server(judge, **options) -> FakeOpenAI:
    """A FakeOpenAI answering with `judge` that checks each request carries its step's schema."""
    return FakeOpenAI(responder=judge, schemas=steps.SCHEMAS, step_of=step_of, **options)


MERGED = {
    "content": "User wants readable code over clever code",
    "summary": "readable code",
    "tags": ["style"],
}


def lifecycle_round(tmp_path, clock, **options) -> tuple[Memory, FakeOpenAI, dict]:
    """A month of use against one server: remember (gate, confidence, contradiction,
    expiry), recall (select) and compression (cluster, merge), every answer well formed."""
    judge = Judge(
        gate=lambda p: {**DEFAULTS["gate"](p), "summary": "s", "importance": 6},
        contradiction=lambda p: {"supersedes": pick(p, "PostgreSQL"), "confirms": []},
        expiry={"expires_at": "2026-06-30"},
        cluster=lambda p: {"clusters": [pick(p, "readable")]},
        merge=MERGED,
        select=lambda p: {"ids": sorted(shown(p))[:2]},
    )
    fake = server(judge, **options).start()
    path = policy_file(tmp_path, fake.base_url, name="round.yaml")
    mem = Memory(str(tmp_path / "round.db"), policy=path, clock=clock)
    old = seed(mem, "User uses PostgreSQL for the main database")
    for text in (
        "User wants code kept readable",
        "Readable code matters to the user",
        "User prefers readable code over clever code",
        "User's cat is called Miso",
    ):
        seed(mem, text)
    [new] = mem.remember("We moved the main database to MySQL until the end of June.", "ok")
    recalled = mem.recall("which database?")
    clock.advance(dt.timedelta(days=7))
    mem.run(["compression"])
    rows = memories(mem)
    facts = {
        "old": rows[old]["status"],
        "new": rows[new]["expires_at"],
        "recalled": len(recalled),
        "compressed": sum(r["status"] == "compressed" for r in rows.values()),
    }
    fake.stop()
    return mem, fake, facts


EXPECTED = {"old": "superseded", "new": "2026-06-30T23:59:59", "recalled": 2, "compressed": 3}
