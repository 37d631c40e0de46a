"""The context every step runs in: the store, the compiled plan, the policy, the
namespace, the clock and the judges. Write, recall, compress, passes and the scheduler
receive one of these, never the whole `Memory`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Protocol, cast

from engine.base.clock import Clock
from engine.base.errors import LetheError
from engine.judges import Judges
from engine.judges.embeddings import make_embedder
from engine.plan import Plan, compile_policy
from engine.policy import Policy
from engine.store import open_store
from engine.store.protocol import Store, VectorStore


@dataclass(frozen=True)
class JudgeSettings:
    """How judgments are answered: `offline` (rules for every model), `record`/`replay`
    (a file of answers), `scripted` (a scenario's `judged:` answers)."""

    offline: bool = False
    record: str | None = None
    replay: str | None = None
    scripted: object = None


class Fence(Protocol):
    """The pass lease a runner holds, as a context sees it (engine.run.leasing.Held)."""

    def check(self) -> None: ...
    def due(self) -> bool: ...
    def renewed(self) -> None: ...
    def renew_sql(self) -> tuple[str, tuple]: ...


class Embedder(Protocol):
    """A policy's embedding model (engine.judges.embeddings): its vectors, and the last few
    it gave, by text."""

    name: str
    recent: dict[str, bytes]
    remote: bool  # asked over the network: a vector not yet given is a round trip away

    def embed(self, texts: list[str]) -> list[bytes]: ...


@dataclass
class Context:
    store: Store  # SqliteStore or PostgresStore (engine.store.protocol)
    plan: Plan
    policy: Policy
    namespace: str
    clock: Clock
    judges: Judges
    settings: JudgeSettings = field(default_factory=JudgeSettings)
    lease: Fence | None = None  # the pass lease, when a runner holds it (engine.run.leasing)
    embedder: Embedder | None = None  # the policy's embedding model, or None

    def now(self) -> str:
        return self.store.now()

    def transaction(self, exclusive: bool = False):
        """A write transaction; under a runner's lease its commit is fenced (it rolls back
        when another runner has taken the lease over meanwhile). `exclusive`: no other
        writer changes memories until the commit (a pass's events and updates see the same
        rows; on SQLite every write transaction is)."""
        return self.store.transaction(fence=self.lease, exclusive=exclusive)

    def check_lease(self) -> None:
        """Under a runner's lease, stop early (LeaseLost) once it is known to be lost."""
        if self.lease is not None:
            self.lease.check()

    def reopen(self) -> "Context":
        """The same context on a connection of its own (a scheduler's thread)."""
        store = self.store.reopen()
        return replace(
            self,
            store=store,
            lease=None,
            judges=make_judges(self.policy, store, self.namespace, self.settings),
        )


def vector_store(ctx: Context) -> VectorStore:
    """The store with its vector index: what code behind a policy's `embed:` reads and writes
    vectors with. `open_store` opens it so (and refuses a store without one) whenever the
    policy has `embed:`; the protocol cannot say that its type depends on the policy."""
    if not hasattr(ctx.store, "nearest"):
        raise LetheError(f"{ctx.store.path}: this store keeps no vectors (a policy with `embed:`)")
    return cast(VectorStore, ctx.store)


def number(ctx: Context, name: str, default: float) -> float:
    """A number the engine reads from the policy's `params` (`reinforce_bump`, ...): a
    param may be text too, which is an error here, naming the param, not a bare ValueError."""
    value = ctx.policy.params.get(name, default)
    try:
        if isinstance(value, bool) or not isinstance(value, (int, float, str)):
            raise ValueError(value)
        return float(value)
    except ValueError:
        raise LetheError(f"policy {ctx.policy.name}: params.{name} must be a number, got {value!r}") from None


def make_judges(policy: Policy, store, namespace: str, s: JudgeSettings) -> Judges:
    return Judges(policy, store, namespace, s.offline, s.record, s.replay, s.scripted)


def check_replay(path: str) -> None:
    """A `--replay` file is read when a judge is first asked, and a bad one then failed
    each turn with a bare `JSONDecodeError` that named no file (the turn stayed pending
    for it). Read it up front: a file that is not JSON lines of recorded answers is an
    error that names the file and line."""
    try:
        with open(path, encoding="utf-8") as fh:
            for n, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                try:
                    rec = json.loads(line)
                    ok = isinstance(rec, dict) and {"step", "prompt_sha", "answer"} <= rec.keys()
                    why = "it lacks step, prompt_sha or answer"
                except ValueError as exc:
                    ok, why = False, f"not JSON ({exc})"
                if not ok:
                    raise LetheError(
                        f"replay file {path}:{n} is not an answer recorded by "
                        f"--record (JSON lines of step, prompt_sha, answer): {why}"
                    )
    except FileNotFoundError:
        raise LetheError(f"replay file not found: {path}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise LetheError(f"cannot read replay file {path}: {exc}") from None


def open_context(
    target: str,
    policy: Policy,
    namespace: str,
    clock: Clock,
    settings: JudgeSettings,
    read_only: bool = False,
    progress=None,
) -> Context:
    if settings.replay:
        check_replay(settings.replay)
    store = open_store(target, clock, read_only, progress, vectors=policy.embed is not None)
    plan = compile_policy(policy, store.dialect)
    ctx = Context(
        store,
        plan,
        policy,
        namespace,
        clock,
        make_judges(policy, store, namespace, settings),
        settings,
        embedder=make_embedder(policy.embed, settings.offline),
    )
    if not read_only:  # a reader keeps the stored ranks as they are: it never writes
        sync_rank(ctx)
    return ctx


def sync_rank(ctx: Context) -> None:
    """Recompute stored ranks when the rank formula differs from the one they were
    computed with (a new policy, or an adopted article database). Opening a store whose
    ranks are current writes nothing."""
    st = ctx.plan.rank_refresh
    signature = json.dumps([st.sql, [repr(p) for p in st.shown_params()]])
    if ctx.store.rank_signature(ctx.namespace) != signature:
        ctx.store.rebuild_rank(
            st, ctx.namespace, ctx.policy.name, signature, ranged=ctx.plan.rank_refresh_ranged
        )
