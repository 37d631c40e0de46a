"""Rewriting most of a table at once: rebuild its indexes instead of moving each entry.

A statement that rewrites a column for most rows (a decay pass, a rank refresh) moves one
entry per row in every index over that column, each a random B-tree update: at a million
memories that is most of the pass's time (bench/RESULTS.md). Dropping those indexes inside
the transaction and creating them again at its end sorts the entries once instead, with
the same rows, in the same transaction: readers keep seeing the old snapshot, indexes
included, until the commit, and a rollback restores both.
"""

from __future__ import annotations

import contextlib
import sqlite3
from typing import Iterable, Iterator

from engine.store.sqlite import recall_head as head
from engine.store.sqlite.text_apart import rows_table

# rebuilding pays off only when the rows rewritten are most of the table, and it is not
# worth a thought below this many rows: lifecycle's expiry + decay in-process, medians of
# 7 interleaved runs, moved in place / rebuilt: 500 rows 6.1 / 4.6 ms, 2,000 rows
# 10.5 / 8.8 ms, 5,000 rows 23.7 / 17.8 ms, 10,000 rows 50.7 / 35.8 ms; 100 rows 2.9 / 3.0
BULK_MIN_ROWS = 1_000
# partial indexes over a small part of the table (m017: memories with an expiry date) or
# over columns a pass rarely changes (m019: active memories by namespace): a pass moves
# the few entries it touches there for less than a rebuild's scan of the table (an UPDATE
# that takes many rows out of the active ones makes m019's again: `leaving_active`). Recall's
# index joins them while it holds only the head of the ranking (engine.store.sqlite.recall_head).
KEPT_IN_PLACE = {"memories_expiry", "memories_active"}


def most_of_the_table(db: sqlite3.Connection, rows: int) -> int | None:
    """The table's largest rowid when `rows` memories are most of it: more than
    BULK_MIN_ROWS and over half that rowid (which costs no scan). None otherwise.

    Rows reached in that number are rewritten with the indexes rebuilt, and read in rowid
    order (a range from 0 to that rowid), not through an index on namespace: without
    statistics SQLite takes `namespace = ?` as selective and walks an index that leads with
    it, such as (namespace, scene), fetching the rows in that index's order. With scenes set
    on a million memories that made decay 3.3x slower (bench/RESULTS.md, eleventh round)."""
    if rows <= BULK_MIN_ROWS:
        return None
    top = db.execute(f"SELECT coalesce(max(rowid), 0) FROM {rows_table(db)}").fetchone()[0]
    return top if rows * 2 > top else None


def worth_rebuilding(db: sqlite3.Connection, rows: int) -> bool:
    """Whether rewriting `rows` memories is cheaper with the indexes rebuilt: when they are
    most of the table (`most_of_the_table`)."""
    return most_of_the_table(db, rows) is not None


def indexes_over(
    db: sqlite3.Connection, columns: Iterable[str], head_in_place: bool = True
) -> list[tuple[str, str]]:
    """(name, CREATE statement) of each index on memories that holds one of `columns`.
    Indexes SQLite made for a constraint (no SQL of their own) and the small partial
    indexes in KEPT_IN_PLACE are never included, nor recall's while it holds only the
    head of the ranking, unless `head_in_place` is False (a rank refresh, which may move
    every rank into the head: it is chosen again from the new ranks instead)."""
    wanted = set(columns)
    kept = KEPT_IN_PLACE | ({head.INDEX} if head_in_place and head.floor(db) is not None else set())
    out = []
    for name, sql in db.execute(
        "SELECT name, sql FROM sqlite_master WHERE type = 'index' "
        "AND tbl_name = ? AND sql IS NOT NULL ORDER BY name",
        (rows_table(db),),
    ).fetchall():
        held = {r[2] for r in db.execute("SELECT * FROM pragma_index_info(?)", (name,))}
        if held & wanted and name not in kept:
            out.append((name, sql))
    return out


@contextlib.contextmanager
def rebuilding(
    db: sqlite3.Connection, columns: Iterable[str], rows: int, now: str, head_in_place: bool = True
) -> Iterator[list[str]]:
    """Inside the caller's transaction: when rewriting `rows` memories is worth it, drop
    the indexes over `columns` for the block and create them again after it (recall's
    with the floor chosen again from the new ranks: engine.store.sqlite.recall_head; `now` is when).
    Yields the names of the indexes rebuilt (empty: the statements update them as usual).
    When the block raises, nothing is re-created here: the caller's rollback restores
    them."""
    dropped = indexes_over(db, columns, head_in_place) if worth_rebuilding(db, rows) else []
    for name, _ in dropped:
        db.execute('DROP INDEX "' + name.replace('"', '""') + '"')
    yield [name for name, _ in dropped]
    for name, sql in dropped:
        if name == head.INDEX:
            head.settle(db, now)
        else:
            db.execute(sql)


ACTIVE_INDEX = "memories_active"  # m019: active memories by namespace, partial on status
# an UPDATE that takes rows out of the active ones removes one entry a row from that
# index (lifecycle's archive a year on, 680,739 of 1M rows: 0.62 s CPU more than without
# the index), where creating it again reads the rows once, without their text (m020), and
# sorts those still active (0.14 s at 1M): worth it when they are this share of the file
LEAVING_SHARE = 4  # more than 1/LEAVING_SHARE of the file's largest rowid


@contextlib.contextmanager
def leaving_active(db: sqlite3.Connection, rows: int) -> Iterator[bool]:
    """Inside the caller's transaction, around an UPDATE that takes `rows` memories out of
    the active ones: when they are more than BULK_MIN_ROWS and a large share of the file,
    drop the index of the active memories before it and create it again (the same
    statement) after it. Yields whether it did. When the block raises, nothing is
    re-created here: the caller's rollback restores it."""
    found = None
    if rows > BULK_MIN_ROWS:
        top = db.execute(f"SELECT coalesce(max(rowid), 0) FROM {rows_table(db)}").fetchone()[0]
        if rows * LEAVING_SHARE > top:
            found = db.execute(
                "SELECT sql FROM sqlite_master WHERE type = 'index' AND name = ? AND tbl_name = ?",
                (ACTIVE_INDEX, rows_table(db)),
            ).fetchone()
    if found is not None:
        db.execute(f'DROP INDEX "{ACTIVE_INDEX}"')
    yield found is not None
    if found is not None:
        db.execute(found[0])
