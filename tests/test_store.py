"""The store: migrations, adopting the article's database in place, append-only events."""

import sqlite3

import pytest

from bench import seed_article
from engine.store import MIGRATIONS, Store
from tests.helpers import START, run_sql, store_of

pytestmark = pytest.mark.both_backends  # SQLite and PostgreSQL; see conftest.py


@pytest.mark.sqlite_only
def test_new_database_has_every_migration_and_wal(db_path, clock):
    store = Store(db_path, clock)
    names = [r[0] for r in store.db.execute("SELECT name FROM lethe_migrations ORDER BY rowid")]
    assert names == [m.__name__ for m in MIGRATIONS]
    assert store.db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    # the connection waits for the write lock itself, 30 s by default (test_sqlite_wait)
    assert store.db.execute("PRAGMA busy_timeout").fetchone()[0] == 0 and store.db.wait == 30.0
    cols = {r[1] for r in store.db.execute("PRAGMA table_info(memories)")}
    assert {
        "id",
        "content",
        "summary",
        "tags",
        "importance",
        "confidence",
        "access_count",
        "decay_score",
        "status",
        "contradicted_by",
        "created_at",
        "last_accessed",
        "expires_at",
        "namespace",
        "kind",
        "scene",
        "rank",
    } <= cols


@pytest.mark.sqlite_only
def test_reopening_applies_nothing_twice(db_path, clock):
    Store(db_path, clock).close()
    assert Store(db_path, clock).migrate() == []


@pytest.mark.sqlite_only
def test_article_database_is_adopted_in_place_losing_nothing(tmp_path, clock, memory):
    path = str(tmp_path / "agent_memory.db")
    seed_article.generate(path, 500, START)
    raw = sqlite3.connect(path)
    before = raw.execute("SELECT * FROM memories ORDER BY id").fetchall()
    events_before = raw.execute("SELECT count(*) FROM memory_events").fetchone()[0]
    raw.close()

    mem = memory("lifecycle", db=path)
    after = run_sql(
        store_of(mem),
        "SELECT id, content, summary, tags, importance, confidence, access_count, decay_score, "
        "status, contradicted_by, created_at, last_accessed, expires_at FROM memories ORDER BY id",
    ).fetchall()
    assert [tuple(r) for r in after] == before
    assert run_sql(store_of(mem), "SELECT count(*) FROM memory_events").fetchone()[0] == events_before
    # adopted rows belong to the default namespace and get their stored rank
    row = run_sql(
        store_of(mem),
        "SELECT namespace, rank, importance * confidence * decay_score FROM memories WHERE id = 1",
    ).fetchone()
    assert row[0] == "default" and row[1] == pytest.approx(row[2])
    # and the full-text index covers the old rows
    hits = run_sql(store_of(mem), "SELECT count(*) FROM memories_fts WHERE memories_fts MATCH 'prefers'")
    assert hits.fetchone()[0] > 0


@pytest.mark.sqlite_only
def test_events_are_append_only(memory):
    mem = memory()
    mid = mem.add("User prefers tabs")
    with pytest.raises(sqlite3.IntegrityError, match="append-only"):
        run_sql(store_of(mem), "UPDATE memory_events SET event_type = 'x' WHERE memory_id = ?", (mid,))
    with pytest.raises(sqlite3.IntegrityError, match="append-only"):
        run_sql(store_of(mem), "DELETE FROM memory_events WHERE memory_id = ?", (mid,))


@pytest.mark.sqlite_only
def test_full_text_index_follows_content_changes(memory):
    mem = memory()
    mid = mem.add("User prefers tabs")
    run_sql(
        store_of(mem),
        "UPDATE memories SET content = 'User prefers spaces', summary = 'spaces' WHERE id = ?",
        (mid,),
    )

    def match(word):
        sql = "SELECT rowid FROM memories_fts WHERE memories_fts MATCH ?"
        return [tuple(r) for r in run_sql(store_of(mem), sql, (word,)).fetchall()]

    assert match("spaces") == [(mid,)]
    assert match("tabs") == []


def test_transaction_rolls_back_everything(memory):
    mem = memory()
    with pytest.raises(RuntimeError):
        with store_of(mem).transaction():
            store_of(mem).insert_memory({"content": "half-written", "namespace": "default"})
            raise RuntimeError("crash")
    assert run_sql(store_of(mem), "SELECT count(*) FROM memories").fetchone()[0] == 0
