"""A memory's text in a table of its own (SQLite): what migration m020 makes, and the
names the store reads it by.

`memory_rows` holds every column of a memory but its text, and every index over memories;
`memory_texts` holds content, summary and tags by the memory's id; `memories` is a view
joining them, with the seed article's columns in the article's order, and INSTEAD OF
triggers for writes that come through it. A pass rewrites every active row's score, and
SQLite writes whole pages: without the text (136 of ~240 bytes a row at 1M) it rewrites
about half as many (bench/RESULTS.md, eighteenth round).
"""

from __future__ import annotations

import re

from engine.base.errors import StoreError
from engine.store.sqlite.sqlite_library import library

MIGRATION = "m020_text_apart"  # the migration after which memories is a view
ROWS, TEXTS = "memory_rows", "memory_texts"
TEXT_COLUMNS = ("content", "summary", "tags")
# every other column of `memories` as m001..m019 left it: (declaration, default). The
# default is also what an INSERT through the view gets for a column it leaves out (a view
# has no defaults of its own)
_ROW_COLUMNS = {
    "importance": ("REAL", "5.0"),
    "confidence": ("REAL", "1.0"),
    "access_count": ("INTEGER", "0"),
    "decay_score": ("REAL", "1.0"),
    "status": ("TEXT", "'active'"),
    "contradicted_by": ("INTEGER REFERENCES memory_rows(id)", None),
    "created_at": ("TEXT", None),
    "last_accessed": ("TEXT", None),
    "expires_at": ("TEXT", None),
    "namespace": ("TEXT NOT NULL", "'default'"),
    "kind": ("TEXT", None),
    "scene": ("TEXT", None),
    "rank": ("REAL", None),
    "merged_into": ("INTEGER REFERENCES memory_rows(id)", None),
}


def rows_table(db) -> str:
    """The table that holds memories' rows: memory_rows once m020 has run, memories on a
    file it has not (the seed article's own, one being upgraded)."""
    return (
        ROWS
        if db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (ROWS,)).fetchone()
        else "memories"
    )


def go_on_after(db, table: str, seq) -> None:
    """`table`'s AUTOINCREMENT gives no id up to `seq` from now on (SQLite's
    sqlite_sequence; a value that is not a whole number is ignored): ids a store gave out
    never come back, even when their row is gone and its events remain."""
    if isinstance(seq, int) and not isinstance(seq, bool) and seq > 0:
        db.execute("UPDATE sqlite_sequence SET seq = max(seq, ?) WHERE name = ?", (seq, table))
        db.execute(
            "INSERT INTO sqlite_sequence (name, seq) SELECT ?, ? WHERE NOT EXISTS "
            "(SELECT 1 FROM sqlite_sequence WHERE name = ?)",
            (table, seq, table),
        )


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def split(db) -> None:
    """The memories' text (content, summary, tags: over half of a row) moves to
    `memory_texts`; every other column, and every index, to `memory_rows`; `memories`
    becomes a view joining them, with the article's columns in the article's order. A pass
    rewriting every active row's score rewrites pages that hold no text, half as many as
    with the text in them (bench/RESULTS.md, eighteenth round). Readers, and writers through INSTEAD OF
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
    indexes = db.execute(
        "SELECT name, sql FROM sqlite_master WHERE type = 'index' AND "
        "tbl_name = 'memories' AND sql IS NOT NULL ORDER BY name"
    ).fetchall()
    seq = db.execute(
        "SELECT CAST(seq AS INTEGER) FROM sqlite_sequence WHERE name = 'memories'"
    ).fetchone()  # as SQLite reads it
    decl = ", ".join(_declared(c) for c in row_cols)
    db.execute(f"CREATE TABLE {ROWS} (id INTEGER PRIMARY KEY AUTOINCREMENT, {decl})")
    listed = ", ".join(_q(c[0]) for c in row_cols)
    db.execute(f"INSERT INTO {ROWS} (id, {listed}) SELECT id, {listed} FROM memories ORDER BY id")
    db.execute(
        f"CREATE TABLE {TEXTS} (id INTEGER PRIMARY KEY, content TEXT NOT NULL, summary TEXT, tags TEXT)"
    )
    db.execute(
        f"INSERT INTO {TEXTS} (id, content, summary, tags) "
        "SELECT id, content, summary, tags FROM memories ORDER BY id"
    )
    if seq is not None:  # ids never come back: the old table's sequence goes on
        go_on_after(db, ROWS, seq[0])
    db.execute("DROP TABLE memories")  # its indexes and full-text triggers with it
    for name, sql in indexes:  # Lethe's own (recall's, expiry's, active's, scene's), any other
        _move_index(db, name, sql)
    picked = ", ".join(f"t.{c} AS {c}" if c in TEXT_COLUMNS else f"r.{_q(c)} AS {_q(c)}" for c in names)
    db.execute(
        f"CREATE VIEW memories AS SELECT {picked} FROM {ROWS} AS r LEFT JOIN {TEXTS} AS t ON t.id = r.id"
    )
    _view_triggers(db, row_cols)
    _text_search_triggers(db)


_FTS_TRIGGERS = {"memories_fts_insert", "memories_fts_delete", "memories_fts_update"}
_ON_MEMORIES = re.compile(
    r"""\bON\s+(?:"memories"|'memories'|`memories`|\[memories\]|memories)"""
    r"""\s*\(""",
    re.IGNORECASE,
)
# the seed article's columns (m001): a memories table without them is not one Lethe adopts
ARTICLE_COLUMNS = (
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
)
_QUOTED = re.compile(r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|`[^`]*`|\[[^\]]*\]|--[^\n]*|/\*.*?\*/", re.DOTALL)
_KEPT_NOT = re.compile(r"\b(CHECK|COLLATE)\b", re.IGNORECASE)


def _not_another_applications(db, where: str) -> None:
    """Refuse a file with tables of its own but neither Lethe's (`lethe_migrations`) nor
    the article's `memories` table: another application's database, which adopting would
    give twenty tables and switch to WAL. An empty or new file is Lethe's to make."""
    found = [
        r[0]
        for r in db.execute(
            "SELECT name FROM sqlite_master WHERE type IN ('table', 'view') AND name NOT LIKE "
            "'sqlite_%' ORDER BY name"
        )
    ]
    if found and "lethe_migrations" not in found:
        shown = ", ".join(found[:5]) + (f" and {len(found) - 5} more" if len(found) > 5 else "")
        raise StoreError(
            f"cannot open {where}: it is another application's database (tables "
            f"{shown}), with neither Lethe's tables nor the article's memories "
            "table; Lethe opens a new file, one of its own or an agent_memory.db. "
            "Nothing in it was changed"
        )


def adoptable(db, where: str = "this file", writing: bool = False) -> None:
    """Refuse, naming each, what this file's memories table holds that Lethe's store
    cannot keep once its text is apart from its rows (m020): before any migration runs,
    so a refused file is left as it was. A table that is not the seed article's; a
    generated column; a trigger, a UNIQUE index or constraint, a CHECK, a COLLATE or a
    foreign key of the user's own (a view keeps none of them: a write through it with
    OR IGNORE or OR REPLACE would leave half a memory); an index over text and other
    columns at once; rows with no namespace. Nothing to check on a file whose memories
    are already apart (a view); one without a memories table is refused when `writing`
    (a store opened to write adopts it) if it holds another application's tables."""
    kind = db.execute("SELECT type, sql FROM sqlite_master WHERE name = 'memories'").fetchone()
    if kind is None and writing:  # a reader says "no Lethe store" of it itself
        _not_another_applications(db, where)
    if kind is None or kind[0] != "table":
        return
    cols = db.execute('PRAGMA table_xinfo("memories")').fetchall()
    names = [r[1] for r in cols]
    missing = [c for c in ARTICLE_COLUMNS if c not in names]
    if missing:
        raise StoreError(
            f"cannot adopt {where}: its memories table is not the seed "
            f"article's (it has no column {', '.join(missing)}); Lethe adopts an "
            "agent_memory.db or opens a file of its own. Nothing in it was changed"
        )
    found = [f"generated column {r[1]!r}" for r in cols if r[6]]
    found += [
        f"trigger {r[0]!r}"
        for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'memories'")
        if r[0] not in _FTS_TRIGGERS
    ]
    bare = _QUOTED.sub(" ", kind[1] or "")
    found += [f"a {w.upper()} clause" for w in sorted({m.lower() for m in _KEPT_NOT.findall(bare)})]
    own = set(ARTICLE_COLUMNS) | set(_ROW_COLUMNS)
    found += [
        f"a foreign key on {r[3]!r}"
        for r in db.execute('PRAGMA foreign_key_list("memories")')
        if r[3] not in own
    ]
    for _, name, unique, origin, partial in db.execute('PRAGMA index_list("memories")'):
        parts = [r[2] for r in db.execute("SELECT * FROM pragma_index_xinfo(?)", (name,)) if r[5]]
        if unique:
            found.append(
                f"UNIQUE index {name!r}"
                if origin == "c"
                else f"a UNIQUE or PRIMARY KEY constraint on {', '.join(map(str, parts))}"
            )
            continue
        sql = db.execute("SELECT sql FROM sqlite_master WHERE name = ?", (name,)).fetchone()
        if (None in parts or partial) and sql and sql[0]:  # every column it names
            words = set(re.findall(r"\w+", _QUOTED.sub(" ", sql[0]).split("(", 1)[-1]))
            parts = [c for c in names if c in words]
        text = {p for p in parts if p in TEXT_COLUMNS}
        if text and len(text) < len(parts):
            found.append(f"index {name!r} over text and other columns")
    if found:
        raise StoreError(
            f"cannot upgrade {where}: memories has {', '.join(found)}, which "
            "Lethe's store cannot keep (its text lives apart from its rows, "
            "joined by a view); drop them and try again (once it is upgraded, "
            "an index can be made on memory_rows or memory_texts). "
            "Nothing in it was changed"
        )
    if "namespace" in names:
        none = db.execute("SELECT count(*) FROM memories WHERE namespace IS NULL").fetchone()[0]
        if none:
            raise StoreError(
                f"cannot upgrade {where}: {none} memories have no namespace "
                "(NULL), which Lethe's store refuses; give them one (UPDATE "
                "memories SET namespace = 'default' WHERE namespace IS NULL) and "
                "try again. Nothing in it was changed"
            )


def _movable_columns(db) -> list[tuple]:
    """(name, type, notnull, default) of each column of memories, once `adoptable` found
    nothing m020 cannot carry into a view (it ran before any migration; again here for
    a file upgraded another way)."""
    adoptable(db)
    return [(r[1], r[2], r[3], r[4]) for r in db.execute('PRAGMA table_xinfo("memories")')]


_SAFE_TYPE = re.compile(r"[A-Za-z][A-Za-z0-9_ ]*(\(\s*[0-9]+\s*(,\s*[0-9]+\s*)?\))?")


def _default(col: tuple) -> str | None:
    """A column's default as SQL: Lethe's own as its migration declared it, any other's as
    SQLite reports it (in parentheses: an expression)."""
    name, _, _, default = col
    if name in _ROW_COLUMNS:
        return _ROW_COLUMNS[name][1]
    return None if default is None else f"({default})"


def _declared(col: tuple) -> str:
    """A column of memory_rows as memories declared it: Lethe's own as their migrations
    did; any other with its type, NOT NULL and default, as SQLite reports them."""
    name, type_, notnull, _ = col
    if name in _ROW_COLUMNS:
        out = f"{_q(name)} {_ROW_COLUMNS[name][0]}"
    else:
        out = _q(name) + (f" {type_}" if type_ and _SAFE_TYPE.fullmatch(type_) else "")
        out += " NOT NULL" if notnull else ""
    default = _default(col)
    return out + (f" DEFAULT {default}" if default is not None else "")


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
    raise StoreError(
        f"cannot upgrade this file (m020_text_apart): index {name!r} on memories "
        f"fits neither {ROWS} nor {TEXTS} ({'; '.join(errors)}); drop it, open the "
        "file again, and make it again on one of them (this step changed nothing; "
        "the upgrades before it stay)"
    )


def _view_triggers(db, row_cols: list[tuple]) -> None:
    """Writes through the view (a user's own script, the seed article's loop) go to the
    two tables. The engine itself writes the tables: a write through a view's trigger
    counts no rows (cursor.rowcount) and gives no lastrowid. An UPDATE writes only the
    columns it names (one trigger a column: writing the rest would move every index entry
    of the row). A column left out of an INSERT gets the table's default (a view has none)."""
    values = ", ".join(
        f"coalesce(NEW.{_q(c[0])}, {_default(c)})" if _default(c) is not None else f"NEW.{_q(c[0])}"
        for c in row_cols
    )
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
