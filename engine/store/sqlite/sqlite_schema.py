"""The schema, as a list of migrations: each a small function, run once per database in
the order written, recorded in `lethe_migrations` (llm's habit).

m001 is the seed article's schema exactly, so an existing `agent_memory.db` is adopted in
place: opening it runs only the migrations it lacks. Never edit a migration that has
shipped; append a new one. A migration that takes `now` gets the clock's time (for the
events it writes).
"""

from __future__ import annotations

import functools
import sqlite3
from typing import Callable

from engine.store.odd_values import COLUMNS, NUMBERS, TEXTS, fix_row
from engine.store.shared_schema import EXPIRY_INDEX, SQLITE_TYPES, columns, replacement_indexes, tables
from engine.store.sqlite import text_apart

MIGRATIONS: list[Callable] = []


def migration(fn: Callable) -> Callable:
    """Register a schema change; they run in the order written, once each, per database."""
    MIGRATIONS.append(fn)
    return fn


def _columns(db: sqlite3.Connection, table: str) -> set[str]:
    return {r[1] for r in db.execute(f'PRAGMA table_info("{table}")')}


_TABLES, _ADDED = tables(SQLITE_TYPES), columns(SQLITE_TYPES)


def _shared(fn: Callable) -> Callable:
    """A migration whose statements both backends share (shared_schema.py): the columns
    it adds that the table lacks, then its tables and indexes, then its own body."""

    def run(db) -> None:
        for table, column, declared in _ADDED.get(fn.__name__, []):
            if column not in _columns(db, table):
                db.execute(f"ALTER TABLE {table} ADD COLUMN {column} {declared}")
        for sql in _TABLES.get(fn.__name__, []):
            db.execute(sql)
        fn(db)

    return functools.update_wrapper(run, fn)


@migration
@_shared
def m001_article_schema(db):
    """The seed article's two tables, exactly; a no-op on an article database."""


@migration
@_shared
def m002_engine_columns(db):
    """namespace (the agent), kind and scene (typed cells), a stored rank for fast recall."""


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
@_shared
def m005_engine_state(db):
    """When each pass last ran (so a restart does not re-run compression), which rank
    formula the stored rank was computed with, and a log of every model call."""


@migration
@_shared
def m006_inbox(db):
    """Turns are written here before any model is called, so an outage loses nothing."""


@migration
@_shared
def m007_scenes(db):
    """Seed C: one short, reusable summary per scene, re-written after each exchange."""


@migration
@_shared
def m008_leases(db):
    """Who may run passes on a namespace, and until when: schedulers take this row before
    running passes and give it back after, so two processes never run them at once."""


@migration
@_shared
def m009_pass_progress(db):
    """Where an unfinished batched pass stopped, and the `now` it runs with."""


@migration
@_shared
def m010_pass_progress_count(db):
    """How many rows an interrupted batched pass had changed, so its total stays true."""


@migration
@_shared
def m011_merged_into(db):
    """What a compressed memory was merged into, as a column (not text parsed out of an
    event); filled in for memories compressed before this migration from their event."""
    db.execute("""UPDATE memories SET merged_into = (
        SELECT CAST(substr(e.detail, 14) AS INTEGER) FROM memory_events e
        WHERE e.memory_id = memories.id AND e.event_type = 'compressed'
          AND e.detail LIKE 'merged into #%' ORDER BY e.id DESC LIMIT 1)
        WHERE status = 'compressed' AND merged_into IS NULL""")


@migration
@_shared
def m012_model_call_marks(db):
    """Which attempt a model call was (0: the first ask, 1: the first retry, ...), and
    whether its token counts are estimates (the server sent no usable usage)."""


@migration
@_shared
def m013_inbox_judged(db):
    """Judgments a pending turn already paid for (the gate's answer, say), so a retry after
    an outage asks only for what is still missing."""


@migration
@_shared
def m014_inbox_retries(db):
    """A turn whose judging failed waits before it is tried again (`next_retry_at`), and
    after a few failures that were not outages (`failures`) it is parked as 'failed'."""


@migration
def m015_normalise_odd_rows(db, now=None):
    """Rows an adopted database (or an older Lethe) left with values recall cannot use:
    NULL, text, blobs or infinities in a numeric column, out-of-range numbers, blobs or
    numbers in a text column. Each becomes a usable value (the column's default, the
    nearest bound, the text decoded), with a `normalised` event saying what it was.
    Only the odd rows are read; a clean table costs one scan."""
    odd = " OR ".join(
        [
            f"typeof({c}) NOT IN ('integer', 'real') OR NOT ({c} BETWEEN {lo} AND {hi})"
            for c, (lo, hi, _) in NUMBERS.items()
        ]
        + [f"typeof({c}) NOT IN ('text', 'null')" for c in TEXTS]
        + ["typeof(content) = 'null'"]
    )
    for row in db.execute(f"SELECT id, {', '.join(COLUMNS)} FROM memories WHERE {odd}").fetchall():
        fix_row(db, "?", row, now)


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
    db.execute(
        "CREATE INDEX IF NOT EXISTS memory_vectors_cell ON memory_vectors(namespace, model, cell, bits)"
    )
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
    db.execute(
        "CREATE INDEX memories_recall ON memories(namespace, status, rank, id) WHERE status = 'active'"
    )
    db.execute("DROP INDEX IF EXISTS memories_expiry")
    db.execute(EXPIRY_INDEX)


@migration
@_shared
def m018_pass_progress_top(db):
    """The largest id a run in ranges reaches: what the pass saw when it began. Without it
    a run resumed after a crash read the newest id again and passed, with its old `now`,
    memories written after that `now` (NULL: a run saved before, which reads it again)."""


@migration
def m019_recall_head(db):
    """Room for recall's index to hold only the head of the ranking (engine.store.sqlite.recall_head):
    `recall_head` keeps its floor (NULL: every active memory, as m017 made it), and
    `memories_active` counts a namespace's active memories and finds them when recall reads
    past the head. It holds no column a decay writes, so a pass moves none of its entries."""
    db.execute(
        "CREATE INDEX IF NOT EXISTS memories_active ON memories(namespace, status) WHERE status = 'active'"
    )
    db.execute("""CREATE TABLE IF NOT EXISTS recall_head (
        floor REAL, rows INTEGER NOT NULL DEFAULT 0, chosen_at TEXT)""")
    if db.execute("SELECT count(*) FROM recall_head").fetchone()[0] == 0:
        db.execute("INSERT INTO recall_head (floor, rows) VALUES (NULL, 0)")


@migration
def m020_text_apart(db):
    """A memory's text (content, summary, tags) moves to `memory_texts`, every other column
    and every index to `memory_rows`, and `memories` becomes a view over the two
    (engine.store.sqlite.text_apart says how, and what it refuses)."""
    text_apart.split(db)


@migration
@_shared
def m021_said_at(db):
    """Two times on every change (docs/time.md): `said_at` is when what an event records was
    said (a turn's time; NULL: when it was recorded, `occurred_at`), and events are found by
    memory and recording time, so the state of a few memories at a past time is read from
    their events alone (engine.run.asof)."""


@migration
def m022_replacement_indexes(db):
    """What replaced a memory is a column (contradicted_by, merged_into); what a memory
    replaced is found through these partial indexes, which hold only the rows that were
    superseded or merged (a pass that decays or expires moves none of their entries), and
    the model calls around a time through an index on their time (the inspector: a
    memory's page at 1M read the whole table for both)."""
    for sql in replacement_indexes(text_apart.rows_table(db)):
        db.execute(sql)


@migration
@_shared
def m023_wall_runs(db):
    """When each pass last ran on the wall clock (a run at a given `--now` leaves it): a
    store that has such runs refuses a `--now` far ahead of the wall clock (docs/time.md)."""


@migration
@_shared
def m024_model_support(db):
    """What a model at an endpoint was found not to accept (a response format, a
    temperature), so a new process does not pay the refused request again."""


@migration
@_shared
def m025_asof_marks(db):
    """Marks that bound an as-of read: for each segment of ids, the earliest time one of its
    memories counts as recorded, and what the marks cover (engine.store.asof_marks). A
    runner writes them after its passes; no insert reads or writes them."""
