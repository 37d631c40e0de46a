"""Checkpointing the WAL from a thread of the store's own, never inside a caller's commit.

SQLite's default moves the WAL's pages into the database file from inside whichever
commit brings the WAL past 1,000 pages. That is a `remember` or an `add` now and then:
it copies the pages and syncs both files before its COMMIT returns. At a million memories
that commit took 208 ms against a median `remember` of 8 ms. With `wal_autocheckpoint`
off, p90 went from 28.5 to 13.4 ms and the maximum from 215 to 58 ms (bench/RESULTS.md,
fifteenth round).

So the store's connections never checkpoint as they commit. After each commit the store
calls `Checkpointer.committed`, which looks at the WAL file's size (one stat). When it has
grown by CHECKPOINT_BYTES since the last checkpoint, or every EVERY_COMMITS commits (a
WAL reused from its start does not grow), a thread with a connection of its own runs
`PRAGMA wal_checkpoint(PASSIVE)`. A passive checkpoint never waits for a lock and never
makes a reader or writer wait. A crash loses nothing: committed pages are in the WAL
until they are copied, as before. `close` stops the thread; the last connection to close
checkpoints what is left, as SQLite always does.

The WAL starts over from its beginning at the first write after a checkpoint that copied
all of it, and is then cut back to CHECKPOINT_BYTES (`journal_size_limit`). Writes that
come faster than the thread copies never let it start over. Once this connection's own
commits have grown the WAL by BEHIND_BYTES since it last started over, the committing
connection checkpoints itself, as SQLite's default would, and again at each commit until
the WAL has started over (a reader's snapshot can keep it from starting over after a
checkpoint), so a burst cannot grow the WAL without bound (tests/test_checkpoints.py).
Only its own growth counts (the size from `began`, under the write lock, to after the
commit): a WAL made large by someone else, such as a pass in another process that
spilled 200 MB and then gave way to this writer, is the thread's to copy. Checkpointing
it inside the writer's commit cost that writer 170-300 ms, the fsync of the pass's frames
(bench/RESULTS.md, sixteenth round).
"""

from __future__ import annotations

import os
import sqlite3
import threading

# what SQLite's own default waits for: 1,000 pages of 4 KiB
CHECKPOINT_BYTES = 1000 * 4096
EVERY_COMMITS = 200
# the WAL is kept to CHECKPOINT_BYTES when it starts over (PRAGMA journal_size_limit); past
# this it has not started over for a while, and the committing connection checkpoints
BEHIND_BYTES = 8 * CHECKPOINT_BYTES


class Checkpointer:
    """One store's background checkpoints (a thread, started at the first one needed)."""

    def __init__(self, path: str, connect, sql=sqlite3):
        self.wal = path + "-wal"
        self._connect = connect  # a new connection to the same file, for the thread
        self._errors = sql.Error  # what `connect`'s library raises
        self._wake = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._stop = False
        self._seen = self._size()  # the WAL's size at the last checkpoint asked for
        self._began = self._last = self._seen  # at this transaction's start; after the last
        self._own = 0  # bytes this connection's commits added since the WAL last started over
        self._commits = 0
        self._pending = False  # a checkpoint asked for and not finished yet
        self.done = 0  # checkpoints run (for tests and the curious)
        self.failed: str | None = None  # the last one's error, if it failed

    @classmethod
    def taking_over(cls, db, path: str, sql=sqlite3) -> "Checkpointer":
        """The checkpoints of the store's connection `db` to `path`, which from now on
        makes none as it commits. `sql`: the DB-API module `db` came from; the thread's
        connections use the same SQLite library (sqlite_library: two libraries on one file in
        one process corrupt it)."""
        db.execute("PRAGMA wal_autocheckpoint = 0")
        db.execute(f"PRAGMA journal_size_limit = {CHECKPOINT_BYTES}")  # a number of ours
        return cls(
            path, lambda: sql.connect(path, timeout=0, isolation_level=None, check_same_thread=False), sql
        )

    def _size(self) -> int:
        try:
            return os.stat(self.wal).st_size
        except OSError:
            return 0

    def began(self) -> None:
        """A write transaction of the store's connection began (it holds the write lock:
        what the WAL grows by until `committed` is its own)."""
        self._began = self._size()

    def committed(self, db) -> None:
        """After a commit on `db`: wake the thread when the WAL holds enough to copy. When
        this connection's own commits grew the WAL by BEHIND_BYTES without it starting
        over (they come faster than the thread copies, so no checkpoint ever finds it all
        copied), `db` checkpoints here, as SQLite's default would: a burst of writes
        cannot grow the WAL without bound."""
        self._commits += 1
        size = self._size()
        if size < self._last:
            self._own = 0  # it started over (and was cut back) since our last commit
        self._own += max(0, size - self._began)
        self._last = size
        # a WAL that started over is first written over in the CHECKPOINT_BYTES it was cut
        # back to, which the file's size does not show: with them, past BEHIND_BYTES
        if self._own >= BEHIND_BYTES - CHECKPOINT_BYTES:
            try:
                busy, log, copied = db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
            except Exception as exc:  # the commit stands; the thread tries
                self.failed = str(exc)
                busy, log, copied = 1, 0, -1
            if not busy:
                self._seen = size
            if not busy and log == copied:
                # all of it copied: the next write starts it over, or, if a reader keeps it
                # from that, asks again a CHECKPOINT_BYTES later, not at every commit (a
                # count that missed a start-over made by another process stays bounded too)
                self._own = min(self._own, BEHIND_BYTES - 2 * CHECKPOINT_BYTES)
            # the count starts again only when the WAL is seen to start over (above): a
            # checkpoint that copied all of it lets the next write start the WAL over only
            # if no reader holds a snapshot of it then (the thread's connection reading the
            # schema is one), and a WAL that went on growing from its end grew a second
            # BEHIND_BYTES unchecked when the count started again here. One refused (the
            # thread's slow one holds the lock) or stopped by a reader is asked again at
            # the next commit
            return
        if size - self._seen < CHECKPOINT_BYTES and self._commits % EVERY_COMMITS:
            return
        self._seen = size
        with self._lock:
            if self._stop:
                return
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="lethe-checkpoint", daemon=True)
                self._thread.start()
            self._pending = True
            self._wake.set()

    def _run(self) -> None:
        while True:
            self._wake.wait()
            self._wake.clear()
            if self._stop:
                return
            self._checkpoint()
            with self._lock:
                if not self._wake.is_set():
                    self._pending = False

    def _checkpoint(self) -> None:
        """One passive checkpoint, on a connection opened for it: between checkpoints the
        store holds no connection beyond its own (a journal-mode switch needs that)."""
        try:
            db = self._connect()
        except self._errors as exc:
            self.failed = str(exc)
            return
        try:
            db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
            self.done += 1
            self.failed = None
        except self._errors as exc:  # busy, or the file went away: next time
            self.failed = str(exc)
        finally:
            db.close()

    def idle(self, timeout: float = 10.0) -> bool:
        """Wait until no checkpoint is asked for or running (tests). False on timeout."""
        pause = threading.Event()
        for _ in range(int(timeout / 0.01)):
            if not self._pending:
                return True
            pause.wait(0.01)
        return not self._pending

    def close(self) -> None:
        """Stop the thread, after the checkpoint it is running (if one is); commits after
        this checkpoint nothing. Closing twice is closing once."""
        with self._lock:
            self._stop = True
            thread = self._thread
            self._wake.set()
        if thread is not None:
            thread.join()
        self._pending = False
