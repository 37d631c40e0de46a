"""Schema upgrades: a database from every earlier schema version, opened with Memory,
upgrades in place with every row intact and every migration applied.

The fixtures live in tests/fixtures/schemas/ (`make.py` there builds them): the seed
article's database, then one per prefix of engine.store.MIGRATIONS. Adding a migration
means adding the fixture of the version before it: run `python tests/fixtures/schemas/make.py`.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import sqlite3

import pytest

from engine import Memory
from engine.store import MIGRATIONS, Store
from tests.helpers import POLICIES, ROOT, START, store_of

HERE = os.path.join(ROOT, "tests", "fixtures", "schemas")
LIFECYCLE = os.path.join(POLICIES, "lifecycle.yaml")


def _make_module():
    spec = importlib.util.spec_from_file_location("schema_fixtures_make", os.path.join(HERE, "make.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


make = _make_module()
FIXTURES = sorted(
    (f for f in os.listdir(HERE) if f.endswith(".sqlite")), key=lambda f: int(f[1:].split("-")[0])
)


def dump(path: str) -> dict:
    """Every row of every table, by rowid, as {column: value} (FTS shadow tables aside).
    `memories` is read as the seed article's table, whether it is one or, since m020, the
    view over memory_rows and memory_texts (those two are read through it, by id)."""
    db = sqlite3.connect(path)
    try:
        out = {}
        for (table,) in db.execute(
            "SELECT name FROM sqlite_master WHERE (type = 'table' OR "
            "name = 'memories') AND name NOT LIKE 'sqlite_%' AND name "
            "NOT LIKE 'memories_fts%' AND name NOT IN ('memory_rows', "
            "'memory_texts')"
        ).fetchall():
            cols = [r[1] for r in db.execute(f'PRAGMA table_info("{table}")')]
            key = "id" if table == "memories" else "rowid"
            rows = db.execute(f'SELECT {key}, * FROM "{table}" ORDER BY {key}').fetchall()
            out[table] = {r[0]: dict(zip(cols, r[1:])) for r in rows}
        return out
    finally:
        db.close()


def test_there_is_a_fixture_for_every_earlier_schema_version():
    missing = [name for _, name in make.versions() if name not in FIXTURES]
    assert missing == [], f"run `python tests/fixtures/schemas/make.py` to add {missing}"
    assert FIXTURES[0] == "v0-article.sqlite"


def test_the_fixtures_are_what_make_py_builds(tmp_path):
    """Rebuilding gives the same rows: the fixtures are reproducible, and a migration
    changed after its fixture was recorded shows up here."""
    make.main(["--out", str(tmp_path)])
    for _, name in make.versions():
        assert dump(str(tmp_path / name)) == dump(os.path.join(HERE, name)), name


@pytest.fixture(params=FIXTURES)
def old_db(request, tmp_path):
    name = request.param
    path = str(tmp_path / name.replace(".sqlite", ".db"))
    shutil.copyfile(os.path.join(HERE, name), path)
    return name, path


def test_an_old_database_upgrades_in_place_with_every_row_intact(old_db):
    name, path = old_db
    before = dump(path)
    had_migrations = {r["name"] for r in before.get("lethe_migrations", {}).values()}
    with Memory(path, policy=LIFECYCLE, offline=True, clock=lambda: START) as mem:
        db = store_of(mem).db
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        names = [r[0] for r in db.execute("SELECT name FROM lethe_migrations ORDER BY rowid")]
        assert sorted(names) == sorted(fn.__name__ for fn in MIGRATIONS)
        assert len(names) == len(set(names))
        assert store_of(mem).migrate() == []  # nothing left to apply
    after = dump(path)

    # Every row of every table is still there, unchanged, with two kinds of engine
    # bookkeeping aside: the upgrade adds rows to lethe_migrations, and opening with a
    # policy recomputes the stored rank (and records its formula in policy_state) for
    # that policy's namespace.
    for table, rows in before.items():
        if table == "lethe_migrations":
            assert set(after[table]) >= set(rows)
        else:
            assert set(after[table]) == set(rows), f"{name}: rows of {table} added or lost"
        for rowid, old in rows.items():
            new = after[table][rowid]
            for col, value in old.items():
                if table == "memories" and col == "rank" and new["namespace"] == "default":
                    continue
                if (
                    table == "policy_state"
                    and new["namespace"] == "default"
                    and col in ("policy", "rank_formula", "updated_at")
                ):
                    continue
                assert new[col] == value, f"{name}: {table} #{rowid}.{col} changed"
    assert had_migrations <= {fn.__name__ for fn in MIGRATIONS}

    memories = after["memories"]
    assert len(memories) == 60
    for m in memories.values():
        if "namespace" not in before["memories"][1]:  # columns an upgrade added
            assert m["namespace"] == "default" and m["kind"] is None and m["scene"] is None
        if m["namespace"] == "default":
            assert m["rank"] == pytest.approx(m["importance"] * m["confidence"] * m["decay_score"])


def test_an_upgraded_database_works(old_db):
    """Full text over the old rows, append-only events, passes, remember and pending turns."""
    name, path = old_db
    with Memory(path, policy=LIFECYCLE, offline=True, clock=lambda: START) as mem:
        db = store_of(mem).db
        row = db.execute(
            "SELECT id, content FROM memories WHERE namespace = 'default' AND "
            "status = 'active' AND content LIKE 'User prefers%' ORDER BY id LIMIT 1"
        ).fetchone()
        word = row["content"].split()[2]
        assert row["id"] in [m.id for m in mem.candidates(word, limit=100)]
        with pytest.raises(sqlite3.DatabaseError, match="append-only"):
            db.execute("UPDATE memory_events SET detail = 'x'")
        pending = mem.pending()
        mem.run_due()
        assert mem.pending() == []
        if pending:  # a turn left pending by the old version is judged now
            assert db.execute("SELECT status FROM inbox WHERE id = ?", (pending[0]["id"],)).fetchone()[0] in (
                "done",
                "dropped",
            )
        assert mem.remember("I use Podman for deployment now.", "Noted.")
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def test_two_processes_may_open_an_old_database_at_once(tmp_path):
    """The migrations re-check under the write lock: two Stores opening one old file."""
    path = str(tmp_path / "article.db")
    shutil.copyfile(os.path.join(HERE, "v0-article.sqlite"), path)
    a, b = Store(path), Store(path)
    try:
        for s in (a, b):
            names = [r[0] for r in s.db.execute("SELECT name FROM lethe_migrations")]
            assert sorted(names) == sorted(fn.__name__ for fn in MIGRATIONS)
    finally:
        a.close()
        b.close()


def test_the_article_fixture_is_the_articles_schema():
    db = sqlite3.connect(os.path.join(HERE, "v0-article.sqlite"))
    try:
        tables = {
            r[0]
            for r in db.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
            )
        }
        assert tables == {"memories", "memory_events"}
        cols = [r[1] for r in db.execute("PRAGMA table_info(memories)")]
        assert cols == [
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
        statuses = {r[0] for r in db.execute("SELECT DISTINCT status FROM memories")}
        assert statuses == {"active", "archived", "superseded", "expired", "compressed"}
        assert json.loads(db.execute("SELECT tags FROM memories WHERE id = 2").fetchone()[0])
    finally:
        db.close()
