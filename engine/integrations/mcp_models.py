"""What the MCP tools return: pydantic models (a host reads their JSON schema as each
tool's output schema), each with the short text form a host shows a model."""
from __future__ import annotations

import json

from pydantic import BaseModel, Field

from ..passes import PassResult
from ..records import History, MemoryRecord


class MemoryOut(BaseModel):
    """One memory."""

    id: int
    content: str
    status: str = Field(description="active, archived, superseded, expired or compressed")
    importance: float = Field(description="How much it matters, 0-10")
    confidence: float = Field(description="How sure the agent is that it holds, 0-1")
    decay_score: float = Field(description="Freshness, 0-1: it falls while the memory goes "
                                           "unused; a memory below the policy's floor is archived")
    created_at: str | None = Field(description="When it was stored (ISO-8601)")
    expires_at: str | None = Field(description="When it stops being true (ISO-8601), or null")
    tags: list[str]

    @classmethod
    def of(cls, m: MemoryRecord) -> "MemoryOut":
        return cls(id=m.id, content=m.content, status=m.status, importance=m.importance,
                   confidence=m.confidence, decay_score=m.decay_score, created_at=m.created_at,
                   expires_at=m.expires_at, tags=[str(t) for t in m.tags])

    def line(self) -> str:
        expiry = f", expires {self.expires_at}" if self.expires_at else ""
        return (f"#{self.id} [{self.status}] {self.content} (confidence {self.confidence:.2f}, "
                f"fresh {self.decay_score:.2f}{expiry})")


class Superseded(BaseModel):
    """An older memory that a new one replaced; it stays in the store, out of recall."""

    id: int
    content: str
    by: int = Field(description="The id of the memory that replaced it")


class Remembered(BaseModel):
    """What `remember` did with the turn."""

    stored: list[MemoryOut] = Field(description="New memories")
    reinforced: list[MemoryOut] = Field(description="Memories the turn confirmed")
    superseded: list[Superseded] = Field(description="Older memories the new ones replaced")
    pending: str | None = Field(description="Why the turn waits for a judge model "
                                            "(run_passes retries it), or null")

    def text(self) -> str:
        lines = [f"stored {m.line()}" for m in self.stored]
        lines += [f"reinforced {m.line()}" for m in self.reinforced]
        lines += [f"superseded #{s.id} by #{s.by}: {s.content}" for s in self.superseded]
        if self.pending:
            lines.append(f"pending: {self.pending} (run_passes retries it)")
        return "\n".join(lines) or "nothing stored: the policy found nothing worth keeping"


class Recalled(BaseModel):
    """What the agent should know for the query, best first."""

    query: str
    memories: list[MemoryOut]

    def text(self) -> str:
        return "\n".join(m.line() for m in self.memories) or "(nothing recalled)"


class Added(BaseModel):
    """The memory `add` stored (or the existing one it confirmed)."""

    memory: MemoryOut

    def text(self) -> str:
        return self.memory.line()


class Event(BaseModel):
    """One entry of a memory's history."""

    event: str = Field(description="created, reinforced, superseded, forgotten, expired, "
                                   "archived, merged, ...")
    at: str = Field(description="When it happened (ISO-8601)")
    detail: dict | list | str | None

    @classmethod
    def of(cls, row: dict) -> "Event":
        detail = row["detail"]
        try:
            detail = json.loads(detail) if detail else None
        except ValueError:
            pass  # free text, such as "superseded by #2: ..."
        if not isinstance(detail, (dict, list, str)) and detail is not None:
            detail = str(detail)
        return cls(event=row["event_type"], at=row["occurred_at"], detail=detail)


class Story(BaseModel):
    """A memory's whole history: what happened to it, what replaced or absorbed it."""

    memory: MemoryOut
    events: list[Event]
    superseded_by: MemoryOut | None = Field(description="The memory that replaced it, or null")
    merged_into: MemoryOut | None = Field(description="The memory it was merged into, or null")

    @classmethod
    def of(cls, h: History) -> "Story":
        return cls(memory=MemoryOut.of(h.memory), events=[Event.of(e) for e in h.events],
                   superseded_by=MemoryOut.of(h.superseded_by) if h.superseded_by else None,
                   merged_into=MemoryOut.of(h.merged_into) if h.merged_into else None)

    def text(self) -> str:
        lines = [self.memory.line()]
        lines += [f"  {e.at}  {e.event}: {_detail(e.detail)}" for e in self.events]
        if self.superseded_by:
            lines.append(f"  superseded by {self.superseded_by.line()}")
        if self.merged_into:
            lines.append(f"  merged into {self.merged_into.line()}")
        return "\n".join(lines)


class Forgotten(BaseModel):
    """The memory `forget` archived: out of recall, still in the store with its history."""

    memory: MemoryOut
    reason: str

    def text(self) -> str:
        return f"forgot {self.memory.line()}: {self.reason}"


class Listing(BaseModel):
    """Memories with one status (or all), newest first."""

    status: str
    memories: list[MemoryOut]

    def text(self) -> str:
        return "\n".join(m.line() for m in self.memories) or f"(no {self.status} memories)"


class PassRun(BaseModel):
    """One pass that ran (or `pending`: the turns retried)."""

    name: str
    ran_at: str
    changed: int = Field(description="How many memories it changed")
    events: dict[str, int] = Field(description="Events it wrote, by type")
    notes: list[str]

    @classmethod
    def of(cls, r: PassResult) -> "PassRun":
        return cls(name=r.name, ran_at=r.ran_at, changed=r.changed, events=dict(r.events),
                   notes=list(r.notes))


class PassesRun(BaseModel):
    """What `run_passes` ran."""

    ran: list[PassRun]
    skipped: str | None = Field(description="Why nothing ran (another scheduler holds the "
                                            "lease), or null")

    def text(self) -> str:
        if self.skipped:
            return f"skipped: {self.skipped}"
        lines = [f"{r.name}: {r.changed} changed" + "".join(
            f", {n} {e}" for e, n in sorted(r.events.items())) for r in self.ran]
        return "\n".join(lines) or "nothing was due"


def _detail(detail) -> str:
    if detail is None:
        return "-"
    return detail if isinstance(detail, str) else json.dumps(detail, ensure_ascii=False)
