"""Copy a store into another: an article `agent_memory.db`, a Lethe SQLite file or a
PostgreSQL database into a SQLite file or a PostgreSQL database (`lethe import`).

Ids, events, the inbox, model calls, pass runs and progress, and scenes keep their values.
Each table is copied in id order, a batch per transaction, and a rerun resumes after the
last id the destination holds, so a copy killed half-way and run again ends with the same
rows as one that was never interrupted. Leases (who runs passes right now) and the rank
signature (compiled SQL, per dialect) are not copied: the destination's first open
recomputes the stored rank. Stop the source's writers first: rows written to the source
behind a finished table are not seen.
"""
from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from typing import Callable

from ..clock import Clock
from ..errors import StoreError
from . import open_store
from .postgres import _psycopg, is_dsn, masked

# (table, key): tables with an `id` are copied in id order and resume after the last one
TABLES = [("memories", "id"), ("memory_events", "id"), ("inbox", "id"), ("model_calls", "id"),
          ("pass_runs", None), ("pass_progress", None), ("scenes", None)]
Progress = Callable[[str, int, int], None] | None  # (table, copied so far, total)


@dataclass
class Transfer:
    """What one `copy_store` did, per table: rows copied now, rows already there before."""

    source: str
    destination: str
    copied: dict[str, int] = field(default_factory=dict)
    resumed: dict[str, int] = field(default_factory=dict)

    def as_dict(self) -> dict:
        return {"source": self.source, "destination": self.destination,
                "copied": self.copied, "already_there": self.resumed}


class _Source:
    """Read-only access to the source's tables, with `?` SQL on either backend."""

    def __init__(self, target: str):
        self.pg = is_dsn(target)
        try:
            if self.pg:
                self.db = _psycopg().connect(target, autocommit=True)
            else:
                self.db = sqlite3.connect(f"file:{target}?mode=ro", uri=True)
        except Exception as exc:
            shown = masked(target)
            raise StoreError(f"cannot open the source {shown}: {str(exc).splitlines()[0]}") from None

    def q(self, sql: str, params=()):
        return self.db.execute(sql.replace("?", "%s") if self.pg else sql, params)

    def columns(self, table: str) -> list[str]:
        if self.pg:
            rows = self.q("SELECT column_name FROM information_schema.columns WHERE table_name = ? "
                          "AND table_schema = current_schema() ORDER BY ordinal_position", (table,))
            return [r[0] for r in rows]
        return [r[1] for r in self.q(f'PRAGMA table_info("{table}")')]


def copy_store(source: str, destination: str, clock: Clock | None = None, batch: int = 5000,
               progress: Progress = None) -> Transfer:
    """Copy every table of `source` into `destination` (created or upgraded to the current
    schema), keeping ids; resumable. Raises StoreError when the destination holds memories
    that are not this source's."""
    src, dst = _Source(source), open_store(destination, clock)
    result = Transfer(masked(source), masked(destination))
    try:
        _check_same_history(src, dst)
        for table, key in TABLES:
            cols = [c for c in src.columns(table) if c in set(_dst_columns(dst, table))]
            if not cols:
                continue  # an article database has no inbox, no pass runs, ...
            if key:
                _copy_by_id(src, dst, table, cols, batch, result, progress)
            else:
                _copy_small(src, dst, table, cols, result)
        if dst.dialect == "postgres":
            _reset_sequences(dst)
            dst.db.execute("ANALYZE")  # the planner's statistics for the rows just copied
    finally:
        src.db.close()
        dst.close()
    return result


def _dst_columns(dst, table: str) -> list[str]:
    return _Source.columns(_as_source(dst), table)


def _as_source(dst) -> _Source:
    view = _Source.__new__(_Source)
    view.pg, view.db = dst.dialect == "postgres", dst.db
    return view


def _check_same_history(src: _Source, dst) -> None:
    """A destination with memories must be an earlier, interrupted copy of this source."""
    view = _as_source(dst)
    top = view.q("SELECT max(id) FROM memories").fetchone()[0]
    if top is None:
        return
    theirs = src.q("SELECT content FROM memories WHERE id = ?", (top,)).fetchone()
    ours = view.q("SELECT content FROM memories WHERE id = ?", (top,)).fetchone()
    if theirs is None or theirs[0] != ours[0]:
        raise StoreError(f"the destination already holds other memories (#{top} differs from "
                         "the source's): import into an empty database")


def _copy_by_id(src: _Source, dst, table: str, cols: list[str], batch: int, result: Transfer,
                progress: Progress) -> None:
    view = _as_source(dst)
    done = view.q(f"SELECT count(*), max(id) FROM {table}").fetchone()
    last = done[1] or 0
    total = src.q(f"SELECT count(*) FROM {table}").fetchone()[0]
    result.resumed[table], result.copied[table] = done[0], 0
    select = f"SELECT {', '.join(cols)} FROM {table} WHERE id > ? ORDER BY id LIMIT ?"
    while True:
        rows = src.q(select, (last, batch)).fetchall()
        if not rows:
            break
        with dst.transaction():
            _write(dst, table, cols, rows)
        last = rows[-1][cols.index("id")]
        result.copied[table] += len(rows)
        if progress:
            progress(table, done[0] + result.copied[table], total)


def _copy_small(src: _Source, dst, table: str, cols: list[str], result: Transfer) -> None:
    """Keyed by name (pass runs, progress, scenes): inserted unless already there."""
    rows = src.q(f"SELECT {', '.join(cols)} FROM {table}").fetchall()
    mark = "%s" if dst.dialect == "postgres" else "?"
    sql = (f"INSERT INTO {table} ({', '.join(cols)}) VALUES ({', '.join(mark for _ in cols)}) "
           "ON CONFLICT DO NOTHING")
    with dst.transaction():
        changed = sum(max(dst.db.execute(sql, tuple(r)).rowcount, 0) for r in rows)
    result.copied[table], result.resumed[table] = changed, len(rows) - changed


def _write(dst, table: str, cols: list[str], rows) -> None:
    if dst.dialect == "postgres":  # COPY: one stream per batch, triggers still fire
        with dst.db.cursor().copy(f"COPY {table} ({', '.join(cols)}) FROM STDIN") as copy:
            for row in rows:
                copy.write_row(tuple(row))
        return
    dst.db.executemany(f"INSERT INTO {table} ({', '.join(cols)}) "
                       f"VALUES ({', '.join('?' for _ in cols)})", [tuple(r) for r in rows])


def _reset_sequences(dst) -> None:
    """Identity columns continue after the copied ids, so the next insert gets a new one."""
    for table, key in TABLES:
        if key:
            dst.db.execute(f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), "
                           f"(SELECT coalesce(max(id), 0) + 1 FROM {table}), false)")
