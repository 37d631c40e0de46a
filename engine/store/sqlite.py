"""The SQLite store: one file, WAL and a busy timeout always on, the migrations list, and
every bookkeeping query the engine needs (inbox, pass runs, model calls, leases, scenes,
history, costs).

Policy-driven statements (passes, recall, supersede, reinforce, merge, ...) are compiled by
`engine.plan` and executed here through `run`, `fetch` and `fetch_one`: outside this
package nothing in the engine writes SQL text or calls `execute`. A status change and its
event are written in one transaction (`with store.transaction(): ...`).
"""
from __future__ import annotations

import contextlib
import json
import math
import sqlite3

from ..clock import Clock, iso, system_clock
from ..errors import StoreError
from .lease import SqliteLease
from .migrations import MIGRATIONS, RECALL_INDEX
from .vectors import VectorIndex, driver, load_extension


class SqliteStore(VectorIndex):
    """A connection to one database file, upgraded to the current schema on open.
    `vectors=True` (a policy with an embedding model) loads the sqlite-vec extension."""

    dialect = "sqlite"

    def __init__(self, path: str, clock: Clock | None = None, timeout: float = 30.0,
                 vectors: bool = False):
        self.path = str(path)
        self.clock = clock or system_clock
        self.timeout = timeout
        self.vectors = vectors
        sql = driver(vectors)
        try:
            self.db = sql.connect(self.path, timeout=timeout, isolation_level=None,
                                  check_same_thread=False)
            self.db.row_factory = sql.Row
            if vectors:
                load_extension(self.db)
            self.db.execute(f"PRAGMA busy_timeout = {int(timeout * 1000)}")
            if self.db.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
                self.db.execute("PRAGMA journal_mode = WAL")
            self.db.execute("PRAGMA synchronous = NORMAL")
            # a pass rewrites index entries all over the table: a 64 MiB page cache halves
            # a million-row decay (measured in bench/)
            self.db.execute("PRAGMA cache_size = -65536")
            _ensure_math(self.db)
            self.migrate()
        except sql.DatabaseError as exc:
            raise StoreError(f"cannot open {self.path}: {exc}") from None

    def now(self) -> str:
        return iso(self.clock())

    def close(self) -> None:
        self.db.close()

    def reopen(self) -> "SqliteStore":
        """Another connection to the same file (a scheduler works on its own)."""
        return SqliteStore(self.path, self.clock, self.timeout, self.vectors)

    def interrupt(self) -> None:
        """Abort the statement running on this connection (its transaction rolls back)."""
        try:
            self.db.interrupt()
        except (sqlite3.ProgrammingError, driver(self.vectors).ProgrammingError):
            # closed meanwhile: nothing is running
            pass

    @contextlib.contextmanager
    def transaction(self):
        """BEGIN IMMEDIATE ... COMMIT; anything raised inside rolls the whole thing back."""
        self.db.execute("BEGIN IMMEDIATE")
        try:
            yield self.db
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        self.db.execute("COMMIT")

    def migrate(self) -> list[str]:
        """Run the migrations this file lacks. An up-to-date file is only read: opening it
        starts no write transaction, so readers never wait behind a writer."""
        if self._applied() >= {fn.__name__ for fn in MIGRATIONS}:
            return []
        self.db.execute("""CREATE TABLE IF NOT EXISTS lethe_migrations (
            name TEXT PRIMARY KEY, applied_at TEXT)""")
        applied = []
        for fn in MIGRATIONS:
            with self.transaction() as db:
                # re-checked inside the write lock: two processes may open a new file at once
                if db.execute("SELECT 1 FROM lethe_migrations WHERE name = ?",
                              (fn.__name__,)).fetchone():
                    continue
                fn(db)
                db.execute("INSERT INTO lethe_migrations VALUES (?, ?)", (fn.__name__, self.now()))
                applied.append(fn.__name__)
        return applied

    def _applied(self) -> set[str]:
        if not self.db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND "
                               "name = 'lethe_migrations'").fetchone():
            return set()
        return {r[0] for r in self.db.execute("SELECT name FROM lethe_migrations")}

    # -- compiled statements (engine.plan) --------------------------------------------
    def run(self, st, namespace: str, now: str | None = None, **binds) -> int:
        """Execute one compiled statement; the number of rows it changed."""
        cur = self.db.execute(st.sql, st.bind(now or self.now(), namespace, **binds))
        return max(cur.rowcount, 0)

    def fetch(self, st, namespace: str, now: str | None = None, **binds) -> list[sqlite3.Row]:
        return self.db.execute(st.sql, st.bind(now or self.now(), namespace, **binds)).fetchall()

    def fetch_one(self, st, namespace: str, now: str | None = None, **binds):
        return self.db.execute(st.sql, st.bind(now or self.now(), namespace, **binds)).fetchone()

    # -- memories and their events ------------------------------------------------------
    def insert_memory(self, *args) -> int:
        """Insert one row of `memories` from a mapping of column -> value (columns come from
        the engine's own field list, never from input)."""
        fields = args[-1]  # (fields) or, as tests call it, (connection, fields)
        cols = list(fields)
        sql = (f"INSERT INTO memories ({', '.join(cols)}) "
               f"VALUES ({', '.join('?' for _ in cols)})")
        return self.db.execute(sql, [fields[c] for c in cols]).lastrowid

    def event(self, memory_id: int | None, event_type: str, detail=None) -> None:
        if detail is not None and not isinstance(detail, str):
            detail = json.dumps(detail, ensure_ascii=False, sort_keys=True)
        self.db.execute("INSERT INTO memory_events (memory_id, event_type, detail, occurred_at) "
                        "VALUES (?, ?, ?, ?)", (memory_id, event_type, detail, self.now()))

    def get(self, memory_id: int, namespace: str | None = None) -> sqlite3.Row | None:
        """One memory, with its scene's summary; None when absent (or in another namespace)."""
        sql = ("SELECT memories.*, scenes.summary AS scene_summary FROM memories LEFT JOIN scenes "
               "ON scenes.namespace = memories.namespace AND scenes.scene = memories.scene "
               "WHERE memories.id = ?")
        if namespace is None:
            return self.db.execute(sql, (memory_id,)).fetchone()
        return self.db.execute(sql + " AND memories.namespace = ?", (memory_id, namespace)).fetchone()

    def events(self, memory_id: int) -> list[sqlite3.Row]:
        return self.db.execute("SELECT * FROM memory_events WHERE memory_id = ? ORDER BY id",
                               (memory_id,)).fetchall()

    def counts(self, namespace: str) -> dict[str, int]:
        rows = self.db.execute("SELECT status, count(*) FROM memories WHERE namespace = ? "
                               "GROUP BY status", (namespace,))
        return {r[0]: r[1] for r in rows}

    def memories(self, namespace: str) -> list[sqlite3.Row]:
        """Every memory of a namespace, oldest first (scenario checks, dumps)."""
        return self.db.execute("SELECT * FROM memories WHERE namespace = ? ORDER BY id",
                               (namespace,)).fetchall()

    def list_memories(self, namespace: str, statuses: tuple[str, ...] | None,
                      limit: int) -> list[sqlite3.Row]:
        """Memories of a namespace with one of `statuses` (None: any), newest first."""
        if statuses is None:
            return self.db.execute("SELECT * FROM memories WHERE namespace = ? ORDER BY id DESC "
                                   "LIMIT ?", (namespace, limit)).fetchall()
        return self.db.execute("SELECT * FROM memories WHERE namespace = ? AND status IN "
                               "(SELECT value FROM json_each(?)) ORDER BY id DESC LIMIT ?",
                               (namespace, json.dumps(list(statuses)), limit)).fetchall()

    def changes(self, namespace: str) -> list[sqlite3.Row]:
        """Every memory no longer active, with what replaced or absorbed it and when."""
        return self.db.execute(
            "SELECT m.id, m.content, m.status, coalesce(r.content, g.content) AS replaced_by, "
            "coalesce(m.contradicted_by, m.merged_into) AS replaced_by_id, "
            "(SELECT occurred_at FROM memory_events e WHERE e.memory_id = m.id "
            " ORDER BY e.id DESC LIMIT 1) AS at "
            "FROM memories m LEFT JOIN memories r ON r.id = m.contradicted_by "
            "LEFT JOIN memories g ON g.id = m.merged_into "
            "WHERE m.namespace = ? AND m.status != 'active' ORDER BY m.id", (namespace,)).fetchall()

    def match_count(self, fts_query: str, cap: int) -> int:
        """How many memories match a full-text query, counting at most `cap + 1`."""
        return self.db.execute("SELECT count(*) FROM (SELECT 1 FROM memories_fts WHERE "
                               "memories_fts MATCH ? LIMIT ?)", (fts_query, cap + 1)).fetchone()[0]

    # -- the stored rank ----------------------------------------------------------------
    def rank_signature(self, namespace: str) -> str | None:
        row = self.db.execute("SELECT rank_formula FROM policy_state WHERE namespace = ?",
                              (namespace,)).fetchone()
        return row[0] if row else None

    def rebuild_rank(self, st, namespace: str, policy: str, signature: str) -> None:
        """Recompute a namespace's stored ranks and remember the formula they came from."""
        with self.transaction() as db:
            # when most of the file's ranks change, rebuilding the recall index once beats
            # moving each entry; a small namespace in a big file just updates its rows
            mine = db.execute("SELECT count(*) FROM memories WHERE namespace = ?",
                              (namespace,)).fetchone()[0]
            total = db.execute("SELECT coalesce(max(rowid), 0) FROM memories").fetchone()[0]
            rebuild = mine > 10_000 and mine * 2 > total
            if rebuild:
                db.execute("DROP INDEX IF EXISTS memories_recall")
            self.run(st, namespace)
            if rebuild:
                db.execute(RECALL_INDEX)
            db.execute("INSERT INTO policy_state (namespace, policy, rank_formula, updated_at) "
                       "VALUES (?, ?, ?, ?) ON CONFLICT (namespace) DO UPDATE SET "
                       "policy = excluded.policy, rank_formula = excluded.rank_formula, "
                       "updated_at = excluded.updated_at", (namespace, policy, signature, self.now()))

    # -- the inbox: turns saved before any model is asked -------------------------------
    def add_turn(self, namespace: str, user: str, assistant: str) -> int:
        with self.transaction() as db:
            return db.execute("INSERT INTO inbox (namespace, user_text, assistant_text, created_at, "
                              "updated_at) VALUES (?, ?, ?, ?, ?)",
                              (namespace, user, assistant, self.now(), self.now())).lastrowid

    def turn(self, turn_id: int) -> sqlite3.Row | None:
        return self.db.execute("SELECT * FROM inbox WHERE id = ?", (turn_id,)).fetchone()

    def turn_failed(self, turn_id: int, error: str) -> None:
        self.db.execute("UPDATE inbox SET attempts = attempts + 1, last_error = ?, updated_at = ? "
                        "WHERE id = ?", (error[:500], self.now(), turn_id))

    def close_turn(self, turn_id: int, status: str, memory_ids: list[int]) -> None:
        """Mark a judged turn done (or dropped), in the caller's transaction."""
        self.db.execute("UPDATE inbox SET status = ?, memory_ids = ?, attempts = attempts + 1, "
                        "updated_at = ? WHERE id = ?",
                        (status, json.dumps(memory_ids), self.now(), turn_id))

    def pending(self, namespace: str) -> list[dict]:
        rows = self.db.execute("SELECT id, user_text, assistant_text, attempts, last_error, "
                               "created_at FROM inbox WHERE namespace = ? AND status = 'pending' "
                               "ORDER BY id", (namespace,))
        return [dict(r) for r in rows]

    def pending_ids(self, namespace: str, limit: int) -> list[int]:
        return [r[0] for r in self.db.execute(
            "SELECT id FROM inbox WHERE namespace = ? AND status = 'pending' ORDER BY id LIMIT ?",
            (namespace, limit))]

    def pending_count(self, namespace: str) -> int:
        return self.db.execute("SELECT count(*) FROM inbox WHERE namespace = ? AND "
                               "status = 'pending'", (namespace,)).fetchone()[0]

    # -- pass runs and batched progress -------------------------------------------------
    def last_runs(self, namespace: str) -> dict[str, str]:
        return {r[0]: r[1] for r in self.db.execute(
            "SELECT pass, last_run_at FROM pass_runs WHERE namespace = ?", (namespace,))}

    def record_run(self, namespace: str, name: str, now: str, changed: int) -> None:
        self.db.execute("INSERT INTO pass_runs (namespace, pass, last_run_at, rows_changed) "
                        "VALUES (?, ?, ?, ?) ON CONFLICT (namespace, pass) DO UPDATE SET "
                        "last_run_at = excluded.last_run_at, rows_changed = excluded.rows_changed",
                        (namespace, name, now, changed))

    def unfinished(self, namespace: str) -> set[str]:
        return {r[0] for r in self.db.execute("SELECT pass FROM pass_progress WHERE namespace = ?",
                                              (namespace,))}

    def progress(self, namespace: str, name: str) -> sqlite3.Row | None:
        return self.db.execute("SELECT cursor, run_now, changed FROM pass_progress WHERE "
                               "namespace = ? AND pass = ?", (namespace, name)).fetchone()

    def save_progress(self, namespace: str, name: str, cursor: int, now: str, changed: int) -> None:
        self.db.execute("INSERT INTO pass_progress (namespace, pass, cursor, run_now, changed) "
                        "VALUES (?, ?, ?, ?, ?) ON CONFLICT (namespace, pass) DO UPDATE SET "
                        "cursor = excluded.cursor, changed = excluded.changed",
                        (namespace, name, cursor, now, changed))

    def clear_progress(self, namespace: str, name: str) -> None:
        self.db.execute("DELETE FROM pass_progress WHERE namespace = ? AND pass = ?", (namespace, name))

    def id_bounds(self, namespace: str) -> tuple[int, int]:
        lo, hi = self.db.execute("SELECT min(id), max(id) FROM memories WHERE namespace = ?",
                                 (namespace,)).fetchone()
        return lo or 0, hi or 0

    # -- model calls ----------------------------------------------------------------------
    def log_call(self, namespace: str, step: str, model: str, provider: str | None,
                 prompt_tokens: int, completion_tokens: int, latency_ms: float, outcome: str,
                 detail: str | None) -> None:
        self.db.execute(
            "INSERT INTO model_calls (namespace, step, model, provider, prompt_tokens, "
            "completion_tokens, latency_ms, outcome, detail, occurred_at) VALUES (?,?,?,?,?,?,?,?,?,?)",
            (namespace, step, model, provider, prompt_tokens, completion_tokens, latency_ms,
             outcome, detail, self.now()))

    def costs(self, namespace: str) -> list[dict]:
        """Every logged model call summed per step and model: calls, tokens, latency, outcomes."""
        return [dict(r) for r in self.db.execute(
            "SELECT step, model, count(*) AS calls, sum(prompt_tokens) AS prompt_tokens, "
            "sum(completion_tokens) AS completion_tokens, round(avg(latency_ms), 1) AS avg_latency_ms, "
            "sum(outcome = 'ok') AS ok, sum(outcome != 'ok') AS failed FROM model_calls "
            "WHERE namespace = ? GROUP BY step, model ORDER BY step, model", (namespace,))]

    def model_use(self, namespace: str) -> dict:
        """Model calls and tokens: totals, and calls by step and by provider."""
        total = self.db.execute("SELECT count(*), coalesce(sum(prompt_tokens), 0), "
                                "coalesce(sum(completion_tokens), 0) FROM model_calls "
                                "WHERE namespace = ?", (namespace,)).fetchone()
        by_step = {r[0]: r[1] for r in self.db.execute(
            "SELECT step, count(*) FROM model_calls WHERE namespace = ? GROUP BY step ORDER BY step",
            (namespace,))}
        by_provider = {r[0] or "none": r[1] for r in self.db.execute(
            "SELECT provider, count(*) FROM model_calls WHERE namespace = ? GROUP BY provider "
            "ORDER BY provider", (namespace,))}
        return {"calls": total[0], "prompt_tokens": total[1], "completion_tokens": total[2],
                "tokens": total[1] + total[2], "by_step": by_step, "by_provider": by_provider}

    # -- scenes (seed C) ------------------------------------------------------------------
    def scene_cells(self, namespace: str, scene: str, limit: int = 20) -> list[sqlite3.Row]:
        return self.db.execute(
            "SELECT content, kind, importance FROM memories WHERE namespace = ? AND scene = ? "
            "AND status = 'active' ORDER BY importance DESC, id DESC LIMIT ?",
            (namespace, scene, limit)).fetchall()

    def save_scene(self, namespace: str, scene: str, summary: str) -> None:
        self.db.execute("INSERT INTO scenes (namespace, scene, summary, updated_at) VALUES (?, ?, ?, ?) "
                        "ON CONFLICT (namespace, scene) DO UPDATE SET summary = excluded.summary, "
                        "updated_at = excluded.updated_at", (namespace, scene, summary, self.now()))

    def scenes(self, namespace: str) -> dict[str, str]:
        return {r[0]: r[1] for r in self.db.execute(
            "SELECT scene, summary FROM scenes WHERE namespace = ? ORDER BY scene", (namespace,))}

    # -- leases ---------------------------------------------------------------------------
    def lease(self, namespace: str, ttl, holder: str, wait: float = 1.0) -> SqliteLease:
        """The namespace's pass lease, on a connection of its own."""
        return SqliteLease(self.path, namespace, self.clock, ttl, holder, wait)

    def renew_lease(self, lease: SqliteLease) -> None:
        """Extend `lease` from this connection, inside the transaction running now."""
        self.db.execute(*lease.renew_sql())


Store = SqliteStore  # the embedded default



def _ensure_math(db: sqlite3.Connection) -> None:
    """Builds of SQLite without the math functions get Python ones (slower, same results)."""
    try:
        db.execute("SELECT exp(0), ln(1), log10(1), floor(0.5), ceil(0.5), pow(2, 2), sqrt(4)")
        return
    except sqlite3.OperationalError:
        pass
    for name, fn, n in (("exp", math.exp, 1), ("ln", math.log, 1), ("log10", math.log10, 1),
                        ("floor", math.floor, 1), ("ceil", math.ceil, 1), ("pow", math.pow, 2),
                        ("sqrt", math.sqrt, 1)):
        db.create_function(name, n, _null_safe(fn), deterministic=True)


def _null_safe(fn):
    def wrapped(*args):
        if any(a is None for a in args):
            return None
        try:
            return fn(*args)
        except (ValueError, OverflowError):
            return None
    return wrapped
