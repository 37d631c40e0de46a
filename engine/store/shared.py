"""What every store backend does the same way, whatever its database: the clock, the
context manager, the check that a read-only open found a current schema, the writes kept
for the next transaction (`defer`), and the queries whose SQL is the same on both. Each
backend names its own migrations list (`migrations`), says which it has (`_applied`), and
runs a statement written with `?` marks (`_x`).
"""

from __future__ import annotations

import contextlib
import json
import warnings
from dataclasses import dataclass, field
from typing import Any

from engine.base.clock import iso, system_clock
from engine.base.errors import StoreError, StoreWarning
from engine.store.asof_reads import AsOf

Row = Any  # sqlite3.Row, or the PostgreSQL backend's Row: read by position or name


@dataclass(frozen=True)
class Schedule:
    """What decides whether a runner has work: pending turns, each pass's last run, and
    the passes a crash left half done (`StoreCommon.schedule`)."""

    pending: int = 0
    last_runs: dict[str, str] = field(default_factory=dict)
    unfinished: frozenset[str] = frozenset()


_nothing = contextlib.nullcontext

# seconds a write no caller waits on (a recall's access, a model call's log line) waits for
# a lock before it is kept for the store's next transaction (`StoreCommon.defer`)
KEEP_AFTER = 0.02


class StoreCommon(AsOf):
    migrations: list = []

    @contextlib.contextmanager
    def claimed_turns(self, namespace: str, limit: int):
        """`claim_turns`, and every turn of them still claimed given back when the round
        ends, however it ends (an outage stops it at the first turn; an error, a lost
        lease): the others are claimable at once, not after the claim's 5 minutes."""
        ids = self.claim_turns(namespace, limit)
        try:
            yield ids
        finally:
            if ids:
                self.release_turns(ids)

    # the table of memories' rows, for a read of no text (SQLite's is memory_rows, m020:
    # its view `memories` would look each row's text up for nothing)
    rows = "memories"

    # the fields `update_memory` may set (the engine's own list, never input)
    UPDATABLE: tuple[str, ...] = ("summary", "tags", "importance", "confidence", "expires_at", "kind", "scene")

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

    # -- queries both backends spell the same (`_x` runs them on either) ---------------
    def changes(self, namespace: str) -> list[Row]:
        """Every memory no longer active, with what replaced or absorbed it and when."""
        return self._x(
            "SELECT m.id, m.content, m.status, coalesce(r.content, g.content) AS replaced_by, "
            "coalesce(m.contradicted_by, m.merged_into) AS replaced_by_id, "
            "(SELECT occurred_at FROM memory_events e WHERE e.memory_id = m.id "
            " ORDER BY e.id DESC LIMIT 1) AS at "
            "FROM memories m LEFT JOIN memories r ON r.id = m.contradicted_by "
            "LEFT JOIN memories g ON g.id = m.merged_into "
            "WHERE m.namespace = ? AND m.status != 'active' ORDER BY m.id",
            (namespace,),
        ).fetchall()

    def keyed_events(self, namespace: str) -> list[Row]:
        """Every `keyed` event of a namespace's memories, oldest first, with the memory's
        status: what key-value callers put, refreshed and deleted (Memory.key_events)."""
        return self._x(
            "SELECT e.memory_id, e.detail, e.occurred_at, m.status FROM memory_events e "
            "JOIN memories m ON m.id = e.memory_id WHERE m.namespace = ? AND "
            "e.event_type = 'keyed' ORDER BY e.id",
            (namespace,),
        ).fetchall()

    def record_run(self, namespace: str, name: str, now: str, changed: int) -> None:
        """A pass ran at `now`; on the wall clock (no clock injected) that is kept apart as
        `wall_run_at`, which a run at a given time never clears (docs/time.md)."""
        wall = now if self.clock is system_clock else None
        self._x(
            "INSERT INTO pass_runs (namespace, pass, last_run_at, rows_changed, wall_run_at) "
            "VALUES (?, ?, ?, ?, ?) ON CONFLICT (namespace, pass) DO UPDATE SET "
            "last_run_at = excluded.last_run_at, rows_changed = excluded.rows_changed, "
            "wall_run_at = coalesce(excluded.wall_run_at, pass_runs.wall_run_at)",
            (namespace, name, now, changed, wall),
        )

    def model_support(self, base_url: str, model: str) -> dict:
        """What this model at this endpoint was found not to accept ({} when nothing, or
        when the stored value is unreadable)."""
        row = self._x(
            "SELECT facts FROM model_support WHERE base_url = ? AND model = ?", (base_url, model)
        ).fetchone()
        try:
            facts = json.loads(row[0]) if row and row[0] else {}
        except ValueError:
            return {}
        return facts if isinstance(facts, dict) else {}

    def wall_run(self) -> str | None:
        """The latest pass run of any namespace made on the wall clock, or None: a store
        a daemon or a plain `lethe run` works on, not a scenario's simulated time."""
        return self._x("SELECT max(wall_run_at) FROM pass_runs").fetchone()[0]

    def clear_progress(self, namespace: str, name: str) -> None:
        self._x("DELETE FROM pass_progress WHERE namespace = ? AND pass = ?", (namespace, name))

    def get(self, memory_id: int, namespace: str | None = None) -> Row | None:
        """One memory, with its scene's summary; None when absent (or in another namespace)."""
        sql = (
            "SELECT memories.*, scenes.summary AS scene_summary FROM memories LEFT JOIN scenes "
            "ON scenes.namespace = memories.namespace AND scenes.scene = memories.scene "
            "WHERE memories.id = ?"
        )
        if namespace is None:
            return self._x(sql, (memory_id,)).fetchone()
        return self._x(sql + " AND memories.namespace = ?", (memory_id, namespace)).fetchone()

    def last_runs(self, namespace: str) -> dict[str, str]:
        return {
            r[0]: r[1]
            for r in self._x("SELECT pass, last_run_at FROM pass_runs WHERE namespace = ?", (namespace,))
        }

    def schedule(self, namespace: str) -> Schedule:
        """Pending turns, last runs and unfinished passes in one statement: a scheduler
        asks at every tick, and on a server each statement is a round trip."""
        pending, last, unfinished = 0, {}, set()
        for kind, name, at, n in self._x(
            "SELECT 'pending', NULL, NULL, count(*) FROM inbox "
            "WHERE namespace = ? AND status = 'pending' "
            "UNION ALL SELECT 'ran', pass, last_run_at, 0 FROM pass_runs WHERE namespace = ? "
            "UNION ALL SELECT 'unfinished', pass, NULL, 0 FROM pass_progress "
            "WHERE namespace = ?",
            (namespace,) * 3,
        ):
            if kind == "pending":
                pending = n
            elif kind == "ran":
                last[name] = at
            else:
                unfinished.add(name)
        return Schedule(pending, last, frozenset(unfinished))

    def pending_ids(self, namespace: str, limit: int) -> list[int]:
        """Pending turns that may be tried now (no backoff, or it has run out), in the order
        they were said (docs/time.md)."""
        return [
            r[0]
            for r in self._x(
                "SELECT id FROM inbox WHERE namespace = ? AND status = 'pending' AND "
                "(next_retry_at IS NULL OR next_retry_at <= ?) ORDER BY created_at, id LIMIT ?",
                (namespace, self.now(), limit),
            )
        ]

    def pending_count(self, namespace: str) -> int:
        return self._x(
            "SELECT count(*) FROM inbox WHERE namespace = ? AND status = 'pending'", (namespace,)
        ).fetchone()[0]

    def renew_lease(self, held) -> None:
        """Extend a held lease from this connection, inside the transaction running now;
        raises the holder's LeaseLost when the lease is no longer its own."""
        if self.db.execute(*held.renew_sql()).rowcount != 1:
            raise held.lost()

    def holds(self, namespace: str) -> bool:
        """Whether the namespace holds any memory, of any status (one index probe)."""
        return (
            self._x(f"SELECT 1 FROM {self.rows} WHERE namespace = ? LIMIT 1", (namespace,)).fetchone()
            is not None
        )

    def namespace_counts(self) -> dict[str, int]:
        """How many memories (of any status) each namespace holds, by name."""
        return {
            r[0]: r[1]
            for r in self._x(
                f"SELECT namespace, count(*) FROM {self.rows} GROUP BY namespace ORDER BY namespace"
            )
        }

    def scenes(self, namespace: str) -> dict[str, str]:
        return {
            r[0]: r[1]
            for r in self._x(
                "SELECT scene, summary FROM scenes WHERE namespace = ? ORDER BY scene", (namespace,)
            )
        }
