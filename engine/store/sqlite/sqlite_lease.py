"""The pass lease on SQLite (shared_lease.py says what a lease is). It has its own
connection, so taking or renewing it never waits behind a Python lock, and gives up after
`wait` seconds when another process holds SQLite's write lock (then someone is busy
writing, and the next try may succeed)."""

from __future__ import annotations

import datetime as dt
import sqlite3

from engine.base.clock import Clock
from engine.store.shared_lease import LeaseCommon
from engine.store.sqlite.sqlite_library import library


def open_lease_db(path: str, sql=sqlite3) -> sqlite3.Connection:
    """A connection for leases only (a store keeps one and lends it to each lease), from
    `sql`, the store's own SQLite library (sqlite_library: two on one file corrupt it)."""
    db = sql.connect(path, timeout=1.0, isolation_level=None, check_same_thread=False)
    db.row_factory = sql.Row
    # as the store's own connection: WAL commits without an fsync each (a lease row a
    # power cut takes back is harmless: the fence still stops a second holder)
    db.execute("PRAGMA synchronous = NORMAL")
    return db


class SqliteLease(LeaseCommon):
    """One holder's lease on one namespace; over a connection of its own (given a path)
    or lent by its store (given a connection, which `close` leaves open)."""

    p = "?"

    def __init__(
        self, path_or_db, namespace: str, clock: Clock, ttl: dt.timedelta, holder: str, wait: float = 1.0
    ):
        self._own = isinstance(path_or_db, str)
        db = open_lease_db(path_or_db) if self._own else path_or_db
        super().__init__(db, namespace, clock, ttl, holder, wait)

    def close(self) -> None:
        if self._own:
            self.db.close()

    def _write(self, sql: str, params: tuple, wait: float | None = None) -> bool | None:
        self.db.execute(f"PRAGMA busy_timeout = {int((wait or self.wait) * 1000)}")
        try:
            self.db.execute("BEGIN IMMEDIATE")
        except library(self.db).OperationalError:  # the write lock stayed taken `wait` s
            return None
        try:
            changed = self.db.execute(sql, params).rowcount
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        self.db.execute("COMMIT")
        return changed == 1
