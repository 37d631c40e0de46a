"""The pass lease on PostgreSQL: the namespace's row in `leases`, with a fencing token.

Why a row and not `pg_try_advisory_lock`: a session advisory lock belongs to one server
connection. Behind a transaction-pooling proxy (PgBouncer's `pool_mode = transaction`, RDS
Proxy, Supavisor) consecutive transactions of one client run on different server
connections, so the lock is taken on one and "released" on another, and a client that dies
leaves it held by a pooled connection that lives on. A lease row is plain data: it works
through any proxy, expires by itself `ttl` after its holder stops renewing it, and says who
holds it. Its `token` grows at every take-over; the holder's store checks it, with a row
lock, in every transaction it commits while holding the lease (`PostgresStore.transaction`),
so a holder that stalled past its expiry cannot commit over its successor's work.
"""
from __future__ import annotations

import datetime as dt

from ..clock import Clock, iso
from ..errors import StoreError


class LeaseLost(StoreError):
    """Our lease was taken over (it expired while we were busy): our transaction rolls back."""


class PostgresLease:
    def __init__(self, store, namespace: str, clock: Clock, ttl: dt.timedelta, holder: str):
        self.store, self.namespace, self.clock, self.ttl = store, namespace, clock, ttl
        self.holder = holder
        self.token: int | None = None
        self.db = store.connect()  # its own connection: taking the lease never waits on ours

    def acquire(self) -> bool:
        """Take the lease if nobody holds it, it has expired, or it is already ours."""
        now = self.clock()
        row = self.db.execute(
            "INSERT INTO leases (namespace, holder, acquired_at, expires_at) "
            "VALUES (%s, %s, %s, %s) ON CONFLICT (namespace) DO UPDATE SET "
            "holder = excluded.holder, acquired_at = excluded.acquired_at, "
            "expires_at = excluded.expires_at, token = leases.token + 1 "
            "WHERE leases.holder = excluded.holder OR leases.expires_at <= excluded.acquired_at "
            "RETURNING token", (self.namespace, self.holder, iso(now), iso(now + self.ttl))).fetchone()
        self.token = row[0] if row else None
        self.store.fence = self if row else None
        return row is not None

    def release(self) -> None:
        """Give the lease back (only while it is still ours)."""
        self.store.fence = None
        if self.token is not None:
            self.db.execute("DELETE FROM leases WHERE namespace = %s AND holder = %s AND token = %s",
                            (self.namespace, self.holder, self.token))
        self.token = None

    def renew_sql(self) -> tuple[str, tuple]:
        """Extend our lease by `ttl` from now; changes no row once it is someone else's."""
        return ("UPDATE leases SET expires_at = greatest(expires_at, %s) WHERE namespace = %s "
                "AND holder = %s AND token = %s",
                (iso(self.clock() + self.ttl), self.namespace, self.holder, self.token))

    def current(self) -> dict | None:
        row = self.db.execute("SELECT * FROM leases WHERE namespace = %s", (self.namespace,)).fetchone()
        return dict(row) if row else None

    def close(self) -> None:
        self.db.close()
