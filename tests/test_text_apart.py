"""A memory's text in a table of its own (SQLite's m020): a pass writes no page of it,
`memories` still reads and writes as the seed article's table, and a rule may read the
text on either backend."""

import datetime as dt
import hashlib
import os
import sqlite3
import struct

import pytest

from bench import seed_article
from engine import Memory
from engine.base.errors import StoreError
from engine.store import Store
from tests.helpers import POLICIES, START, run_sql, store_of

pytestmark = pytest.mark.both_backends  # SQLite and PostgreSQL; see conftest.py

T = START + dt.timedelta(days=1)


def wal_pages(path: str) -> set[int]:
    """The pages the WAL holds frames of, for the WAL's current salt (its valid frames)."""
    with open(path + "-wal", "rb") as f:
        data = f.read()
    page_size = struct.unpack(">I", data[8:12])[0]
    salts, pages, at = data[16:24], set(), 32
    while at + 24 + page_size <= len(data):
        if data[at + 8 : at + 16] != salts:
            break
        pages.add(struct.unpack(">I", data[at : at + 4])[0])
        at += 24 + page_size
    return pages


def pages_of(db, prefix: str) -> set[int]:
    return {
        r[0]
        for r in db.execute("SELECT pageno FROM dbstat WHERE name = ? OR name LIKE ?", (prefix, prefix + "%"))
    }


@pytest.mark.sqlite_only
def test_a_pass_writes_no_page_of_the_text(tmp_path):
    path = str(tmp_path / "article.db")
    seed_article.generate(path, 20_000, START, seed=3)
    Store(path).close()  # adopted: the WAL is checkpointed and gone
    with Memory(path, policy=f"{POLICIES}/lifecycle.yaml", clock=lambda: T, offline=True) as mem:
        ran = mem.run(["expiry", "decay"])
        assert ran[1].changed > 10_000 and ran[1].events["archived"] > 0
        written = wal_pages(path)
        db = sqlite3.connect(path)
        try:
            rows, texts = pages_of(db, "memory_rows"), pages_of(db, "memory_texts")
            search = pages_of(db, "memories_fts")
        finally:
            db.close()
    assert rows and texts and search  # the three are there, each on pages of its own
    assert len(written & rows) > len(rows) // 2  # the pass rewrote the rows' pages
    assert written & texts == set() and written & search == set()


@pytest.mark.sqlite_only
def test_memories_reads_and_writes_as_the_articles_table(tmp_path):
    """A script of the user's own (or the seed article's loop) that writes `memories`
    reaches both tables, full-text search follows, and new ids continue the sequence."""
    path = str(tmp_path / "memory.db")
    with Memory(path, policy=f"{POLICIES}/lifecycle.yaml", clock=lambda: T, offline=True) as mem:
        first = mem.add("User prefers tabs", importance=8)
        db = store_of(mem).db
        assert db.execute("SELECT type FROM sqlite_master WHERE name = 'memories'").fetchone()[0] == "view"
        assert [r[1] for r in db.execute("PRAGMA table_info(memories)")][:13] == [
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
        ]
        with store_of(mem).transaction():
            db.execute(
                "INSERT INTO memories (content, tags) VALUES ('Deploys go out on Fridays', '[\"ops\"]')"
            )
        new = db.execute("SELECT max(id) FROM memories").fetchone()[0]
        row = dict(db.execute("SELECT * FROM memories WHERE id = ?", (new,)).fetchone())
        assert new == first + 1
        assert (
            row["importance"],
            row["confidence"],
            row["status"],
            row["namespace"],
            row["decay_score"],
            row["access_count"],
        ) == (5.0, 1.0, "active", "default", 1.0, 0)
        assert [m.id for m in mem.candidates("fridays")] == [new]
        with store_of(mem).transaction():
            db.execute(
                "UPDATE memories SET content = 'Deploys go out on Mondays', importance = 9 WHERE id = ?",
                (new,),
            )
        assert mem.candidates("fridays") == [] and [m.id for m in mem.candidates("mondays")] == [new]
        assert mem.get(new).importance == 9 and mem.get(new).content == "Deploys go out on Mondays"
        with store_of(mem).transaction():
            db.execute("DELETE FROM memories WHERE id = ?", (new,))
        assert db.execute("SELECT count(*) FROM memory_rows WHERE id = ?", (new,)).fetchone()[0] == 0
        assert db.execute("SELECT count(*) FROM memory_texts WHERE id = ?", (new,)).fetchone()[0] == 0
        assert mem.candidates("mondays") == []
        again = mem.add("User prefers spaces")
        assert again == new + 1  # AUTOINCREMENT: a deleted id is never given again


@pytest.mark.sqlite_only
def test_adopting_keeps_the_articles_ids_going(tmp_path):
    """The seed article's file whose newest memory was deleted: the next id is past it."""
    path = str(tmp_path / "article.db")
    seed_article.generate(path, 50, START, seed=3)
    db = sqlite3.connect(path)
    db.execute("DELETE FROM memories WHERE id = 50")
    db.commit()
    db.close()
    with Memory(path, policy=f"{POLICIES}/lifecycle.yaml", clock=lambda: T, offline=True) as mem:
        assert mem.add("A new fact") == 51
        assert len(store_of(mem).db.execute("SELECT id FROM memories").fetchall()) == 50


def test_a_rule_may_read_a_memorys_text(memory, tmp_path, clock):
    policy = tmp_path / "tidy.yaml"
    policy.write_text(
        f"name: tidy\nextends: {os.path.join(POLICIES, 'lifecycle.yaml')}\n"
        "passes:\n  tidy:\n    rules:\n"
        "      - {when: \"status = 'active' and content = 'scratch' and "
        'summary is not null", set: {status: archived, importance: 1}, '
        "event: archived}\n"
    )
    mem = memory(str(policy), offline=True)
    keep = mem.add("User prefers tabs", importance=8)
    drop = mem.add("scratch", importance=6)
    ran = mem.run(["tidy"])
    assert ran[0].events == {"archived": 1} and ran[0].changed == 1
    assert mem.get(drop).status == "archived" and mem.get(drop).importance == 1
    assert mem.get(drop).rank == pytest.approx(1 * mem.get(drop).confidence * mem.get(drop).decay_score)
    assert mem.get(keep).status == "active" and mem.get(keep).importance == 8
    assert [
        r[0]
        for r in run_sql(
            store_of(mem), "SELECT event_type FROM memory_events WHERE memory_id = ? ORDER BY id", (drop,)
        ).fetchall()
    ][-1] == "archived"


def article_with(tmp_path, *statements) -> str:
    path = str(tmp_path / "article.db")
    seed_article.generate(path, 30, START, seed=3)
    db = sqlite3.connect(path)
    for sql in statements:
        db.execute(sql)
    db.commit()
    db.close()
    return path


@pytest.mark.sqlite_only
def test_an_article_files_own_indexes_and_columns_come_along(tmp_path):
    """An index over the text goes to memory_texts, one over the rest to memory_rows; a
    column of the user's own keeps its type and default, through the view too."""
    path = article_with(
        tmp_path,
        "CREATE INDEX by_content ON Memories (content)",
        'CREATE INDEX "by_when" on "memories"(created_at, importance)',
        "ALTER TABLE memories ADD COLUMN priority INTEGER NOT NULL DEFAULT 3",
    )
    with Memory(path, policy=f"{POLICIES}/lifecycle.yaml", clock=lambda: T, offline=True) as mem:
        db = store_of(mem).db
        on = dict(
            db.execute(
                "SELECT name, tbl_name FROM sqlite_master WHERE type = 'index' "
                "AND name IN ('by_content', 'by_when')"
            ).fetchall()
        )
        assert on == {"by_content": "memory_texts", "by_when": "memory_rows"}
        with store_of(mem).transaction():
            db.execute("INSERT INTO memories (content) VALUES ('x')")
            db.execute("INSERT INTO memories (content, priority) VALUES ('y', '7')")
        assert [
            tuple(r)
            for r in db.execute("SELECT priority, typeof(priority) FROM memories WHERE id > 30 ORDER BY id")
        ] == [(3, "integer"), (7, "integer")]
        assert len(db.execute("SELECT id FROM memories").fetchall()) == 32


def digest(path: str) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


@pytest.mark.sqlite_only
@pytest.mark.parametrize(
    "statement, named",
    [
        ("CREATE INDEX mixed ON memories(content, importance)", "index 'mixed' over text"),
        ("CREATE INDEX mixed ON memories(lower(content), importance)", "index 'mixed' over text"),
        ("CREATE INDEX mixed ON memories(content) WHERE status = 'active'", "index 'mixed' over text"),
        ("CREATE TRIGGER audit AFTER UPDATE ON memories BEGIN SELECT 1; END", "trigger 'audit'"),
        (
            "ALTER TABLE memories ADD COLUMN clen INTEGER GENERATED ALWAYS AS (length(content))",
            "generated column 'clen'",
        ),
        ("CREATE UNIQUE INDEX once ON memories(content)", "UNIQUE index 'once'"),
        ("ALTER TABLE memories ADD COLUMN owner TEXT CHECK (owner <> '')", "a CHECK clause"),
        ("ALTER TABLE memories ADD COLUMN owner TEXT COLLATE NOCASE", "a COLLATE clause"),
        (
            "ALTER TABLE memories ADD COLUMN owner INTEGER REFERENCES memory_events(id)",
            "a foreign key on 'owner'",
        ),
    ],
)
def test_what_a_view_cannot_keep_is_refused_by_name_and_nothing_is_lost(tmp_path, statement, named):
    """Refused before any migration runs: the file's bytes are what they were (before, the
    upgrades before m020 were already in it, and a UNIQUE index, a CHECK or a COLLATE was
    dropped without a word: a write through the view could leave half a memory)."""
    path = article_with(tmp_path, statement)
    before = digest(path)
    with pytest.raises(StoreError, match=f"cannot upgrade .*{named}.*Nothing in it was changed"):
        Memory(path, policy=f"{POLICIES}/lifecycle.yaml", clock=lambda: T, offline=True)
    with pytest.raises(StoreError, match=f"cannot upgrade .*{named}"):  # read-only: the same
        Memory(path, policy=f"{POLICIES}/lifecycle.yaml", clock=lambda: T, offline=True, read_only=True)
    assert digest(path) == before
    assert sorted(os.listdir(tmp_path)) == ["article.db"]


@pytest.mark.sqlite_only
def test_memories_with_no_namespace_are_refused_with_what_to_do(tmp_path):
    """Before: a raw 'NOT NULL constraint failed: memory_rows.namespace' after m001..m019."""
    path = article_with(tmp_path, "ALTER TABLE memories ADD COLUMN namespace TEXT")
    before = digest(path)
    with pytest.raises(
        StoreError,
        match="30 memories have no namespace.*UPDATE memories SET "
        "namespace = 'default' WHERE namespace IS NULL",
    ):
        Memory(path, policy=f"{POLICIES}/lifecycle.yaml", clock=lambda: T, offline=True)
    assert digest(path) == before
    db = sqlite3.connect(path)
    db.execute("UPDATE memories SET namespace = 'default' WHERE namespace IS NULL")
    db.commit()
    db.close()
    with Memory(path, policy=f"{POLICIES}/lifecycle.yaml", clock=lambda: T, offline=True) as mem:
        assert len(mem.memories("all", None)) == 30


@pytest.mark.sqlite_only
@pytest.mark.parametrize("read_only", [False, True])
def test_a_memories_table_that_is_not_the_articles_is_not_adopted(tmp_path, read_only):
    """Before: a read was told to run `lethe run` to adopt it, and that failed on 'no such
    column: status'."""
    path = str(tmp_path / "other.db")
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE memories (a)")
    db.commit()
    db.close()
    before = digest(path)
    with pytest.raises(StoreError, match="cannot adopt .*not the seed article's .*no column id, content"):
        Memory(path, policy=f"{POLICIES}/lifecycle.yaml", clock=lambda: T, offline=True, read_only=read_only)
    assert digest(path) == before


@pytest.mark.sqlite_only
def test_a_write_through_the_view_is_whole_or_refused(tmp_path):
    """No row without its text (INSERT OR IGNORE of a NULL content is refused, as the
    table refused it); an UPDATE of one column leaves the others as they were."""
    path = str(tmp_path / "memory.db")
    with Memory(path, policy=f"{POLICIES}/lifecycle.yaml", clock=lambda: T, offline=True) as mem:
        mid = mem.add("User prefers tabs", importance=8)
        before = dict(store_of(mem).db.execute("SELECT * FROM memories WHERE id = ?", (mid,)).fetchone())
        db = sqlite3.connect(path, isolation_level=None)
        try:
            with pytest.raises(sqlite3.IntegrityError, match="memories.content"):
                db.execute("INSERT OR IGNORE INTO memories (summary) VALUES ('no content')")
            db.execute("UPDATE memories SET decay_score = 0.5 WHERE id = ?", (mid,))
            after = dict(
                zip(
                    [d[1] for d in db.execute("PRAGMA table_info(memories)")],
                    db.execute("SELECT * FROM memories WHERE id = ?", (mid,)).fetchone(),
                )
            )
            counts = [
                db.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in ("memory_rows", "memory_texts")
            ]
            fts = db.execute("INSERT INTO memories_fts(memories_fts) VALUES ('integrity-check')")
        finally:
            db.close()
    assert counts == [1, 1] and fts is not None
    assert after == {**before, "decay_score": 0.5}
