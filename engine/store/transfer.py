"""Copy a store into another: an article `agent_memory.db`, a Lethe SQLite file or a
PostgreSQL database into a SQLite file or a PostgreSQL database (`lethe import`).

Ids, events, the inbox, model calls, pass runs and progress, and scenes keep their values,
and the copy's ids go on after every id the source gave out, even one whose row is gone
(its events may remain: a new memory must not take them over).
Each table is copied in id order, a batch per transaction, and a rerun resumes after the
last id the destination holds, so a copy killed half-way and run again ends with the same
rows as one that was never interrupted. Leases (who runs passes right now) and the rank
signature (compiled SQL, per dialect) are not copied: the destination's first open
recomputes the stored rank. Stop the source's writers first: rows written to the source
behind a finished table are not seen.

A SQLite source whose schema is behind (an article database, a file of an older Lethe) is
first adopted as opening it would: a copy (sqlite3's backup, in the temp folder) gets the
migrations it lacks, odd values included (m015's `normalised` events), and the rows are
read from that copy, so an import gives what adopting the file and then importing it
gives. The source itself is only read. The copy is on disk only while it is adopted:
then it is read through an open handle and its folder removed. A copy left by an import
killed while adopting it is removed by the next import on this host. A PostgreSQL source
must be as new as this Lethe (it is upgraded by opening it, not in a copy).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import stat
import tempfile
from dataclasses import dataclass, field
from typing import Callable

from engine.base import processes
from engine.base.clock import Clock, FixedClock, parse_time, system_clock
from engine.base.errors import StoreError
from engine.base.inputs import MAX_TAG, MAX_TAGS, MAX_TEXT
from engine.store import open_store
from engine.store.postgres.postgres_connection import is_dsn, masked
from engine.store.sqlite.sqlite_library import library, loaded
from engine.store.sqlite.sqlite_store import SqliteStore
from engine.store.sqlite.text_apart import MIGRATION as TEXT_APART
from engine.store.sqlite.text_apart import ROWS, TEXT_COLUMNS, TEXTS, adoptable, go_on_after, rows_table
from engine.store.transfer_source import Source, as_source, dst_columns

# (table, key): tables with an `id` are copied in id order and resume after the last one
TABLES = [
    ("memories", "id"),
    ("memory_events", "id"),
    ("inbox", "id"),
    ("model_calls", "id"),
    ("pass_runs", None),
    ("pass_progress", None),
    ("scenes", None),
]
Progress = Callable[[str, int, int], None] | None  # (table, copied so far, total)
Report = Callable[[str], None] | None  # a line saying what happens (adopting a copy, ...)
SCRATCH = "lethe-import-"  # an adopted copy's temp folder: lethe-import-<pid>@<host>-<random>


@dataclass
class Transfer:
    """What one `copy_store` did, per table: rows copied now, rows already there before."""

    source: str
    destination: str
    copied: dict[str, int] = field(default_factory=dict)
    resumed: dict[str, int] = field(default_factory=dict)
    adopted: list[str] = field(default_factory=list)  # migrations the source's copy got

    def as_dict(self) -> dict:
        return {
            "source": self.source,
            "destination": self.destination,
            "copied": self.copied,
            "already_there": self.resumed,
            "adopted": self.adopted,
        }


def copy_store(
    source: str,
    destination: str,
    clock: Clock | None = None,
    batch: int = 5000,
    progress: Progress = None,
    report: Report = None,
) -> Transfer:
    """Copy every table of `source` into `destination` (created or upgraded to the current
    schema), keeping ids; resumable. A SQLite source with an older schema is read from an
    adopted copy (see the module's docstring; `clock` dates its `normalised` events, and
    `report` is told about it). Raises StoreError when the destination holds memories
    that are not this source's."""
    _check_not_itself(source, destination)
    raw = Source(source)
    result = Transfer(masked(source), masked(destination))
    try:
        _check_source(raw, result.source)
        dst = open_store(destination, clock)
    except BaseException:
        raw.db.close()
        raise
    try:
        with _readable(raw, dst, clock, report, result) as src:
            _check_same_history(src, dst)
            _check_sizes(src)
            _copy_tables(src, dst, batch, result, progress)
    finally:
        raw.db.close()
        dst.close()
    return result


def _check_sizes(src: Source) -> None:
    """Refuse, before anything is copied, a source holding a memory, tag list or turn larger
    than `add()` and `remember()` accept: an import is an entry point like them, and such a
    memory wedged every judged write of its namespace."""
    checks = [
        ("memories", "memory", "content", MAX_TEXT),
        ("memories", "memory", "summary", MAX_TEXT),
        ("memories", "memory", "tags", MAX_TAGS * (MAX_TAG + 4) + 2),
        ("inbox", "turn", "user_text", MAX_TEXT),
        ("inbox", "turn", "assistant_text", MAX_TEXT),
    ]
    for table, what, column, limit in checks:
        if column not in src.columns(table):
            continue
        row = src.q(
            f"SELECT id, length({column}) FROM {table} WHERE length({column}) > {src.p} ORDER BY id LIMIT 1",
            (limit,),
        ).fetchone()
        if row is not None:
            raise StoreError(
                f"{what} #{row[0]} of the source has a {column} of {row[1]:,} "
                f"characters, at most {limit:,} are stored: shorten or remove "
                "it in the source, then import again"
            )


def _copy_tables(src: Source, dst, batch: int, result: Transfer, progress: Progress) -> None:
    for table, key in TABLES:
        cols = [c for c in src.columns(table) if c in set(dst_columns(dst, table))]
        if not cols:
            continue  # a source without an inbox, pass runs, ...
        if key:
            _copy_by_id(src, dst, table, cols, batch, result, progress)
        else:
            _copy_small(src, dst, table, cols, result)
    given = _given_out(src)
    if dst.ids_from_sequences:  # nor below what the destination itself gave out (a rerun)
        mine = _given_out(as_source(dst))
        _reset_sequences(dst, {t: max(given.get(t, 0), mine.get(t, 0)) for t in {*given, *mine}})
        dst.db.execute("ANALYZE")  # the planner's statistics for the rows just copied
    else:
        with dst.transaction():
            for table, seq in given.items():
                go_on_after(dst.db, rows_table(dst.db) if table == "memories" else table, seq)


def _given_out(src: Source) -> dict[str, int]:
    """The last id the source gave out in each table copied by id: its AUTOINCREMENT (or
    identity) never gives one again, even when that row is gone (deleted by another
    program, its events kept), so the copy must not either. A table without a sequence, or
    one this role may not read, gives nothing: max(id) is then all that is known."""
    keyed = [t for t, key in TABLES if key and src.has(t)]
    if src.pg:
        return {t: _pg_given_out(src, t) for t in keyed}
    if not src.has("sqlite_sequence"):  # no AUTOINCREMENT table: ids up to max(id) only
        return {}
    seqs: dict[str, int] = {}  # read as SQLite reads them (a text '100' goes on from 100); below 1: nothing
    for name, seq in src.q("SELECT name, CAST(seq AS INTEGER) FROM sqlite_sequence"):
        table = "memories" if name == ROWS else name
        seqs[table] = max(seqs.get(table, 0), seq or 0)
    return {t: seqs[t] for t in keyed if seqs.get(t, 0) > 0}


def _pg_given_out(src: Source, table: str) -> int:
    """The last value `table`'s id sequence gave out, from the sequence itself: one set but
    not called since (an older import left them so) gives one less than it holds."""
    row = src.q(
        "SELECT n.nspname, c.relname, has_sequence_privilege(c.oid, 'SELECT') "
        "FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE c.oid = pg_get_serial_sequence(%s, 'id')::regclass",
        (table,),
    ).fetchone()
    if row is None or not row[2]:
        return 0
    from psycopg import sql  # a server's source or destination: psycopg is loaded

    last, called = src.db.execute(
        sql.SQL("SELECT last_value, is_called FROM {}").format(sql.Identifier(row[0], row[1]))
    ).fetchone()
    return int(last) if called else int(last) - 1


@contextlib.contextmanager
def _readable(raw: Source, dst, clock: Clock | None, report: Report, result: Transfer):
    """The source itself when its schema is current (or it is a server), else an adopted
    copy of it, removed when the import ends, however it ends."""
    missing = raw.behind()
    if not missing:
        yield raw
        return
    _sweep_stale()
    try:
        folder = tempfile.mkdtemp(prefix=f"{SCRATCH}{os.getpid()}@{_HOST}-")
    except OSError as exc:
        raise _refused(result.source, exc) from None
    copy = None
    try:
        path = os.path.join(folder, "source.db")
        if report:
            report(
                f"{result.source} is behind the current schema (it lacks {len(missing)} "
                f"migrations): adopting a copy of it in {folder}"
            )
        try:
            _adopt_copy(raw, path, FixedClock(_adoption_time(raw, dst, clock)), report)
            copy = Source(path, query="immutable=1")
        except (*loaded("Error"), StoreError, OSError) as exc:  # a full or failing temp folder
            raise _refused(result.source, exc) from None
        shutil.rmtree(folder)  # read through the open handle from now on
        result.adopted = missing
        yield copy
    finally:
        if copy is not None:
            copy.db.close()
        shutil.rmtree(folder, ignore_errors=True)


def _check_not_itself(source: str, destination: str) -> None:
    """Importing a store into itself copied nothing and said "3 already there", exit 0, as
    if a rerun had found the work done: refuse it, whatever path (a symlink, ../x) or
    spelling names the one file or database twice."""
    if is_dsn(source) or is_dsn(destination):
        same = is_dsn(source) and is_dsn(destination) and _place(source) == _place(destination)
    else:
        try:
            same = os.path.samefile(source, destination)
        except OSError:  # one of them is not there (the destination is created)
            same = False
    if same:
        also = "" if source == destination else f" ({masked(destination)} is the same file)"
        raise StoreError(
            f"cannot import {masked(source)} into itself{also}: give --db another "
            "database, the one to copy it into"
        )


def _place(dsn: str):
    """Where a DSN leads, whatever order or form (URL, key=value) it is written in: the
    server, database, user and options (a schema is chosen there); the text without psycopg."""
    try:
        from psycopg.conninfo import conninfo_to_dict

        parts = conninfo_to_dict(dsn.strip())
    except Exception:  # no postgres extra, or a DSN psycopg cannot read: as written
        return dsn.strip()
    return tuple(str(parts.get(k) or "") for k in ("host", "hostaddr", "port", "dbname", "user", "options"))


def _check_source(raw: Source, shown: str) -> None:
    """Refuse what cannot be imported as it is: a database with no memories (an empty or
    unrelated file), a server whose schema is older than this Lethe's."""
    if not raw.has("memories"):
        raise StoreError(
            f"the source {shown} holds no memories table: it is neither an agent_memory.db nor a Lethe store"
        )
    if not raw.pg and TEXT_APART in raw.behind():  # what adopting it would refuse
        adoptable(raw.db, shown)  # said of the source, before a destination is made
    if raw.pg and raw.behind():
        raise StoreError(
            f"the source {shown} is from an older version of Lethe (it lacks "
            f"{', '.join(raw.behind())}); run a command that writes, such as "
            "`lethe run`, on it once with this version to upgrade it, then import"
        )


_HOST = "".join(c for c in socket.gethostname() if c.isalnum() or c in ".-")[:64] or "host"


def _sweep_stale() -> None:
    """Remove adopted copies that imports killed mid-adoption left in the temp folder:
    ours (this user, this host) whose process is gone. Another user's, another host's or a
    live process's are left alone."""
    root = tempfile.gettempdir()
    try:
        names = os.listdir(root)
    except OSError:
        return
    for name in names:
        pid, _, rest = name[len(SCRATCH) :].partition("@")
        if not name.startswith(SCRATCH) or not pid.isdigit() or rest.rpartition("-")[0] != _HOST:
            continue
        path = os.path.join(root, name)
        with contextlib.suppress(OSError):
            st = os.lstat(path)  # a link of that name is not followed, nor removed
            if stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid() and processes.gone(pid):
                shutil.rmtree(path, ignore_errors=True)


def _refused(shown: str, exc: Exception) -> StoreError:
    return StoreError(
        f"{shown} has an older schema and is upgraded in a copy, but the temp "
        f"folder {tempfile.gettempdir()} refused it (set TMPDIR elsewhere): "
        f"{str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"
    )


def _adopt_copy(raw: Source, path: str, clock: Clock, report: Report) -> None:
    """Back the source up into `path` and open that with Lethe: every migration it lacks,
    as opening the source itself would run them. Left in rollback-journal mode, so it is
    read later with no -wal or -shm file beside it."""
    target = library(raw.db).connect(path)  # backup() wants both of one library
    try:
        raw.db.backup(target)
    finally:
        target.close()
    store = SqliteStore(path, clock, progress=report)
    try:
        store.stop_checkpoints()  # its thread's connection would keep the mode from changing
        store.db.execute("PRAGMA journal_mode = DELETE")
    finally:
        store.close()


def _adoption_time(raw: Source, dst, clock: Clock | None):
    """When the copy's `normalised` events happen: when an earlier, interrupted import of
    this source adopted its copy, if that import already copied some of them (a rerun
    must end with the same rows); else now. Those events are the destination's events
    after the source's last one."""
    last = (
        raw.q("SELECT coalesce(max(id), 0) FROM memory_events").fetchone()[0]
        if raw.has("memory_events")
        else 0
    )
    view = as_source(dst)
    row = view.q(
        f"SELECT occurred_at FROM memory_events WHERE id > {view.p} AND "
        "event_type = 'normalised' ORDER BY id LIMIT 1",
        (last,),
    ).fetchone()
    if row and row[0]:
        return parse_time(row[0])
    return (clock or system_clock)()


def _check_same_history(src: Source, dst) -> None:
    """A destination with memories must be an earlier, interrupted copy of this source."""
    view = as_source(dst)
    top = view.q("SELECT max(id) FROM memories").fetchone()[0]
    if top is None:
        return
    theirs = src.q(f"SELECT content FROM memories WHERE id = {src.p}", (top,)).fetchone()
    ours = view.q(f"SELECT content FROM memories WHERE id = {view.p}", (top,)).fetchone()
    if theirs is None or theirs[0] != ours[0]:
        raise StoreError(
            f"the destination already holds other memories (#{top} differs from "
            "the source's): import into an empty database"
        )


def _copy_by_id(
    src: Source, dst, table: str, cols: list[str], batch: int, result: Transfer, progress: Progress
) -> None:
    view = as_source(dst)
    done = view.q(f"SELECT count(*), max(id) FROM {table}").fetchone()
    last = done[1] or 0
    total = src.q(f"SELECT count(*) FROM {table}").fetchone()[0]
    result.resumed[table], result.copied[table] = done[0], 0
    select = f"SELECT {', '.join(cols)} FROM {table} WHERE id > {src.p} ORDER BY id LIMIT {src.p}"
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


def _copy_small(src: Source, dst, table: str, cols: list[str], result: Transfer) -> None:
    """Keyed by name (pass runs, progress, scenes): inserted unless already there."""
    rows = src.q(f"SELECT {', '.join(cols)} FROM {table}").fetchall()
    sql = (
        f"INSERT INTO {table} ({', '.join(cols)}) VALUES ({', '.join(dst.p for _ in cols)}) "
        "ON CONFLICT DO NOTHING"
    )
    with dst.transaction():
        changed = sum(max(dst.db.execute(sql, tuple(r)).rowcount, 0) for r in rows)
    result.copied[table], result.resumed[table] = changed, len(rows) - changed


def _write(dst, table: str, cols: list[str], rows) -> None:
    if dst.takes_copy_stream:  # COPY: one stream per batch, triggers still fire
        with dst.db.cursor().copy(f"COPY {table} ({', '.join(cols)}) FROM STDIN") as copy:
            for row in rows:
                copy.write_row(tuple(row))
        return
    if table == "memories":  # a view over two tables on SQLite (m020): each gets its part
        _write_memories(dst, cols, rows)
        return
    dst.db.executemany(
        f"INSERT INTO {table} ({', '.join(cols)}) VALUES ({', '.join('?' for _ in cols)})",
        [tuple(r) for r in rows],
    )


def _write_memories(dst, cols: list[str], rows) -> None:
    """Memories into SQLite's two tables, ids as copied (a write through the view's
    triggers would do the same a row at a time)."""
    for table, part in (
        (ROWS, [c for c in cols if c not in TEXT_COLUMNS]),
        (TEXTS, ["id", *(c for c in TEXT_COLUMNS if c in cols)]),
    ):
        at = [cols.index(c) for c in part]
        dst.db.executemany(
            f"INSERT INTO {table} ({', '.join(part)}) VALUES ({', '.join('?' for _ in part)})",
            [tuple(r[i] for i in at) for r in rows],
        )


def _reset_sequences(dst, given: dict[str, int]) -> None:
    """Identity columns continue after the copied ids and after every id the source gave
    out (`given`), so the next insert gets one nobody had."""
    for table, key in TABLES:
        if key:  # called at the last id (so it reads back as given out), or unused at 1
            dst.db.execute(
                f"SELECT CASE WHEN v > 0 THEN setval(s, v, true) ELSE setval(s, 1, "
                f"false) END FROM (SELECT pg_get_serial_sequence('{table}', 'id') "
                f"AS s, greatest((SELECT coalesce(max(id), 0) FROM {table}), "
                "%s::bigint) AS v) AS last",
                (int(given.get(table, 0)),),
            )
