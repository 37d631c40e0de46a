"""`Memory`: the Python API an agent uses, and the code path every CLI command goes through.

A thin façade, and the only door: it opens a `Context` (store, compiled plan, policy,
namespace, clock, judges), keeps it to itself, and hands it to the step that does the work
(write, recall, runner, ...). Its reads are `Reader`'s (engine/memory/reader.py).
"""

from __future__ import annotations

import functools
import warnings
from typing import TYPE_CHECKING, Iterable

from engine.base import inputs as I
from engine.base import tracing
from engine.base.errors import InputError, LetheError, RulesFallbackWarning
from engine.base.lazy import lazy
from engine.base.records import History, Keyed, MemoryRecord
from engine.base.resources import DEFAULT_POLICY
from engine.judges import Answer
from engine.judges.keys import NoApiKeyWarning, PassesUndoneWarning, RulesJudgedWarning
from engine.memory.reader import AS, A, K, R, Reader
from engine.run import neighbours as vectors
from engine.run import passes as P
from engine.run import runner
from engine.run.context import Context
from engine.run.leasing import LeaseTerms

W = lazy("engine.run.write")  # a pass alone (`lethe run`, the scheduler) never writes memories
if TYPE_CHECKING:  # their types, without importing them at start-up
    from engine.run.recall import Explanation
    from engine.run.write import Writer, Written

__all__ = ["Memory", "Reader", "MemoryRecord", "History", "Keyed", "DEFAULT_POLICY"]


def _says_if_keyless(warning: type[NoApiKeyWarning]):
    """For a method that may ask a model: when it asked one that needs an API key none is
    set for (never offline, replaying, or a model on a server of its own: those need none),
    warn with `warning` once per Memory. Without it a keyless add or recall looked judged."""

    def wrap(method):
        @functools.wraps(method)
        def asking(self, *args, **kwargs):
            judges = self._context.judges
            before, fell_back = judges.keyless_asks, judges.fallbacks
            out = method(self, *args, **kwargs)
            if judges.keyless_asks > before:
                if warning not in self._warned:
                    self._warned.add(warning)
                    warnings.warn(warning(judges.keyless_env), stacklevel=2)
            elif judges.fallbacks > fell_back and RulesFallbackWarning not in self._warned:
                self._warned.add(RulesFallbackWarning)  # a model down, refusing, timing out
                warnings.warn(RulesFallbackWarning(judges.fallback_reason), stacklevel=2)
            return out

        return asking

    return wrap


class Memory(Reader):
    """A policy-governed memory over one database, for one namespace (agent).

    >>> mem = Memory("agent.db", offline=True)          # the shipped lifecycle policy
    >>> mem.add("User prefers tabs over spaces", importance=6)
    """

    @functools.cached_property
    def _writer(self) -> Writer:
        """The write pipeline (made on first use: a pass alone never writes memories)."""
        return W.Writer(self._context)

    @functools.cached_property
    def _warned(self) -> set[type]:
        """The keyless and fallback warnings given (each once per Memory)."""
        return set()

    def runner_context(self) -> Context:
        """This memory's context on a connection of its own, for a runner on another
        thread (the `Scheduler`)."""
        return self._context.reopen()

    # -- writing
    @_says_if_keyless(NoApiKeyWarning)
    def remember(self, user: str, assistant: str = "", said_at=None) -> Written:
        """Judge a conversation turn (what the user said and, if any, what the assistant
        answered: `lethe remember` and the MCP tool take it as optional too) and store what
        is worth keeping; returns the ids stored
        or reinforced, as a list that also says what was `stored`, `reinforced` and
        `superseded`. The turn is saved first: if a model is unreachable it stays pending
        (see `pending()`), `run_due()` retries it, and this returns [] with `.pending`
        saying why. When that is because no API key is set, a `NoApiKeyWarning` says so,
        once per Memory. `said_at` (a datetime or ISO text, not after now): when the turn
        was said, if earlier than now; its memories are created at it (docs/time.md)."""
        if not isinstance(user, str) or not isinstance(assistant, str):
            raise InputError("remember() takes the user's and the assistant's text")
        I.text(user, "the user's text")
        I.text(assistant, "the assistant's text")
        with tracing.span("lethe.remember", **self._traced()) as span:
            written = self._writer.remember(user, assistant, I.said(said_at, self.clock()))
            span.set_attributes(
                {
                    "lethe.memory_ids": list(written),
                    "lethe.stored": written.stored,
                    "lethe.reinforced": written.reinforced,
                    "lethe.superseded": [old for old, _ in written.superseded],
                    "lethe.pending": written.pending,
                }
            )
        return written

    @_says_if_keyless(RulesJudgedWarning)
    def add(
        self,
        content: str,
        *,
        summary: str | None = None,
        tags: Iterable[str] | None = None,
        importance: float | None = None,
        confidence: float | None = None,
        expires_at=None,
        kind: str | None = None,
        scene: str | None = None,
        judged: bool = True,
    ) -> int:
        """Store a memory: every write step of the policy except the gate runs (values given
        here win over judgments). `judged=False` stores it exactly as given. An `expires_at`
        before the clock's now is refused (LetheError). A model that
        cannot be reached is answered for by the built-in rules; when that is because no
        API key is set, a `RulesJudgedWarning` says so, once per Memory."""
        if not isinstance(content, str) or not content.strip():
            raise InputError("a memory needs non-empty content")
        I.text(content, "content")
        fields = {
            "summary": I.text(summary, "summary", optional=True),
            "tags": I.tags(tags),
            "importance": I.number(importance, 0, 10, "importance"),
            "confidence": I.number(confidence, 0, 1, "confidence"),
            "expires_at": I.expiry(expires_at, self.clock()),
            "kind": I.text(kind, "kind", optional=True),
            "scene": I.text(scene, "scene", optional=True),
        }
        if I.flag(judged, "judged"):
            return self._writer.add(content, fields)
        vector = vectors.vector_of(self._context, content)  # outside the transaction
        with self._store.transaction():
            new_id = W.store_memory(self._context, content, **fields)
            vectors.save(self._context, new_id, vector)
            return new_id

    def forget(self, memory_id: int, reason: str) -> MemoryRecord:
        """Archive a memory, with a `forgotten` event that keeps `reason`; it leaves recall,
        nothing is deleted. Raises LetheError when it is absent or not active."""
        mem = self._present(memory_id)
        if not W.forget(self._context, mem.id, I.text(str(reason), "reason")):
            raise LetheError(f"memory #{mem.id} is {mem.status}, not active: nothing to forget")
        return self._present(mem.id)

    def retry_turns(self, ids: Iterable[int] | None = None) -> int:
        """Put turns parked as failed (or waiting out a backoff) back in the queue, all of
        them or those of `ids`; the next `run_due()` judges them. How many went back."""
        if ids is None:
            return self._store.requeue_turns(self.namespace, None)
        ids = I.idents(ids)  # an id past INTEGER's range names no turn
        return self._store.requeue_turns(self.namespace, ids) if ids else 0

    def log_model_call(
        self, step: str, model: str, started: float, answer: Answer | None = None, problem: str | None = None
    ) -> None:
        """Log a call an app made to a model of its own (the chat's answer) in `model_calls`,
        beside the judges' calls: `ok` with its `answer`, or `unavailable` with the `problem`
        when none came. `started`: `time.perf_counter()` when it was sent."""
        if answer is not None and not isinstance(answer, Answer):
            raise InputError(f"answer must be an Answer or None, got {type(answer).__name__}")
        step, model = I.text(step, "step", nonempty=True), I.text(model, "model", nonempty=True)
        problem, started = I.text(problem, "problem", optional=True), I.seconds(started, "started")
        outcome = "ok" if answer is not None else "unavailable"
        self._context.judges.log(step, model, answer, outcome, problem, started)

    # -- passes
    @_says_if_keyless(PassesUndoneWarning)
    def run(
        self, names: Iterable[str], progress=None, *, wait: float = 0.0, lease_ttl=None
    ) -> list[P.PassResult]:
        """Run the named passes now, in the order given, under the namespace's pass lease
        (the one every runner takes). Raises LeaseBusy when another runner holds it for
        longer than `wait` seconds; `lease_ttl` is how long the lease outlives this
        process if it dies (default 15 minutes)."""
        return runner.run(
            self._context, I.names(names, "names"), I.callback(progress, "progress"), _terms(wait, lease_ttl)
        )

    @_says_if_keyless(PassesUndoneWarning)
    def run_due(
        self, progress=None, *, wait: float = 0.0, lease_ttl=None, retry_failed: bool = False
    ) -> list[P.PassResult]:
        """Run every pass whose schedule has come round, under the namespace's pass lease,
        then retry pending turns (with `retry_failed`, also those parked as failed). Raises
        LeaseBusy when another runner holds it for longer than `wait` seconds: that runner
        is running the passes (on PostgreSQL this one judged the pending turns first: the
        message says how many)."""
        return runner.run_due(
            self._context,
            I.callback(progress, "progress"),
            _terms(wait, lease_ttl),
            I.flag(retry_failed, "retry_failed"),
        )

    def start_schedules(self) -> list[str]:
        """Every scheduled pass that never ran counts as run now (with nothing changed): its
        schedule starts here (a scenario's `advance: 30d` runs a daily pass 30 times, not
        31). The names of those passes."""
        return runner.start_schedules(self._context)

    # -- recalling (it records access: a write)
    @_says_if_keyless(RulesJudgedWarning)
    def recall(self, query: str, top_n: int | None = None, as_of=None) -> list[MemoryRecord]:
        """What the agent should know for `query`: the policy's candidates, picked by its
        select judge (at most top_n), with their access recorded. A select model that cannot
        be reached is answered for by the built-in rules (a `RulesJudgedWarning` says so
        once when that is because no API key is set). `as_of` (a time): what recall would
        have returned then, rebuilt from the events (records no access; docs/time.md)."""
        query, top_n = I.query(query), I.count(top_n, "top_n")
        if as_of is not None:
            return AS.recall(self._context, query, I.moment(as_of), top_n)
        with tracing.span("lethe.recall", **self._traced(), **{"lethe.top_n": top_n}) as span:
            found = R.recall(self._context, query, top_n)
            span.set_attribute("lethe.memory_ids", [m.id for m in found])
        return found

    def _traced(self) -> dict:
        return {"lethe.namespace": self.namespace, "lethe.policy": self.policy.name}

    @_says_if_keyless(RulesJudgedWarning)
    def explain(self, query: str, top_n: int | None = None) -> Explanation:
        """Why recall returns what it returns for `query` (records no access)."""
        return R.explain(self._context, I.query(query), I.count(top_n, "top_n"))

    def recall_context(self, query: str, top_n: int | None = None) -> str:
        """The text an agent puts in its prompt: the summaries of the scenes the recalled
        memories belong to, then the memories themselves (one from `recall.fallback` with its
        status: "(archived) ...")."""
        records = self.recall(query, top_n)
        scenes = dict.fromkeys((r.scene, r.scene_summary) for r in records if r.scene_summary)
        lines = [f"[{scene}] {summary}" for scene, summary in scenes]
        lines += [
            f"- {r.content}" if r.status == "active" else f"- ({r.status}) {r.content}" for r in records
        ]
        return "\n".join(lines)

    # -- editing the record (the inspector, `lethe ui`)
    def restore(self, memory_id: int, reason: str) -> MemoryRecord:
        """Make an archived (forgotten, decayed) or expired memory active again, with a
        `restored` event keeping `reason`. Raises LetheError when it is neither."""
        mem = self.history(memory_id).memory
        if not A.restore(self._context, mem, I.text(str(reason), "reason")):
            raise LetheError(
                f"memory #{mem.id} is {mem.status}: only an archived or expired memory is restored"
            )
        return self._present(mem.id)

    def correct(self, memory_id: int, content: str, reason: str) -> int:
        """Replace an active memory's fact: a new memory with `content` supersedes it, both
        events keeping `reason`. Returns the new memory's id."""
        if not isinstance(content, str) or not content.strip():
            raise InputError("a correction needs non-empty content")
        I.text(content, "content")
        return A.correct(
            self._context, self.history(memory_id).memory, content, I.text(str(reason), "reason")
        )

    # -- keys: memories a key-value caller (the LangGraph store) names itself
    def put(self, key: str, content: str, value=None, *, detail: dict | None = None, **fields) -> int:
        """Store `content` through `add()` (`fields` are add()'s) under the caller's own
        `key`, keeping `value` (the caller's record, JSON, its key order kept) in a `keyed`
        event, with `detail`'s entries beside it. The memory that was under `key` is
        superseded by the new one. Returns the id, which is an existing memory's when the
        judges find the content only confirms it."""
        key = I.text(key, "a key", nonempty=True, name=True)
        event = K.keyed_event(key, value, detail)
        before = self.keyed(key)
        new_id = self.add(content, **fields)
        if K.held_by_another_key(self._context, new_id, key):  # it confirms another key's:
            new_id = self.add(content, **{**fields, "judged": False})  # each key its own
        with self._store.transaction():
            self._store.event(new_id, "keyed", event)
            if before is not None and before.memory.id != new_id:
                self._writer.supersede(before.memory.id, new_id, content)
        return new_id

    def mark_key(
        self,
        memory_id: int,
        key: str,
        value=None,
        *,
        detail: dict | None = None,
        expires_at=None,
        reason: str | None = None,
    ) -> None:
        """A `keyed` event for the memory `put()` stored under `key`, without storing a new
        one: a refreshed expiry (`expires_at`, set on the memory too while it is active), or
        with `reason` a deletion (value None; the memory, if active, is archived with a
        `forgotten` event that keeps the reason)."""
        ident, event = I.ident(memory_id), K.keyed_event(key, value, detail)
        if ident is None:
            raise InputError("mark_key() needs the id of a stored memory")
        why = I.text(reason, "reason", optional=True)
        expiry = None if expires_at is None else I.expiry(expires_at, self.clock())
        K.mark(self._context, ident, event, expiry)
        if why is not None and (record := self.get(ident)) and record.status == "active":
            self.forget(ident, why)


def _terms(wait, lease_ttl) -> LeaseTerms:
    wait = I.seconds(wait, "wait")
    if lease_ttl is None:
        return LeaseTerms(wait=wait)
    return LeaseTerms(ttl=I.duration(lease_ttl, "lease_ttl"), wait=wait)
