"""`Reader`: what a `Memory` answers without writing (listing, getting, a memory's history,
the namespace's counts and costs, the inspector's pages). `Memory` adds what writes."""

from __future__ import annotations

import warnings
from typing import Iterable

from engine.base import inputs as I
from engine.base.clock import Clock, system_clock
from engine.base.errors import InputError, LetheError, PolicyWarning
from engine.base.lazy import lazy
from engine.base.records import History, Keyed, MemoryRecord
from engine.base.resources import DEFAULT_POLICY
from engine.plan import render_plan
from engine.policy import STATUSES, Policy, load
from engine.run import passes as P
from engine.run.context import Context, JudgeSettings, open_context

# what a pass alone (`lethe run`, the scheduler) never calls: imported on first use
R = lazy("engine.run.recall")
AS = lazy("engine.run.asof")
A = lazy("engine.run.audit")
K = lazy("engine.run.keyed")


class Reader:
    """The reads of a policy-governed memory over one database, for one namespace."""

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
        for warning in policy.warnings:  # a param nothing reads: most often a typo
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
        self._context: Context = open_context(
            db_path, policy, namespace, clock or system_clock, settings, read_only, progress
        )

    policy = property(lambda self: self._context.policy)
    namespace = property(lambda self: self._context.namespace)
    clock = property(lambda self: self._context.clock)
    offline = property(lambda self: self._context.settings.offline)
    # the parts behind the façade: for its own methods only
    _store = property(lambda self: self._context.store)

    @property
    def database(self) -> str:
        """Where the memories live: the file path, or the PostgreSQL DSN (password masked)."""
        return self._store.path

    def close(self) -> None:
        self._store.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- listing and getting
    def memories(self, status: str = "active", limit: int | None = 20, as_of=None) -> list[MemoryRecord]:
        """Memories by status (active, archived, superseded, expired, compressed, or all), newest
        first; `limit=None` lists all; `as_of` (a time): as they stood then (docs/time.md)."""
        if status != "all" and status not in STATUSES:
            raise InputError(f"unknown status {status!r}; use one of {', '.join(STATUSES)} or all")
        statuses, most = None if status == "all" else (status,), I.count(limit, "limit") or I.INT64
        if as_of is not None:
            return AS.memories(self._context, statuses, I.moment(as_of), most)
        return MemoryRecord.from_rows(self._store.list_memories(self.namespace, statuses, most))

    def pending(self) -> list[dict]:
        """Turns saved but not yet judged, oldest first: `pending` ones (a model was
        unreachable, or judging failed and `next_retry_at` says when it is tried again) and
        those parked as `failed` after repeated failures, each with `attempts` and
        `last_error`."""
        return self._store.pending(self.namespace)

    def due(self) -> list[str]:
        """The passes whose schedule has come round (or whose batched run was interrupted)."""
        return P.due(self._context, self.clock())

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
            return AS.candidates(self._context, query, at, I.count(limit, "limit"))
        return R.candidates(
            self._context,
            query,
            I.count(limit, "limit"),
            I.flag(scored, "scored"),
            I.flag(relevance, "relevance"),
        )

    def get(self, memory_id: int, as_of=None) -> MemoryRecord | None:
        """One memory of this namespace by id, or None. An id that is not a whole number is
        refused (LetheError). `as_of` (a time): the memory as it stood then, None if it had
        not been recorded yet."""
        ident, at = I.ident(memory_id), I.moment(as_of)
        if ident is None:
            return None
        return R.get(self._context, ident) if at is None else AS.get(self._context, ident, at)

    def _present(self, memory_id: int) -> MemoryRecord:
        """The memory #id of this namespace; a LetheError saying so when there is none."""
        mem = self.get(memory_id)
        if mem is None:
            raise LetheError(self._not_here(memory_id))
        return mem

    def history(self, memory_id: int, as_of=None) -> History:
        """A memory's whole story: its events, what superseded it, what it merged into.
        `as_of` (a time): as it stood then, with the events recorded by then."""
        mem = self.get(memory_id, as_of=as_of)
        if mem is None:
            raise LetheError(self._not_here(memory_id) + (f" as of {as_of}" if as_of else ""))
        at = I.moment(as_of)
        events = [dict(e) for e in self._store.events(mem.id) if at is None or e["occurred_at"] <= AS.iso(at)]
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
        ident = I.ident(memory_id)
        row = None if ident is None else self._store.get(ident)
        return None if row is None else row["namespace"]

    # -- the namespace as a whole
    def counts(self) -> dict[str, int]:
        """How many memories this namespace holds, by status."""
        return self._store.counts(self.namespace)

    def namespaces(self) -> list[str]:
        """Every namespace that holds a memory in this database, in order."""
        return self._store.namespaces()

    def why_empty(self) -> str | None:
        """Why listing or recalling found nothing, when it is that this namespace holds
        nothing at all (no memory of any status, no pending turn) while others in the
        database do: most often a mistyped namespace. None otherwise (an empty namespace
        of its own is legitimate: a new agent's)."""
        if self._store.holds(self.namespace) or self.pending():
            return None  # the count of every namespace below reads them all: not for this
        held = self._store.namespace_counts()
        if not held:
            return None
        counts = ", ".join(
            f"{name} ({n} memor{'y' if n == 1 else 'ies'})" if i == 0 else f"{name} ({n})"
            for i, (name, n) in enumerate(held.items())
        )
        return f"namespace '{self.namespace}' holds nothing; this database holds: {counts}"

    def changes(self) -> list[dict]:
        """Every memory no longer active, oldest first: `id`, `content`, `status`, `at` (its
        last event), and what replaced or absorbed it (`replaced_by`, `replaced_by_id`)."""
        return [dict(r) for r in self._store.changes(self.namespace)]

    def costs(self) -> list[dict]:
        """Every logged model call summed per step and model: calls, tokens, latency, outcomes."""
        return self._store.costs(self.namespace)

    def model_use(self) -> dict:
        """Model calls and tokens: totals, and calls by step and by provider."""
        return self._store.model_use(self.namespace)

    def last_runs(self) -> dict[str, str]:
        """When each pass last ran in this namespace (ISO text), by pass name."""
        return self._store.last_runs(self.namespace)

    def last_wall_run(self) -> str | None:
        """The latest pass run of any namespace made on the wall clock, or None: a store a
        daemon or a plain `lethe run` works on, not a scenario's simulated time."""
        return self._store.wall_run()

    def scenes(self) -> dict[str, str]:
        """The summary of each scene of this namespace, by scene."""
        return self._store.scenes(self.namespace)

    def dump(self) -> list[dict]:
        """Every memory of this namespace, of any status, oldest first: its row as a dict
        with its `events` (oldest first) under that key."""
        return [
            {**dict(r), "events": [dict(e) for e in self._store.events(r["id"])]}
            for r in self._store.memories(self.namespace)
        ]

    def compiled_sql(self) -> str:
        """Every statement the policy runs here, with its parameters (`lethe compile`)."""
        return render_plan(self._context.plan)

    def statements(self, passes: Iterable[str]) -> int:
        """How many statements the named passes run (at least one each): a progress bar's length."""
        return sum(max(1, len(self._context.plan.passes.get(n, []))) for n in I.names(passes, "passes"))

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
            self._context,
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
        return A.similar(self._context, I.text(text, "text", nonempty=True), I.count(limit, "limit"))

    def facets(self, column: str) -> list[str]:
        """The kinds or the scenes (`column`) this namespace's memories have."""
        if column not in ("kind", "scene"):
            raise InputError(f"facets() takes 'kind' or 'scene', got {column!r}")
        return self._store.facets(self.namespace, column)

    def neighbours(self, history: History) -> dict:
        """Around a memory (its `history()`): what it superseded or absorbed, the turn it
        came from, the model calls logged just before its judged events."""
        if not isinstance(history, History):
            raise InputError(f"neighbours() takes a History, got {type(history).__name__}")
        return A.neighbours(self._context, history.memory, history.events)

    def decay_curve(self, memory_id: int, days_ahead: int = 60) -> dict | None:
        """What the policy's decay rule would set a memory's decay_score to, from its
        creation to `days_ahead` days past now: {"pass", "points": [(time, score)], "now",
        "threshold"}; None when the policy has no rule that sets decay_score."""
        return A.decay_curve(self._context, self.history(memory_id).memory, I.count(days_ahead, "days_ahead"))

    def activity(self) -> dict:
        """Model use per step, model and day, each pass's last run, events per day."""
        return A.activity(self._context)

    # -- keys: memories a key-value caller (the LangGraph store) names itself
    def key_events(self) -> list[dict]:
        """Every `keyed` event of this namespace, oldest first: the event's detail (key,
        value, ...) with `memory_id`, `status` (the memory's now) and `at`."""
        return K.key_events(self._context)

    def keyed(self, key: str) -> Keyed | None:
        """The active memory `put()` stored under `key`, with the value kept beside it."""
        return K.keyed(self._context, I.text(key, "a key", nonempty=True, name=True))

    def key_of(self, memory: MemoryRecord) -> Keyed | None:
        """The key and value of the last `put()` that stored or confirmed `memory`, or None
        (it came from `remember()`, `add()` or a merge)."""
        if not isinstance(memory, MemoryRecord):
            raise InputError(f"key_of() takes a MemoryRecord, got {type(memory).__name__}")
        return K.key_of(self._context, memory)
