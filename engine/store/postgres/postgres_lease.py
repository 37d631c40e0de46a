"""The pass lease on PostgreSQL: the namespace's row in `leases`, with a fencing token that
grows at every take-over (a row, not an advisory lock, so it works behind a transaction-
pooling proxy: docs/postgres.md). It has its own connection (the store's
`lease_connection`), so taking or renewing it never waits on the store's; a statement
waits at most `wait` seconds for the row, then gives up, as SQLite's does."""

from __future__ import annotations

import datetime as dt

from engine.base.clock import Clock, iso
from engine.store.shared import LeaseCommon


class PostgresLease(LeaseCommon):
    """One holder's lease on one namespace, over the store's lease connection."""

    p = "%s"

    def __init__(
        self, store, namespace: str, clock: Clock, ttl: dt.timedelta, holder: str, wait: float = 1.0
    ):
        super().__init__(store.lease_connection(), namespace, clock, ttl, holder, wait)
        self.token: int | None = None

    def acquire(self) -> bool:
        """Take the lease if nobody holds it, it has expired, or it is already ours."""
        now = self.clock()
        row = self._write(
            "INSERT INTO leases (namespace, holder, acquired_at, expires_at) "
            "SELECT %s, %s, %s, %s FROM waiting ON CONFLICT (namespace) DO UPDATE SET "
            "holder = excluded.holder, acquired_at = excluded.acquired_at, "
            "expires_at = excluded.expires_at, token = leases.token + 1 "
            "WHERE leases.holder = excluded.holder OR leases.expires_at <= excluded.acquired_at "
            "RETURNING token",
            (self.namespace, self.holder, iso(now), self._until(now)),
        )
        return self._took(row)

    def take_over(self, gone: str) -> bool:
        """Take the lease from `gone`, a holder known to be dead, if it still holds it."""
        now = self.clock()
        row = self._write(
            "UPDATE leases SET holder = %s, acquired_at = %s, expires_at = %s, "
            "token = token + 1 FROM waiting WHERE namespace = %s AND holder = %s "
            "RETURNING token",
            (self.holder, iso(now), self._until(now), self.namespace, gone),
        )
        return self._took(row)

    def _took(self, row) -> bool:
        if row is None or row is False:
            return False
        self.token = row[0]
        return True

    def renew(self) -> bool | None:
        """Extend our lease by `ttl` from now, on the lease's own connection: True when
        renewed, False when it is no longer ours (taken over), None when its row stayed
        locked for `wait` seconds (try again later)."""
        row = self._write(*self.renew_sql(returning=True, source=" FROM waiting"))
        return None if row is False else row is not None

    def release(self) -> None:
        """Give the lease back (only while it is still ours)."""
        if self.token is not None:
            self._write(
                "DELETE FROM leases USING waiting WHERE namespace = %s AND holder = %s "
                "AND token = %s RETURNING token",
                (self.namespace, self.holder, self.token),
                30.0,
            )
        self.token = None

    def renew_sql(self, returning: bool = False, source: str = "") -> tuple[str, tuple]:
        """The statement that extends our lease by `ttl` from now, for the caller's
        transaction; it changes no row once the lease is someone else's."""
        return (
            "UPDATE leases SET expires_at = greatest(expires_at, %s)"
            + source
            + " WHERE namespace = %s AND holder = %s AND token = %s"
            + (" RETURNING token" if returning else ""),
            (self._until(self.clock()), self.namespace, self.holder, self.token),
        )

    def close(self) -> None:
        """Nothing to free: the connection is the store's, closed with it."""

    def _write(self, sql: str, params: tuple, wait: float | None = None):
        """The statement's returned row (None: no row changed), or False when the lease
        row stayed locked for `wait` seconds. One round trip, in autocommit: it reads
        `waiting` (a CTE setting lock_timeout for its own transaction) before it reaches
        the row (a lock on the whole table waits the connection's lock_timeout instead)."""
        import psycopg

        ms = str(int((wait or self.wait) * 1000))
        try:
            return self.db.execute(
                "WITH waiting AS (SELECT set_config('lock_timeout', %s, true)) " + sql, (ms, *params)
            ).fetchone()
        except psycopg.errors.LockNotAvailable:
            return False
