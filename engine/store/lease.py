"""The pass lease on SQLite: a namespace's row in `leases` (namespace, holder, acquired_at,
expires_at), taken before running passes and given back after, so two runners never run
them at once.

It has its own connection, so taking it never waits behind a Python lock, and gives up
after `wait` seconds when another process holds SQLite's write lock (then someone is busy
writing, and the next tick tries again).
"""
from __future__ import annotations

import datetime as dt
import sqlite3

from ..clock import Clock, iso


class SqliteLease:
    def __init__(self, path: str, namespace: str, clock: Clock, ttl: dt.timedelta,
                 holder: str, wait: float = 1.0):
        self.namespace, self.clock, self.ttl, self.wait = namespace, clock, ttl, wait
        self.holder = holder
        self.db = sqlite3.connect(path, timeout=wait, isolation_level=None, check_same_thread=False)
        self.db.row_factory = sqlite3.Row

    def acquire(self) -> bool:
        """Take the lease if nobody holds it, it has expired, or it is already ours."""
        now = self.clock()
        return self._write(
            "INSERT INTO leases (namespace, holder, acquired_at, expires_at) VALUES (?, ?, ?, ?) "
            "ON CONFLICT (namespace) DO UPDATE SET holder = excluded.holder, "
            "acquired_at = excluded.acquired_at, expires_at = excluded.expires_at "
            "WHERE leases.holder = excluded.holder OR leases.expires_at <= excluded.acquired_at",
            (self.namespace, self.holder, iso(now), iso(now + self.ttl)), self.wait)

    def release(self) -> None:
        """Give the lease back (only ours: a lease taken over after expiry is left alone)."""
        self._write("DELETE FROM leases WHERE namespace = ? AND holder = ?",
                    (self.namespace, self.holder), 30.0)

    def renew_sql(self) -> tuple[str, tuple]:
        """The statement that extends our lease by `ttl` from now, for the caller's transaction."""
        return ("UPDATE leases SET expires_at = ? WHERE namespace = ? AND holder = ?",
                (iso(self.clock() + self.ttl), self.namespace, self.holder))

    def current(self) -> dict | None:
        row = self.db.execute("SELECT * FROM leases WHERE namespace = ?", (self.namespace,)).fetchone()
        return dict(row) if row else None

    def close(self) -> None:
        self.db.close()

    def _write(self, sql: str, params: tuple, wait: float) -> bool:
        self.db.execute(f"PRAGMA busy_timeout = {int(wait * 1000)}")
        try:
            self.db.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError:  # the write lock stayed taken for `wait` seconds
            return False
        try:
            changed = self.db.execute(sql, params).rowcount
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        self.db.execute("COMMIT")
        return changed == 1
