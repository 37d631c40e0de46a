"""A store with 110 days of one agent's memories, the queries asked of it, and an
explanation as a reviewer reads it (no ids, floats rounded)."""

from __future__ import annotations

import datetime as dt

from tests.helpers import store_of, writer_of

DAY = dt.timedelta(days=1)
QUERIES = [
    "which dependency manager and database does the project use?",
    "what editor do I like?",
    "good morning",
]


def add(mem, text, **kw):
    """A memory stored as given (no judges)."""
    return mem.add(text, judged=False, **kw)


def seed_store(mem, clock) -> dict[str, int]:
    """110 days of one agent's memories: one ages out, one fades below the recall floor,
    one is superseded, one expires, four stay fresh."""
    ids = {
        "weather": add(mem, "User asked about the weather in Lisbon", importance=2),
        "poetry": add(mem, "Dependencies of the project are managed with poetry", importance=7),
    }
    mem.run_due()
    clock.advance(20 * DAY)
    ids["editor"] = add(mem, "The favourite editor of the user is Neovim", importance=6)
    mem.run_due()
    clock.advance(80 * DAY)
    ids["database"] = add(
        mem, "The project uses PostgreSQL 16 for its main database", importance=8, confidence=0.9
    )
    ids["tabs"] = add(mem, "User prefers tabs over spaces", importance=6, confidence=0.7)
    ids["blocked"] = add(
        mem, "Release is blocked until the security review", importance=5, expires_at=clock() + 5 * DAY
    )
    ids["uv"] = add(mem, "Dependencies of the project are managed with uv now", importance=7)
    with store_of(mem).transaction():
        writer_of(mem).supersede(ids["poetry"], ids["uv"], "Dependencies ... uv now")
    mem.run_due()
    clock.advance(10 * DAY)
    mem.run_due()
    return ids


def stable(ex: dict) -> dict:
    """An explanation without database ids, floats rounded: what a reviewer reads."""
    names = {c["id"]: c["summary"] for c in ex["candidates"]}
    r = lambda v: round(v, 4) if isinstance(v, float) else v  # noqa: E731
    return {
        **{
            k: ex[k]
            for k in (
                "where",
                "order",
                "limit",
                "select",
                "top_n",
                "filtered",
                "eligible",
                "beyond_limit",
                "not_chosen",
            )
        },
        "chosen": [names[i] for i in ex["chosen"]],
        "candidates": [
            {k: ([r(x) for x in v] if isinstance(v, list) else r(v)) for k, v in c.items() if k != "id"}
            for c in ex["candidates"]
        ],
    }
