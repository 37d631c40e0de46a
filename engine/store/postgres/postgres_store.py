"""The PostgreSQL store: many agents and machines on one server, behind the protocol
`SqliteStore` has too, with the queries both spell alike inherited (shared_sql.py). What
differs on a server (inbox claims, a pass's table lock, writes locked in id order, the
lease row, read-only sessions) is said in docs/postgres.md. Needs psycopg 3 (`postgres`).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import uuid
import warnings

from engine.base import processes
from engine.base.clock import Clock, iso, system_clock
from engine.base.errors import StoreError, StoreWarning
from engine.base.text import words
from engine.plan.dialect import PostgresDialect
from engine.plan.statement import Kind
from engine.store.asof_reads import AsOf
from engine.store.inspecting import Inspecting
from engine.store.postgres.postgres_connection import (
    connection_class,
    json_or_none,
    masked,
    psycopg,
    rows,
    websearch,
)
from engine.store.postgres.postgres_lease import PostgresLease
from engine.store.postgres.postgres_schema import PG_MIGRATIONS, SEARCH_CONFIG
from engine.store.shared import KEEP_AFTER
from engine.store.shared_schema import POSTGRES_TYPES, migrations_table
from engine.store.shared_sql import Row

# how long a claim keeps other workers off a turn whose holder could not give it back (the
# server gone when it tried) and whose connection lives on: it is given back whenever its
# judging ends, however it ends, and is free at once when its connection is gone
CLAIM = dt.timedelta(minutes=1)
# a server connection, named as a claim names it: its backend's pid, and when the server
# started (microseconds since the epoch): a restart makes every earlier session gone
_SESSION = "SELECT pg_backend_pid(), (extract(epoch FROM pg_postmaster_start_time()) * 1000000)::bigint"
_SESSIONS = (
    "SELECT (extract(epoch FROM pg_postmaster_start_time()) * 1000000)::bigint, "
    "array(SELECT pid FROM pg_stat_activity WHERE pid IS NOT NULL)"
)
_LOCK_MIGRATE = 4_211_001  # advisory transaction lock keys (proxy-safe: one transaction)
_LOCK_MARKS = 4_211_002


def refuse_nul(values) -> None:
    if any(isinstance(v, str) and "\x00" in v for v in values):
        raise StoreError("PostgreSQL text cannot hold NUL characters (\\x00); remove them first")


class PostgresStore(Inspecting, AsOf):
    """A connection to one PostgreSQL database (a DSN), upgraded to the current schema;
    or, `read_only`, one that never writes (nor upgrades it)."""

    dialect = "postgres"
    p = PostgresDialect.placeholder
    migrations = PG_MIGRATIONS
    lease_class = PostgresLease
    _unclaim = ", claimed_by = NULL, claimed_until = NULL"
    _for_update = " FOR UPDATE"
    ids_from_sequences = True  # identity columns (an import moves them on)
    takes_copy_stream = True  # an import writes by COPY
    information_schema = True
    claims_turns = True  # any runner judges pending turns (engine.run.runner.run_due)

    def __init__(self, dsn: str, clock: Clock | None = None, timeout: float = 30.0, read_only: bool = False):
        self._dsn = str(dsn)
        self._closed = False  # closed by its owner: never reopened
        self.path = masked(self._dsn)  # what messages show; never the password
        self.clock = clock or system_clock
        self.timeout = timeout
        self.read_only = read_only
        # who claims inbox turns: host:pid:random, as a lease holder; each claim names the
        # store's connection too (`claimer`: holder:backend-pid.server-start)
        self.holder = f"{processes.host()}:{os.getpid()}:{uuid.uuid4().hex[:12]}"
        self.claimer = self.holder
        self._common: set[tuple[str, int]] = set()  # full-text queries known to pass a cap
        self._lease_db = None  # the leases' own connection, opened by the first lease
        self._unreturned: set[int] = set()  # claims a give-back could not reach the server for
        # errors of the server itself (unreachable, a lock timeout): never a turn's fault
        self.busy_errors = (psycopg().OperationalError,)
        self._db = self._session(self.connect())
        self._schema_checked()

    @property
    def db(self):
        """The store's connection, opened again after the server dropped it (the call that
        met the drop got `ServerGone`)."""
        if (self._db.broken or self._db.closed) and not self._closed:
            self._db = self._session(self.connect())
        return self._db

    def _session(self, conn):
        """The store's connection, and the name its claims take on it (`claimer`)."""
        if self.read_only:
            conn.execute("SET default_transaction_read_only = on")
        pid, started = conn.execute(_SESSION).fetchone()
        self.claimer = f"{self.holder}:{pid}.{started}"
        return conn

    def connect(self):
        """A new autocommit connection with rows like sqlite3.Row and NUMERIC read as float."""
        pg = psycopg()  # the error naming the extra, when it is not installed
        from psycopg.types.numeric import FloatLoader

        try:
            conn = connection_class().connect(
                self._dsn, autocommit=True, row_factory=rows, connect_timeout=10, application_name="lethe"
            )
        except pg.OperationalError as exc:
            reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise StoreError(f"cannot reach PostgreSQL at {self.path}: {masked(reason)}") from None
        conn.adapters.register_loader("numeric", FloatLoader)
        conn.execute(f"SET lock_timeout = {int(self.timeout * 1000)}")
        return conn

    def close(self) -> None:
        with contextlib.suppress(*self.busy_errors):  # a server gone keeps what it lost
            self.flush_deferred()
        with contextlib.suppress(*self.busy_errors, StoreError):  # claims run out then
            self._give_back_unreturned()
        self._closed = True
        if self._lease_db is not None:
            self._lease_db.close()
        self._db.close()

    def lease_connection(self):
        """The connection every lease of this store uses: its own, so a lease never waits
        on the store's transaction; kept, as a server connection costs a process."""
        if self._lease_db is None or self._lease_db.closed or self._lease_db.broken:
            self._lease_db = self.connect()
        return self._lease_db

    def reopen(self) -> PostgresStore:
        """Another connection to the same database (a scheduler works on its own)."""
        return PostgresStore(self._dsn, self.clock, self.timeout, self.read_only)

    def interrupt(self) -> None:
        """Abort the statement running on this connection (its transaction rolls back)."""
        with contextlib.suppress(Exception):
            getattr(self.db, "cancel_safe", self.db.cancel)()

    @contextlib.contextmanager
    def _begun(self, fenced: bool, exclusive: bool, wait: float | None):
        """`exclusive` locks memories against other writers (readers go on)."""
        with self.db.transaction():
            if wait is not None:
                self._lock_timeout(f"{max(1, int(wait * 1000))}ms")
            if exclusive and not self.read_only:
                self.db.execute("LOCK TABLE memories IN SHARE ROW EXCLUSIVE MODE")
            yield

    def _lock_timeout(self, value: str) -> None:
        self.db.execute("SELECT set_config('lock_timeout', %s, true)", (value,))

    @contextlib.contextmanager
    def _briefly(self):
        """Kept writes wait KEEP_AFTER for a lock: not behind a pass's lock on memories."""
        saved = self.db.execute("SELECT current_setting('lock_timeout')").fetchone()[0]
        self._lock_timeout(f"{int(KEEP_AFTER * 1000)}ms")
        try:
            yield
        finally:
            self._lock_timeout(saved)

    def write_soon(self, sql: str, params=()) -> None:
        """Made now (in the caller's transaction, if one is open), after the first of the
        writes kept, if any."""
        if not self.deferred or self.db.info.transaction_status:
            self.db.execute(sql, params)
            return
        with self.transaction(kept_at_most=self.KEPT_AT_ONCE):
            self.db.execute(sql, params)  # never kept here: made now, whatever is still kept

    def is_busy(self, exc: BaseException) -> bool:
        """lock_not_available: another transaction held the lock longer than we waited."""
        return getattr(exc, "sqlstate", None) == "55P03"

    # -- the migrations (shared.StoreCommon.migrate runs them) ---------------------------
    def _before_migrating(self) -> None:
        if self.db.execute("SELECT current_schema()").fetchone()[0] is None:
            path = self.db.execute("SHOW search_path").fetchone()[0]
            raise StoreError(
                f"{self.path}: no schema of its search_path ({path}) exists, so there is "
                "nowhere to create the store's tables; create it first (CREATE SCHEMA ...), "
                "or connect without the search_path option"
            )

    @contextlib.contextmanager
    def _migrating(self):
        """Under a transaction-level advisory lock (proxy-safe)."""
        with self.db.transaction():
            self.db.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK_MIGRATE,))
            self.db.execute(migrations_table(POSTGRES_TYPES))
            yield self.db

    def _has_table(self, name: str) -> bool:
        return self.db.execute("SELECT to_regclass(%s)", (name,)).fetchone()[0] is not None

    # -- the as-of marks (engine.store.asof_marks): one runner marks, after what it saw ends
    marks_wait_for_transactions = True

    def _marking(self) -> bool:
        return bool(self.db.execute("SELECT pg_try_advisory_xact_lock(%s)", (_LOCK_MARKS,)).fetchone()[0])

    def _running_after(self) -> int | None:
        return self.db.execute("SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint").fetchone()[0]

    def _ended(self, after: int | None) -> bool:
        sql = "SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint >= %s"
        return after is not None and bool(self.db.execute(sql, (after,)).fetchone()[0])

    # -- what SharedQueries asks of a backend ---------------------------------------------
    def _in(self, column: str) -> str:
        return f"{column} = ANY(%s)"

    def _many(self, values) -> list:
        return list(values)

    def _clean(self, text: str | None) -> str | None:
        return text.replace("\x00", "") if text else text

    def _checked(self, text: str) -> str:
        refuse_nul((text,))
        return text

    # -- compiled statements (engine.plan, postgres dialect) ----------------------------
    def run(self, st, namespace: str, now: str | None = None, **binds) -> int:
        """An UPDATE of several memories by id first locks them in id order (it would lock
        them in the order it finds them, not id order)."""
        if len(binds.get("ids") or ()) > 1 and st.kind is Kind.WRITE_MEMORIES:
            self.lock_memories(binds["ids"])
        return super().run(st, namespace, now, **binds)

    def _bound(self, st, namespace: str, now: str | None, binds: dict) -> tuple:
        """Full-text queries in websearch syntax; ids in order, so transactions updating
        the same memories lock them in the same order (no deadlock between two recalls)."""
        binds["query"] = websearch(binds.get("query"))
        if binds.get("ids"):
            binds["ids"] = sorted(binds["ids"])
        return super()._bound(st, namespace, now, binds)

    def rebuild_rank(self, st, namespace: str, policy: str, signature: str, ranged=None) -> None:
        """As SqliteStore's; processes opening the database at once take turns."""
        with self.transaction():
            self.db.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", ("lethe.rank:" + namespace,))
            if self.rank_signature(namespace) != signature:
                self.run(st, namespace)
                self._rank_computed(namespace, policy, signature)

    # -- memories -------------------------------------------------------------------------
    def insert_memory(self, fields: dict) -> int:
        """One row of `memories` from column -> value (columns from the engine's own list)."""
        refuse_nul(fields.values())
        cols = list(fields)
        marks = ", ".join("%s" for _ in cols)
        sql = f"INSERT INTO memories ({', '.join(cols)}) VALUES ({marks}) RETURNING id"
        return self.db.execute(sql, [fields[c] for c in cols]).fetchone()[0]

    def _update_fields(self, namespace: str, memory_id: int, fields: dict) -> int:
        refuse_nul(fields.values())
        return self._update_row("memories", namespace, memory_id, fields)

    def lock_memories(self, ids: list[int]) -> None:
        """Hold these memories until the commit, locked in id order (never a deadlock)."""
        if ids:
            # the table lock a write takes, first: FOR UPDATE alone takes a weaker one, and
            # a pass's lock granted in between would wait on our rows while we wait on it
            self.db.execute("LOCK TABLE memories IN ROW EXCLUSIVE MODE")
            sql = "SELECT id FROM memories WHERE id = ANY(%s) ORDER BY id FOR UPDATE"
            self.db.execute(sql, (sorted(set(ids)),)).fetchall()

    def keyed(self, namespace: str, key: str) -> Row | None:
        """As SqliteStore.keyed, the details read here, not cast to json in SQL (one cast
        that fails fails the lookup): one that is not JSON (NaN) is left out with a warning
        naming it, as SQLite's json_valid leaves it out."""
        found = self.db.execute(
            "SELECT m.*, e.detail AS keyed, e.occurred_at AS keyed_at FROM memories m "
            "JOIN memory_events e ON e.memory_id = m.id WHERE m.namespace = %s AND "
            "m.status = 'active' AND e.event_type = 'keyed' AND strpos(e.detail, %s) > 0 "
            "ORDER BY e.id DESC",
            (namespace, json.dumps(key, ensure_ascii=False)),  # as the detail spells it
        )
        for row in found:
            detail = json_or_none(row["keyed"])
            if detail is None:
                warnings.warn(
                    StoreWarning(
                        f"memory #{row['id']}: its keyed event of {row['keyed_at']} is not JSON "
                        f"and is left out: {row['keyed'][:80]!r}"
                    ),
                    stacklevel=3,
                )
            elif isinstance(detail, dict) and detail.get("key") == key:
                return row
        return None

    def fts_ids(self, text: str, every: bool) -> tuple[str, str] | None:
        """Every word: websearch syntax (words side by side are AND); any: a tsquery of
        the words joined by `|`."""
        found = words(text)
        if not found:
            return None
        parse, joiner = ("websearch_to_tsquery", " ") if every else ("to_tsquery", " | ")
        return f"SELECT id FROM memories_fts WHERE tsv @@ {parse}('{SEARCH_CONFIG}', %s)", joiner.join(found)

    def match_count(self, fts_query: str, cap: int) -> int:
        """At most `cap + 1`. A GIN scan reads a word's whole posting list before LIMIT, so
        a query found past the cap is remembered (memories are never deleted)."""
        if (fts_query, cap) in self._common:
            return cap + 1
        n = self.db.execute(
            f"SELECT count(*) FROM (SELECT 1 FROM memories_fts WHERE tsv @@ "
            f"websearch_to_tsquery('{SEARCH_CONFIG}', %s) LIMIT %s) AS hits",
            (websearch(fts_query), cap + 1),
        ).fetchone()[0]
        if n > cap:
            if len(self._common) > 100_000:  # bounded: forget and learn again
                self._common.clear()
            self._common.add((fts_query, cap))
        return n

    # -- the inbox, shared by workers ---------------------------------------------------
    def add_turn(self, namespace: str, user: str, assistant: str, said_at: str | None = None) -> int:
        """Save a turn, claimed by us: the writer judging it now is not raced by a retry."""
        refuse_nul((user, assistant))
        self._give_back_unreturned()
        db = self.db  # (re)connected first: the claim names this connection
        return db.execute(
            "INSERT INTO inbox (namespace, user_text, assistant_text, created_at, updated_at, "
            "claimed_by, claimed_until) VALUES (%s, %s, %s, %s, %s, %s, %s) RETURNING id",
            (namespace, user, assistant, said_at or self.now(), self.now(), self.claimer, self._claim()),
        ).fetchone()[0]

    def _claim(self) -> str:
        return iso(self.clock() + CLAIM)

    def claim_turns(self, namespace: str, limit: int) -> list[int]:
        """Pending turns that may be tried now and nobody is judging, oldest first, claimed
        for CLAIM (workers skip each other's rows and claims). A claim whose connection is
        gone (its process killed, the server restarted since) or whose holder was a process
        of this host that has died (an agent killed in its `remember`) is taken at once, as
        a dead runner's lease is, not after CLAIM."""
        db = self.db  # (re)connected first: the claims name this connection
        self._give_back_unreturned()
        now = self.now()
        found = db.execute(
            "UPDATE inbox SET claimed_by = %s, claimed_until = %s WHERE id IN (SELECT id FROM inbox "
            "WHERE namespace = %s AND status = 'pending' AND (next_retry_at IS NULL OR "
            "next_retry_at <= %s) AND (claimed_until IS NULL OR claimed_until <= %s OR "
            "claimed_by = ANY(%s)) ORDER BY created_at, id LIMIT %s "
            "FOR UPDATE SKIP LOCKED) RETURNING id, created_at",
            (self.claimer, self._claim(), namespace, now, now, self._free(namespace, now), limit),
        ).fetchall()
        return [r[0] for r in sorted(found, key=lambda r: (r[1] or "", r[0]))]  # as said

    def _free(self, namespace: str, now: str) -> list[str]:
        """The claimants of the namespace's live claims that may be taken now: this store
        (on any of its connections), a connection the server no longer has, a process of
        this host that died."""
        held = [
            h
            for (h,) in self.db.execute(
                "SELECT DISTINCT claimed_by FROM inbox WHERE namespace = %s AND status = 'pending' "
                "AND claimed_until > %s AND claimed_by IS NOT NULL",
                (namespace, now),
            ).fetchall()
        ]
        others = [h for h in held if not self._ours(h)]
        gone = [h for h in others if processes.holder_gone(h)]
        named = [h for h in others if h not in gone and _session_of(h) is not None]
        if named:
            started, pids = self.db.execute(_SESSIONS).fetchone()
            alive = {f"{pid}.{started}" for pid in pids}
            gone += [h for h in named if _session_of(h) not in alive]
        return [h for h in held if self._ours(h)] + gone

    def _ours(self, claimant: str) -> bool:
        return claimant == self.holder or claimant.startswith(self.holder + ":")

    def release_turns(self, ids: list[int]) -> None:
        """Give back this store's claims on these turns (those it did not judge). When the
        server cannot be reached (it is restarting), they are given back by this store's
        next inbox call that reaches it (`add_turn`, `claim_turns`), not left to run out:
        an agent that met a restart gives its turn back at its next `remember`."""
        ids = [*self._unreturned, *ids]
        self._unreturned = set()
        try:
            self.db.execute(
                "UPDATE inbox SET claimed_by = NULL, claimed_until = NULL WHERE "
                "(claimed_by = %s OR left(claimed_by, %s) = %s) AND id = ANY(%s)",
                (self.holder, len(self.holder) + 1, self.holder + ":", ids),
            )
        except (*self.busy_errors, StoreError):
            self._unreturned.update(ids)  # only ours: a claim taken over meanwhile is not touched

    def _give_back_unreturned(self) -> None:
        """Give back what `release_turns` could not, when no transaction is open (a failed
        give-back must not abort the caller's)."""
        if self._unreturned and not self.db.info.transaction_status:
            self.release_turns([])


def _session_of(claimant: str) -> str | None:
    """The connection a claim names (`backend-pid.server-start`), None for a claim that
    names none (a claim made before claims named their connection)."""
    parts = claimant.split(":")
    return parts[3] if len(parts) == 4 else None
