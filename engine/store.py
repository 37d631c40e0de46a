"""The store: one SQLite file, its schema as a list of migrations, and transactions.

The `memories` table keeps the seed article's column names and status words, so an
existing `agent_memory.db` is adopted in place: opening it runs the migrations it lacks.
WAL and a busy timeout are always on. `memory_events` is append-only (triggers refuse
UPDATE and DELETE), and a status change and its event are written in one transaction.
"""
from __future__ import annotations

import contextlib
import json
import sqlite3
from typing import Callable

from .clock import Clock, iso, system_clock
from .errors import StoreError

MIGRATIONS: list[Callable] = []
RECALL_INDEX = "CREATE INDEX IF NOT EXISTS memories_recall ON memories(namespace, status, rank, id)"


def migration(fn: Callable) -> Callable:
    """Register a schema change; they run in the order written, once each, per database."""
    MIGRATIONS.append(fn)
    return fn


def _columns(db: sqlite3.Connection, table: str) -> set[str]:
    return {r[1] for r in db.execute(f'PRAGMA table_info("{table}")')}


@migration
def m001_article_schema(db):
    """The seed article's two tables, exactly; a no-op on an article database."""
    db.execute("""CREATE TABLE IF NOT EXISTS memories (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        content TEXT NOT NULL,
        summary TEXT,
        tags TEXT,
        importance REAL DEFAULT 5.0,
        confidence REAL DEFAULT 1.0,
        access_count INTEGER DEFAULT 0,
        decay_score REAL DEFAULT 1.0,
        status TEXT DEFAULT 'active',
        contradicted_by INTEGER REFERENCES memories(id),
        created_at TEXT,
        last_accessed TEXT,
        expires_at TEXT)""")
    db.execute("""CREATE TABLE IF NOT EXISTS memory_events (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        memory_id INTEGER REFERENCES memories(id),
        event_type TEXT NOT NULL,
        detail TEXT,
        occurred_at TEXT)""")


@migration
def m002_engine_columns(db):
    """namespace (the agent), kind and scene (typed cells), a stored rank for fast recall."""
    have = _columns(db, "memories")
    for col, decl in (("namespace", "TEXT NOT NULL DEFAULT 'default'"), ("kind", "TEXT"),
                      ("scene", "TEXT"), ("rank", "REAL")):
        if col not in have:
            db.execute(f"ALTER TABLE memories ADD COLUMN {col} {decl}")
    db.execute(RECALL_INDEX)
    db.execute("CREATE INDEX IF NOT EXISTS memories_expiry ON memories(namespace, status, expires_at)")
    db.execute("CREATE INDEX IF NOT EXISTS memory_events_memory ON memory_events(memory_id, id)")


@migration
def m003_events_append_only(db):
    for op in ("UPDATE", "DELETE"):
        db.execute(f"""CREATE TRIGGER IF NOT EXISTS memory_events_no_{op.lower()}
            BEFORE {op} ON memory_events
            BEGIN SELECT RAISE(ABORT, 'memory_events is append-only'); END""")


@migration
def m004_full_text(db):
    """FTS5 over content, summary and tags, kept in sync by triggers.

    The update trigger names its columns, so passes that only touch scores and statuses
    never pay for the index."""
    db.execute("""CREATE VIRTUAL TABLE IF NOT EXISTS memories_fts USING fts5(
        content, summary, tags, content='memories', content_rowid='id',
        tokenize='porter unicode61')""")
    db.execute("""CREATE TRIGGER IF NOT EXISTS memories_fts_insert AFTER INSERT ON memories BEGIN
        INSERT INTO memories_fts(rowid, content, summary, tags)
        VALUES (new.id, new.content, new.summary, new.tags); END""")
    db.execute("""CREATE TRIGGER IF NOT EXISTS memories_fts_delete AFTER DELETE ON memories BEGIN
        INSERT INTO memories_fts(memories_fts, rowid, content, summary, tags)
        VALUES ('delete', old.id, old.content, old.summary, old.tags); END""")
    db.execute("""CREATE TRIGGER IF NOT EXISTS memories_fts_update
        AFTER UPDATE OF content, summary, tags ON memories BEGIN
        INSERT INTO memories_fts(memories_fts, rowid, content, summary, tags)
        VALUES ('delete', old.id, old.content, old.summary, old.tags);
        INSERT INTO memories_fts(rowid, content, summary, tags)
        VALUES (new.id, new.content, new.summary, new.tags); END""")
    db.execute("INSERT INTO memories_fts(memories_fts) VALUES ('rebuild')")


@migration
def m005_engine_state(db):
    """When each pass last ran (so a restart does not re-run compression), which rank
    formula the stored rank was computed with, and a log of every model call."""
    db.execute("""CREATE TABLE IF NOT EXISTS pass_runs (
        namespace TEXT NOT NULL, pass TEXT NOT NULL, last_run_at TEXT NOT NULL,
        rows_changed INTEGER, PRIMARY KEY (namespace, pass))""")
    db.execute("""CREATE TABLE IF NOT EXISTS policy_state (
        namespace TEXT PRIMARY KEY, policy TEXT, rank_formula TEXT, updated_at TEXT)""")
    db.execute("""CREATE TABLE IF NOT EXISTS model_calls (
        id INTEGER PRIMARY KEY AUTOINCREMENT, namespace TEXT, step TEXT, model TEXT,
        provider TEXT, prompt_tokens INTEGER, completion_tokens INTEGER, latency_ms REAL,
        outcome TEXT, detail TEXT, occurred_at TEXT)""")


@migration
def m006_inbox(db):
    """Turns are written here before any model is called, so an outage loses nothing."""
    db.execute("""CREATE TABLE IF NOT EXISTS inbox (
        id INTEGER PRIMARY KEY AUTOINCREMENT, namespace TEXT NOT NULL,
        user_text TEXT NOT NULL, assistant_text TEXT NOT NULL,
        status TEXT NOT NULL DEFAULT 'pending', attempts INTEGER NOT NULL DEFAULT 0,
        last_error TEXT, memory_ids TEXT, created_at TEXT, updated_at TEXT)""")
    db.execute("CREATE INDEX IF NOT EXISTS inbox_pending ON inbox(namespace, status, id)")


@migration
def m007_scenes(db):
    """Seed C: one short, reusable summary per scene, re-written after each exchange."""
    db.execute("""CREATE TABLE IF NOT EXISTS scenes (
        namespace TEXT NOT NULL, scene TEXT NOT NULL, summary TEXT, updated_at TEXT,
        PRIMARY KEY (namespace, scene))""")
    db.execute("CREATE INDEX IF NOT EXISTS memories_scene ON memories(namespace, scene)")


@migration
def m008_leases(db):
    """Who may run passes on a namespace, and until when: schedulers take this row before
    running passes and give it back after, so two processes never run them at once."""
    db.execute("""CREATE TABLE IF NOT EXISTS leases (
        namespace TEXT PRIMARY KEY, holder TEXT NOT NULL, acquired_at TEXT NOT NULL,
        expires_at TEXT NOT NULL)""")


@migration
def m009_pass_progress(db):
    """Where an unfinished batched pass stopped, and the `now` it runs with."""
    db.execute("""CREATE TABLE IF NOT EXISTS pass_progress (
        namespace TEXT NOT NULL, pass TEXT NOT NULL, cursor INTEGER NOT NULL,
        run_now TEXT NOT NULL, PRIMARY KEY (namespace, pass))""")


@migration
def m010_pass_progress_count(db):
    """How many rows an interrupted batched pass had changed, so its total stays true."""
    if "changed" not in _columns(db, "pass_progress"):
        db.execute("ALTER TABLE pass_progress ADD COLUMN changed INTEGER NOT NULL DEFAULT 0")


@migration
def m011_model_call_marks(db):
    """Which attempt a model call was (0: the first ask, 1: the first retry, ...), and
    whether its token counts are estimates (the server sent no usable usage)."""
    have = _columns(db, "model_calls")
    for col in ("attempt", "tokens_estimated"):
        if col not in have:
            db.execute(f"ALTER TABLE model_calls ADD COLUMN {col} INTEGER NOT NULL DEFAULT 0")


class Store:
    """A connection to one database file, upgraded to the current schema on open."""

    def __init__(self, path: str, clock: Clock | None = None, timeout: float = 30.0):
        self.path = str(path)
        self.clock = clock or system_clock
        try:
            self.db = sqlite3.connect(self.path, timeout=timeout, isolation_level=None,
                                      check_same_thread=False)
            self.db.row_factory = sqlite3.Row
            self.db.execute(f"PRAGMA busy_timeout = {int(timeout * 1000)}")
            self.db.execute("PRAGMA journal_mode = WAL")
            self.db.execute("PRAGMA synchronous = NORMAL")
            # a pass rewrites index entries all over the table: a 64 MiB page cache halves
            # a million-row decay (measured in bench/)
            self.db.execute("PRAGMA cache_size = -65536")
            _ensure_math(self.db)
            self.migrate()
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"cannot open {self.path}: {exc}") from None

    def now(self) -> str:
        return iso(self.clock())

    def close(self) -> None:
        self.db.close()

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

    # -- small reads and writes used across the engine
    def insert_memory(self, db, fields: dict) -> int:
        cols = list(fields)
        sql = (f"INSERT INTO memories ({', '.join(cols)}) "
               f"VALUES ({', '.join('?' for _ in cols)})")
        return db.execute(sql, [fields[c] for c in cols]).lastrowid

    def event(self, db, memory_id: int, event_type: str, detail=None) -> None:
        if detail is not None and not isinstance(detail, str):
            detail = json.dumps(detail, ensure_ascii=False, sort_keys=True)
        db.execute("INSERT INTO memory_events (memory_id, event_type, detail, occurred_at) "
                   "VALUES (?, ?, ?, ?)", (memory_id, event_type, detail, self.now()))

    def get(self, memory_id: int) -> sqlite3.Row | None:
        return self.db.execute("SELECT * FROM memories WHERE id = ?", (memory_id,)).fetchone()

    def costs(self, namespace: str) -> list[dict]:
        """Every logged model call summed per step and model: calls, tokens, latency, and
        outcomes: ok, repaired, retried (calls that were retries), refused (bad answers),
        fell_back (the rules judge answered), failed (nothing answered), unavailable, and
        estimated (calls whose token counts are estimates)."""
        return [dict(r) for r in self.db.execute(
            "SELECT step, model, count(*) AS calls, sum(prompt_tokens) AS prompt_tokens, "
            "sum(completion_tokens) AS completion_tokens, round(avg(latency_ms), 1) AS avg_latency_ms, "
            "sum(outcome = 'ok') AS ok, sum(outcome = 'repaired') AS repaired, "
            "sum(attempt > 0) AS retried, sum(outcome = 'bad_answer') AS refused, "
            "sum(outcome = 'fallback') AS fell_back, sum(outcome = 'failed') AS failed, "
            "sum(outcome = 'unavailable') AS unavailable, sum(tokens_estimated) AS estimated "
            "FROM model_calls WHERE namespace = ? GROUP BY step, model ORDER BY step, model",
            (namespace,))]

    def events(self, memory_id: int) -> list[sqlite3.Row]:
        return self.db.execute("SELECT * FROM memory_events WHERE memory_id = ? ORDER BY id",
                               (memory_id,)).fetchall()


def _ensure_math(db: sqlite3.Connection) -> None:
    """Builds of SQLite without the math functions get Python ones (slower, same results)."""
    try:
        db.execute("SELECT exp(0), ln(1), log10(1), floor(0.5), ceil(0.5), pow(2, 2), sqrt(4)")
        return
    except sqlite3.OperationalError:
        pass
    import math

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
