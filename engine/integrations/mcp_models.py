"""What the MCP tools return, as typed dicts: the SDK validates each answer against its
type with pydantic and publishes the type's JSON schema (attribute docstrings become
field descriptions) as the tool's output schema. Each has a short text form, `text()`.

Typed dicts rather than pydantic models: importing pydantic and building models would
cost every `lethe` command half a second, since the CLI imports this module at start.
"""

from __future__ import annotations

import json
from typing import overload

from typing_extensions import TypedDict

from engine.base.records import History, MemoryRecord
from engine.run.passes import PassResult

DOCSTRINGS = {"use_attribute_docstrings": True}  # pydantic's ConfigDict, as a plain dict


class MemoryOut(TypedDict):
    """One memory."""

    id: int
    content: str
    status: str
    """active, archived, superseded, expired or compressed"""
    importance: float
    """How much it matters, 0-10"""
    confidence: float
    """How sure the agent is that it holds, 0-1"""
    decay_score: float
    """Freshness, 0-1: it falls while unused; below the policy's floor it is archived"""
    created_at: str | None
    """When it was stored (ISO-8601)"""
    expires_at: str | None
    """When it stops being true (ISO-8601), or null"""
    tags: list[str]


class Superseded(TypedDict):
    """An older memory that a new one replaced; it stays in the store, out of recall."""

    id: int
    content: str
    by: int
    """The id of the memory that replaced it"""


class Remembered(TypedDict):
    """What `remember` did with the turn."""

    stored: list[MemoryOut]
    """New memories"""
    reinforced: list[MemoryOut]
    """Memories the turn confirmed"""
    superseded: list[Superseded]
    """Older memories the new ones replaced"""
    pending: str | None
    """Why the turn waits for a judge model (run_passes retries it), or null"""


class Recalled(TypedDict):
    """What the agent should know for the query, best first."""

    query: str
    memories: list[MemoryOut]


class Added(TypedDict):
    """The memory `add` stored (or the existing one it confirmed)."""

    memory: MemoryOut


class Event(TypedDict):
    """One entry of a memory's history."""

    event: str
    """created, reinforced, superseded, forgotten, expired, archived, merged, ..."""
    at: str
    """When it happened (ISO-8601)"""
    detail: dict | list | str | None


class Story(TypedDict):
    """A memory's whole history: what happened to it, what replaced or absorbed it."""

    memory: MemoryOut
    events: list[Event]
    superseded_by: MemoryOut | None
    """The memory that replaced it, or null"""
    merged_into: MemoryOut | None
    """The memory it was merged into, or null"""


class Forgotten(TypedDict):
    """The memory `forget` archived: out of recall, still in the store with its history."""

    memory: MemoryOut
    reason: str


class Listing(TypedDict):
    """Memories with one status (or all), newest first."""

    status: str
    memories: list[MemoryOut]


class PassRun(TypedDict):
    """One pass that ran (or `pending`: the turns retried)."""

    name: str
    ran_at: str
    changed: int
    """How many memories it changed"""
    events: dict[str, int]
    """Events it wrote, by type"""
    notes: list[str]


class PassesRun(TypedDict):
    """What `run_passes` ran."""

    ran: list[PassRun]
    skipped: str | None
    """Why nothing ran (another scheduler holds the lease), or null"""


for _type in (
    MemoryOut,
    Superseded,
    Remembered,
    Recalled,
    Added,
    Event,
    Story,
    Forgotten,
    Listing,
    PassRun,
    PassesRun,
):
    _type.__pydantic_config__ = DOCSTRINGS  # type: ignore[union-attr]  # pydantic reads it


# ---- from the engine's records ----------------------------------------------------------
@overload
def utc(when: str) -> str: ...
@overload
def utc(when: str | None) -> str | None: ...
def utc(when: str | None) -> str | None:
    """A stored time (UTC, written without a zone) with its zone: `2026-01-05T09:00:00Z`."""
    if not when or when.endswith("Z") or "+" in when[10:] or when[10:].count("-"):
        return when
    return f"{when}Z" if "T" in when else when


def memory_out(m: MemoryRecord) -> MemoryOut:
    return MemoryOut(
        id=m.id,
        content=m.content,
        status=m.status,
        importance=m.importance,
        confidence=m.confidence,
        decay_score=m.decay_score,
        created_at=utc(m.created_at),
        expires_at=utc(m.expires_at),
        tags=[str(t) for t in m.tags],
    )


def story(h: History) -> Story:
    return Story(
        memory=memory_out(h.memory),
        events=[event(e) for e in h.events],
        superseded_by=memory_out(h.superseded_by) if h.superseded_by else None,
        merged_into=memory_out(h.merged_into) if h.merged_into else None,
    )


def event(row: dict) -> Event:
    detail = row["detail"]
    try:
        detail = json.loads(detail) if detail else None
    except ValueError:
        pass  # free text, such as "superseded by #2: ..."
    if detail is not None and not isinstance(detail, (dict, list, str)):
        detail = str(detail)
    return Event(event=row["event_type"], at=utc(row["occurred_at"]), detail=detail)


def pass_run(r: PassResult) -> PassRun:
    return PassRun(
        name=r.name, ran_at=utc(r.ran_at), changed=r.changed, events=dict(r.events), notes=list(r.notes)
    )


# ---- the short text forms ---------------------------------------------------------------
def line(m: MemoryOut) -> str:
    expiry = f", expires {m['expires_at']}" if m["expires_at"] else ""
    return (
        f"#{m['id']} [{m['status']}] {m['content']} (confidence {m['confidence']:.2f}, "
        f"fresh {m['decay_score']:.2f}{expiry})"
    )


def _remembered(r: Remembered) -> str:
    lines = [f"stored {line(m)}" for m in r["stored"]]
    lines += [f"reinforced {line(m)}" for m in r["reinforced"]]
    lines += [f"superseded #{s['id']} by #{s['by']}: {s['content']}" for s in r["superseded"]]
    if r["pending"]:
        lines.append(f"pending: {r['pending']} (run_passes retries it)")
    return "\n".join(lines) or "nothing stored: the policy found nothing worth keeping"


def _story(s: Story) -> str:
    lines = [line(s["memory"])]
    lines += [f"  {e['at']}  {e['event']}: {_detail(e['detail'])}" for e in s["events"]]
    if s["superseded_by"]:
        lines.append(f"  superseded by {line(s['superseded_by'])}")
    if s["merged_into"]:
        lines.append(f"  merged into {line(s['merged_into'])}")
    return "\n".join(lines)


def _passes(p: PassesRun) -> str:
    if p["skipped"]:
        return f"skipped: {p['skipped']}"
    return (
        "\n".join(
            f"{r['name']}: {r['changed']} changed"
            + "".join(f", {n} {e}" for e, n in sorted(r["events"].items()))
            for r in p["ran"]
        )
        or "nothing was due"
    )


TEXT = {
    Remembered: _remembered,
    Recalled: lambda r: "\n".join(line(m) for m in r["memories"]) or "(nothing recalled)",
    Added: lambda a: line(a["memory"]),
    Story: _story,
    Forgotten: lambda f: f"forgot {line(f['memory'])}: {f['reason']}",
    Listing: lambda s: (
        "\n".join(line(m) for m in s["memories"])
        or ("(no memories)" if s["status"] == "all" else f"(no {s['status']} memories)")
    ),
    PassesRun: _passes,
}


def text(kind: type, out: dict) -> str:
    """The short text form of a tool's answer of type `kind`."""
    return TEXT[kind](out)


def _detail(detail) -> str:
    if detail is None:
        return "-"
    return detail if isinstance(detail, str) else json.dumps(detail, ensure_ascii=False)
