"""What every store backend does the same way, whatever its database: the clock, the
context manager, the one migration runner and the check that a read-only open found a
current schema, and the writes kept for the next transaction (`defer`). The queries both
spell alike are in shared_sql.py. A backend names its connection (`db`), its migrations
list (`migrations`) and its placeholder (`p`, its dialect's), and says how it makes a
transaction, a migration's transaction, and whether it has a table.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import inspect
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, TypeVar

from engine.base.clock import Clock, iso
from engine.base.errors import StoreError, StoreWarning
from engine.store.shared_lease import LeaseCommon


@dataclass(frozen=True)
class Schedule:
    """What decides whether a runner has work: pending turns, each pass's last run, and
    the passes a crash left half done (`StoreCommon.schedule`)."""

    pending: int = 0
    last_runs: dict[str, str] = field(default_factory=dict)
    unfinished: frozenset[str] = frozenset()


class NamedRow(tuple):
    """A result row read by position or by column name, as sqlite3.Row is: what the shared
    queries read, from a driver whose rows are plain tuples (psycopg's)."""

    _names: list[str]
    _index: dict[str, int]

    def __new__(cls, values, names: list[str], index: dict[str, int]):
        row = super().__new__(cls, values)
        row._names, row._index = names, index
        return row

    def __getitem__(self, key):  # type: ignore[override]  # a name, as sqlite3.Row takes
        if isinstance(key, str):
            try:
                key = self._index[key]
            except KeyError:
                raise IndexError(f"no column {key!r}") from None
        return tuple.__getitem__(self, key)

    def keys(self) -> list[str]:
        return list(self._names)


_nothing = contextlib.nullcontext
T = TypeVar("T")

# seconds a write no caller waits on (a recall's access, a model call's log line) waits for
# a lock before it is kept for the store's next transaction (`StoreCommon.defer`)
KEEP_AFTER = 0.02


class StoreCommon:
    db: Any  # the backend's DB-API connection (sqlite3's, or psycopg's)
    dialect: str  # "sqlite" or "postgres": what engine.plan compiles for
    p: str  # the dialect's placeholder
    path: str
    clock: Clock
    timeout: float
    read_only: bool
    migrations: list = []
    lease_class: type[LeaseCommon]

    @contextlib.contextmanager
    def claimed_turns(self, namespace: str, limit: int):
        """`claim_turns`, and every turn of them still claimed given back when the round
        ends, however it ends (an outage stops it at the first turn; an error, a lost
        lease): the others are claimable at once, not after the claim runs out."""
        ids = self.claim_turns(namespace, limit)
        try:
            yield ids
        finally:
            if ids:
                self.release_turns(ids)

    # -- what a backend can do, asked instead of its name ------------------------------
    # a full-text search walks its matches newest first and stops at a batch (FTS5's
    # rowids): a read of the newest matches asks for them in batches (engine.store.asof_reads)
    fts_newest_first = False
    # ids come from sequences a copy of rows must move on (PostgreSQL's identity columns);
    # else a table goes on after its own AUTOINCREMENT counter (engine.store.transfer)
    ids_from_sequences = False
    # rows are written as one COPY stream per batch (engine.store.transfer)
    takes_copy_stream = False
    # its catalog is information_schema, not SQLite's PRAGMAs (engine.store.transfer_source)
    information_schema = False
    # `claim_turns` keeps other workers off a turn while one judges it (PostgreSQL's
    # claims), so any runner judges pending turns, not only the lease's holder
    # (engine.run.runner.run_due); else the holder alone does
    claims_turns = False

    def fts_ids(self, text: str, every: bool) -> tuple[str, str] | None:
        """A SELECT of the ids (one column) of the memories matching `text` in full text,
        every one of its words or any of them, with the query it binds (one parameter);
        None when `text` has no word to look for."""
        raise NotImplementedError

    def head_floor(self) -> float | None:
        """The floor of recall's index when it holds only the head of the ranking (rank >=
        floor, engine.store.sqlite.recall_head); None: it holds every active memory."""
        return None

    # the table of memories' rows, for a read of no text (SQLite's is memory_rows, m020:
    # its view `memories` would look each row's text up for nothing)
    rows = "memories"

    # the fields `update_memory` may set (the engine's own list, never input)
    UPDATABLE: tuple[str, ...] = (
        "summary",
        "tags",
        "importance",
        "confidence",
        "expires_at",
        "kind",
        "scene",
    )

    # when what the events written now was said (a turn's time), None: when recorded
    said_at: str | None = None

    def now(self) -> str:
        return iso(self.clock())

    @contextlib.contextmanager
    def saying(self, when: str | None):
        """Inside the block, events carry `when` as their `said_at` and a memory stored is
        created at it (the time of the turn being judged, docs/time.md)."""
        before, self.said_at = self.said_at, when
        try:
            yield
        finally:
            self.said_at = before

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @contextlib.contextmanager
    def transaction(
        self, fence=None, exclusive: bool = False, wait: float | None = None, kept_at_most: int | None = None
    ):
        """One transaction (`_begun`): anything raised inside rolls it all back.
        `exclusive`: no other writer of memories until the commit. `wait`: seconds to wait
        for the lock, when not the store's timeout (after it, `is_busy`). The writes
        `defer` kept run first (the first `kept_at_most` of them, when given: then see
        `keeps_more`). With a `fence` (a held pass lease), the commit first renews the
        lease inside this transaction; when the lease is no longer the holder's that
        raises and everything rolls back, so work done after a takeover never lands."""
        with self._begun(fence is not None, exclusive, wait):
            kept = self._run_deferred(kept_at_most)
            yield self.db
            if fence is not None:
                self.renew_lease(fence)
        self._forget_deferred(kept)
        if fence is not None:
            fence.renewed()

    # -- what each backend says for itself --------------------------------------------
    def _begun(
        self, fenced: bool, exclusive: bool, wait: float | None
    ) -> contextlib.AbstractContextManager[Any]:
        """BEGIN ... COMMIT around the block, or ROLLBACK when it raises."""
        raise NotImplementedError

    def run(self, st, namespace: str, now: str | None = None, **binds) -> int:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    def is_busy(self, exc: BaseException) -> bool:
        raise NotImplementedError

    def renew_lease(self, held) -> None:
        raise NotImplementedError

    def lease_connection(self) -> Any:
        """The connection every lease of this store uses: its own, so a lease never waits
        on the store's transaction."""
        raise NotImplementedError

    def lease(self, namespace: str, ttl: dt.timedelta, holder: str, wait: float = 1.0) -> LeaseCommon:
        """The namespace's pass lease, on the store's lease connection."""
        return self.lease_class(self.lease_connection(), namespace, self.clock, ttl, holder, wait)

    def _has_table(self, name: str) -> bool:
        raise NotImplementedError

    def claim_turns(self, namespace: str, limit: int) -> list[int]:
        raise NotImplementedError

    def release_turns(self, ids: list[int]) -> None:
        raise NotImplementedError

    def write_soon(self, sql: str, params=()) -> None:
        """A write no caller waits on (a model call's log line), made now or soon."""
        raise NotImplementedError

    def _x(self, sql: str, params=()) -> Any:
        """One statement, written with the dialect's placeholder (`p`)."""
        return self.db.execute(sql, params)

    def _migrating(self) -> contextlib.AbstractContextManager[Any]:
        """One migration's transaction, in which it re-checks it is still to be run."""
        raise NotImplementedError

    def _before_migrating(self) -> None:
        """Once, before the migrations a database lacks."""

    def _upgrading(self, name: str, number: int) -> None:
        """Before each migration a database lacks (SQLite says so of a file in use)."""

    def make_way(self) -> None:
        """Between two ranges of a batched pass (SQLite: leave the write lock free a moment)."""

    def rewriting(
        self, reach, columns, namespace: str, now: str, id_range=(0, 0)
    ) -> contextlib.AbstractContextManager[int | None]:
        """Inside a pass's transaction, around its statements (SQLite: indexes rebuilt when
        it reaches most of the table). Yields None: the database chooses how to read rows."""
        return _nothing(None)

    def giving_way(self) -> contextlib.AbstractContextManager[Any]:
        """Around a pass's one transaction (SQLite: interrupted when a writer waits)."""
        return _nothing()

    def leaving_active(self, rows: int) -> contextlib.AbstractContextManager[Any]:
        """Around an UPDATE of a pass that takes `rows` memories out of the active ones
        (SQLite: re-creates its index of the active memories after it when that is cheaper)."""
        return _nothing()

    def writer_waits(self) -> bool:
        """Whether a writer waits for the lock now (SQLite's waiters file)."""
        return False

    # -- the schema ---------------------------------------------------------------------
    def migrate(self) -> list[str]:
        """Run the migrations this database lacks, in order, each in its own transaction
        (`_migrating`), recorded in `lethe_migrations`; each is re-checked inside its
        transaction's lock, as two processes may open a new database at once. An
        up-to-date database is only read: opening it starts no write transaction."""
        if self._applied() >= {fn.__name__ for fn in self.migrations}:
            return []
        self._before_migrating()
        applied, done = [], self._applied()
        p = self.p
        for number, fn in enumerate(self.migrations, 1):
            if fn.__name__ not in done:
                self._upgrading(fn.__name__, number)
            with self._migrating() as db:
                if db.execute(f"SELECT 1 FROM lethe_migrations WHERE name = {p}", (fn.__name__,)).fetchone():
                    continue
                if "now" in inspect.signature(fn).parameters:
                    fn(db, now=self.now())
                else:
                    fn(db)
                db.execute(f"INSERT INTO lethe_migrations VALUES ({p}, {p})", (fn.__name__, self.now()))
                applied.append(fn.__name__)
        return applied

    def _applied(self) -> set[str]:
        if not self._has_table("lethe_migrations"):
            return set()
        return {r[0] for r in self.db.execute("SELECT name FROM lethe_migrations")}

    def _schema_checked(self) -> None:
        """On open: upgraded to the current schema, or (read-only) refused when behind it."""
        if self.read_only:
            self._check_current()
        else:
            self.migrate()

    def _check_current(self) -> None:
        """A store opened read-only is never upgraded: an older schema is refused."""
        applied = self._applied()
        if not applied and not self._has_table("memories"):
            raise StoreError(
                f"no Lethe store at {self.path}: this command does not create one; "
                "commands that write (remember, add, run) do"
            )
        if not applied:  # the seed article's own file: its tables, none of Lethe's migrations
            raise StoreError(
                f"{self.path} holds memories Lethe has not adopted yet; run a "
                "command that writes, such as `lethe run`, once to adopt it"
            )
        missing = [fn.__name__ for fn in self.migrations if fn.__name__ not in applied]
        if missing:
            raise StoreError(
                f"{self.path} is from an older version of Lethe (it lacks "
                f"{', '.join(missing)}); run a command that writes, such as "
                "`lethe run`, once to upgrade it"
            )

    def run_rule(self, st, namespace: str, now: str | None = None, **binds) -> tuple[int, int]:
        """A rule's UPDATE that may keep rows whose new value is unusable: (rows changed,
        rows kept). Only SQLite's dialect compiles such a rule (`Statement.counts_kept`)."""
        return self.run(st, namespace, now, **binds), 0

    # -- writes that can wait for the store's next transaction -------------------------
    @property
    def deferred(self) -> list:
        """The writes `defer` kept, in order (each a callable that makes one): what this
        store's next transaction runs first."""
        return self.__dict__.setdefault("_deferred", [])

    # kept writes a recall's or a log line's own transaction makes first, at most: after a
    # long pass a recall found 1,164 of them kept, and making them all took it 290 ms
    KEPT_AT_ONCE = 64

    def defer(self, write) -> None:
        """Keep a write whose caller need not wait for it (a recall's access and its model
        call's log line, while a pass holds the write lock): `write()` runs at the start of
        this store's next transaction, in the order kept, and commits with it; `close()`
        waits for the lock to write what is still kept. A process that dies first loses it,
        as it would have lost the write it was waiting to make."""
        self.deferred.append(write)

    def write_or_keep(self, write: Callable[[], T]) -> T | None:
        """`write()` made now, in a transaction of its own, when the lock is free within
        KEEP_AFTER (tried once, not waiting, when writes are kept already: the lock was busy
        a moment ago), behind the kept writes it makes first: its result. Else kept for this
        store's next transaction (`defer`), and None: the caller is not held up."""
        with self._kept_if_busy(write):
            with self.transaction(wait=0.0 if self.deferred else KEEP_AFTER, kept_at_most=self.KEPT_AT_ONCE):
                if not self.keeps_more():
                    return write()
            self.defer(write)  # more kept than one transaction makes (after a long pass): behind them
        return None

    @contextlib.contextmanager
    def _kept_if_busy(self, write):
        """Around a try to make `write` now: when the lock stays busy, it is kept (`defer`)."""
        try:
            yield
        except Exception as exc:
            if not self.is_busy(exc):
                raise
            self.defer(write)

    def _run_deferred(self, at_most: int | None = None) -> int:
        """Inside a transaction that has just begun: run the kept writes (the first
        `at_most` of them, when given), each under a savepoint. One that finds a lock held
        (PostgreSQL: a pass's lock on memories, in a transaction that need not touch them)
        waits only briefly (`_briefly`), and it and the rest stay kept. One that fails
        otherwise (a value the database refuses) is dropped with a StoreWarning: it must
        not fail this transaction, nor every later one. Returns how many to forget
        (`_forget_deferred`) once the commit has landed."""
        self._kept_now = 0
        if not self.deferred:
            return 0
        done = 0
        todo = self.deferred if at_most is None or self.__dict__.get("_flushing") else self.deferred[:at_most]
        with self._briefly() if not self.__dict__.get("_flushing") else _nothing():
            for write in list(todo):
                self._x("SAVEPOINT lethe_kept")
                try:
                    write()
                except Exception as exc:
                    self._x("ROLLBACK TO SAVEPOINT lethe_kept")
                    self._x("RELEASE SAVEPOINT lethe_kept")
                    if self.is_busy(exc):
                        break
                    warnings.warn(
                        StoreWarning(
                            f"{self.path}: a write kept while the store was "
                            f"busy was dropped ({type(exc).__name__}: {exc})"
                        ),
                        stacklevel=2,
                    )
                else:
                    self._x("RELEASE SAVEPOINT lethe_kept")
                done += 1
        self._kept_now = done
        return done

    def keeps_more(self) -> bool:
        """Inside a transaction: writes are still kept beyond those it made first (it was
        given `kept_at_most`). A caller whose own write could be kept too keeps it behind
        them, so kept writes land in the order they were made."""
        return len(self.deferred) > self.__dict__.get("_kept_now", 0)

    def _briefly(self):
        """While kept writes run: how long a statement waits for a lock (the backend's;
        SQLite's transaction holds the only lock there is)."""
        return _nothing()

    def _forget_deferred(self, count: int) -> None:
        del self.deferred[:count]

    def flush_deferred(self) -> None:
        """Write what `defer` kept, waiting for the lock up to the store's timeout; when it
        cannot, a warning says how many writes are lost."""
        if not self.deferred or self.read_only:
            return
        self._flushing = True
        try:
            with self.transaction():
                pass  # the transaction runs them first
            problem = "the lock stayed busy" if self.deferred else None
        except Exception as exc:  # closing: say what is lost, never raise over it
            problem = f"{type(exc).__name__}: {exc}"
        finally:
            self._flushing = False
        if problem:
            count = len(self.deferred)
            self.deferred.clear()
            warnings.warn(
                StoreWarning(
                    f"{self.path}: {count} write(s) kept while the store was busy (a recall's "
                    f"access, a model call's log line) could not be made ({problem})"
                ),
                stacklevel=3,
            )
