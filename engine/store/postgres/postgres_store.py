"""The PostgreSQL store: many agents and machines on one server, behind the same methods as
`SqliteStore` (its public methods are the store interface; this class and the
`Bookkeeping` it inherits, postgres_bookkeeping.py, mirror them one for one, in the same
order, so a method added there is ported here by copying it).

Bookkeeping SQL is written as in `sqlite.py`, with `?` placeholders, and turned into
psycopg's `%s` by `q` (so most methods are the SQLite text verbatim); compiled statements
(`engine.plan` with the postgres dialect) already use `%s`. What differs on a server:
- a turn is claimed before it is judged (`claim_turns`: `FOR UPDATE SKIP LOCKED`), and
  `turn()` locks its row, so several workers share one inbox and apply each turn once;
- a pass's transaction (`transaction(exclusive=True)`) locks `memories` against other
  writers (readers go on), as SQLite's write lock does, so a rule's events and its update
  see the same rows;
- a fenced commit (`transaction(fence=held)`, a runner under the pass lease) renews the
  lease row only while its holder and fencing token are still ours (`postgres_lease.py`
  says why a row and not an advisory lock);
- a read-only store runs every transaction READ ONLY and never migrates.
Needs the `postgres` extra (psycopg 3).
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import json
import re
import sys
import uuid

from engine.base.clock import Clock, system_clock
from engine.base.distribution import extra_error
from engine.base.errors import StoreError
from engine.plan.statement import Kind
from engine.store.inspecting import Inspecting
from engine.store.postgres.postgres_bookkeeping import Bookkeeping, refuse_nul
from engine.store.postgres.postgres_lease import PostgresLease
from engine.store.postgres.postgres_schema import PG_MIGRATIONS, SEARCH_CONFIG
from engine.store.shared import KEEP_AFTER, StoreCommon

_LOCK_MIGRATE = 4_211_001  # advisory transaction lock keys (proxy-safe: one transaction)


def is_dsn(target: str) -> bool:
    return str(target).startswith(("postgresql://", "postgres://"))


def masked(dsn: str) -> str:
    """The DSN with its password replaced by ***, for messages."""
    dsn = re.sub(r"(://[^:/@?]*:)[^@]*@", r"\1***@", dsn)
    return re.sub(r"(password=)[^&\s]*", r"\1***", dsn)


def _psycopg():
    try:
        import psycopg
    except ImportError as exc:
        raise extra_error(exc, "postgres", "PostgreSQL", ("psycopg", "psycopg_binary"), StoreError) from None
    return psycopg


def pg_database_errors() -> tuple:
    """What psycopg raises when the server or the database fails: nothing until psycopg
    has been imported (by opening a DSN), so asking never imports it."""
    psycopg = sys.modules.get("psycopg")
    return (psycopg.DatabaseError,) if psycopg is not None else ()


class Row(tuple):
    """A result row read by position or by column name, as sqlite3.Row is."""

    def __new__(cls, values, names: list[str], index: dict[str, int]):
        row = super().__new__(cls, values)
        row._names, row._index = names, index
        return row

    def __getitem__(self, key):
        if isinstance(key, str):
            try:
                key = self._index[key]
            except KeyError:
                raise IndexError(f"no column {key!r}") from None
        return tuple.__getitem__(self, key)

    def keys(self) -> list[str]:
        return list(self._names)


def _rows(cursor):
    names = [c.name for c in cursor.description or []]
    index = {n: i for i, n in reversed(list(enumerate(names)))}  # the first of a name wins
    return lambda values: Row(values, names, index)


def _binds(binds: dict) -> dict:
    """Full-text queries in websearch syntax; ids in order, so transactions updating the
    same memories lock them in the same order (no deadlock between two recalls)."""
    binds["query"] = websearch(binds.get("query"))
    if binds.get("ids"):
        binds["ids"] = sorted(binds["ids"])
    return binds


def websearch(fts: str | None) -> str | None:
    """The engine's full-text queries ('"a" OR "b"', '"a" AND "b"', every token quoted) in
    websearch_to_tsquery's syntax, where OR is OR and words side by side are AND."""
    return fts.replace('" AND "', '" "') if fts else fts


@functools.cache
def _connection_class():
    """psycopg's Connection, turning the error of a connection the server dropped into
    `ServerGone`: a StoreError of one line (libpq says three) that is still an
    OperationalError, so what treats a server failure as never a turn's fault still does.
    Any other error (a lock timeout, a constraint) comes out as it was."""
    psycopg = _psycopg()

    class ServerGone(StoreError, psycopg.OperationalError):
        """The server dropped the connection; the store reconnects at its next call."""

    def gone(conn, exc):
        if isinstance(exc, ServerGone) or not (conn.broken or conn.closed):
            return None
        said = " ".join(str(exc).split())[:200] or type(exc).__name__
        return ServerGone(f"PostgreSQL dropped the connection ({masked(said)}); the next call reconnects")

    class Connection(psycopg.Connection):
        def execute(self, *args, **kwargs):
            try:
                return super().execute(*args, **kwargs)
            except psycopg.OperationalError as exc:
                lost = gone(self, exc)
                if lost is None:
                    raise
                raise lost from None

        @contextlib.contextmanager
        def transaction(self, *args, **kwargs):
            try:
                with super().transaction(*args, **kwargs) as tx:
                    yield tx
            except psycopg.OperationalError as exc:
                lost = gone(self, exc)
                if lost is None:
                    raise
                raise lost from None

    Connection.ServerGone = ServerGone
    return Connection


class PostgresStore(StoreCommon, Bookkeeping, Inspecting):
    """A connection to one PostgreSQL database (a DSN), upgraded to the current schema;
    or, `read_only`, one that never writes (nor upgrades it)."""

    dialect = "postgres"
    migrations = PG_MIGRATIONS

    def __init__(self, dsn: str, clock: Clock | None = None, timeout: float = 30.0, read_only: bool = False):
        self._dsn = str(dsn)
        self._closed = False  # closed by its owner: never reopened
        self.path = masked(self._dsn)  # what messages show; never the password
        self.clock = clock or system_clock
        self.timeout = timeout
        self.read_only = read_only
        self.holder = uuid.uuid4().hex[:12]  # who claims inbox turns through this connection
        self._common: set[tuple[str, int]] = set()  # full-text queries known to pass a cap
        self._lease_db = None  # the leases' own connection, opened by the first lease
        self.db = self._session(self.connect())
        if read_only:
            self._check_current()
        else:
            self.migrate()

    @property
    def db(self):
        """The store's connection, opened again when the server dropped it (a restart, a
        network cut): the call that met the drop got a one-line StoreError (`ServerGone`),
        the next one works on a new connection."""
        if (self._db.broken or self._db.closed) and not self._closed:
            self._db = self._session(self.connect())
        return self._db

    @db.setter
    def db(self, conn) -> None:
        self._db = conn

    def _session(self, conn):
        if self.read_only:
            conn.execute("SET default_transaction_read_only = on")
        return conn

    @property
    def busy_errors(self) -> tuple:
        """Errors of the server itself (unreachable, a lock or deadlock timeout, a failed
        serialisation): never a turn's fault."""
        return (_psycopg().OperationalError,)

    def connect(self):
        """A new autocommit connection with rows like sqlite3.Row and NUMERIC read as float."""
        psycopg = _psycopg()
        from psycopg.types.numeric import FloatLoader

        try:
            conn = _connection_class().connect(
                self._dsn, autocommit=True, row_factory=_rows, connect_timeout=10, application_name="lethe"
            )
        except psycopg.OperationalError as exc:
            reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise StoreError(f"cannot reach PostgreSQL at {self.path}: {masked(reason)}") from None
        conn.adapters.register_loader("numeric", FloatLoader)
        conn.execute(f"SET lock_timeout = {int(self.timeout * 1000)}")
        return conn

    def close(self) -> None:
        with contextlib.suppress(*self.busy_errors):  # a server gone keeps what it lost
            self.flush_deferred()
        self._closed = True
        if self._lease_db is not None:
            self._lease_db.close()
        self._db.close()

    def lease_connection(self):
        """The connection leases take, renew and release on: one per store, opened on first
        use and reopened when broken. A connection of its own, so a lease never waits on
        the store's transaction; kept, because a scheduler takes a lease at every tick and
        a new server connection costs a backend process each time."""
        if self._lease_db is None or self._lease_db.closed or self._lease_db.broken:
            self._lease_db = self.connect()
        return self._lease_db

    def reopen(self) -> "PostgresStore":
        """Another connection to the same database (a scheduler works on its own)."""
        return PostgresStore(self._dsn, self.clock, self.timeout, self.read_only)

    def make_way(self) -> None:
        """Between two ranges of a batched pass: nothing to do, PostgreSQL hands its locks
        out in the order they were asked for."""

    def giving_way(self):
        """Around a pass's one transaction: nothing (see make_way; on SQLite a waiting
        writer interrupts it, engine/store/sqlite/sqlite_wait.py)."""
        return contextlib.nullcontext()

    def writer_waits(self) -> bool:
        """Never asked here: a pass on PostgreSQL never gives way, so never runs in ranges
        but for `batch:`."""
        return False

    def interrupt(self) -> None:
        """Abort the statement running on this connection (its transaction rolls back)."""
        with contextlib.suppress(Exception):
            getattr(self.db, "cancel_safe", self.db.cancel)()

    @contextlib.contextmanager
    def transaction(
        self, fence=None, exclusive: bool = False, wait: float | None = None, kept_at_most: int | None = None
    ):
        """BEGIN ... COMMIT; anything raised inside rolls the whole thing back. `exclusive`:
        no other writer changes memories until the commit (readers are not held up).
        `wait`: seconds a statement in it waits for a lock, when not the store's timeout
        (after it, lock_not_available: `is_busy`). The writes `defer` kept run first (the
        first `kept_at_most` of them, when given: then see `keeps_more`).

        With a `fence` (a held pass lease), the commit first renews the lease inside this
        transaction; when the lease is no longer the holder's (another runner took it over)
        that raises and everything rolls back, so work done after a takeover never lands."""
        with self.db.transaction():
            if wait is not None:
                self.db.execute(
                    "SELECT set_config('lock_timeout', %s, true)", (f"{max(1, int(wait * 1000))}ms",)
                )
            if exclusive and not self.read_only:
                self.db.execute("LOCK TABLE memories IN SHARE ROW EXCLUSIVE MODE")
            kept = self._run_deferred(kept_at_most)
            yield self.db
            if fence is not None:
                self.renew_lease(fence)
        self._forget_deferred(kept)
        if fence is not None:
            fence.renewed()

    @contextlib.contextmanager
    def _briefly(self):
        """Kept writes wait KEEP_AFTER for a lock: a transaction that only touches the inbox
        must not wait behind a pass's lock on memories for a recall's access."""
        saved = self.db.execute("SELECT current_setting('lock_timeout')").fetchone()[0]
        self.db.execute("SELECT set_config('lock_timeout', %s, true)", (f"{int(KEEP_AFTER * 1000)}ms",))
        try:
            yield
        finally:
            self.db.execute("SELECT set_config('lock_timeout', %s, true)", (saved,))

    def is_busy(self, exc: BaseException) -> bool:
        """The error a statement meets when another transaction holds the lock it needs
        longer than it waited (lock_not_available)."""
        return getattr(exc, "sqlstate", None) == "55P03"

    def migrate(self) -> list[str]:
        """Run the migrations this database lacks, each in its own transaction under a
        transaction-level advisory lock (two processes may open a new database at once)."""
        if self._applied() >= {fn.__name__ for fn in PG_MIGRATIONS}:
            return []
        if self.db.execute("SELECT current_schema()").fetchone()[0] is None:
            path = self.db.execute("SHOW search_path").fetchone()[0]
            raise StoreError(
                f"{self.path}: no schema of its search_path ({path}) exists, so "
                "there is nowhere to create the store's tables; create it first "
                "(CREATE SCHEMA ...), or connect without the search_path option"
            )
        applied = []
        for fn in PG_MIGRATIONS:
            with self.db.transaction():
                self.db.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK_MIGRATE,))
                self.db.execute(
                    'CREATE TABLE IF NOT EXISTS lethe_migrations (name TEXT COLLATE "C" '
                    'PRIMARY KEY, applied_at TEXT COLLATE "C")'
                )
                if self.db.execute(
                    "SELECT 1 FROM lethe_migrations WHERE name = %s", (fn.__name__,)
                ).fetchone():
                    continue
                if "now" in inspect.signature(fn).parameters:
                    fn(self.db, now=self.now())
                else:
                    fn(self.db)
                self.db.execute("INSERT INTO lethe_migrations VALUES (%s, %s)", (fn.__name__, self.now()))
                applied.append(fn.__name__)
        return applied

    def _has_table(self, name: str) -> bool:
        return self.db.execute("SELECT to_regclass(%s)", (name,)).fetchone()[0] is not None

    def _applied(self) -> set[str]:
        if not self._has_table("lethe_migrations"):
            return set()
        return {r[0] for r in self.db.execute("SELECT name FROM lethe_migrations")}

    # -- compiled statements (engine.plan, postgres dialect) ----------------------------
    def run(self, st, namespace: str, now: str | None = None, **binds) -> int:
        """Execute one compiled statement; the number of rows it changed. An UPDATE of
        several memories by id first locks them in id order (an UPDATE locks rows in the
        order it finds them, which after earlier updates is not id order)."""
        if len(binds.get("ids") or ()) > 1 and st.kind is Kind.WRITE_MEMORIES:
            self.lock_memories(binds["ids"])
        cur = self.db.execute(st.sql, st.bind(now or self.now(), namespace, **_binds(binds)))
        return max(cur.rowcount, 0)

    def fetch(self, st, namespace: str, now: str | None = None, **binds) -> list[Row]:
        return self.db.execute(st.sql, st.bind(now or self.now(), namespace, **_binds(binds))).fetchall()

    def fetch_one(self, st, namespace: str, now: str | None = None, **binds):
        return self.db.execute(st.sql, st.bind(now or self.now(), namespace, **_binds(binds))).fetchone()

    # -- memories and their events ------------------------------------------------------
    def insert_memory(self, fields: dict) -> int:
        """Insert one row of `memories` from a mapping of column -> value (columns come from
        the engine's own field list, never from input)."""
        refuse_nul(fields.values())
        cols = list(fields)
        sql = (
            f"INSERT INTO memories ({', '.join(cols)}) VALUES ({', '.join('%s' for _ in cols)}) RETURNING id"
        )
        return self.db.execute(sql, [fields[c] for c in cols]).fetchone()[0]

    def update_memory(self, namespace: str, memory_id: int, fields: dict) -> int:
        """Set some fields of one active memory (named from the engine's own list, never
        from input), in the caller's transaction; how many rows changed (0 or 1)."""
        cols = [c for c in fields if c in self.UPDATABLE]
        if not cols:
            return 0
        refuse_nul([fields[c] for c in cols])
        sql = (
            f"UPDATE memories SET {', '.join(f'{c} = %s' for c in cols)} "
            "WHERE namespace = %s AND id = %s AND status = 'active'"
        )
        return self.db.execute(sql, [fields[c] for c in cols] + [namespace, memory_id]).rowcount

    def event(self, memory_id: int | None, event_type: str, detail=None, said_at: str | None = None) -> None:
        if detail is not None and not isinstance(detail, str):
            detail = json.dumps(detail, ensure_ascii=False, sort_keys=True)
        self._x(
            "INSERT INTO memory_events (memory_id, event_type, detail, occurred_at, "
            "said_at) VALUES (?, ?, ?, ?, ?)",
            (memory_id, event_type, detail, self.now(), said_at or self.said_at),
        )

    def statuses(self, namespace: str, ids: list[int]) -> dict[int, tuple[str, int | None]]:
        """id -> (status, merged_into) of some memories of a namespace."""
        rows = self._x(
            "SELECT id, status, merged_into FROM memories WHERE namespace = ? AND id = ANY(?)",
            (namespace, list(ids)),
        )
        return {r[0]: (r[1], r[2]) for r in rows}

    def lock_memories(self, ids: list[int]) -> None:
        """Hold these memories until the commit, locked in id order: two turns superseding
        or reinforcing the same memories in different orders wait, never deadlock."""
        if ids:
            # the table lock a write takes, first: FOR UPDATE alone takes a weaker one, and
            # a pass's lock granted in between would wait on our rows while we wait on it
            self.db.execute("LOCK TABLE memories IN ROW EXCLUSIVE MODE")
            self._x(
                "SELECT id FROM memories WHERE id = ANY(?) ORDER BY id FOR UPDATE", (sorted(set(ids)),)
            ).fetchall()

    def events(self, memory_id: int) -> list[Row]:
        return self._x("SELECT * FROM memory_events WHERE memory_id = ? ORDER BY id", (memory_id,)).fetchall()

    def counts(self, namespace: str) -> dict[str, int]:
        rows = self._x(
            "SELECT status, count(*) FROM memories WHERE namespace = ? GROUP BY status", (namespace,)
        )
        return {r[0]: r[1] for r in rows}

    def memories(self, namespace: str) -> list[Row]:
        """Every memory of a namespace, oldest first (scenario checks, dumps)."""
        return self._x("SELECT * FROM memories WHERE namespace = ? ORDER BY id", (namespace,)).fetchall()

    def list_memories(self, namespace: str, statuses: tuple[str, ...] | None, limit: int) -> list[Row]:
        """Memories of a namespace with one of `statuses` (None: any), newest first."""
        if statuses is None:
            return self._x(
                "SELECT * FROM memories WHERE namespace = ? ORDER BY id DESC LIMIT ?", (namespace, limit)
            ).fetchall()
        return self._x(
            "SELECT * FROM memories WHERE namespace = ? AND status = ANY(?) ORDER BY id DESC LIMIT ?",
            (namespace, list(statuses), limit),
        ).fetchall()

    def namespaces(self) -> list[str]:
        """Every namespace that holds a memory, in order (the memories_recall index)."""
        return [r[0] for r in self._x("SELECT DISTINCT namespace FROM memories ORDER BY namespace")]

    def keyed(self, namespace: str, key: str) -> Row | None:
        """The active memory a caller stored under `key` (its newest `keyed` event), with
        that event's detail and time as `keyed` and `keyed_at`."""
        return self._x(
            "SELECT m.*, e.detail AS keyed, e.occurred_at AS keyed_at FROM memories m "
            "JOIN memory_events e ON e.memory_id = m.id WHERE m.namespace = ? AND "
            # CASE: other events' detail is free text, which a cast to json would refuse
            "m.status = 'active' AND CASE WHEN e.event_type = 'keyed' THEN "
            "e.detail::json ->> 'key' END = ? ORDER BY e.id DESC LIMIT 1",
            (namespace, key),
        ).fetchone()

    def match_count(self, fts_query: str, cap: int) -> int:
        """How many memories match a full-text query, counting at most `cap + 1`. A GIN
        scan reads a word's whole posting list before LIMIT applies, so a query found to
        pass the cap is remembered: memories are never deleted, it stays past it."""
        if (fts_query, cap) in self._common:
            return cap + 1
        n = self._x(
            f"SELECT count(*) FROM (SELECT 1 FROM memories_fts WHERE tsv @@ "
            f"websearch_to_tsquery('{SEARCH_CONFIG}', ?) LIMIT ?) AS hits",
            (websearch(fts_query), cap + 1),
        ).fetchone()[0]
        if n > cap:
            if len(self._common) > 100_000:  # bounded: forget and learn again
                self._common.clear()
            self._common.add((fts_query, cap))
        return n

    # -- the stored rank ----------------------------------------------------------------
    def rank_signature(self, namespace: str) -> str | None:
        row = self._x("SELECT rank_formula FROM policy_state WHERE namespace = ?", (namespace,)).fetchone()
        return row[0] if row else None

    def rebuild_rank(self, st, namespace: str, policy: str, signature: str, ranged=None) -> None:
        """Recompute a namespace's stored ranks and remember the formula they came from;
        processes opening the database at once take turns, and only the first rebuilds."""
        with self.transaction():
            self._x("SELECT pg_advisory_xact_lock(hashtext(?))", ("lethe.rank:" + namespace,))
            if self.rank_signature(namespace) == signature:
                return
            self.run(st, namespace)
            self._x(
                "INSERT INTO policy_state (namespace, policy, rank_formula, updated_at) "
                "VALUES (?, ?, ?, ?) ON CONFLICT (namespace) DO UPDATE SET "
                "policy = excluded.policy, rank_formula = excluded.rank_formula, "
                "updated_at = excluded.updated_at",
                (namespace, policy, signature, self.now()),
            )

    @contextlib.contextmanager
    def rewriting(self, reach, columns, namespace: str, now: str, id_range=(0, 0)):
        """A pass's rows are updated with their indexes in place: unlike SQLite, dropping
        an index here takes an ACCESS EXCLUSIVE lock on memories, which would stop every
        other agent's reads and writes on the server for the whole pass. Yields None: the
        planner, which keeps statistics, chooses how to read the rows."""
        yield None

    # -- leases ---------------------------------------------------------------------------
    def lease(self, namespace: str, ttl, holder: str, wait: float = 1.0) -> PostgresLease:
        """The namespace's pass lease, on a connection of its own."""
        return PostgresLease(self, namespace, self.clock, ttl, holder, wait)
