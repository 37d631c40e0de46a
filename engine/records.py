"""What the engine hands out: a memory (`MemoryRecord`) and its story (`History`)."""
from __future__ import annotations

import json
from dataclasses import dataclass, field, fields


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
        two columns with one name the first wins, as it does for row[name]."""
        if not rows:
            return []
        picks: dict[str, int] = {}
        for i, name in enumerate(rows[0].keys()):
            if name in FIELD_NAMES and name not in picks:
                picks[name] = i
        tags = picks.pop("tags", None)
        out = []
        for row in rows:
            data = {name: row[i] for name, i in picks.items()}
            out.append(cls(**data, tags=parse_tags(None if tags is None else row[tags])))
        return out

    def as_dict(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self)}


FIELD_NAMES = frozenset(f.name for f in fields(MemoryRecord))


def parse_tags(raw) -> list:
    """Tags as stored: a JSON array (Lethe), or comma-separated text (older rows)."""
    if not raw or raw == "[]":
        return []
    try:
        value = json.loads(raw)
        return value if isinstance(value, list) else [str(value)]
    except (TypeError, ValueError):
        return [t.strip() for t in str(raw).split(",") if t.strip()]


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
