"""Recall's index over the head of the ranking only (SQLite).

Recall reads the best-ranked active memories of a namespace, a few dozen of them, through
the index `memories_recall (namespace, status, rank, id)`. Over every active memory that
index costs a decay pass most of its time: the pass rewrites every rank, and the index is
either moved one entry a row (random B-tree updates) or rebuilt from a sort of them all
(bench/RESULTS.md). Recall never reads past the first few dozen entries.

So on a store with many memories the index is partial: `WHERE status = 'active' AND rank
>= FLOOR`, FLOOR a number the store chooses from the ranks themselves (never text from a
policy or a memory) and keeps in `recall_head`. SQLite maintains a partial index only for
rows inside it, before or after an UPDATE: a decay moves the head's few thousand entries
and drops those that fall under the floor, and does nothing for the rest.

Recall stays exact whatever the floor: its statement runs first with `AND rank >= ?`
bound to the floor (SQLite plans with the bound value, so it walks the head), and when
that returns fewer rows than asked for, the statement without it runs (the rows under the
floor all rank lower than any row above it). A namespace of few memories, or one whose
ranks are all under the floor, reads its rows through `memories_active` and sorts them.

The floor is chosen again (`settle`) when a pass leaves the head under half the size it
was chosen for, over four times it, or a large namespace with too few rows in it. Under
FULL_BELOW active memories, or when no floor would leave the head small, the index is over
every active memory (`floor` is NULL), and a pass over most of the file
rebuilds it (engine.store.sqlite.bulk). PostgreSQL keeps its full index: its planner has
statistics and never needs this.
"""

from __future__ import annotations

import math
import sqlite3

from engine.store.sqlite.sqlite_library import library
from engine.store.sqlite.text_apart import ROWS

INDEX = "memories_recall"
HEAD_ROWS = 10_000  # entries in the head when its floor is chosen
PER_NAMESPACE = 500  # entries kept for each namespace of at least twice this many
FULL_BELOW = 40_000  # active memories under which the index holds every one of them

_COLUMNS = f"{ROWS}(namespace, status, rank, id)"  # the rows' table (migrations m020)


def floor(db: sqlite3.Connection) -> float | None:
    """The head's floor (None: the index holds every active memory, or the database has
    no `recall_head`: a bare article file that no store has opened)."""
    try:
        row = db.execute("SELECT floor FROM recall_head").fetchone()
    except library(db).OperationalError:
        if db.execute("SELECT 1 FROM sqlite_master WHERE name = 'recall_head'").fetchone():
            raise
        return None
    return None if row is None else row[0]


def index_sql(value: float | None) -> str:
    """recall's CREATE INDEX for a floor (None: every active memory). The floor is a
    finite float the store computed, written as Python's exact repr of it."""
    where = "status = 'active'"
    if value is not None:
        if not isinstance(value, float) or not math.isfinite(value):
            raise ValueError(f"a floor must be a finite float, not {value!r}")
        where += f" AND rank >= {value!r}"
    return f"CREATE INDEX {INDEX} ON {_COLUMNS} WHERE {where}"


def choose(db: sqlite3.Connection) -> float | None:
    """The floor that leaves about HEAD_ROWS active memories above it, low enough that each
    namespace of at least 2 x PER_NAMESPACE active memories keeps PER_NAMESPACE of its own
    in the head; None when the store is small or no such floor leaves the head under half
    of the active memories. Reads the ranks with no index over them (a scan: 0.2-0.5 s at
    a million memories), so it runs rarely: when the head has drifted (`check`)."""
    active = db.execute(f"SELECT count(*) FROM {ROWS} WHERE status = 'active'").fetchone()[0]
    if active < FULL_BELOW:
        return None
    ranked = "status = 'active' AND rank IS NOT NULL ORDER BY rank DESC LIMIT 1 OFFSET ?"
    row = db.execute(f"SELECT rank FROM {ROWS} WHERE {ranked}", (HEAD_ROWS - 1,)).fetchone()
    if row is None:
        return None
    value = row[0]
    large = db.execute(
        f"SELECT namespace FROM {ROWS} WHERE status = 'active' GROUP BY namespace HAVING count(*) >= ?",
        (2 * PER_NAMESPACE,),
    )
    for (namespace,) in large.fetchall():
        row = db.execute(
            f"SELECT rank FROM {ROWS} WHERE namespace = ? AND {ranked}", (namespace, PER_NAMESPACE - 1)
        ).fetchone()
        if row is not None and row[0] < value:
            value = row[0]
    if not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    value = float(value)
    # ties at the floor, or a namespace that pulled it down, can make the head most of it
    head = db.execute(
        f"SELECT count(*) FROM {ROWS} WHERE status = 'active' AND rank >= ?", (value,)
    ).fetchone()[0]
    return None if head * 2 > active else value


def install(db: sqlite3.Connection, value: float | None, now: str) -> float | None:
    """In the caller's transaction: recall's index made again for the floor `value`, and
    the floor recorded as SQLite reads it back from the index's text (what recall binds
    must equal it exactly for SQLite to plan with the head). Returns that floor."""
    db.execute(f"DROP INDEX IF EXISTS {INDEX}")
    db.execute(index_sql(value))
    if value is not None:
        value = db.execute(f"SELECT {value!r}").fetchone()[0]
    head = db.execute(
        f"SELECT count(*) FROM {ROWS} WHERE status = 'active'" + ("" if value is None else " AND rank >= ?"),
        () if value is None else (value,),
    ).fetchone()[0]
    db.execute("UPDATE recall_head SET floor = ?, rows = ?, chosen_at = ?", (value, head, now))
    return value


def settle(db: sqlite3.Connection, now: str) -> float | None:
    """Choose the floor again and make recall's index for it (`choose`, `install`)."""
    return install(db, choose(db), now)


def check(db: sqlite3.Connection, namespace: str, now: str) -> bool:
    """After a pass over `namespace`, in its transaction: settle again when the head has
    drifted from what it was chosen for. Costs a count of the head's entries (a few
    thousand) or, over every active memory, nothing while the file is small. Whether it
    settled."""
    value, chosen_for = db.execute("SELECT floor, rows FROM recall_head").fetchone() or (None, 0)
    if value is None:  # over every active memory: has the file grown enough for a head?
        top = db.execute(f"SELECT coalesce(max(rowid), 0) FROM {ROWS}").fetchone()[0]
        if top < FULL_BELOW:
            return False
        active = _active(db)
        if active < max(FULL_BELOW, 2 * (chosen_for or 0)):
            return False
        chosen = choose(db)
        if chosen is None:  # looked at this size: not again before it doubles
            db.execute("UPDATE recall_head SET rows = ?, chosen_at = ?", (active, now))
            return False
        install(db, chosen, now)
        return True
    try:
        head, mine = _head(db, value), _head(db, value, namespace)
    except library(db).OperationalError:  # the index is not the one recorded: make it again
        head = mine = -1
    chosen_for = max(chosen_for or 0, 1)
    drifted = not chosen_for // 2 <= head <= 4 * max(chosen_for, HEAD_ROWS)
    short = mine < PER_NAMESPACE // 2 and _active(db, namespace) >= 2 * PER_NAMESPACE
    if not drifted and not short:
        return False
    settle(db, now)
    return True


def _active(db: sqlite3.Connection, namespace: str | None = None) -> int:
    if namespace is None:
        return db.execute(f"SELECT count(*) FROM {ROWS} WHERE status = 'active'").fetchone()[0]
    return db.execute(
        f"SELECT count(*) FROM {ROWS} WHERE namespace = ? AND status = 'active'", (namespace,)
    ).fetchone()[0]


def _head(db: sqlite3.Connection, value: float, namespace: str | None = None) -> int:
    if namespace is None:
        return db.execute(
            f"SELECT count(*) FROM {ROWS} WHERE status = 'active' AND rank >= ?", (value,)
        ).fetchone()[0]
    return db.execute(
        f"SELECT count(*) FROM {ROWS} WHERE namespace = ? AND status = 'active' AND rank >= ?",
        (namespace, value),
    ).fetchone()[0]
