"""The schema on PostgreSQL: the same migrations as SQLite's (sqlite_schema.py), by the same
names, in the same order (a test checks the names match); those both spell alike but for
their types come from shared_schema.py, the rest are PostgreSQL's DDL here (m015 reads
rows). Text is `COLLATE "C"` (times compare as SQLite's do), there are no foreign keys,
full text is a tsvector table kept by a trigger, the lease row has a fencing token and inbox
rows a claim: docs/postgres.md says why."""

from __future__ import annotations

from typing import Callable

from engine.plan.dialect import PG_SEARCH_CONFIG as SEARCH_CONFIG
from engine.store.odd_values import COLUMNS, NUMBERS, fix_row
from engine.store.shared_schema import EXPIRY_INDEX, POSTGRES_TYPES, columns, replacement_indexes, tables

PG_MIGRATIONS: list[Callable] = []
TEXT = POSTGRES_TYPES.text


def _add(table: str, column: str) -> str:
    return f"ALTER TABLE {table} ADD COLUMN IF NOT EXISTS {column}"


def _statements(name: str, *sql: str) -> None:
    """A migration, `name`, that runs these statements in order."""

    def run(db) -> None:
        for statement in sql:
            db.execute(statement)

    run.__name__ = run.__qualname__ = name
    PG_MIGRATIONS.append(run)


_statements(
    "m003_events_append_only",
    """CREATE OR REPLACE FUNCTION memory_events_append_only() RETURNS trigger
        LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'memory_events is append-only'; END $$""",
    "CREATE TRIGGER memory_events_no_update BEFORE UPDATE OR DELETE ON memory_events "
    "FOR EACH ROW EXECUTE FUNCTION memory_events_append_only()",
    "CREATE TRIGGER memory_events_no_truncate BEFORE TRUNCATE ON memory_events "
    "FOR EACH STATEMENT EXECUTE FUNCTION memory_events_append_only()",
)

# a tsvector per memory over content, summary and tags, with a GIN index
_statements(
    "m004_full_text",
    f"CREATE TEXT SEARCH DICTIONARY {SEARCH_CONFIG}_stem (TEMPLATE = snowball, Language = english)",
    f"CREATE TEXT SEARCH CONFIGURATION {SEARCH_CONFIG} (COPY = english)",
    f"ALTER TEXT SEARCH CONFIGURATION {SEARCH_CONFIG} ALTER MAPPING FOR asciiword, "
    f"asciihword, hword_asciipart, word, hword, hword_part WITH {SEARCH_CONFIG}_stem",
    "CREATE TABLE IF NOT EXISTS memories_fts (id BIGINT PRIMARY KEY, tsv TSVECTOR NOT NULL)",
    "CREATE INDEX IF NOT EXISTS memories_fts_tsv ON memories_fts USING gin (tsv) WITH (fastupdate = off)",
    f"""CREATE OR REPLACE FUNCTION memories_fts_sync() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
          IF TG_OP = 'DELETE' THEN DELETE FROM memories_fts WHERE id = OLD.id; RETURN OLD; END IF;
          INSERT INTO memories_fts (id, tsv) VALUES (NEW.id, setweight(to_tsvector(
            '{SEARCH_CONFIG}', concat_ws(' ', NEW.content, NEW.summary, NEW.tags)), 'A'))
          ON CONFLICT (id) DO UPDATE SET tsv = excluded.tsv;
          RETURN NEW;
        END $$""",
    "CREATE TRIGGER memories_fts_sync AFTER INSERT OR DELETE OR UPDATE OF content, summary, "
    "tags ON memories FOR EACH ROW EXECUTE FUNCTION memories_fts_sync()",
)


def m015_normalise_odd_rows(db, now=None):
    """As SQLite's m015; typed columns hold no text or blobs here: only numbers are odd."""
    odd = " OR ".join(
        f"{c} IS NULL OR NOT ({c} BETWEEN {lo} AND {hi})"  # NaN is above all
        for c, (lo, hi, _) in NUMBERS.items()
    )
    for row in db.execute(f"SELECT id, {', '.join(COLUMNS)} FROM memories WHERE {odd}").fetchall():
        fix_row(db, "%s", row, now)


PG_MIGRATIONS.append(m015_normalise_odd_rows)

# as SQLite's, so both keep one schema; nothing fills them on a server yet (`embed:` needs SQLite)
_statements(
    "m016_vectors",
    "CREATE TABLE IF NOT EXISTS memory_vectors (memory_id BIGINT PRIMARY KEY "
    "REFERENCES memories(id), namespace TEXT NOT NULL, model TEXT NOT NULL, "
    "cell BIGINT NOT NULL DEFAULT 0, bits BYTEA NOT NULL, vector BYTEA NOT NULL)",
    "CREATE INDEX IF NOT EXISTS memory_vectors_cell ON memory_vectors(namespace, model, cell)",
    "CREATE TABLE IF NOT EXISTS vector_cells (namespace TEXT NOT NULL, model TEXT NOT "
    "NULL, cell BIGINT NOT NULL, centroid BYTEA NOT NULL, "
    "PRIMARY KEY (namespace, model, cell))",
)

# expiry only: psycopg's generic plan cannot prove `status = $1` is 'active', so a partial
# recall index would leave recall a sequential scan
_statements("m017_partial_indexes", "DROP INDEX IF EXISTS memories_expiry", EXPIRY_INDEX)

_statements("m019_recall_head")  # by name: recall's index stays whole (the planner has statistics)
_statements("m020_text_apart")  # by name: one table (PostgreSQL keeps long text out of line itself)

_statements("m022_replacement_indexes", *replacement_indexes("memories"))

# what PostgreSQL adds to migrations both share: a worker judging an inbox turn claims it
# until `claimed_until`; the lease's `token` grows at every take-over, so a holder that
# stalled past its expiry finds it stale (fencing)
_OWN = {
    "m006_inbox": [_add("inbox", f"claimed_by {TEXT}"), _add("inbox", f"claimed_until {TEXT}")],
    "m008_leases": [_add("leases", "token BIGINT NOT NULL DEFAULT 1")],
}
_TABLES, _ADDED = tables(POSTGRES_TYPES), columns(POSTGRES_TYPES)
for _name in sorted({*_TABLES, *_ADDED}):  # those both backends share (shared_schema.py)
    _added = (_add(t, f"{c} {d}") for t, c, d in _ADDED.get(_name, []))
    _statements(_name, *_added, *_TABLES.get(_name, []), *_OWN.get(_name, []))
PG_MIGRATIONS.sort(key=lambda fn: fn.__name__)
