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
from .store import RECALL_INDEX, Store

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
    scene_summary: str | None = None

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

    def __init__(self, db_path: str, policy: str | Policy = DEFAULT_POLICY,
                 namespace: str = "default", offline: bool = False, clock: Clock | None = None,
                 record: str | None = None, replay: str | None = None, scripted=None):
        from .judges import Judges
        from .write import Writer

        self.policy = policy if isinstance(policy, Policy) else load(policy)
        self.namespace = namespace
        self.offline = offline
        self.clock = clock or system_clock
        self.store = Store(db_path, self.clock)
        self.plan: Plan = compile_policy(self.policy)
        # scripted: an object with .take(step) -> answer or None (a scenario's `judged:`)
        self.judges = Judges(self.policy, self.store, namespace, offline, record, replay, scripted)
        self.writer = Writer(self, self.judges)
        self._sync_rank()

    def close(self) -> None:
        self.store.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- writing
    def remember(self, user: str, assistant: str) -> list[int]:
        """Judge a conversation turn and store what is worth keeping; returns the ids stored
        or reinforced. The turn is saved first: if a model is unreachable it stays pending
        (see `pending()`), `run_due()` retries it, and this returns []."""
        if not isinstance(user, str) or not isinstance(assistant, str):
            raise LetheError("remember() takes the user's and the assistant's text")
        _valid_text(user, "the user's text")
        _valid_text(assistant, "the assistant's text")
        return self.writer.remember(user, assistant)

    def add(self, content: str, *, summary: str | None = None, tags: Iterable[str] | None = None,
            importance: float | None = None, confidence: float | None = None, expires_at=None,
            kind: str | None = None, scene: str | None = None, judged: bool = True) -> int:
        """Store a memory: every write step of the policy except the gate runs (values given
        here win over judgments). `judged=False` stores it exactly as given."""
        if not isinstance(content, str) or not content.strip():
            raise LetheError("a memory needs non-empty content")
        tags = list(tags) if tags else None
        for name, text in (("content", content), ("summary", summary), *(("a tag", t) for t in tags or [])):
            _valid_text(text, name)
        fields = {"summary": summary, "tags": list(tags) if tags else None,
                  "importance": importance, "confidence": confidence,
                  "expires_at": _time_or_none(expires_at), "kind": kind, "scene": scene}
        if judged:
            return self.writer.add(content, fields)
        with self.store.transaction() as db:
            return self.insert(db, content, **fields)

    def insert(self, db, content: str, *, summary=None, tags=None, importance=None,
               confidence=None, expires_at=None, kind=None, scene=None,
               event: str = "created", detail=None) -> int:
        """Insert one memory with its rank and its 'created' event, in the caller's transaction."""
        row = {"content": content, "summary": summary if summary else content[:120],
               "tags": json.dumps(list(tags or []), ensure_ascii=False),
               "importance": float(5.0 if importance is None else importance),
               "confidence": float(1.0 if confidence is None else confidence),
               "access_count": 0, "decay_score": 1.0, "status": "active",
               "created_at": self.store.now(), "last_accessed": None,
               "expires_at": expires_at, "namespace": self.namespace, "kind": kind, "scene": scene}
        new_id = self.store.insert_memory(db, row)
        self.refresh_rank(db, [new_id])
        self.store.event(db, new_id, event, {"importance": row["importance"],
                                             "confidence": row["confidence"],
                                             "expires_at": expires_at, **(detail or {})})
        return new_id

    def refresh_rank(self, db, ids: list[int]) -> None:
        st = self.plan.rank_refresh_ids
        db.execute(st.sql, st.bind(self.store.now(), self.namespace, ids=ids))

    def _pending_count(self) -> int:
        return self.store.db.execute("SELECT count(*) FROM inbox WHERE namespace = ? AND "
                                     "status = 'pending'", (self.namespace,)).fetchone()[0]

    def pending(self) -> list[dict]:
        """Turns saved but not yet judged (a model was unreachable)."""
        rows = self.store.db.execute("SELECT id, user_text, assistant_text, attempts, last_error, "
                                     "created_at FROM inbox WHERE namespace = ? AND status = "
                                     "'pending' ORDER BY id", (self.namespace,))
        return [dict(r) for r in rows]

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
            # when most of the file's ranks change, rebuilding the recall index once beats
            # moving each entry; a small namespace in a big file just updates its rows
            mine = db.execute("SELECT count(*) FROM memories WHERE namespace = ?",
                              (self.namespace,)).fetchone()[0]
            total = db.execute("SELECT coalesce(max(rowid), 0) FROM memories").fetchone()[0]
            rebuild = mine > 10_000 and mine * 2 > total
            if rebuild:
                db.execute("DROP INDEX IF EXISTS memories_recall")
            db.execute(st.sql, st.bind(self.store.now(), self.namespace))
            if rebuild:
                db.execute(RECALL_INDEX)
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
        if p.cluster is None:
            return P.run_rules(self.store, self.plan, name, self.namespace, progress)
        from .compress import compress

        # recorded only once every merge is done: a crash mid-compression leaves it due
        result = P.run_rules(self.store, self.plan, name, self.namespace, progress, record=False)
        compress(self, p, result)
        with self.store.transaction() as db:
            P.record_run(db, self.namespace, name, result.ran_at, result.changed)
        return result

    def due(self) -> list[str]:
        return P.due(self.store, self.plan, self.namespace, self.clock())

    def run_due(self, progress=None) -> list[P.PassResult]:
        """Retry pending turns, then run every pass whose schedule has come round."""
        before = self._pending_count()
        if before:
            self.writer.retry_pending()
        results = self.run(self.due(), progress)
        if before:
            left = self._pending_count()
            results.insert(0, P.PassResult("pending", self.store.now(), before - left,
                                           notes=[f"{left} still pending"] if left else []))
        return results

    # -- reading
    def candidates(self, query: str | None = None, limit: int | None = None,
                   scored: bool = False, relevance: bool = True) -> list[MemoryRecord]:
        """Recall candidates in the policy's recall order, before any model picks among them.
        With a query: only memories matching it in full text, or with `scored=True` all
        candidates, each with its `relevance` to the query (0 when it shares no word)."""
        limit = self.policy.recall.candidates.limit if limit is None else int(limit)
        fts = fts_query(query) if query else None
        st = self.plan.recall
        if fts:
            filtering = not scored or self.policy.recall.match == "filter"
            st = self.plan.recall_query if filtering else self.plan.recall_scored
            if scored and not filtering and not relevance and not self.plan.recall_reads_relevance:
                # bm25 needs each query word's document count: costly at a million rows,
                # and nothing here reads it (the select judge reads the text itself)
                st, fts = self.plan.recall, None
        rows = self.store.db.execute(st.sql, st.bind(self.store.now(), self.namespace, fts, limit)).fetchall()
        if not rows and fts and scored:  # `match: filter` and nothing matched: the top ones
            return self.candidates(None, limit)
        return [MemoryRecord.from_row(r) for r in rows]

    def recall(self, query: str, top_n: int | None = None) -> list[MemoryRecord]:
        """What the agent should know for `query`: the policy's candidates, picked by its
        select judge (at most top_n), with their access recorded."""
        from .recall import recall

        return recall(self, query, top_n)

    def get(self, memory_id: int) -> MemoryRecord | None:
        row = self.store.db.execute(
            "SELECT memories.*, scenes.summary AS scene_summary FROM memories LEFT JOIN scenes "
            "ON scenes.namespace = memories.namespace AND scenes.scene = memories.scene "
            "WHERE memories.id = ? AND memories.namespace = ?", (memory_id, self.namespace)).fetchone()
        return MemoryRecord.from_row(row) if row else None

    def recall_context(self, query: str, top_n: int | None = None) -> str:
        """The text an agent puts in its prompt: the summaries of the scenes the recalled
        memories belong to, then the memories themselves."""
        records = self.recall(query, top_n)
        scenes = dict.fromkeys((r.scene, r.scene_summary) for r in records if r.scene_summary)
        lines = [f"[{scene}] {summary}" for scene, summary in scenes]
        lines += [f"- {r.content}" for r in records]
        return "\n".join(lines)

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


STOPWORDS = frozenset("""a an and are as at be been but by can could did do does for from had
has have he her his how i if in into is it its just me my no not now of on or our she so
than that the their them then there these they this to too us was we were what when where
which who why will with would you your also about after again all am any because before
being both each few more most other over same some such only own very should""".split())


def words(text: str, content_words: bool = False) -> list[str]:
    """Alphanumeric tokens, lowercased, once each (at most 64). `content_words` drops
    stopwords and one-letter tokens (for relevance between memories)."""
    tokens = re.findall(r"\w+", text or "")
    if content_words:
        tokens = [t for t in tokens if len(t) > 1 and t.lower() not in STOPWORDS]
    return list(dict.fromkeys(t.lower() for t in tokens))[:64]


def fts_query(text: str, content_words: bool = False, joiner: str = " OR ") -> str | None:
    """Words as a safe FTS5 query: tokens quoted (never FTS syntax), OR-ed."""
    tokens = words(text, content_words)
    return joiner.join(f'"{t}"' for t in tokens) if tokens else None


RARE = 2000  # a word in more memories than this does not pick contradiction candidates


def distinctive_query(db, text: str) -> str | None:
    """An FTS5 query for the memories most like `text`, whose cost does not grow with the
    store: words found in more than RARE memories are left out (their counts stop at
    RARE + 1, so counting is bounded too); when every word is that common, all of them
    must match."""
    from .judges.rules import related_words

    tokens = words(text, content_words=True)
    if not tokens:
        return None
    # a replacement names another member of the same slot: "MySQL" should find "PostgreSQL"
    related = [r for t in tokens for r in related_words(t) if r not in tokens]
    count = "SELECT count(*) FROM (SELECT 1 FROM memories_fts WHERE memories_fts MATCH ? LIMIT ?)"
    rare = [t for t in dict.fromkeys(tokens + related)
            if db.execute(count, (f'"{t}"', RARE + 1)).fetchone()[0] <= RARE][:64]
    return " OR ".join(f'"{t}"' for t in rare) if rare else " AND ".join(f'"{t}"' for t in tokens)


def _valid_text(text, what: str) -> None:
    """Text SQLite can store as UTF-8: lone surrogates (invalid UTF-8) are refused."""
    if text is None:
        return
    if not isinstance(text, str):
        raise LetheError(f"{what} must be text, got {type(text).__name__}")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise LetheError(f"{what} is not valid UTF-8 text ({exc.reason} at {exc.start})") from None


def _time_or_none(value) -> str | None:
    if value is None or value == "":
        return None
    if isinstance(value, str):
        when = parse_time(value)
        if len(value.strip()) == 10:  # a bare date: true through the end of that day
            when = when.replace(hour=23, minute=59, second=59)
        return iso(when)
    return iso(value)
