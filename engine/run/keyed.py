"""Memories a key-value caller (the LangGraph store, `Memory.put`) names itself: each `put`
leaves a `keyed` event holding the key and the caller's value beside the memory."""

from __future__ import annotations

import json

from engine.base import inputs as I
from engine.base.errors import InputError
from engine.base.records import Keyed, MemoryRecord
from engine.run.context import Context
from engine.run.recall import get


def keyed_event(key: str, value, detail: dict | None) -> str:
    """A `keyed` event's detail as JSON text, in the caller's key order; a value that is not
    JSON (NaN, infinity, bytes, a set, text keys only, at most 64 deep) is refused before
    anything is written: stored, it would fail every later read of the namespace."""
    key = I.text(key, "a key", nonempty=True, name=True)
    if detail is not None and not isinstance(detail, dict):
        raise InputError(f"detail must be a dict, got {type(detail).__name__}")
    return I.json_value({**(detail or {}), "key": key, "value": value}, f"the value of key {key!r}")


def key_events(ctx: Context) -> list[dict]:
    """Every `keyed` event of the namespace, oldest first, with the memory's status now."""
    return [
        {
            **json.loads(r["detail"]),
            "memory_id": r["memory_id"],
            "status": r["status"],
            "at": r["occurred_at"],
        }
        for r in ctx.store.keyed_events(ctx.namespace)
    ]


def keyed(ctx: Context, key: str) -> Keyed | None:
    """The active memory stored under `key`, with the value kept beside it."""
    row = ctx.store.keyed(ctx.namespace, key)
    if row is None:
        return None
    detail = json.loads(row["keyed"])
    return Keyed(MemoryRecord.from_row(row), detail["key"], detail["value"], row["keyed_at"])


def key_of(ctx: Context, memory: MemoryRecord) -> Keyed | None:
    """The key and value of the last `keyed` event of `memory`, or None."""
    for event in reversed(ctx.store.events(memory.id)):
        if event["event_type"] == "keyed":
            detail = json.loads(event["detail"])
            return Keyed(memory, detail["key"], detail["value"], event["occurred_at"])
    return None


def held_by_another_key(ctx: Context, memory_id: int, key: str) -> bool:
    """Whether `memory_id` is the memory another key holds now: a second key with the same
    text must not share it (deleting either would take both)."""
    record = get(ctx, memory_id)
    other = key_of(ctx, record) if record is not None else None
    if other is None or other.key == key:
        return False
    holder = keyed(ctx, other.key)
    return holder is not None and holder.memory.id == memory_id


def mark(ctx: Context, memory_id: int, event: str, expires_at: str | None) -> None:
    """The `keyed` event, and a refreshed expiry on the memory, in one transaction."""
    with ctx.store.transaction():
        ctx.store.event(memory_id, "keyed", event)
        if expires_at is not None:
            ctx.store.update_memory(ctx.namespace, memory_id, {"expires_at": expires_at})
