"""The pass lease on SQLite: a namespace's row in `leases` (namespace, holder, acquired_at,
expires_at), taken before running passes and given back after, so two runners never run
them at once.

It has its own connection, so taking or renewing it never waits behind a Python lock, and
gives up after `wait` seconds when another process holds SQLite's write lock (then someone
is busy writing, and the next try may succeed). The holder's own commits are fenced with
`renew_sql`: run inside the commit's transaction, it renews the row only while it still
names this holder, so a commit made after a takeover is rolled back instead.
"""

from __future__ import annotations

import datetime as dt
import sqlite3

from engine.base.clock import Clock, iso
from engine.store.shared import LeaseCommon
from engine.store.sqlite.sqlite_library import library


def lease_connection(path: str, sql=sqlite3) -> sqlite3.Connection:
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
        db = lease_connection(path_or_db) if self._own else path_or_db
        super().__init__(db, namespace, clock, ttl, holder, wait)

    def acquire(self) -> bool:
        """Take the lease if nobody holds it, it has expired, or it is already ours."""
        now = self.clock()
        return (
            self._write(
                "INSERT INTO leases (namespace, holder, acquired_at, expires_at) VALUES (?, ?, ?, ?) "
                "ON CONFLICT (namespace) DO UPDATE SET holder = excluded.holder, "
                "acquired_at = excluded.acquired_at, expires_at = excluded.expires_at "
                "WHERE leases.holder = excluded.holder OR leases.expires_at <= excluded.acquired_at",
                (self.namespace, self.holder, iso(now), self._until(now)),
                self.wait,
            )
            is True
        )

    def take_over(self, gone: str) -> bool:
        """Take the lease from `gone`, a holder known to be dead, if it still holds it."""
        now = self.clock()
        return (
            self._write(
                "UPDATE leases SET holder = ?, acquired_at = ?, expires_at = ? "
                "WHERE namespace = ? AND holder = ?",
                (self.holder, iso(now), self._until(now), self.namespace, gone),
                self.wait,
            )
            is True
        )

    def renew(self) -> bool | None:
        """Extend our lease by `ttl` from now, on the lease's own connection: True when
        renewed, False when it is no longer ours (taken over), None when the write lock
        stayed taken for `wait` seconds (try again later)."""
        return self._write(*self.renew_sql(), self.wait)

    def release(self) -> None:
        """Give the lease back (only ours: a lease taken over after expiry is left alone)."""
        self._write(
            "DELETE FROM leases WHERE namespace = ? AND holder = ?", (self.namespace, self.holder), 30.0
        )

    def renew_sql(self) -> tuple[str, tuple]:
        """The statement that extends our lease by `ttl` from now, for the caller's
        transaction; it changes no row once the lease is someone else's."""
        return (
            "UPDATE leases SET expires_at = ? WHERE namespace = ? AND holder = ?",
            (self._until(self.clock()), self.namespace, self.holder),
        )

    def close(self) -> None:
        if self._own:
            self.db.close()

    def _write(self, sql: str, params: tuple, wait: float) -> bool | None:
        self.db.execute(f"PRAGMA busy_timeout = {int(wait * 1000)}")
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
