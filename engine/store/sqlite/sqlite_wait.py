"""Waiting for SQLite's write lock in turn with a batched pass.

SQLite's own busy handler sleeps longer the longer it has waited: 1, 2, 5, 10 ... up to 100
ms between tries. A batched pass commits a range and begins the next one within
microseconds, so a writer that has waited a while wakes up, finds the next range holding
the lock, and sleeps again: measured at 1M memories with 60 ms ranges, a `remember` waited
up to 2.8 s behind a pass that never held the lock for more than 150 ms at a time.

So the store's connections leave SQLite's busy timeout at 0 and wait here instead: a
statement that finds the database locked outside a transaction (an autocommit write, or
the BEGIN IMMEDIATE that opens one), or a COMMIT that must wait for readers (a file SQLite
could not put in WAL mode), is tried again every millisecond until the store's timeout.
A pass makes way between its ranges (`MAKE_WAY`) for longer than one such try, so a
waiting writer gets the lock after at most one range.

A pass of one transaction gives way too (`giving_way`). A writer that waits, and needs
what it writes (remember, add, forget: not a recall's kept access), holds a shared flock
on a file beside the database (`WAITERS`) while it waits. The pass looks for one every
`LOOK_EVERY` steps of SQLite's machine (a millisecond or two); when it finds one, its
statement is interrupted, its transaction rolls back, and it runs again in ranges
(engine/run/passes.py): the writer waits milliseconds, not the whole pass.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import stat
import threading
import time

from engine.base.errors import GaveWay
from engine.store.shared import KEEP_AFTER, StoreCommon
from engine.store.sqlite.text_apart import rows_table

try:
    import fcntl
except ImportError:  # no flock (Windows): writers do not say they wait, passes never give way
    fcntl = None  # type: ignore[assignment]  # no flock here: looked for before each use

TRY_EVERY = 0.001  # seconds between tries of a statement that found the database locked
MAKE_WAY = 0.003  # seconds a batched pass leaves the lock free after each range
WAITERS = "-lethe-waiters"  # the file beside the database a waiting writer holds a lock on
LOOK_EVERY = 50_000  # SQLite machine steps between a giving-way pass's looks for a writer
LAST_LOOK = True  # and one look after its last statement (its COMMIT cannot be cut short)


SQLITE_BUSY = 5


def locked(exc: Exception) -> bool:
    """SQLITE_BUSY: another connection holds the lock (worth another try). Not
    SQLITE_LOCKED, a table lock within this connection, which waiting does not clear."""
    code = getattr(exc, "sqlite_errorcode", None)  # Python 3.11's sqlite3; text otherwise
    return code & 0xFF == SQLITE_BUSY if code is not None else "database is locked" in str(exc)


def _ends(sql: str) -> bool:
    """COMMIT / END: inside a transaction, the one statement that may wait for others (for
    readers to finish, in rollback-journal mode) and that is safe to try again."""
    word = sql.lstrip()[:6].upper()
    return word == "COMMIT" or word[:3] == "END"


@functools.cache
def connection_class(module):
    """A subclass of `module.Connection` (sqlite3, or pysqlite3's) that waits for the lock
    itself; `wait` (seconds) is set on each connection by the store."""

    class Connection(module.Connection):
        wait = 30.0
        waiters = None  # the store's Waiters, for a connection that writes
        says_it_waits = True  # False while a pass opens a transaction (passes never ask)

        def execute(self, sql, params=(), /):
            if self.in_transaction and not _ends(sql):
                return super().execute(sql, params)  # the lock is ours or not needed
            deadline, said = None, False
            try:
                while True:
                    try:
                        return super().execute(sql, params)
                    except module.OperationalError as exc:
                        if not locked(exc):
                            raise
                        now = time.monotonic()
                        deadline = deadline or now + self.wait
                        if now >= deadline:
                            raise
                        if (
                            not said
                            and self.says_it_waits
                            and self.waiters is not None
                            and self.wait > KEEP_AFTER
                        ):
                            said = self.waiters.waiting()  # a pass may give way to us
                        time.sleep(TRY_EVERY)
            finally:
                if said:
                    self.waiters.done()

    return Connection


# why a waiters file can never be had here (a link, another user's file, a read-only
# folder): not tried again; anything else (out of descriptors) is tried at the next wait
_FOR_GOOD = {errno.ELOOP, errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOENT, errno.ENOTDIR}


def _open_plain(path: str, create: bool = True) -> int | None:
    """A descriptor of the regular file at `path`, created empty if missing (with
    `create`; without, a missing file is None); -1 when it can never be had, None when not
    now. Never follows a link put in its place, never blocks on a FIFO, never keeps
    anything but a regular file open."""
    try:
        fd = os.open(
            path,
            os.O_RDONLY | (os.O_CREAT if create else 0) | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
            0o644,
        )
    except OSError as exc:
        if exc.errno == errno.ENOENT and not create:
            return None  # nobody has waited yet: looked for again next time
        return -1 if exc.errno in _FOR_GOOD else None
    try:
        plain = stat.S_ISREG(os.fstat(fd).st_mode)
    except OSError:
        plain = False
    if not plain:
        os.close(fd)
        return -1
    return fd


class Waiters:
    """The file beside a database (`WAITERS`) by which writers say they wait: each holds a
    shared flock on it while it waits; a pass that finds it cannot take an exclusive one
    knows somebody waits. Made by the first writer that waits (a store nobody contended
    for leaves no file beside it); where it cannot be (a folder this process may not
    write, a link in its place), nobody says and nothing gives way."""

    def __init__(self, db_path: str):
        # the file's own folder, as SQLite's -wal: every process reaching it through a link
        # or another relative path finds the same waiters file
        self.path = os.path.realpath(db_path) + WAITERS
        self.fd: int | None = None
        self._opening = threading.Lock()  # threads sharing a store open it once

    def _file(self, create: bool = True) -> int | None:
        with self._opening:
            if self.fd is None:
                self.fd = _open_plain(self.path, create)
            return self.fd if self.fd is not None and self.fd >= 0 else None

    def waiting(self) -> bool:
        """Say this connection waits (until `done`); False when it could not say so."""
        fd = self._file() if fcntl else None
        if fd is None:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            return True
        except OSError:  # a pass looking at this very moment: the next try says it
            return False

    def done(self) -> None:
        with contextlib.suppress(OSError):
            fcntl.flock(self.fd, fcntl.LOCK_UN)  # type: ignore[arg-type]  # done() follows a waiting() that opened it

    def anyone(self) -> bool:
        """Whether another connection says it waits (no file: nobody has)."""
        fd = self._file(create=False) if fcntl else None
        if fd is None:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        except OSError:
            return False
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False

    def close(self) -> None:
        with self._opening:
            if self.fd is not None and self.fd >= 0:
                os.close(self.fd)
            self.fd = -1  # closed for good: a late writer's wait says nothing


class Waiting(StoreCommon):
    """The SQLite store's ways of waiting for the lock less than its timeout (it keeps the
    connection in `db`, its timeout in `timeout`, and `defer`s writes: common.py)."""

    @contextlib.contextmanager
    def waiting(self, seconds: float | None):
        """Statements that find the file locked wait `seconds` for it (None: the store's
        timeout)."""
        if seconds is None:
            yield
            return
        self.db.wait = seconds
        try:
            yield
        finally:
            self.db.wait = self.timeout

    def make_way(self) -> None:
        """Between two committed ranges of a batched pass: leave the write lock free long
        enough (MAKE_WAY) for a waiting writer to take it."""
        time.sleep(MAKE_WAY)

    def writer_waits(self) -> bool:
        """Whether a writer whose caller needs its write waits for the lock now (it says
        so on the waiters file): a pass in ranges stays in ranges."""
        return self.db.waiters is not None and self.db.waiters.anyone()

    def write_soon(self, sql: str, params=()) -> None:
        """An autocommit write no caller waits on (a model call's log line): made now when
        the write lock is free within KEEP_AFTER, else kept for the next transaction (`defer`).
        When writes are kept already (the lock was busy a moment ago) it is tried once, in a
        transaction that writes those too."""
        write = functools.partial(self.db.execute, sql, params)
        if self.deferred and not self.db.in_transaction:
            self.write_or_keep(write)
            return
        with self._kept_if_busy(write), self.waiting(KEEP_AFTER):
            write()

    @contextlib.contextmanager
    def giving_way(self):
        """Inside a pass's one transaction, around its statements (never its BEGIN, its
        lease renewal or its COMMIT): when a writer says it waits (`Waiters`), the running
        statement is interrupted and GaveWay raised, for the transaction to roll back and
        the pass to run again in ranges. Looks once per LOOK_EVERY steps, and once more
        after the last statement, since a COMMIT (a second at 1M memories) cannot be."""
        waiters = self.db.waiters
        if waiters is None or fcntl is None:
            yield
            return
        # the ids this transaction sees, all its runs in ranges may reach (AUTOINCREMENT:
        # a memory written after it has a larger one); max(rowid) is one B-tree descent
        top = self.db.execute(f"SELECT coalesce(max(rowid), 0) FROM {rows_table(self.db)}").fetchone()[0]
        seen = []

        def look() -> int:
            if not seen and waiters.anyone():
                seen.append(True)
                return 1  # once: the ROLLBACK that follows must run
            return 0

        self.db.set_progress_handler(look, LOOK_EVERY)
        try:
            yield
            if LAST_LOOK and not seen and waiters.anyone():  # its COMMIT cannot be cut short
                raise GaveWay(top)
        except GaveWay:
            raise
        except Exception as exc:  # the interrupted statement's (sqlite3's or pysqlite3's)
            if seen and "interrupted" in str(exc):
                raise GaveWay(top) from None
            raise
        finally:
            self.db.set_progress_handler(None, 0)

    def is_busy(self, exc: BaseException) -> bool:
        """The error a writer meets when another connection holds the write lock longer
        than it waited."""
        return (
            isinstance(exc, Exception) and hasattr(exc, "sqlite_errorcode") and locked(exc)
        )  # sqlite3's or pysqlite3's
