"""`Memory`: the Python API an agent uses, and the code path every CLI command goes through."""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field, fields
from typing import Iterable

from . import passes as P
from .clock import Clock, iso, parse_time, system_clock
from .errors import LetheError
from .plan import Plan, compile_policy
from .policy import Policy, load
from .store import Store

DEFAULT_POLICY = "lifecycle"


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

    @classmethod
    def from_row(cls, row) -> "MemoryRecord":
        keys = row.keys()
        data = {f.name: row[f.name] for f in fields(cls) if f.name in keys}
        data["tags"] = _tags(data.get("tags"))
        return cls(**data)

    def as_dict(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self)}


def _tags(raw) -> list:
    if not raw:
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


class Memory:
    """A policy-governed memory over one SQLite file, for one namespace (agent).

    >>> mem = Memory("agent.db", policy="policies/lifecycle.yaml", offline=True)
    >>> mem.add("User prefers tabs over spaces", importance=6)
    """

    def __init__(self, db_path: str, policy: str | Policy = f"policies/{DEFAULT_POLICY}.yaml",
                 namespace: str = "default", offline: bool = False, clock: Clock | None = None):
        self.policy = policy if isinstance(policy, Policy) else load(policy)
        self.namespace = namespace
        self.offline = offline
        self.clock = clock or system_clock
        self.store = Store(db_path, self.clock)
        self.plan: Plan = compile_policy(self.policy)
        self._sync_rank()

    def close(self) -> None:
        self.store.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- writing
    def add(self, content: str, *, summary: str | None = None, tags: Iterable[str] | None = None,
            importance: float = 5.0, confidence: float = 1.0, expires_at=None,
            kind: str | None = None, scene: str | None = None, event: str = "created") -> int:
        """Store a memory as given (no judges), with its rank and a 'created' event."""
        if not isinstance(content, str) or not content.strip():
            raise LetheError("a memory needs non-empty content")
        now = self.store.now()
        row = {"content": content, "summary": summary if summary is not None else content[:120],
               "tags": json.dumps(list(tags or []), ensure_ascii=False),
               "importance": float(importance), "confidence": float(confidence),
               "access_count": 0, "decay_score": 1.0, "status": "active",
               "created_at": now, "last_accessed": None,
               "expires_at": _time_or_none(expires_at), "namespace": self.namespace,
               "kind": kind, "scene": scene}
        with self.store.transaction() as db:
            new_id = self.store.insert_memory(db, row)
            self._refresh_rank(db, [new_id])
            self.store.event(db, new_id, event, {"importance": row["importance"],
                                                 "confidence": row["confidence"]})
        return new_id

    def _refresh_rank(self, db, ids: list[int]) -> None:
        st = self.plan.rank_refresh
        db.execute(st.sql + ' AND "id" IN (SELECT value FROM json_each(?))',
                   st.bind(self.store.now(), self.namespace) + [json.dumps(ids)])

    def _sync_rank(self) -> None:
        """Recompute stored ranks when the rank formula differs from the one they were
        computed with (a new policy, or an adopted article database)."""
        st = self.plan.rank_refresh
        signature = json.dumps([st.sql, [repr(p) for p in st.shown_params()]])
        row = self.store.db.execute("SELECT rank_formula FROM policy_state WHERE namespace = ?",
                                    (self.namespace,)).fetchone()
        if row and row[0] == signature:
            return
        with self.store.transaction() as db:
            db.execute(st.sql, st.bind(self.store.now(), self.namespace))
            db.execute("INSERT INTO policy_state (namespace, policy, rank_formula, updated_at) "
                       "VALUES (?, ?, ?, ?) ON CONFLICT (namespace) DO UPDATE SET "
                       "policy = excluded.policy, rank_formula = excluded.rank_formula, "
                       "updated_at = excluded.updated_at",
                       (self.namespace, self.policy.name, signature, self.store.now()))

    # -- passes
    def run(self, names: Iterable[str], progress=None) -> list[P.PassResult]:
        """Run the named passes now, in the order given."""
        results = []
        for name in names:
            if name not in self.policy.passes:
                known = ", ".join(self.policy.passes) or "(none)"
                raise LetheError(f"policy '{self.policy.name}' has no pass '{name}'; it has: {known}")
            results.append(self._run_one(name, progress))
        return results

    def _run_one(self, name: str, progress=None) -> P.PassResult:
        p = self.policy.passes[name]
        result = P.run_rules(self.store, self.plan, name, self.namespace, progress)
        if p.cluster is not None:
            result.notes.append("compression (cluster and merge) is not built yet: skipped")
        return result

    def due(self) -> list[str]:
        return P.due(self.store, self.plan, self.namespace, self.clock())

    def run_due(self, progress=None) -> list[P.PassResult]:
        """Run every pass whose schedule has come round at the clock's now."""
        return self.run(self.due(), progress)

    # -- reading
    def candidates(self, query: str | None = None, limit: int | None = None) -> list[MemoryRecord]:
        """Recall candidates in the policy's recall order, before any model picks among them.
        With a query, only memories that match it in full text."""
        limit = self.policy.recall.candidates.limit if limit is None else int(limit)
        fts = fts_query(query) if query else None
        st = self.plan.recall_query if fts else self.plan.recall
        rows = self.store.db.execute(st.sql, st.bind(self.store.now(), self.namespace, fts, limit))
        return [MemoryRecord.from_row(r) for r in rows]

    def get(self, memory_id: int) -> MemoryRecord | None:
        row = self.store.get(memory_id)
        return MemoryRecord.from_row(row) if row else None

    def history(self, memory_id: int) -> History:
        """A memory's whole story: its events, what superseded it, what it merged into."""
        mem = self.get(memory_id)
        if mem is None:
            raise LetheError(f"no memory #{memory_id}")
        events = [dict(e) for e in self.store.events(memory_id)]
        superseded_by = self.get(mem.contradicted_by) if mem.contradicted_by else None
        merged = None
        for e in events:
            m = re.match(r"merged into #(\d+)", e.get("detail") or "")
            if e["event_type"] == "compressed" and m:
                merged = self.get(int(m.group(1)))
        return History(mem, events, superseded_by, merged)

    def counts(self) -> dict[str, int]:
        rows = self.store.db.execute("SELECT status, count(*) FROM memories WHERE namespace = ? "
                                     "GROUP BY status", (self.namespace,))
        return {r[0]: r[1] for r in rows}


def fts_query(text: str) -> str | None:
    """A user's words as a safe FTS5 query: alphanumeric tokens, quoted, OR-ed."""
    tokens = re.findall(r"\w+", text or "")
    return " OR ".join(f'"{t}"' for t in tokens) if tokens else None


def _time_or_none(value) -> str | None:
    if value is None or value == "":
        return None
    if isinstance(value, str):
        return iso(parse_time(value))
    return iso(value)
