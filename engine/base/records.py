"""What the engine hands out: a memory (`MemoryRecord`), its story (`History`), and why
turns wait in the inbox (`pending_reasons`)."""

from __future__ import annotations

import json
from dataclasses import MISSING, dataclass, field, fields
from functools import lru_cache
from operator import itemgetter
from typing import Any


@dataclass
class MemoryRecord:
    """One memory, as the engine hands it out."""

    id: int
    content: str
    summary: str | None = None
    tags: list = field(default_factory=list)
    importance: float = 5.0
    confidence: float = 1.0
    access_count: int = 0
    decay_score: float = 1.0
    status: str = "active"
    contradicted_by: int | None = None
    created_at: str | None = None
    last_accessed: str | None = None
    expires_at: str | None = None
    namespace: str = "default"
    kind: str | None = None
    scene: str | None = None
    rank: float | None = None
    relevance: float | None = None
    scene_summary: str | None = None
    merged_into: int | None = None

    @classmethod
    def from_row(cls, row) -> "MemoryRecord":
        return cls.from_rows([row])[0]

    @classmethod
    def from_rows(cls, rows) -> list["MemoryRecord"]:
        """Records of result rows that share their columns (one statement's). A recall
        makes 60: which column is which field is worked out once, not for every row; of
        two columns with one name the first wins, as it does for row[name]. Each record's
        fields are set at once, not bound as twenty keyword arguments: that binding was
        half of a recall's time at a million memories (bench/RESULTS.md). A field the
        statement leaves out keeps its default, as __init__ would give it."""
        if not rows:
            return []
        picks: dict[str, int] = {}
        for i, name in enumerate(rows[0].keys()):
            if name in FIELD_NAMES and name not in picks:
                picks[name] = i
        if missing := REQUIRED - picks.keys():
            raise TypeError(f"MemoryRecord needs the column(s) {', '.join(sorted(missing))}")
        tags = picks.pop("tags", None)
        names, values = tuple(picks), itemgetter(*picks.values())  # id, content: two at least
        out = []
        for row in rows:
            raw = None if tags is None else row[tags]
            kept = stored_tags(raw) if isinstance(raw, str) else None
            data: dict[str, Any] = dict(DEFAULTS)
            data.update(zip(names, values(row)))
            data["tags"] = parse_tags(raw) if kept is None else list(kept)
            if cls is MemoryRecord:
                record = object.__new__(cls)
                record.__dict__ = data
            else:  # a caller's subclass: its own fields, defaults and __post_init__
                record = cls(**data)
            out.append(record)
        return out

    def as_dict(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self)}


FIELD_NAMES = frozenset(f.name for f in fields(MemoryRecord))
REQUIRED = frozenset(
    f.name for f in fields(MemoryRecord) if f.default is MISSING and f.default_factory is MISSING
)
# every field's default, in the fields' order; from_rows gives tags, the one field with a
# default_factory, a new list for each record (a test fails if another is added)
DEFAULTS = {f.name: None if f.default is MISSING else f.default for f in fields(MemoryRecord)}


def parse_tags(raw) -> list:
    """Tags as stored: a JSON array (Lethe), or comma-separated text (older rows)."""
    if not raw or raw == "[]":
        return []
    try:
        value = json.loads(raw)
        return value if isinstance(value, list) else [str(value)]
    except (TypeError, ValueError):
        return [t.strip() for t in str(raw).split(",") if t.strip()]


@lru_cache(maxsize=4096)
def stored_tags(raw: str) -> tuple | None:
    """parse_tags of one stored text, kept: recalls meet the same few tag lists again and
    again, and parsing them was a fifth of a recall's time. None when a tag is itself a
    list or an object, which records must not share."""
    tags = parse_tags(raw)
    return tuple(tags) if all(isinstance(t, (str, int, float)) for t in tags) else None


@dataclass
class History:
    """Everything that happened to one memory, and what replaced or absorbed it."""

    memory: MemoryRecord
    events: list[dict]
    superseded_by: MemoryRecord | None = None
    merged_into: MemoryRecord | None = None


@dataclass
class Keyed:
    """A memory a key-value caller stored under its own key (`Memory.put`), with the value
    it kept beside the memory and when it was put."""

    memory: MemoryRecord
    key: str
    value: object
    put_at: str


def pending_reasons(rows: list[dict]) -> dict[str, int]:
    """Why the turns wait, with how many turns wait for each reason, as the inbox records
    it (what `lethe pending` shows): the last error of a turn tried, and for one not tried
    yet that it waits (another process may be judging it right now). `remember` and an
    experiment say these, not one reason guessed for all."""
    reasons: dict[str, int] = {}
    for r in rows:
        if r["status"] == "failed":
            why = f"parked as failed: {r['last_error'] or '-'}"
        elif r["last_error"]:
            why = r["last_error"] + (f", next try after {r['next_retry_at']}" if r["next_retry_at"] else "")
        else:
            why = "not judged yet: another process may be judging it now"
        reasons[why] = reasons.get(why, 0) + 1
    return reasons
