"""The SQLite store: one file, WAL and a wait for the write lock always on (sqlite_wait.py),
the migrations list, and the bookkeeping queries (inbox, pass runs, leases, history).

Policy-driven statements (passes, recall, supersede, reinforce, merge, ...) are compiled by
`engine.plan` and executed here through `run`, `fetch` and `fetch_one`: outside this
package nothing in the engine writes SQL text or calls `execute`. A status change and its
event are written in one transaction (`with store.transaction(): ...`).
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import urllib.parse
from typing import Any

from engine.base.clock import Clock, system_clock
from engine.base.errors import StoreError
from engine.base.text import fts_query
from engine.plan.dialect import Dialect
from engine.store.asof_reads import AsOf
from engine.store.inspecting import Inspecting
from engine.store.shared_schema import SQLITE_TYPES, migrations_table
from engine.store.sqlite import bulk
from engine.store.sqlite import recall_head as head
from engine.store.sqlite.sqlite_checkpoint import Checkpointer
from engine.store.sqlite.sqlite_file import absolute, file_path, on_disk, unusable
from engine.store.sqlite.sqlite_functions import sql_functions
from engine.store.sqlite.sqlite_lease import SqliteLease, open_lease_db
from engine.store.sqlite.sqlite_library import claim, release
from engine.store.sqlite.sqlite_schema import MIGRATIONS
from engine.store.sqlite.sqlite_wait import Waiters, Waiting, connection_class
from engine.store.sqlite.text_apart import MIGRATION as TEXT_APART
from engine.store.sqlite.text_apart import ROWS, TEXT_COLUMNS, TEXTS, adoptable, rows_table
from engine.store.sqlite.vectors import VectorIndex, load_extension


class SqliteStore(Waiting, VectorIndex, Inspecting, AsOf):
    """A connection to one database file, upgraded to the current schema on open.
    `vectors=True` (a policy with an embedding model) loads the sqlite-vec extension."""

    dialect = "sqlite"
    p = Dialect.placeholder
    _by_id = "+"  # `+namespace`: ids looked up by primary key, not the namespace's index
    migrations = MIGRATIONS
    lease_class = SqliteLease
    rows = ROWS
    fts_newest_first = True  # FTS5 walks its rowids backwards

    def __init__(
        self,
        path: str,
        clock: Clock | None = None,
        timeout: float = 30.0,
        read_only: bool = False,
        progress=None,
        vectors: bool = False,
    ):
        self.path = str(path)  # as given, for messages
        self._file = absolute(self.path)  # what every connection opens
        self.report = progress  # told each step of upgrading a file in use (a line)
        self.clock = clock or system_clock
        self.timeout = timeout
        self.read_only = read_only
        self.vectors = vectors
        self._lease_db: sqlite3.Connection | None = None  # opened when a runner first takes a lease
        self._checkpoints: Checkpointer | None = None  # the WAL's checkpoints (sqlite_checkpoint)
        problem = unusable(self.path, read_only)
        if problem:
            raise StoreError(f"cannot open {self.path}: {problem}")
        # every connection to the file comes from one library (sqlite_library)
        self.sql, self._claim = claim(self.path, vectors)
        # errors of the database itself (locked, full, I/O): never a turn's fault
        self.busy_errors = (self.sql.OperationalError,)
        try:
            self._open(self.sql, vectors, read_only)
        except BaseException:
            self.stop_checkpoints()  # a migration's commit may have started the thread
            if getattr(self, "db", None) is not None:
                self.db.close()
            release(self._claim)
            self._claim = None
            raise

    def _open(self, sql, vectors: bool, read_only: bool) -> None:
        try:
            self.db = self._connect(sql)
            self.db.row_factory = sql.Row
            if not read_only and self.path not in ("", ":memory:"):
                self.db.waiters = Waiters(self._file)  # it says when it waits (sqlite_wait)
            if vectors:
                load_extension(self.db)
            self.db.execute("PRAGMA busy_timeout = 0")
            if not read_only and TEXT_APART not in self._applied():
                adoptable(self.db, self.path, writing=True)  # refused before any change
            if not read_only and self.db.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
                self.db.execute("PRAGMA journal_mode = WAL")
            self.db.execute("PRAGMA synchronous = NORMAL")
            if not read_only and on_disk(self.path):
                self._checkpoints = Checkpointer.taking_over(self.db, self._file, sql)
            # a pass rewrites index entries all over the table: a 64 MiB page cache halves
            # a million-row decay (measured in bench/)
            self.db.execute("PRAGMA cache_size = -65536")
            self._kept = sql_functions(self.db)  # rows a pass's rule kept (run_rule)
            self._schema_checked()
        except sql.DatabaseError as exc:
            raise StoreError(f"cannot open {self.path}: {exc}") from None

    def _connect(self, sql=None) -> Any:  # sqlite_wait.connection_class's, of `sql`
        """Read-write; or read-only, which never writes a byte nor takes the write lock
        (on a file or folder this process may not write, read as it is, unchanging).
        `sql` is the DB-API module (the store's own, `self.sql`, unless given)."""
        sql = sql or self.sql

        def connect(target, **kw):
            db = sql.connect(
                target,
                timeout=0,
                isolation_level=None,
                check_same_thread=False,
                factory=connection_class(sql),
                **kw,
            )
            db.wait = self.timeout  # it waits for the lock itself, this long (sqlite_wait)
            return db

        if not self.read_only:
            return connect(self._file)
        if not os.path.exists(file_path(self._file)):
            raise StoreError(f"cannot open {self.path}: no such database file")
        uri = self._file if self._file.startswith("file:") else "file:" + urllib.parse.quote(self._file)
        uri += "&" if "?" in uri else "?"  # a URI given: its own parameters, and ours
        try:
            db = connect(uri + "mode=ro", uri=True)
            db.execute("SELECT count(*) FROM sqlite_master").fetchone()
            return db
        except sql.OperationalError:
            wal = self._file + "-wal"
            if os.path.exists(wal) and os.path.getsize(wal):
                raise  # committed pages still in the WAL: nothing to read them through
        # WAL mode needs to write its -shm index beside the file; a file nobody writes
        # (no -wal left) is read as immutable instead
        return connect(uri + "immutable=1", uri=True)

    def stop_checkpoints(self) -> None:
        """No more checkpoints from the store's thread (after the one running, if one is):
        before a switch that needs the file to itself (`PRAGMA journal_mode = DELETE`)."""
        if self._checkpoints is not None:
            self._checkpoints.close()

    def close(self) -> None:
        self.flush_deferred()
        self.close_beside()
        self.stop_checkpoints()  # then the last connection's close checkpoints the rest
        self.db.close()
        if self.db.waiters is not None:
            self.db.waiters.close()
        if self._lease_db is not None:
            self._lease_db.close()
        release(self._claim)
        self._claim = None  # closing twice releases once

    def reopen(self) -> "SqliteStore":
        """Another connection to the same file (a scheduler works on its own)."""
        return SqliteStore(self._file, self.clock, self.timeout, self.read_only, vectors=self.vectors)

    def interrupt(self) -> None:
        """Abort the statement running on this connection (its transaction rolls back)."""
        try:
            self.db.interrupt()
        except self.sql.ProgrammingError:
            # closed meanwhile: nothing is running
            pass

    @contextlib.contextmanager
    def _begun(self, fenced: bool, exclusive: bool, wait: float | None):
        """BEGIN IMMEDIATE ... COMMIT: SQLite's write lock always keeps other writers out."""
        # a runner's commits (fenced by its lease: a pass, its bookkeeping, merges) wait
        # their turn without asking a pass to give way
        self.db.says_it_waits = not fenced and not exclusive
        try:
            with self.waiting(wait):
                self.db.execute("BEGIN IMMEDIATE")
        finally:
            self.db.says_it_waits = True
        if self._checkpoints is not None:
            self._checkpoints.began()
        try:
            yield
        except BaseException:
            if self.db.in_transaction:  # an interrupted statement rolled it back itself
                self.db.execute("ROLLBACK")
            raise
        try:
            self.db.execute("COMMIT")  # waited for, up to the timeout (sqlite_wait)
        except BaseException:
            if self.db.in_transaction:  # not committed: never keep the write lock
                self.db.execute("ROLLBACK")
            raise
        if self._checkpoints is not None:
            self._checkpoints.committed(self.db)

    def _check_current(self) -> None:
        """Read-only: a file Lethe could not adopt is said so, not sent to `lethe run`."""
        if TEXT_APART not in self._applied():
            adoptable(self.db, self.path)
        super()._check_current()

    def _before_migrating(self) -> None:
        self.db.execute(migrations_table(SQLITE_TYPES))
        self._held = self._held_rows()

    def _upgrading(self, name: str, number: int) -> None:
        if self._held and self.report:  # a file in use: adopting one of 1M takes seconds
            self.report(
                f"upgrading {self.path} ({self._held} memories): {name} ({number} of {len(MIGRATIONS)})"
            )

    def _migrating(self):
        return self.transaction()

    def _held_rows(self) -> int:
        """The largest memory id of a file that has a memories table (0: none yet)."""
        if not self.db.execute("SELECT 1 FROM sqlite_master WHERE name = 'memories'").fetchone():
            return 0
        return self.db.execute(f"SELECT coalesce(max(rowid), 0) FROM {rows_table(self.db)}").fetchone()[0]

    def _has_table(self, name: str) -> bool:
        return (
            self.db.execute(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (name,)
            ).fetchone()
            is not None
        )

    # -- compiled statements (engine.plan) --------------------------------------------
    def run_rule(self, st, namespace: str, now: str | None = None, **binds) -> tuple[int, int]:
        """A rule's UPDATE that keeps a row whose new value is unusable and counts it
        (`Statement.counts_kept`): (rows changed, rows kept)."""
        self._kept.calls = 0
        n = self.run(st, namespace, now, **binds)
        return n - self._kept.calls, self._kept.calls

    def fetch(self, st, namespace: str, now: str | None = None, **binds) -> list[sqlite3.Row]:
        """The rows of a compiled SELECT. One with a `head` form (recall's, in rank order)
        reads the head of the ranking first while recall's index holds only that, and the
        whole statement when the head has fewer rows than its limit (engine.store.sqlite.recall_head)."""
        now = now or self.now()
        limit = binds.get("limit")
        if st.head is not None and limit is not None:
            value = head.floor(self.db)
            if value is not None:
                rows = self.db.execute(
                    st.head.sql, st.head.bind(now, namespace, floor=value, **binds)
                ).fetchall()
                if len(rows) >= limit:
                    return rows
        return super().fetch(st, namespace, now, **binds)

    # -- memories and their events ------------------------------------------------------
    def insert_memory(self, fields: dict) -> int:
        """Insert one row of `memories` from a mapping of column -> value (columns come from
        the engine's own field list, never from input)."""
        cols = [c for c in fields if c not in TEXT_COLUMNS]  # the text beside it (m020)
        sql = f"INSERT INTO {ROWS} ({', '.join(cols)}) VALUES ({', '.join('?' for _ in cols)})"
        new_id: int = self.db.execute(sql, [fields[c] for c in cols]).lastrowid
        self.db.execute(
            f"INSERT INTO {TEXTS} (id, content, summary, tags) VALUES (?, ?, ?, ?)",
            (new_id, *(fields.get(c) for c in TEXT_COLUMNS)),
        )
        return new_id

    def _update_fields(self, namespace: str, memory_id: int, fields: dict) -> int:
        cols = list(fields)
        # the row first: whether it is this namespace's and active decides the text too
        rows = {c: fields[c] for c in cols if c not in TEXT_COLUMNS}
        if rows:
            changed = self._update_row(ROWS, namespace, memory_id, rows)
        else:
            changed = self.db.execute(
                f"SELECT count(*) FROM {ROWS} WHERE namespace = ? AND id = ? AND status = 'active'",
                (namespace, memory_id),
            ).fetchone()[0]
        texts = [c for c in cols if c in TEXT_COLUMNS]
        if changed and texts:
            self.db.execute(
                f"UPDATE {TEXTS} SET {', '.join(f'{c} = ?' for c in texts)} WHERE id = ?",
                [fields[c] for c in texts] + [memory_id],
            )
        return changed

    def lock_memories(self, ids: list[int]) -> None:
        """Hold these memories until the commit (a turn about to supersede or reinforce
        them): SQLite's write lock already holds the whole file."""

    def keyed(self, namespace: str, key: str) -> sqlite3.Row | None:
        """The active memory a caller stored under `key` (its newest `keyed` event), with
        that event's detail and time as `keyed` and `keyed_at`."""
        return self.db.execute(
            "SELECT m.*, e.detail AS keyed, e.occurred_at AS keyed_at FROM memories m "
            "JOIN memory_events e "
            "ON e.memory_id = m.id WHERE m.namespace = ? AND m.status = 'active' "
            # CASE: other events' detail is free text (and an old keyed one may not be JSON)
            "AND CASE WHEN e.event_type = 'keyed' AND json_valid(e.detail) THEN "
            "json_extract(e.detail, '$.key') END = ? "
            "ORDER BY e.id DESC LIMIT 1",
            (namespace, key),
        ).fetchone()

    def fts_ids(self, text: str, every: bool) -> tuple[str, str] | None:
        match = fts_query(text, joiner=" AND " if every else " OR ")
        return None if match is None else ("SELECT rowid FROM memories_fts WHERE memories_fts MATCH ?", match)

    def head_floor(self) -> float | None:
        return head.floor(self.db)

    def match_count(self, fts_query: str, cap: int) -> int:
        """How many memories match a full-text query, counting at most `cap + 1`."""
        return self.db.execute(
            "SELECT count(*) FROM (SELECT 1 FROM memories_fts WHERE memories_fts MATCH ? LIMIT ?)",
            (fts_query, cap + 1),
        ).fetchone()[0]

    # -- the stored rank ----------------------------------------------------------------
    def rebuild_rank(self, st, namespace: str, policy: str, signature: str, ranged=None) -> None:
        """Recompute a namespace's stored ranks and remember the formula they came from.
        `ranged`: the same statement over an id range, run over every id when the
        namespace is most of the file (engine.store.sqlite.bulk)."""
        with self.transaction() as db:
            # a small namespace in a big file just updates its rows (engine.store.sqlite.bulk)
            mine = db.execute(f"SELECT count(*) FROM {ROWS} WHERE namespace = ?", (namespace,)).fetchone()[0]
            if mine and self.report:
                self.report(f"computing the stored rank of {mine} memories ({policy})")
            top = bulk.most_of_the_table(db, mine)
            # a new formula may move every rank: recall's head is chosen again, not moved
            with bulk.rebuilding(db, ["rank"], mine, self.now(), head_in_place=False):
                if top is None or ranged is None:
                    self.run(st, namespace)
                else:
                    self.run(ranged, namespace, id_range=(0, top + 1))
            head.check(db, namespace, self.now())
            self._rank_computed(namespace, policy, signature)

    @contextlib.contextmanager
    def rewriting(self, reach, columns, namespace: str, now: str, id_range=(0, 0)):
        """Inside a pass's transaction: count the rows it reaches (`reach`, a compiled
        count, within `id_range` when it is ranged), and when they are most of the file,
        rebuild the indexes over the `columns` it writes once at the end instead of moving
        an entry per row (engine.store.sqlite.bulk). Yields the file's largest id when they are
        (the pass then reads its rows in id order, up to it), else None. After the block,
        recall's index is made again when its head has drifted (engine.store.sqlite.recall_head)."""
        rows = (self.fetch_one(reach, namespace, now, id_range=id_range) or (0,))[0]  # a count: one row
        with bulk.rebuilding(self.db, columns, rows, now):
            yield bulk.most_of_the_table(self.db, rows)
        head.check(self.db, namespace, now)

    def leaving_active(self, rows: int):
        """Around a pass's UPDATE that takes `rows` memories out of the active ones: when
        they are a large part of the file, the index of the active memories is made again
        after it instead of losing an entry a row (engine.store.sqlite.bulk)."""
        return bulk.leaving_active(self.db, rows)

    # -- the inbox: turns saved before any model is asked -------------------------------
    def add_turn(self, namespace: str, user: str, assistant: str, said_at=None) -> int:
        """Save a turn; `said_at`: when it was said, if not now (its memories' created_at)."""
        with self.transaction() as db:
            return db.execute(
                "INSERT INTO inbox (namespace, user_text, assistant_text, created_at, "
                "updated_at) VALUES (?, ?, ?, ?, ?)",
                (namespace, user, assistant, said_at or self.now(), self.now()),
            ).lastrowid

    def _in(self, column: str) -> str:
        return f"{column} IN (SELECT value FROM json_each(?))"

    def _many(self, values) -> str:
        return json.dumps(list(values))

    def claim_turns(self, namespace: str, limit: int) -> list[int]:
        """Pending turns to judge, oldest first. One file has one writer at a time, and
        `Writer.finish` re-checks a turn inside its write transaction: nothing to claim."""
        return self.pending_ids(namespace, limit)

    def release_turns(self, ids: list[int]) -> None:
        """Nothing to give back: no turn is claimed (`claim_turns`)."""

    def lease_connection(self) -> sqlite3.Connection:
        """The connection every lease of this store uses, opened by the first, kept."""
        if self._lease_db is None:
            self._lease_db = open_lease_db(self._file, self.sql)
        return self._lease_db


Store = SqliteStore  # the embedded default
