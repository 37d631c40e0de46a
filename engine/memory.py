"""`Memory`: the Python API an agent uses, and the code path every CLI command goes through.

A thin façade: it opens a `Context` (store, compiled plan, policy, namespace, clock,
judges) and hands it to the step that does the work (write, recall, runner, ...).
"""
from __future__ import annotations

from typing import Iterable

from . import passes as P
from . import recall as R
from . import runner
from . import vectors
from .clock import Clock, iso, system_clock, until_end_of_day
from .context import Context, JudgeSettings, open_context
from .errors import LetheError
from .policy import Policy, load
from .records import History, MemoryRecord
from .text import valid_text
from .policy import STATUSES
from .write import Writer, Written, forget, store_memory

DEFAULT_POLICY = "lifecycle"

__all__ = ["Memory", "MemoryRecord", "History", "DEFAULT_POLICY"]


class Memory:
    """A policy-governed memory over one database, for one namespace (agent).

    >>> mem = Memory("agent.db", offline=True)          # the shipped lifecycle policy
    >>> mem.add("User prefers tabs over spaces", importance=6)
    """

    def __init__(self, db_path: str, policy: str | Policy = DEFAULT_POLICY,
                 namespace: str = "default", offline: bool = False, clock: Clock | None = None,
                 record: str | None = None, replay: str | None = None, scripted=None):
        pol = policy if isinstance(policy, Policy) else load(policy)
        # scripted: an object with .take(step) -> answer or None (a scenario's `judged:`)
        settings = JudgeSettings(offline, record, replay, scripted)
        self.context: Context = open_context(db_path, pol, namespace, clock or system_clock, settings)
        self.writer = Writer(self.context)

    # the context's parts, for callers that inspect them
    policy = property(lambda self: self.context.policy)
    plan = property(lambda self: self.context.plan)
    store = property(lambda self: self.context.store)
    judges = property(lambda self: self.context.judges)
    namespace = property(lambda self: self.context.namespace)
    clock = property(lambda self: self.context.clock)
    offline = property(lambda self: self.context.settings.offline)

    def close(self) -> None:
        self.store.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- writing
    def remember(self, user: str, assistant: str) -> Written:
        """Judge a conversation turn and store what is worth keeping; returns the ids stored
        or reinforced, as a list that also says what was `stored`, `reinforced` and
        `superseded`. The turn is saved first: if a model is unreachable it stays pending
        (see `pending()`), `run_due()` retries it, and this returns [] with `.pending`
        saying why."""
        if not isinstance(user, str) or not isinstance(assistant, str):
            raise LetheError("remember() takes the user's and the assistant's text")
        valid_text(user, "the user's text")
        valid_text(assistant, "the assistant's text")
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
            valid_text(text, name)
        fields = {"summary": summary, "tags": tags, "importance": importance,
                  "confidence": confidence, "expires_at": _expiry(expires_at), "kind": kind,
                  "scene": scene}
        if judged:
            return self.writer.add(content, fields)
        vector = vectors.vector_of(self.context, content)  # outside the transaction
        with self.store.transaction():
            new_id = store_memory(self.context, content, **fields)
            vectors.save(self.context, new_id, vector)
            return new_id

    def forget(self, memory_id: int, reason: str) -> MemoryRecord:
        """Archive a memory, with a `forgotten` event that keeps `reason`; it leaves recall,
        nothing is deleted. Raises LetheError when it is absent or not active."""
        mem = self.get(memory_id)
        if mem is None:
            raise LetheError(f"no memory #{memory_id} in namespace '{self.namespace}'")
        if not forget(self.context, memory_id, str(reason)):
            raise LetheError(f"memory #{memory_id} is {mem.status}, not active: nothing to forget")
        return self.get(memory_id)

    def memories(self, status: str = "active", limit: int = 20) -> list[MemoryRecord]:
        """Memories by status (active, archived, superseded, expired, compressed, or all),
        newest first: what was forgotten can be listed too."""
        if status != "all" and status not in STATUSES:
            raise LetheError(f"unknown status {status!r}; use one of {', '.join(STATUSES)} or all")
        rows = self.store.list_memories(self.namespace, None if status == "all" else (status,),
                                        int(limit))
        return [MemoryRecord.from_row(r) for r in rows]

    def pending(self) -> list[dict]:
        """Turns saved but not yet judged (a model was unreachable)."""
        return self.store.pending(self.namespace)

    # -- passes
    def run(self, names: Iterable[str], progress=None) -> list[P.PassResult]:
        """Run the named passes now, in the order given."""
        return runner.run(self.context, names, progress)

    def due(self) -> list[str]:
        """The passes whose schedule has come round (or whose batched run was interrupted)."""
        return P.due(self.context, self.clock())

    def run_due(self, progress=None) -> list[P.PassResult]:
        """Retry pending turns, then run every pass whose schedule has come round."""
        return runner.run_due(self.context, progress)

    # -- reading
    def candidates(self, query: str | None = None, limit: int | None = None,
                   scored: bool = False, relevance: bool = True) -> list[MemoryRecord]:
        """Recall candidates in the policy's recall order, before any model picks among them.
        With a query: only memories matching it in full text, or with `scored=True` all
        candidates, each with its `relevance` to the query (0 when it shares no word)."""
        return R.candidates(self.context, query, limit, scored, relevance)

    def recall(self, query: str, top_n: int | None = None) -> list[MemoryRecord]:
        """What the agent should know for `query`: the policy's candidates, picked by its
        select judge (at most top_n), with their access recorded."""
        return R.recall(self.context, query, top_n)

    def explain(self, query: str, top_n: int | None = None) -> R.Explanation:
        """Why recall returns what it returns for `query` (records no access)."""
        return R.explain(self.context, query, top_n)

    def get(self, memory_id: int) -> MemoryRecord | None:
        """One memory of this namespace by id, or None."""
        return R.get(self.context, memory_id)

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
        merged = self.get(mem.merged_into) if mem.merged_into else None
        return History(mem, events, superseded_by, merged)

    def counts(self) -> dict[str, int]:
        """How many memories this namespace holds, by status."""
        return self.store.counts(self.namespace)


def _expiry(value) -> str | None:
    if value is None or value == "":
        return None
    return iso(until_end_of_day(value) if isinstance(value, str) else value)
