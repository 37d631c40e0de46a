"""The variables each step's template is given, with an example value for each.

One table, read four ways: `lethe render POLICY STEP --example` renders a template with
these values, `lethe render --help` lists them, `validate` renders every template of a
policy with them (so a template using a name its step does not give fails at load time,
not at the first `remember`), and docs/policy.md prints them. The write pipeline, recall,
compression and chat build the real values with the same names (tests/test_first_hour.py
checks the two stay in step).
"""

from __future__ import annotations

import datetime as dt

NOW = dt.datetime(2026, 1, 5, 9, 0, 0)
TODAY = NOW.date().isoformat()

_TURN = {
    "user": ("what the user said", "We moved the app's database from PostgreSQL to MySQL."),
    "assistant": ("what the assistant answered", "Got it."),
}
_CLOCK = {
    "now": ("the clock's time (a datetime)", NOW),
    "today": ("the clock's date, YYYY-MM-DD", TODAY),
}
_SAID = {  # a turn is judged on the day it was said, however late (docs/time.md)
    "now": ("when the turn was said (a datetime; the clock's time for a memory added)", NOW),
    "today": ("the date the turn was said, YYYY-MM-DD", TODAY),
}
_MEMORY = {
    "memory": (
        "the new memory so far: content, summary, tags",
        {
            "content": "We moved the app's database from PostgreSQL to MySQL.",
            "summary": "We moved the app's database from PostgreSQL to MySQL.",
            "tags": ["migration", "database"],
        },
    ),
}
_WRITE_CANDIDATES = {
    "candidates": (
        "older memories like the new one, numbered n = 1..K (n, id, content, "
        "summary, created_at, importance)",
        [
            {
                "n": 1,
                "id": 12,
                "content": "The app's database is PostgreSQL.",
                "summary": "The app's database is PostgreSQL.",
                "created_at": "2025-11-02T10:00:00",
                "importance": 7.0,
            }
        ],
    ),
}
_CELLS = [
    {"content": "The build uses Bazel.", "kind": "fact", "salience": 0.7},
    {"content": "CI takes 40 minutes.", "kind": "issue", "salience": 0.5},
]
_POOL = [
    {
        "n": 1,
        "id": 3,
        "content": "User prefers readable code.",
        "summary": "User prefers readable code.",
        "tags": ["preference"],
        "importance": 6.0,
        "access_count": 2,
    },
    {
        "n": 2,
        "id": 9,
        "content": "User likes clear names over clever ones.",
        "summary": "User likes clear names over clever ones.",
        "tags": ["preference"],
        "importance": 5.0,
        "access_count": 0,
    },
]

WRITE = {**_TURN, **_SAID, **_MEMORY, **_WRITE_CANDIDATES}
_SUPERSEDING = {
    "max_supersedes": (
        "at most this many memories one new memory may supersede (param max_supersedes, default 3)",
        3,
    )
}

# step kind -> {variable: (what it is, example value)}
VARIABLES: dict[str, dict[str, tuple[str, object]]] = {
    "gate": WRITE,
    "confidence": WRITE,
    "expiry": WRITE,
    "contradiction": {**WRITE, **_SUPERSEDING},
    "fused": {**WRITE, **_SUPERSEDING},
    "extract": {**WRITE, "cells": ("always empty here (extract writes the cells)", [])},
    "summarise": {
        **_CLOCK,
        **_MEMORY,
        **_WRITE_CANDIDATES,
        "scene": ("the scene being summarised", "build"),
        "cells": ("the scene's cells by salience: content, kind, salience 0-1", _CELLS),
    },
    "cluster": {
        **_CLOCK,
        "candidates": (
            "memories that may say the same thing, numbered n (n, id, content, summary, tags, "
            "importance, access_count)",
            _POOL,
        ),
    },
    "merge": {**_CLOCK, "memories": ("the group to merge (same fields as cluster's candidates)", _POOL)},
    "select": {
        **_CLOCK,
        "query": ("what recall was asked", "which database do we use?"),
        "top_n": ("pick at most this many", 6),
        "past": ("whether the candidates are recall.fallback's (archived or expired: none current)", False),
        "candidates": (
            "recall's candidates in recall order, numbered n (n, id, summary, "
            "content, confidence, decay_score, created_at, status)",
            [
                {
                    "n": 1,
                    "id": 14,
                    "summary": "The app's database is MySQL.",
                    "content": "The app's database is MySQL.",
                    "confidence": 0.9,
                    "decay_score": 1.0,
                    "created_at": "2025-12-01T09:00:00",
                    "status": "active",
                }
            ],
        ),
    },
    "chat": {
        **_CLOCK,
        "user": ("the user's message", "Which database should the migration target?"),
        "memories": (
            "the memories recalled for it (every MemoryRecord field)",
            [
                {
                    "id": 14,
                    "content": "The app's database is MySQL.",
                    "confidence": 0.9,
                    "created_at": "2025-12-01T10:00:00",
                }
            ],
        ),
        "history": (
            "the last exchanges: user, assistant",
            [{"user": "Hi.", "assistant": "Hello! How can I help?"}],
        ),
    },
}


def names(step: str) -> list[str]:
    """The variables a step's template is given, in a stable order."""
    return list(VARIABLES.get(step, {}))


def example(step: str) -> dict:
    """Example values for every variable of a step (for rendering and validation)."""
    return {name: value for name, (_, value) in VARIABLES.get(step, {}).items()}


def described(step: str) -> list[tuple[str, str]]:
    """(name, what it is) for every variable of a step."""
    return [(name, what) for name, (what, _) in VARIABLES.get(step, {}).items()]
