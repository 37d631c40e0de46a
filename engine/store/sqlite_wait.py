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
"""
from __future__ import annotations

import contextlib
import functools
import time

from .common import KEEP_AFTER

TRY_EVERY = 0.001  # seconds between tries of a statement that found the database locked
MAKE_WAY = 0.003   # seconds a batched pass leaves the lock free after each range


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

        def execute(self, sql, params=(), /):
            if self.in_transaction and not _ends(sql):
                return super().execute(sql, params)  # the lock is ours or not needed
            deadline = None
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
                    time.sleep(TRY_EVERY)

    return Connection


def make_way() -> None:
    """Between two ranges of a batched pass: give a writer that waits one try at the lock."""
    time.sleep(MAKE_WAY)


class Waiting:
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

    def write_soon(self, sql: str, params=()) -> None:
        """An autocommit write no caller waits on (a model call's log line): made now when
        the write lock is free within KEEP_AFTER, else kept for the next transaction (`defer`).
        When writes are kept already (the lock was busy a moment ago) it is tried once, in a
        transaction that writes those too."""
        write = functools.partial(self.db.execute, sql, params)
        try:
            if self.deferred and not self.db.in_transaction:
                with self.transaction(wait=0.0):
                    write()
            else:
                with self.waiting(KEEP_AFTER):
                    write()
        except Exception as exc:
            if not self.is_busy(exc):
                raise
            self.defer(write)

    def is_busy(self, exc: BaseException) -> bool:
        """The error a writer meets when another connection holds the write lock longer
        than it waited."""
        return hasattr(exc, "sqlite_errorcode") and locked(exc)  # sqlite3's or pysqlite3's
