"""The PostgreSQL store: many agents and machines on one server, behind the same methods as
`SqliteStore` (its public methods are the store interface; this class mirrors them one for
one, in the same order, so a method added there is ported here by copying it).

Bookkeeping SQL is written as in `sqlite.py`, with `?` placeholders, and turned into
psycopg's `%s` by `_q` (so most methods are the SQLite text verbatim); compiled statements
(`engine.plan` with the postgres dialect) already use `%s`. What differs on a server:
- a turn is claimed before it is judged (`claim_turns`: `FOR UPDATE SKIP LOCKED`), and
  `turn()` locks its row, so several workers share one inbox and apply each turn once;
- a pass's transaction (`transaction(exclusive=True)`) locks `memories` against other
  writers (readers go on), as SQLite's write lock does, so a rule's events and its update
  see the same rows;
- while this store's runner holds the pass lease, every commit first checks the lease's
  fencing token (`postgres_lease.py` says why a row and not an advisory lock).
Needs the `postgres` extra (psycopg 3).
"""
from __future__ import annotations

import contextlib
import datetime as dt
import json
import re
import uuid

from ..clock import Clock, iso, system_clock
from ..errors import StoreError
from .postgres_lease import LeaseLost, PostgresLease
from .postgres_schema import PG_MIGRATIONS, SEARCH_CONFIG

CLAIM = dt.timedelta(minutes=5)  # how long a worker may judge a claimed turn
_LOCK_MIGRATE = 4_211_001        # advisory transaction lock keys (proxy-safe: one transaction)


def is_dsn(target: str) -> bool:
    return str(target).startswith(("postgresql://", "postgres://"))


def masked(dsn: str) -> str:
    """The DSN with its password replaced by ***, for messages."""
    dsn = re.sub(r"(://[^:/@?]*:)[^@]*@", r"\1***@", dsn)
    return re.sub(r"(password=)[^&\s]*", r"\1***", dsn)


def _psycopg():
    try:
        import psycopg
    except ImportError:
        raise StoreError("PostgreSQL needs the postgres extra: pip install 'lethe[postgres]'") from None
    return psycopg


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


_PLACEHOLDERS: dict[str, str] = {}


def _q(sql: str) -> str:
    """SQLite-style `?` placeholders as psycopg's `%s` (and a literal % as %%)."""
    out = _PLACEHOLDERS.get(sql)
    if out is None:
        out = _PLACEHOLDERS[sql] = sql.replace("%", "%%").replace("?", "%s")
    return out


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


def _refuse_nul(values) -> None:
    if any(isinstance(v, str) and "\x00" in v for v in values):
        raise StoreError("PostgreSQL text cannot hold NUL characters (\\x00); remove them first")


class PostgresStore:
    """A connection to one PostgreSQL database (a DSN), upgraded to the current schema."""

    dialect = "postgres"

    def __init__(self, dsn: str, clock: Clock | None = None, timeout: float = 30.0):
        self._dsn = str(dsn)
        self.path = masked(self._dsn)  # what messages show; never the password
        self.clock = clock or system_clock
        self.timeout = timeout
        self.holder = uuid.uuid4().hex[:12]  # who claims inbox turns through this connection
        self.fence: PostgresLease | None = None
        self._common: set[tuple[str, int]] = set()  # full-text queries known to pass a cap
        self.db = self.connect()
        self.migrate()

    def connect(self):
        """A new autocommit connection with rows like sqlite3.Row and NUMERIC read as float."""
        psycopg = _psycopg()
        from psycopg.types.numeric import FloatLoader
        try:
            conn = psycopg.connect(self._dsn, autocommit=True, row_factory=_rows,
                                   connect_timeout=10, application_name="lethe")
        except psycopg.OperationalError as exc:
            reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise StoreError(f"cannot reach PostgreSQL at {self.path}: {masked(reason)}") from None
        conn.adapters.register_loader("numeric", FloatLoader)
        conn.execute(f"SET lock_timeout = {int(self.timeout * 1000)}")
        return conn

    def now(self) -> str:
        return iso(self.clock())

    def close(self) -> None:
        self.db.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def reopen(self) -> "PostgresStore":
        """Another connection to the same database (a scheduler works on its own)."""
        return PostgresStore(self._dsn, self.clock, self.timeout)

    def interrupt(self) -> None:
        """Abort the statement running on this connection (its transaction rolls back)."""
        with contextlib.suppress(Exception):
            getattr(self.db, "cancel_safe", self.db.cancel)()

    @contextlib.contextmanager
    def transaction(self, exclusive: bool = False):
        """BEGIN ... COMMIT; anything raised inside rolls the whole thing back. `exclusive`:
        no other writer changes memories until the commit (readers are not held up)."""
        with self.db.transaction():
            if exclusive:
                self.db.execute("LOCK TABLE memories IN SHARE ROW EXCLUSIVE MODE")
            yield self.db
            if self.fence is not None:
                self._check_fence()

    def _check_fence(self) -> None:
        cur = self.db.execute(*self.fence.renew_sql())
        if cur.rowcount != 1:
            raise LeaseLost(f"the pass lease on namespace '{self.fence.namespace}' was taken "
                            "over while this run held it: its last transaction rolled back")

    def migrate(self) -> list[str]:
        """Run the migrations this database lacks, each in its own transaction under a
        transaction-level advisory lock (two processes may open a new database at once)."""
        if self._applied() >= {fn.__name__ for fn in PG_MIGRATIONS}:
            return []
        applied = []
        for fn in PG_MIGRATIONS:
            with self.db.transaction():
                self.db.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK_MIGRATE,))
                self.db.execute('CREATE TABLE IF NOT EXISTS lethe_migrations (name TEXT COLLATE "C" '
                                'PRIMARY KEY, applied_at TEXT COLLATE "C")')
                if self.db.execute("SELECT 1 FROM lethe_migrations WHERE name = %s",
                                   (fn.__name__,)).fetchone():
                    continue
                fn(self.db)
                self.db.execute("INSERT INTO lethe_migrations VALUES (%s, %s)", (fn.__name__, self.now()))
                applied.append(fn.__name__)
        return applied

    def _applied(self) -> set[str]:
        if self.db.execute("SELECT to_regclass('lethe_migrations')").fetchone()[0] is None:
            return set()
        return {r[0] for r in self.db.execute("SELECT name FROM lethe_migrations")}

    def _x(self, sql: str, params=()):
        return self.db.execute(_q(sql), params)

    # -- compiled statements (engine.plan, postgres dialect) ----------------------------
    def run(self, st, namespace: str, now: str | None = None, **binds) -> int:
        """Execute one compiled statement; the number of rows it changed. An UPDATE of
        several memories by id first locks them in id order (an UPDATE locks rows in the
        order it finds them, which after earlier updates is not id order)."""
        if len(binds.get("ids") or ()) > 1 and st.sql.startswith("UPDATE memories"):
            self.lock_memories(binds["ids"])
        cur = self.db.execute(st.sql, st.bind(now or self.now(), namespace, **_binds(binds)))
        return max(cur.rowcount, 0)

    def fetch(self, st, namespace: str, now: str | None = None, **binds) -> list[Row]:
        return self.db.execute(st.sql, st.bind(now or self.now(), namespace, **_binds(binds))).fetchall()

    def fetch_one(self, st, namespace: str, now: str | None = None, **binds):
        return self.db.execute(st.sql, st.bind(now or self.now(), namespace, **_binds(binds))).fetchone()

    # -- memories and their events ------------------------------------------------------
    def insert_memory(self, *args) -> int:
        """Insert one row of `memories` from a mapping of column -> value (columns come from
        the engine's own field list, never from input)."""
        fields = args[-1]
        _refuse_nul(fields.values())
        cols = list(fields)
        sql = (f"INSERT INTO memories ({', '.join(cols)}) "
               f"VALUES ({', '.join('%s' for _ in cols)}) RETURNING id")
        return self.db.execute(sql, [fields[c] for c in cols]).fetchone()[0]

    def event(self, memory_id: int | None, event_type: str, detail=None) -> None:
        if detail is not None and not isinstance(detail, str):
            detail = json.dumps(detail, ensure_ascii=False, sort_keys=True)
        self._x("INSERT INTO memory_events (memory_id, event_type, detail, occurred_at) "
                "VALUES (?, ?, ?, ?)", (memory_id, event_type, detail, self.now()))

    def get(self, memory_id: int, namespace: str | None = None) -> Row | None:
        """One memory, with its scene's summary; None when absent (or in another namespace)."""
        sql = ("SELECT memories.*, scenes.summary AS scene_summary FROM memories LEFT JOIN scenes "
               "ON scenes.namespace = memories.namespace AND scenes.scene = memories.scene "
               "WHERE memories.id = ?")
        if namespace is None:
            return self._x(sql, (memory_id,)).fetchone()
        return self._x(sql + " AND memories.namespace = ?", (memory_id, namespace)).fetchone()

    def lock_memories(self, ids: list[int]) -> None:
        """Hold these memories until the commit, locked in id order: two turns superseding
        or reinforcing the same memories in different orders wait, never deadlock."""
        if ids:
            # the table lock a write takes, first: FOR UPDATE alone takes a weaker one, and
            # a pass's lock granted in between would wait on our rows while we wait on it
            self.db.execute("LOCK TABLE memories IN ROW EXCLUSIVE MODE")
            self._x("SELECT id FROM memories WHERE id = ANY(?) ORDER BY id FOR UPDATE",
                    (sorted(set(ids)),)).fetchall()

    def events(self, memory_id: int) -> list[Row]:
        return self._x("SELECT * FROM memory_events WHERE memory_id = ? ORDER BY id",
                       (memory_id,)).fetchall()

    def counts(self, namespace: str) -> dict[str, int]:
        rows = self._x("SELECT status, count(*) FROM memories WHERE namespace = ? "
                       "GROUP BY status", (namespace,))
        return {r[0]: r[1] for r in rows}

    def memories(self, namespace: str) -> list[Row]:
        """Every memory of a namespace, oldest first (scenario checks, dumps)."""
        return self._x("SELECT * FROM memories WHERE namespace = ? ORDER BY id", (namespace,)).fetchall()

    def list_memories(self, namespace: str, statuses: tuple[str, ...] | None,
                      limit: int) -> list[Row]:
        """Memories of a namespace with one of `statuses` (None: any), newest first."""
        if statuses is None:
            return self._x("SELECT * FROM memories WHERE namespace = ? ORDER BY id DESC LIMIT ?",
                           (namespace, limit)).fetchall()
        return self._x("SELECT * FROM memories WHERE namespace = ? AND status = ANY(?) "
                       "ORDER BY id DESC LIMIT ?", (namespace, list(statuses), limit)).fetchall()

    def changes(self, namespace: str) -> list[Row]:
        """Every memory no longer active, with what replaced or absorbed it and when."""
        return self._x(
            "SELECT m.id, m.content, m.status, coalesce(r.content, g.content) AS replaced_by, "
            "coalesce(m.contradicted_by, m.merged_into) AS replaced_by_id, "
            "(SELECT occurred_at FROM memory_events e WHERE e.memory_id = m.id "
            " ORDER BY e.id DESC LIMIT 1) AS at "
            "FROM memories m LEFT JOIN memories r ON r.id = m.contradicted_by "
            "LEFT JOIN memories g ON g.id = m.merged_into "
            "WHERE m.namespace = ? AND m.status != 'active' ORDER BY m.id", (namespace,)).fetchall()

    def match_count(self, fts_query: str, cap: int) -> int:
        """How many memories match a full-text query, counting at most `cap + 1`. A GIN
        scan reads a word's whole posting list before LIMIT applies, so a query found to
        pass the cap is remembered: memories are never deleted, it stays past it."""
        if (fts_query, cap) in self._common:
            return cap + 1
        n = self._x(f"SELECT count(*) FROM (SELECT 1 FROM memories_fts WHERE tsv @@ "
                       f"websearch_to_tsquery('{SEARCH_CONFIG}', ?) LIMIT ?) AS hits",
                       (websearch(fts_query), cap + 1)).fetchone()[0]
        if n > cap:
            if len(self._common) > 100_000:  # bounded: forget and learn again
                self._common.clear()
            self._common.add((fts_query, cap))
        return n

    # -- the stored rank ----------------------------------------------------------------
    def rank_signature(self, namespace: str) -> str | None:
        row = self._x("SELECT rank_formula FROM policy_state WHERE namespace = ?", (namespace,)).fetchone()
        return row[0] if row else None

    def rebuild_rank(self, st, namespace: str, policy: str, signature: str) -> None:
        """Recompute a namespace's stored ranks and remember the formula they came from;
        processes opening the database at once take turns, and only the first rebuilds."""
        with self.transaction():
            self._x("SELECT pg_advisory_xact_lock(hashtext(?))", ("lethe.rank:" + namespace,))
            if self.rank_signature(namespace) == signature:
                return
            self.run(st, namespace)
            self._x("INSERT INTO policy_state (namespace, policy, rank_formula, updated_at) "
                    "VALUES (?, ?, ?, ?) ON CONFLICT (namespace) DO UPDATE SET "
                    "policy = excluded.policy, rank_formula = excluded.rank_formula, "
                    "updated_at = excluded.updated_at", (namespace, policy, signature, self.now()))

    # -- the inbox: turns saved before any model is asked -------------------------------
    def add_turn(self, namespace: str, user: str, assistant: str) -> int:
        """Save a turn, claimed by us: the writer judging it now is not raced by a retry."""
        _refuse_nul((user, assistant))
        return self._x("INSERT INTO inbox (namespace, user_text, assistant_text, created_at, "
                       "updated_at, claimed_by, claimed_until) VALUES (?, ?, ?, ?, ?, ?, ?) "
                       "RETURNING id", (namespace, user, assistant, self.now(), self.now(),
                                        self.holder, iso(self.clock() + CLAIM))).fetchone()[0]

    def turn(self, turn_id: int) -> Row | None:
        """The inbox row; inside a transaction it stays locked until the commit, so a turn
        two workers finish at once is applied by the first and only read by the second."""
        return self._x("SELECT * FROM inbox WHERE id = ? FOR UPDATE", (turn_id,)).fetchone()

    def turn_failed(self, turn_id: int, error: str) -> None:
        self._x("UPDATE inbox SET attempts = attempts + 1, last_error = ?, updated_at = ?, "
                "claimed_by = NULL, claimed_until = NULL WHERE id = ?",
                (error[:500], self.now(), turn_id))

    def close_turn(self, turn_id: int, status: str, memory_ids: list[int]) -> None:
        """Mark a judged turn done (or dropped), in the caller's transaction."""
        self._x("UPDATE inbox SET status = ?, memory_ids = ?, attempts = attempts + 1, "
                "updated_at = ?, claimed_by = NULL, claimed_until = NULL WHERE id = ?",
                (status, json.dumps(memory_ids), self.now(), turn_id))

    def pending(self, namespace: str) -> list[dict]:
        rows = self._x("SELECT id, user_text, assistant_text, attempts, last_error, "
                       "created_at FROM inbox WHERE namespace = ? AND status = 'pending' "
                       "ORDER BY id", (namespace,))
        return [dict(r) for r in rows]

    def pending_ids(self, namespace: str, limit: int) -> list[int]:
        return [r[0] for r in self._x(
            "SELECT id FROM inbox WHERE namespace = ? AND status = 'pending' ORDER BY id LIMIT ?",
            (namespace, limit))]

    def claim_turns(self, namespace: str, limit: int) -> list[int]:
        """Pending turns nobody is judging, oldest first, claimed for CLAIM: workers sharing
        the inbox skip each other's rows (SKIP LOCKED) and each other's claims."""
        now = self.now()
        rows = self._x(
            "UPDATE inbox SET claimed_by = ?, claimed_until = ? WHERE id IN (SELECT id FROM inbox "
            "WHERE namespace = ? AND status = 'pending' AND (claimed_until IS NULL OR "
            "claimed_until <= ? OR claimed_by = ?) ORDER BY id LIMIT ? FOR UPDATE SKIP LOCKED) "
            "RETURNING id", (self.holder, iso(self.clock() + CLAIM), namespace, now, self.holder,
                             limit)).fetchall()
        return sorted(r[0] for r in rows)

    def pending_count(self, namespace: str) -> int:
        return self._x("SELECT count(*) FROM inbox WHERE namespace = ? AND status = 'pending'",
                       (namespace,)).fetchone()[0]

    # -- pass runs and batched progress -------------------------------------------------
    def last_runs(self, namespace: str) -> dict[str, str]:
        return {r[0]: r[1] for r in self._x(
            "SELECT pass, last_run_at FROM pass_runs WHERE namespace = ?", (namespace,))}

    def record_run(self, namespace: str, name: str, now: str, changed: int) -> None:
        self._x("INSERT INTO pass_runs (namespace, pass, last_run_at, rows_changed) "
                "VALUES (?, ?, ?, ?) ON CONFLICT (namespace, pass) DO UPDATE SET "
                "last_run_at = excluded.last_run_at, rows_changed = excluded.rows_changed",
                (namespace, name, now, changed))

    def unfinished(self, namespace: str) -> set[str]:
        return {r[0] for r in self._x("SELECT pass FROM pass_progress WHERE namespace = ?",
                                      (namespace,))}

    def progress(self, namespace: str, name: str) -> Row | None:
        return self._x("SELECT cursor, run_now, changed FROM pass_progress WHERE "
                       "namespace = ? AND pass = ?", (namespace, name)).fetchone()

    def save_progress(self, namespace: str, name: str, cursor: int, now: str, changed: int) -> None:
        self._x("INSERT INTO pass_progress (namespace, pass, cursor, run_now, changed) "
                "VALUES (?, ?, ?, ?, ?) ON CONFLICT (namespace, pass) DO UPDATE SET "
                "cursor = excluded.cursor, changed = excluded.changed",
                (namespace, name, cursor, now, changed))

    def clear_progress(self, namespace: str, name: str) -> None:
        self._x("DELETE FROM pass_progress WHERE namespace = ? AND pass = ?", (namespace, name))

    def id_bounds(self, namespace: str) -> tuple[int, int]:
        lo, hi = self._x("SELECT min(id), max(id) FROM memories WHERE namespace = ?",
                         (namespace,)).fetchone()
        return lo or 0, hi or 0

    # -- model calls ----------------------------------------------------------------------
    def log_call(self, namespace: str, step: str, model: str, provider: str | None,
                 prompt_tokens: int, completion_tokens: int, latency_ms: float, outcome: str,
                 detail: str | None) -> None:
        self._x("INSERT INTO model_calls (namespace, step, model, provider, prompt_tokens, "
                "completion_tokens, latency_ms, outcome, detail, occurred_at) "
                "VALUES (?,?,?,?,?,?,?,?,?,?)",
                (namespace, step, model, provider, prompt_tokens, completion_tokens, latency_ms,
                 outcome, detail, self.now()))

    def costs(self, namespace: str) -> list[dict]:
        """Every logged model call summed per step and model: calls, tokens, latency, outcomes."""
        return [dict(r) for r in self._x(
            "SELECT step, model, count(*) AS calls, sum(prompt_tokens)::bigint AS prompt_tokens, "
            "sum(completion_tokens)::bigint AS completion_tokens, "
            "round(avg(latency_ms)::numeric, 1) AS avg_latency_ms, "
            "count(*) FILTER (WHERE outcome = 'ok') AS ok, "
            "count(*) FILTER (WHERE outcome <> 'ok') AS failed FROM model_calls "
            "WHERE namespace = ? GROUP BY step, model ORDER BY step, model", (namespace,))]

    def model_use(self, namespace: str) -> dict:
        """Model calls and tokens: totals, and calls by step and by provider."""
        total = self._x("SELECT count(*), coalesce(sum(prompt_tokens), 0)::bigint, "
                        "coalesce(sum(completion_tokens), 0)::bigint FROM model_calls "
                        "WHERE namespace = ?", (namespace,)).fetchone()
        by_step = {r[0]: r[1] for r in self._x(
            "SELECT step, count(*) FROM model_calls WHERE namespace = ? GROUP BY step ORDER BY step",
            (namespace,))}
        by_provider = {r[0] or "none": r[1] for r in self._x(
            "SELECT provider, count(*) FROM model_calls WHERE namespace = ? GROUP BY provider "
            "ORDER BY provider", (namespace,))}
        return {"calls": total[0], "prompt_tokens": total[1], "completion_tokens": total[2],
                "tokens": total[1] + total[2], "by_step": by_step, "by_provider": by_provider}

    # -- scenes (seed C) ------------------------------------------------------------------
    def scene_cells(self, namespace: str, scene: str, limit: int = 20) -> list[Row]:
        return self._x(
            "SELECT content, kind, importance FROM memories WHERE namespace = ? AND scene = ? "
            "AND status = 'active' ORDER BY importance DESC, id DESC LIMIT ?",
            (namespace, scene, limit)).fetchall()

    def save_scene(self, namespace: str, scene: str, summary: str) -> None:
        self._x("INSERT INTO scenes (namespace, scene, summary, updated_at) VALUES (?, ?, ?, ?) "
                "ON CONFLICT (namespace, scene) DO UPDATE SET summary = excluded.summary, "
                "updated_at = excluded.updated_at", (namespace, scene, summary, self.now()))

    def scenes(self, namespace: str) -> dict[str, str]:
        return {r[0]: r[1] for r in self._x(
            "SELECT scene, summary FROM scenes WHERE namespace = ? ORDER BY scene", (namespace,))}

    # -- leases ---------------------------------------------------------------------------
    def lease(self, namespace: str, ttl, holder: str, wait: float = 1.0) -> PostgresLease:
        """The namespace's pass lease, on a connection of its own; while it is held, every
        transaction of this store checks it before committing."""
        return PostgresLease(self, namespace, self.clock, ttl, holder)

    def renew_lease(self, lease: PostgresLease) -> None:
        """Extend `lease` from this connection, inside the transaction running now."""
        if self.db.execute(*lease.renew_sql()).rowcount != 1:
            raise LeaseLost(f"the pass lease on namespace '{lease.namespace}' was taken over")
