"""`Memory`: the Python API an agent uses, and the code path every CLI command goes through.

A thin façade: it opens a `Context` (store, compiled plan, policy, namespace, clock,
judges) and hands it to the step that does the work (write, recall, runner, ...).
"""

from __future__ import annotations

import functools
import json
import warnings
from typing import Iterable

from engine.base import inputs as I
from engine.base import tracing
from engine.base.clock import Clock, system_clock
from engine.base.errors import InputError, LetheError, PolicyWarning, RulesFallbackWarning
from engine.base.lazy import lazy
from engine.base.records import History, Keyed, MemoryRecord
from engine.base.resources import DEFAULT_POLICY
from engine.judges.keys import NoApiKeyWarning, PassesUndoneWarning, RulesJudgedWarning
from engine.policy import STATUSES, Policy, load
from engine.run import neighbours as vectors
from engine.run import passes as P
from engine.run import runner
from engine.run.context import Context, JudgeSettings, open_context
from engine.run.leasing import LeaseTerms

# what a pass alone (`lethe run`, the scheduler) never calls: imported on first use
R = lazy("engine.run.recall")
W = lazy("engine.run.write")
AS = lazy("engine.run.asof")
A = lazy("engine.run.audit")

__all__ = ["Memory", "MemoryRecord", "History", "Keyed", "DEFAULT_POLICY"]


def _says_if_keyless(warning: type[NoApiKeyWarning]):
    """For a method that may ask a model: when it asked one that needs an API key none is
    set for (never offline, replaying, or a model on a server of its own: those need none),
    warn with `warning` once per Memory. Without it a keyless add or recall looked judged."""

    def wrap(method):
        @functools.wraps(method)
        def asking(self, *args, **kwargs):
            before, fell_back = self.judges.keyless_asks, self.judges.fallbacks
            out = method(self, *args, **kwargs)
            if self.judges.keyless_asks > before:
                if warning not in self._warned:
                    self._warned.add(warning)
                    warnings.warn(warning(self.judges.keyless_env), stacklevel=2)
            elif self.judges.fallbacks > fell_back and RulesFallbackWarning not in self._warned:
                self._warned.add(RulesFallbackWarning)  # a model down, refusing, timing out
                warnings.warn(RulesFallbackWarning(self.judges.fallback_reason), stacklevel=2)
            return out

        return asking

    return wrap


class Memory:
    """A policy-governed memory over one database, for one namespace (agent).

    >>> mem = Memory("agent.db", offline=True)          # the shipped lifecycle policy
    >>> mem.add("User prefers tabs over spaces", importance=6)
    """

    def __init__(
        self,
        db_path: str,
        policy: str | Policy = DEFAULT_POLICY,
        namespace: str = "default",
        offline: bool = False,
        clock: Clock | None = None,
        record: str | None = None,
        replay: str | None = None,
        scripted=None,
        read_only: bool = False,
        progress=None,
    ):
        db_path = I.db_path(db_path)
        if not isinstance(policy, Policy):
            policy = load(I.text(policy, "policy", nonempty=True, name=True))
        pol = policy
        for warning in pol.warnings:  # a param nothing reads: most often a typo
            warnings.warn(PolicyWarning(warning.headline()), stacklevel=2)
        # scripted: an object with .take(step) -> answer or None (a scenario's `judged:`)
        settings = JudgeSettings(
            I.flag(offline, "offline"),
            I.text(record, "record", optional=True),
            I.text(replay, "replay", optional=True),
            scripted,
        )
        if clock is not None:
            I.clock(clock)
        if not isinstance(namespace, str) or not namespace.strip():  # a slip, never an agent
            raise InputError(f"namespace must be a name, got {namespace!r} (the default one is 'default')")
        I.text(namespace, "namespace", name=True)
        read_only, progress = I.flag(read_only, "read_only"), I.callback(progress, "progress")
        # read_only: list, explain and inspect without ever writing (nor waiting on a writer);
        # progress(line): told each step of adopting or upgrading a file with memories in it
        self.context: Context = open_context(
            db_path, pol, namespace, clock or system_clock, settings, read_only, progress
        )
        self._writer = None
        self._warned: set[type] = set()  # the keyless warnings given

    # the context's parts, for callers that inspect them
    policy = property(lambda self: self.context.policy)
    plan = property(lambda self: self.context.plan)
    store = property(lambda self: self.context.store)
    judges = property(lambda self: self.context.judges)
    namespace = property(lambda self: self.context.namespace)
    clock = property(lambda self: self.context.clock)
    offline = property(lambda self: self.context.settings.offline)

    @property
    def writer(self) -> W.Writer:
        """The write pipeline (made on first use: a pass alone never writes memories)."""
        if self._writer is None:
            self._writer = W.Writer(self.context)
        return self._writer

    def close(self) -> None:
        self.store.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- writing
    @_says_if_keyless(NoApiKeyWarning)
    def remember(self, user: str, assistant: str = "", said_at=None) -> W.Written:
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
            written = self.writer.remember(user, assistant, I.said(said_at, self.clock()))
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
            return self.writer.add(content, fields)
        vector = vectors.vector_of(self.context, content)  # outside the transaction
        with self.store.transaction():
            new_id = W.store_memory(self.context, content, **fields)
            vectors.save(self.context, new_id, vector)
            return new_id

    def forget(self, memory_id: int, reason: str) -> MemoryRecord:
        """Archive a memory, with a `forgotten` event that keeps `reason`; it leaves recall,
        nothing is deleted. Raises LetheError when it is absent or not active."""
        mem = self.get(memory_id)
        if mem is None:
            raise LetheError(self._not_here(memory_id))
        memory_id = mem.id
        if not W.forget(self.context, memory_id, I.text(str(reason), "reason")):
            raise LetheError(f"memory #{memory_id} is {mem.status}, not active: nothing to forget")
        return self.get(memory_id)

    def memories(self, status: str = "active", limit: int = 20, as_of=None) -> list[MemoryRecord]:
        """Memories by status (active, archived, superseded, expired, compressed, or all), newest
        first; `limit=None` lists all; `as_of` (a time): as they stood then (docs/time.md)."""
        if status != "all" and status not in STATUSES:
            raise InputError(f"unknown status {status!r}; use one of {', '.join(STATUSES)} or all")
        statuses, limit = None if status == "all" else (status,), I.count(limit, "limit") or I.INT64
        if as_of is not None:
            return AS.memories(self.context, statuses, I.moment(as_of), limit)
        return MemoryRecord.from_rows(self.store.list_memories(self.namespace, statuses, limit))

    def pending(self) -> list[dict]:
        """Turns saved but not yet judged, oldest first: `pending` ones (a model was
        unreachable, or judging failed and `next_retry_at` says when it is tried again) and
        those parked as `failed` after repeated failures, each with `attempts` and
        `last_error`."""
        return self.store.pending(self.namespace)

    def retry_turns(self, ids: Iterable[int] | None = None) -> int:
        """Put turns parked as failed (or waiting out a backoff) back in the queue, all of
        them or those of `ids`; the next `run_due()` judges them. How many went back."""
        if ids is None:
            return self.store.requeue_turns(self.namespace, None)
        ids = I.idents(ids)  # an id past INTEGER's range names no turn
        return self.store.requeue_turns(self.namespace, ids) if ids else 0

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
            self.context, I.names(names, "names"), I.callback(progress, "progress"), _terms(wait, lease_ttl)
        )

    def due(self) -> list[str]:
        """The passes whose schedule has come round (or whose batched run was interrupted)."""
        return P.due(self.context, self.clock())

    @_says_if_keyless(PassesUndoneWarning)
    def run_due(
        self, progress=None, *, wait: float = 0.0, lease_ttl=None, retry_failed: bool = False
    ) -> list[P.PassResult]:
        """Retry pending turns (with `retry_failed`, also those parked as failed), then run
        every pass whose schedule has come round, under the namespace's pass lease. Raises
        LeaseBusy when another runner holds it for longer than `wait` seconds: that runner
        is doing the work."""
        return runner.run_due(
            self.context,
            I.callback(progress, "progress"),
            _terms(wait, lease_ttl),
            I.flag(retry_failed, "retry_failed"),
        )

    # -- reading
    def candidates(
        self,
        query: str | None = None,
        limit: int | None = None,
        scored: bool = False,
        relevance: bool = True,
        as_of=None,
    ) -> list[MemoryRecord]:
        """Recall candidates in the policy's recall order, before any model picks among them.
        With a query: only memories matching it in full text, or with `scored=True` all
        candidates, each with its `relevance` to the query (0 when it shares no word).
        `as_of` (a time): the candidates as they stood then (`lethe ls --as-of`, docs/time.md)."""
        query, at = I.query(query, optional=True), I.moment(as_of)
        if at is not None:
            return AS.candidates(self.context, query, at, I.count(limit, "limit"))
        return R.candidates(
            self.context,
            query,
            I.count(limit, "limit"),
            I.flag(scored, "scored"),
            I.flag(relevance, "relevance"),
        )

    @_says_if_keyless(RulesJudgedWarning)
    def recall(self, query: str, top_n: int | None = None, as_of=None) -> list[MemoryRecord]:
        """What the agent should know for `query`: the policy's candidates, picked by its
        select judge (at most top_n), with their access recorded. A select model that cannot
        be reached is answered for by the built-in rules (a `RulesJudgedWarning` says so
        once when that is because no API key is set). `as_of` (a time): what recall would
        have returned then, rebuilt from the events (records no access; docs/time.md)."""
        query, top_n = I.query(query), I.count(top_n, "top_n")
        if as_of is not None:
            return AS.recall(self.context, query, I.moment(as_of), top_n)
        with tracing.span("lethe.recall", **self._traced(), **{"lethe.top_n": top_n}) as span:
            found = R.recall(self.context, query, top_n)
            span.set_attribute("lethe.memory_ids", [m.id for m in found])
        return found

    def _traced(self) -> dict:
        return {"lethe.namespace": self.namespace, "lethe.policy": self.policy.name}

    @_says_if_keyless(RulesJudgedWarning)
    def explain(self, query: str, top_n: int | None = None) -> R.Explanation:
        """Why recall returns what it returns for `query` (records no access)."""
        return R.explain(self.context, I.query(query), I.count(top_n, "top_n"))

    def get(self, memory_id: int, as_of=None) -> MemoryRecord | None:
        """One memory of this namespace by id, or None. An id that is not a whole number is
        refused (LetheError). `as_of` (a time): the memory as it stood then, None if it had
        not been recorded yet."""
        memory_id, at = I.ident(memory_id), I.moment(as_of)
        if memory_id is None:
            return None
        return R.get(self.context, memory_id) if at is None else AS.get(self.context, memory_id, at)

    def recall_context(self, query: str, top_n: int | None = None) -> str:
        """The text an agent puts in its prompt: the summaries of the scenes the recalled
        memories belong to, then the memories themselves."""
        records = self.recall(query, top_n)
        scenes = dict.fromkeys((r.scene, r.scene_summary) for r in records if r.scene_summary)
        lines = [f"[{scene}] {summary}" for scene, summary in scenes]
        lines += [f"- {r.content}" for r in records]
        return "\n".join(lines)

    def history(self, memory_id: int, as_of=None) -> History:
        """A memory's whole story: its events, what superseded it, what it merged into.
        `as_of` (a time): as it stood then, with the events recorded by then."""
        mem = self.get(memory_id, as_of=as_of)
        if mem is None:
            raise LetheError(self._not_here(memory_id) + (f" as of {as_of}" if as_of else ""))
        at = I.moment(as_of)
        events = [dict(e) for e in self.store.events(mem.id) if at is None or e["occurred_at"] <= AS.iso(at)]
        superseded_by = self.get(mem.contradicted_by, as_of) if mem.contradicted_by else None
        merged = self.get(mem.merged_into, as_of) if mem.merged_into else None
        return History(mem, events, superseded_by, merged)

    def _not_here(self, memory_id: int) -> str:
        """Why there is no memory #id: which namespace was searched, and what it holds.
        Never where the id is instead: a server shared between namespaces passes this on
        to each of them (`namespace_of` is for a tool whose user owns the database)."""
        held = sum(self.counts().values())
        return (
            f"no memory #{memory_id} in namespace '{self.namespace}' "
            f"(it holds {held} memor{'y' if held == 1 else 'ies'})"
        )

    def namespace_of(self, memory_id: int) -> str | None:
        """The namespace that holds memory #id in this database, whichever it is, or None.
        For a tool whose user owns the whole database (the CLI's hint for a mistyped
        --namespace); a server shared between namespaces must not pass it on."""
        memory_id = I.ident(memory_id)
        row = None if memory_id is None else self.store.get(memory_id)
        return None if row is None else row["namespace"]

    def counts(self) -> dict[str, int]:
        """How many memories this namespace holds, by status."""
        return self.store.counts(self.namespace)

    def namespaces(self) -> list[str]:
        """Every namespace that holds a memory in this database, in order."""
        return self.store.namespaces()

    def why_empty(self) -> str | None:
        """Why listing or recalling found nothing, when it is that this namespace holds
        nothing at all (no memory of any status, no pending turn) while others in the
        database do: most often a mistyped namespace. None otherwise (an empty namespace
        of its own is legitimate: a new agent's)."""
        if self.store.holds(self.namespace) or self.pending():
            return None  # the count of every namespace below reads them all: not for this
        held = self.store.namespace_counts()
        if not held:
            return None
        counts = ", ".join(
            f"{name} ({n} memor{'y' if n == 1 else 'ies'})" if i == 0 else f"{name} ({n})"
            for i, (name, n) in enumerate(held.items())
        )
        return f"namespace '{self.namespace}' holds nothing; this database holds: {counts}"

    # -- auditing (the inspector, `lethe ui`)
    def browse(
        self,
        filters: dict | None = None,
        sort: str = "id",
        descending: bool = True,
        after: tuple | None = None,
        limit: int = 50,
    ) -> tuple[list[MemoryRecord], tuple | None]:
        """A page of memories of any status matching `filters` (status, kind, scene, tag,
        text), ordered by `sort` (id, created_at, importance, confidence, decay_score,
        access_count, rank, last_accessed, expires_at), and the keyset of the next page
        (pass it as `after`; None on the last page)."""
        if sort not in A.SORTS:
            raise InputError(f"unknown sort {sort!r}; use one of {', '.join(A.SORTS)}")
        filters = I.filters(filters, ("status", "kind", "scene", "tag", "text"))
        return A.browse(
            self.context,
            filters,
            sort,
            I.flag(descending, "descending"),
            I.keyset(after),
            I.count(limit, "limit"),
        )

    def similar(self, text: str, limit: int = 20) -> list[tuple[MemoryRecord, float]]:
        """The memories of any status nearest `text` by the policy's embedding model, most
        similar first, each with its cosine ([] when the model gives no vector). A policy
        without `embed:` is refused (LetheError)."""
        return A.similar(self.context, I.text(text, "text", nonempty=True), I.count(limit, "limit"))

    def facets(self, column: str) -> list[str]:
        """The kinds or the scenes (`column`) this namespace's memories have."""
        if column not in ("kind", "scene"):
            raise InputError(f"facets() takes 'kind' or 'scene', got {column!r}")
        return self.store.facets(self.namespace, column)

    def neighbours(self, history: History) -> dict:
        """Around a memory (its `history()`): what it superseded or absorbed, the turn it
        came from, the model calls logged just before its judged events."""
        if not isinstance(history, History):
            raise InputError(f"neighbours() takes a History, got {type(history).__name__}")
        return A.neighbours(self.context, history.memory, history.events)

    def decay_curve(self, memory_id: int, days_ahead: int = 60) -> dict | None:
        """What the policy's decay rule would set a memory's decay_score to, from its
        creation to `days_ahead` days past now: {"pass", "points": [(time, score)], "now",
        "threshold"}; None when the policy has no rule that sets decay_score."""
        return A.decay_curve(self.context, self.history(memory_id).memory, I.count(days_ahead, "days_ahead"))

    def activity(self) -> dict:
        """Model use per step, model and day, each pass's last run, events per day."""
        return A.activity(self.context)

    def restore(self, memory_id: int, reason: str) -> MemoryRecord:
        """Make an archived (forgotten, decayed) or expired memory active again, with a
        `restored` event keeping `reason`. Raises LetheError when it is neither."""
        mem = self.history(memory_id).memory
        if not A.restore(self.context, mem, I.text(str(reason), "reason")):
            raise LetheError(
                f"memory #{mem.id} is {mem.status}: only an archived or expired memory is restored"
            )
        return self.get(mem.id)

    def correct(self, memory_id: int, content: str, reason: str) -> int:
        """Replace an active memory's fact: a new memory with `content` supersedes it, both
        events keeping `reason`. Returns the new memory's id."""
        if not isinstance(content, str) or not content.strip():
            raise InputError("a correction needs non-empty content")
        I.text(content, "content")
        return A.correct(self.context, self.history(memory_id).memory, content, I.text(str(reason), "reason"))

    # -- keys: memories a key-value caller (the LangGraph store) names itself
    def put(self, key: str, content: str, value=None, *, detail: dict | None = None, **fields) -> int:
        """Store `content` through `add()` (`fields` are add()'s) under the caller's own
        `key`, keeping `value` (the caller's record, JSON, its key order kept) in a `keyed`
        event, with `detail`'s entries beside it. The memory that was under `key` is
        superseded by the new one. Returns the id, which is an existing memory's when the
        judges find the content only confirms it."""
        key = I.text(key, "a key", nonempty=True, name=True)
        event = _keyed_event(key, value, detail)
        before = self.keyed(key)
        new_id = self.add(content, **fields)
        if self._held_by_another_key(new_id, key):  # the judges found it confirms that one:
            new_id = self.add(content, **{**fields, "judged": False})  # each key its own
        with self.store.transaction():
            self.store.event(new_id, "keyed", event)
            if before is not None and before.memory.id != new_id:
                self.writer.supersede(before.memory.id, new_id, content)
        return new_id

    def key_events(self) -> list[dict]:
        """Every `keyed` event of this namespace, oldest first: the event's detail (key,
        value, ...) with `memory_id`, `status` (the memory's now) and `at`."""
        return [
            {
                **json.loads(r["detail"]),
                "memory_id": r["memory_id"],
                "status": r["status"],
                "at": r["occurred_at"],
            }
            for r in self.store.keyed_events(self.namespace)
        ]

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
        memory_id, event = I.ident(memory_id), _keyed_event(key, value, detail)
        if memory_id is None:
            raise InputError("mark_key() needs the id of a stored memory")
        reason = I.text(reason, "reason", optional=True)
        expiry = None if expires_at is None else I.expiry(expires_at, self.clock())
        with self.store.transaction():
            self.store.event(memory_id, "keyed", event)
            if expiry is not None:
                self.store.update_memory(self.namespace, memory_id, {"expires_at": expiry})
        if reason is not None and (record := self.get(memory_id)) and record.status == "active":
            self.forget(memory_id, reason)

    def _held_by_another_key(self, memory_id: int, key: str) -> bool:
        """Whether `memory_id` is the memory another key's `put()` holds now: a second key
        with the same text must not share it (deleting either would take both)."""
        record = self.get(memory_id)
        other = self.key_of(record) if record is not None else None
        if other is None or other.key == key:
            return False
        holder = self.keyed(other.key)
        return holder is not None and holder.memory.id == memory_id

    def keyed(self, key: str) -> Keyed | None:
        """The active memory `put()` stored under `key`, with the value kept beside it."""
        row = self.store.keyed(self.namespace, I.text(key, "a key", nonempty=True, name=True))
        if row is None:
            return None
        detail = json.loads(row["keyed"])
        return Keyed(MemoryRecord.from_row(row), detail["key"], detail["value"], row["keyed_at"])

    def key_of(self, memory: MemoryRecord) -> Keyed | None:
        """The key and value of the last `put()` that stored or confirmed `memory`, or None
        (it came from `remember()`, `add()` or a merge)."""
        if not isinstance(memory, MemoryRecord):
            raise InputError(f"key_of() takes a MemoryRecord, got {type(memory).__name__}")
        for event in reversed(self.store.events(memory.id)):
            if event["event_type"] == "keyed":
                detail = json.loads(event["detail"])
                return Keyed(memory, detail["key"], detail["value"], event["occurred_at"])
        return None


def _keyed_event(key: str, value, detail: dict | None) -> str:
    """A `keyed` event's detail as JSON text, in the caller's key order; a value that is not
    JSON (NaN, infinity, bytes, a set, text keys only, at most 64 deep) is refused before
    anything is written: stored, it made every later read of the namespace fail."""
    key = I.text(key, "a key", nonempty=True, name=True)
    if detail is not None and not isinstance(detail, dict):
        raise InputError(f"detail must be a dict, got {type(detail).__name__}")
    return I.json_value({**(detail or {}), "key": key, "value": value}, f"the value of key {key!r}")


def _terms(wait, lease_ttl) -> LeaseTerms:
    wait = I.seconds(wait, "wait")
    if lease_ttl is None:
        return LeaseTerms(wait=wait)
    return LeaseTerms(ttl=I.duration(lease_ttl, "lease_ttl"), wait=wait)
