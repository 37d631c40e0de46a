"""The schema, as a list of migrations: each a small function, run once per database in
the order written, recorded in `lethe_migrations` (llm's habit).

m001 is the seed article's schema exactly, so an existing `agent_memory.db` is adopted in
place: opening it runs only the migrations it lacks. Never edit a migration that has
shipped; append a new one. A migration that takes `now` gets the clock's time (for the
events it writes).
"""
from __future__ import annotations

import json
import math
import re
import sqlite3
from typing import Callable

from ..errors import StoreError
from .sqlite_library import library

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
def m011_merged_into(db):
    """What a compressed memory was merged into, as a column (not text parsed out of an
    event); filled in for memories compressed before this migration from their event."""
    if "merged_into" not in _columns(db, "memories"):
        db.execute("ALTER TABLE memories ADD COLUMN merged_into INTEGER REFERENCES memories(id)")
    db.execute("""UPDATE memories SET merged_into = (
        SELECT CAST(substr(e.detail, 14) AS INTEGER) FROM memory_events e
        WHERE e.memory_id = memories.id AND e.event_type = 'compressed'
          AND e.detail LIKE 'merged into #%' ORDER BY e.id DESC LIMIT 1)
        WHERE status = 'compressed' AND merged_into IS NULL""")


@migration
def m012_model_call_marks(db):
    """Which attempt a model call was (0: the first ask, 1: the first retry, ...), and
    whether its token counts are estimates (the server sent no usable usage)."""
    have = _columns(db, "model_calls")
    for col in ("attempt", "tokens_estimated"):
        if col not in have:
            db.execute(f"ALTER TABLE model_calls ADD COLUMN {col} INTEGER NOT NULL DEFAULT 0")


@migration
def m013_inbox_judged(db):
    """Judgments a pending turn already paid for (the gate's answer, say), so a retry after
    an outage asks only for what is still missing."""
    if "judged" not in _columns(db, "inbox"):
        db.execute("ALTER TABLE inbox ADD COLUMN judged TEXT")


@migration
def m014_inbox_retries(db):
    """A turn whose judging failed waits before it is tried again (`next_retry_at`), and
    after a few failures that were not outages (`failures`) it is parked as 'failed'."""
    have = _columns(db, "inbox")
    if "next_retry_at" not in have:
        db.execute("ALTER TABLE inbox ADD COLUMN next_retry_at TEXT")
    if "failures" not in have:
        db.execute("ALTER TABLE inbox ADD COLUMN failures INTEGER NOT NULL DEFAULT 0")


# what each numeric column may hold: (lowest, highest, value for NULL, text, blob or NaN)
_NUMBERS = {"importance": (0.0, 10.0, 5.0), "confidence": (0.0, 1.0, 1.0),
            "decay_score": (0.0, 1.0, 1.0), "access_count": (0, 2 ** 62, 0)}
_TEXTS = ("content", "summary", "tags", "kind", "scene")


@migration
def m015_normalise_odd_rows(db, now=None):
    """Rows an adopted database (or an older bug) left with values recall cannot use:
    NULL, text, blobs or infinities in a numeric column, out-of-range numbers, blobs or
    numbers in a text column. Each becomes a usable value (the column's default, the
    nearest bound, the text decoded), with a `normalised` event saying what it was.
    Only the odd rows are read; a clean table costs one scan."""
    odd = " OR ".join(
        [f"typeof({c}) NOT IN ('integer', 'real') OR NOT ({c} BETWEEN {lo} AND {hi})"
         for c, (lo, hi, _) in _NUMBERS.items()] +
        [f"typeof({c}) NOT IN ('text', 'null')" for c in _TEXTS] + ["typeof(content) = 'null'"])
    rows = db.execute(f"SELECT id, {', '.join([*_NUMBERS, *_TEXTS])} FROM memories "
                      f"WHERE {odd}").fetchall()
    for row in rows:
        fixed = _normalised(dict(zip([*_NUMBERS, *_TEXTS], row[1:])))
        if not fixed:
            continue
        db.execute(f"UPDATE memories SET {', '.join(f'{c} = ?' for c in fixed)} WHERE id = ?",
                   [now_value for _, now_value in fixed.values()] + [row[0]])
        detail = {c: {"was": was, "now": value} for c, (was, value) in fixed.items()}
        db.execute("INSERT INTO memory_events (memory_id, event_type, detail, occurred_at) "
                   "VALUES (?, 'normalised', ?, ?)",
                   (row[0], json.dumps(detail, ensure_ascii=False, sort_keys=True), now))


def _normalised(values: dict) -> dict:
    """column -> (what it was, as text; what it becomes) for each odd value of one row."""
    out = {}
    for col, (lo, hi, default) in _NUMBERS.items():
        v = values[col]
        ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
        new = (min(hi, max(lo, v)) if ok else default)
        if col == "access_count":
            new = int(new)
        if not ok or new != v:
            out[col] = (_shown(v), new)
    for col in _TEXTS:
        v = values[col]
        if v is None and col != "content" or isinstance(v, str):
            continue
        new = v.decode("utf-8", errors="replace") if isinstance(v, bytes) else \
            ("" if v is None else str(v))
        out[col] = (_shown(v), new)
    return out


def _shown(value) -> str:
    if isinstance(value, bytes):
        return f"a blob of {len(value)} bytes"
    return "NULL" if value is None else repr(value)


@migration
def m016_vectors(db):
    """Embeddings, when a policy declares an embedding model: one vector per memory and
    model (float32, unit length, and its sign bits for a cheap first cut), and the cells
    of the nearest-neighbour index (each vector sits in the cell of its nearest centroid;
    cell 0 holds everything until the index is built). Plain tables: the vector extension
    is needed to search them, not to create or fill them."""
    db.execute("""CREATE TABLE IF NOT EXISTS memory_vectors (
        memory_id INTEGER PRIMARY KEY REFERENCES memories(id), namespace TEXT NOT NULL,
        model TEXT NOT NULL, cell INTEGER NOT NULL DEFAULT 0, bits BLOB NOT NULL,
        vector BLOB NOT NULL)""")
    # covering: a cell is scanned from the index alone (sign bits, no float vectors)
    db.execute("CREATE INDEX IF NOT EXISTS memory_vectors_cell ON "
               "memory_vectors(namespace, model, cell, bits)")
    db.execute("""CREATE TABLE IF NOT EXISTS vector_cells (
        namespace TEXT NOT NULL, model TEXT NOT NULL, cell INTEGER NOT NULL,
        centroid BLOB NOT NULL, PRIMARY KEY (namespace, model, cell))""")


@migration
def m017_partial_indexes(db):
    """Recall's index holds only active memories and the expiry index only memories with
    an expiry date. A store that has lived for months is mostly archived, superseded and
    merged rows that recall never reads; a decay pass rebuilds recall's index over the
    active rows alone (at 1M: 370k entries instead of 1M), and archiving a row removes its
    entry instead of moving it. The expiry index shrinks to the few rows that have a date,
    so a pass that changes statuses moves a few entries there instead of one a row.
    Recall's own `status = ?` picks the partial index for the bound 'active' (SQLite plans
    with bound values); a query for another status reads the table, as it should."""
    db.execute("DROP INDEX IF EXISTS memories_recall")
    # status stays a column: a query's `status = ?` is then checked in the index, not
    # against each row (SQLite proves the partial WHERE from the bound value but still
    # evaluates the term), so a pass's count of active rows reads the index alone
    db.execute("CREATE INDEX memories_recall ON memories(namespace, status, rank, id) "
               "WHERE status = 'active'")
    db.execute("DROP INDEX IF EXISTS memories_expiry")
    db.execute("CREATE INDEX memories_expiry ON memories(namespace, status, expires_at) "
               "WHERE expires_at IS NOT NULL")


@migration
def m018_pass_progress_top(db):
    """The largest id a run in ranges reaches: what the pass saw when it began. Without it
    a run resumed after a crash read the newest id again and passed, with its old `now`,
    memories written after that `now` (NULL: a run saved before, which reads it again)."""
    if "top_id" not in _columns(db, "pass_progress"):
        db.execute("ALTER TABLE pass_progress ADD COLUMN top_id INTEGER")


@migration
def m019_recall_head(db):
    """Room for recall's index to hold only the head of the ranking (engine.store.head):
    `recall_head` keeps its floor (NULL: every active memory, as m017 made it), and
    `memories_active` counts a namespace's active memories and finds them when recall reads
    past the head. It holds no column a decay writes, so a pass moves none of its entries."""
    db.execute("CREATE INDEX IF NOT EXISTS memories_active ON memories(namespace, status) "
               "WHERE status = 'active'")
    db.execute("""CREATE TABLE IF NOT EXISTS recall_head (
        floor REAL, rows INTEGER NOT NULL DEFAULT 0, chosen_at TEXT)""")
    if db.execute("SELECT count(*) FROM recall_head").fetchone()[0] == 0:
        db.execute("INSERT INTO recall_head (floor, rows) VALUES (NULL, 0)")


# m020: the memories' text in a table of its own; `memories` is a view over the two
ROWS, TEXTS = "memory_rows", "memory_texts"
TEXT_COLUMNS = ("content", "summary", "tags")
# every other column of `memories` as m001..m019 left it, declared as they declared it
_ROW_COLUMNS = {
    "importance": "REAL DEFAULT 5.0", "confidence": "REAL DEFAULT 1.0",
    "access_count": "INTEGER DEFAULT 0", "decay_score": "REAL DEFAULT 1.0",
    "status": "TEXT DEFAULT 'active'", "contradicted_by": "INTEGER REFERENCES memory_rows(id)",
    "created_at": "TEXT", "last_accessed": "TEXT", "expires_at": "TEXT",
    "namespace": "TEXT NOT NULL DEFAULT 'default'", "kind": "TEXT", "scene": "TEXT",
    "rank": "REAL", "merged_into": "INTEGER REFERENCES memory_rows(id)"}
# what an INSERT through the view gets for a column it leaves out (the tables' defaults:
# a view has none of its own)
_VIEW_DEFAULTS = {"importance": "5.0", "confidence": "1.0", "access_count": "0",
                  "decay_score": "1.0", "status": "'active'", "namespace": "'default'"}


def rows_table(db) -> str:
    """The table that holds memories' rows: memory_rows once m020 has run, memories on a
    file it has not (the seed article's own, one being upgraded)."""
    return ROWS if db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND "
                              "name = ?", (ROWS,)).fetchone() else "memories"


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


@migration
def m020_text_apart(db):
    """The memories' text (content, summary, tags: over half of a row) moves to
    `memory_texts`; every other column, and every index, to `memory_rows`; `memories`
    becomes a view joining them, with the article's columns in the article's order. A pass
    rewrites every active row's score: it now rewrites pages that hold no text, about half
    as many (bench/RESULTS.md, eighteenth round). Readers, and writers through INSTEAD OF
    triggers, see the table they saw; the engine writes the two tables itself. Full-text
    search reads the view and is kept by triggers on memory_texts. memory_rows is made new,
    rows copied in id order, so its pages are full (dropping the columns in place would
    leave them as many and half empty); the old table's pages go to the free list.

    A file whose memories table carries what a view cannot (a generated column, a trigger
    of the user's own) or an index that fits neither new table is refused, naming it,
    before anything changes: nothing is dropped silently."""
    cols = _movable_columns(db)
    names = [c[0] for c in cols]
    row_cols = [c for c in cols if c[0] not in TEXT_COLUMNS and c[0] != "id"]
    indexes = db.execute("SELECT name, sql FROM sqlite_master WHERE type = 'index' AND "
                         "tbl_name = 'memories' AND sql IS NOT NULL ORDER BY name").fetchall()
    seq = db.execute("SELECT seq FROM sqlite_sequence WHERE name = 'memories'").fetchone()
    decl = ", ".join(_declared(c) for c in row_cols)
    db.execute(f"CREATE TABLE {ROWS} (id INTEGER PRIMARY KEY AUTOINCREMENT, {decl})")
    listed = ", ".join(_q(c[0]) for c in row_cols)
    db.execute(f"INSERT INTO {ROWS} (id, {listed}) SELECT id, {listed} FROM memories ORDER BY id")
    db.execute(f"CREATE TABLE {TEXTS} (id INTEGER PRIMARY KEY, content TEXT NOT NULL, "
               "summary TEXT, tags TEXT)")
    db.execute(f"INSERT INTO {TEXTS} (id, content, summary, tags) "
               "SELECT id, content, summary, tags FROM memories ORDER BY id")
    if seq is not None:  # ids never come back: the old table's sequence goes on
        db.execute("UPDATE sqlite_sequence SET seq = max(seq, ?) WHERE name = ?", (seq[0], ROWS))
        db.execute("INSERT INTO sqlite_sequence (name, seq) SELECT ?, ? WHERE NOT EXISTS "
                   "(SELECT 1 FROM sqlite_sequence WHERE name = ?)", (ROWS, seq[0], ROWS))
    db.execute("DROP TABLE memories")  # its indexes and full-text triggers with it
    for name, sql in indexes:  # Lethe's own (recall's, expiry's, active's, scene's), any other
        _move_index(db, name, sql)
    picked = ", ".join(f"t.{c} AS {c}" if c in TEXT_COLUMNS else f"r.{_q(c)} AS {_q(c)}"
                       for c in names)
    db.execute(f"CREATE VIEW memories AS SELECT {picked} FROM {ROWS} AS r "
               f"LEFT JOIN {TEXTS} AS t ON t.id = r.id")
    _view_triggers(db, row_cols)
    _text_search_triggers(db)


_FTS_TRIGGERS = {"memories_fts_insert", "memories_fts_delete", "memories_fts_update"}
_ON_MEMORIES = re.compile(r"""\bON\s+(?:"memories"|'memories'|`memories`|\[memories\]|memories)"""
                          r"""\s*\(""", re.IGNORECASE)


def _movable_columns(db) -> list[tuple]:
    """(name, type, notnull, default) of each column of memories, or a StoreError naming
    what m020 cannot carry into a view: a generated column, a trigger of the user's own."""
    cols = db.execute('PRAGMA table_xinfo("memories")').fetchall()
    generated = [r[1] for r in cols if r[6]]
    triggers = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = "
                                         "'trigger' AND tbl_name = 'memories'")
                if r[0] not in _FTS_TRIGGERS]
    if generated or triggers:
        what = ", ".join([f"generated column {g!r}" for g in generated]
                         + [f"trigger {t!r}" for t in triggers])
        raise StoreError(f"cannot upgrade this file (m020_text_apart): memories has {what}, "
                         "which a view cannot keep; drop it, open the file again, and make it "
                         "again on memory_rows or memory_texts (this step changed nothing)")
    return [(r[1], r[2], r[3], r[4]) for r in cols]


_SAFE_TYPE = re.compile(r"[A-Za-z][A-Za-z0-9_ ]*(\(\s*[0-9]+\s*(,\s*[0-9]+\s*)?\))?")


def _declared(col: tuple) -> str:
    """A column of memory_rows as memories declared it: Lethe's own as their migrations
    did; any other with its type, NOT NULL and default, as SQLite reports them."""
    name, type_, notnull, default = col
    if name in _ROW_COLUMNS:
        return f"{_q(name)} {_ROW_COLUMNS[name]}"
    out = _q(name) + (f" {type_}" if type_ and _SAFE_TYPE.fullmatch(type_) else "")
    out += " NOT NULL" if notnull else ""
    return out + (f" DEFAULT ({default})" if default is not None else "")


def _move_index(db, name: str, sql: str) -> None:
    """An index of memories made again on memory_rows, or on memory_texts when its columns
    are the text; a StoreError naming it when it fits neither (the transaction then rolls
    back, and the file is as it was)."""
    errors = []
    for table in (ROWS, TEXTS):
        moved = _ON_MEMORIES.sub(f"ON {table}(", sql, count=1)
        try:
            db.execute("SAVEPOINT move_index")
            db.execute(moved)
            db.execute("RELEASE move_index")
            return
        except library(db).OperationalError as exc:  # the store's own SQLite's error
            db.execute("ROLLBACK TO move_index")
            db.execute("RELEASE move_index")
            errors.append(str(exc))
    raise StoreError(f"cannot upgrade this file (m020_text_apart): index {name!r} on memories "
                     f"fits neither {ROWS} nor {TEXTS} ({'; '.join(errors)}); drop it, open the "
                     "file again, and make it again on one of them (this step changed nothing)")


def _view_triggers(db, row_cols: list[tuple]) -> None:
    """Writes through the view (a user's own script, the seed article's loop) go to the
    two tables. The engine itself writes the tables: a write through a view's trigger
    counts no rows (cursor.rowcount) and gives no lastrowid. An UPDATE writes only the
    columns it names (one trigger a column: writing the rest would move every index entry
    of the row). A column left out of an INSERT gets the table's default (a view has none)."""
    defaults = {**{c[0]: f"({c[3]})" for c in row_cols if c[3] is not None and
                   c[0] not in _ROW_COLUMNS}, **_VIEW_DEFAULTS}
    values = ", ".join(f"coalesce(NEW.{_q(c)}, {defaults[c]})" if c in defaults
                       else f"NEW.{_q(c)}" for c, *_ in row_cols)
    listed = ", ".join(_q(c) for c, *_ in row_cols)
    # content is NOT NULL: refused here, or an INSERT OR IGNORE would keep the row and
    # skip its text
    db.execute(f"""CREATE TRIGGER memories_insert INSTEAD OF INSERT ON memories BEGIN
        SELECT RAISE(ABORT, 'NOT NULL constraint failed: memories.content')
        WHERE NEW.content IS NULL;
        INSERT INTO {ROWS} (id, {listed}) VALUES (NEW.id, {values});
        INSERT INTO {TEXTS} (id, content, summary, tags)
        VALUES (coalesce(NEW.id, last_insert_rowid()), NEW.content, NEW.summary, NEW.tags); END""")
    for i, (c, *_) in enumerate(row_cols):
        db.execute(f"""CREATE TRIGGER memories_update_{i} INSTEAD OF UPDATE OF {_q(c)} ON memories
            BEGIN UPDATE {ROWS} SET {_q(c)} = NEW.{_q(c)} WHERE id = OLD.id; END""")
    for c in TEXT_COLUMNS:
        db.execute(f"""CREATE TRIGGER memories_update_{c} INSTEAD OF UPDATE OF {c} ON memories
            BEGIN UPDATE {TEXTS} SET {c} = NEW.{c} WHERE id = OLD.id; END""")
    db.execute(f"""CREATE TRIGGER memories_delete INSTEAD OF DELETE ON memories BEGIN
        DELETE FROM {TEXTS} WHERE id = OLD.id; DELETE FROM {ROWS} WHERE id = OLD.id; END""")


def _text_search_triggers(db) -> None:
    """m004's triggers, on the table that now holds the text (the index reads the view)."""
    db.execute(f"""CREATE TRIGGER memories_fts_insert AFTER INSERT ON {TEXTS} BEGIN
        INSERT INTO memories_fts(rowid, content, summary, tags)
        VALUES (new.id, new.content, new.summary, new.tags); END""")
    db.execute(f"""CREATE TRIGGER memories_fts_delete AFTER DELETE ON {TEXTS} BEGIN
        INSERT INTO memories_fts(memories_fts, rowid, content, summary, tags)
        VALUES ('delete', old.id, old.content, old.summary, old.tags); END""")
    db.execute(f"""CREATE TRIGGER memories_fts_update
        AFTER UPDATE OF content, summary, tags ON {TEXTS} BEGIN
        INSERT INTO memories_fts(memories_fts, rowid, content, summary, tags)
        VALUES ('delete', old.id, old.content, old.summary, old.tags);
        INSERT INTO memories_fts(rowid, content, summary, tags)
        VALUES (new.id, new.content, new.summary, new.tags); END""")
