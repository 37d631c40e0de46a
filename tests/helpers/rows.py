"""Reading what the engine wrote, on either backend: memory rows, memory_events,
model_calls and the inbox; and `seed`, a memory stored exactly as given."""

from __future__ import annotations

from engine import Memory
from tests.helpers import run_sql, store_of


def memories(mem: Memory, namespace: str | None = None) -> dict[int, dict]:
    sql = "SELECT * FROM memories" + (" WHERE namespace = ?" if namespace else "") + " ORDER BY id"
    return {r["id"]: dict(r) for r in run_sql(store_of(mem), sql, (namespace,) if namespace else ())}


def events(mem: Memory, memory_id: int | None = None) -> list[tuple[int, str, str]]:
    sql = "SELECT memory_id, event_type, detail FROM memory_events"
    rows = run_sql(
        store_of(mem),
        sql + (" WHERE memory_id = ?" if memory_id else "") + " ORDER BY id",
        (memory_id,) if memory_id else (),
    )
    return [tuple(r) for r in rows]


def event_types(mem: Memory, memory_id: int) -> list[str]:
    return [e[1] for e in events(mem, memory_id)]


def calls(mem: Memory, step: str | None = None) -> list[dict]:
    sql = "SELECT * FROM model_calls" + (" WHERE step = ?" if step else "") + " ORDER BY id"
    return [dict(r) for r in run_sql(store_of(mem), sql, (step,) if step else ())]


def outcomes(mem: Memory, step: str | None = None) -> list:
    return [(c["step"], c["outcome"]) if step is None else c["outcome"] for c in calls(mem, step)]


def inbox(mem: Memory) -> list[dict]:
    return [dict(r) for r in run_sql(store_of(mem), "SELECT * FROM inbox ORDER BY id")]


def seed(mem: Memory, content: str, **fields) -> int:
    """A memory stored exactly as given (no judges)."""
    return mem.add(content, judged=False, **fields)
