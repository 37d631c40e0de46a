"""A namespace's pass lease on either backend: the row in `leases` a holder takes for
`ttl`, so two runners never run passes at once, written once. The holder's own commits are
fenced with `renew_sql`: run inside the commit's transaction, it renews the row only while
it is still the holder's, so a commit made after a takeover is rolled back instead.

A backend says how one statement waits for the row (`_write`) and what it adds to the
statements: PostgreSQL reads `waiting` first (a CTE setting the statement's lock timeout:
`_values`, `_from`, `_using`), keeps a fencing token that grows at every take-over
(`tokens`, `_next_token`, `_returning`) and never shortens a lease it renews (`_extend`).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from engine.base.clock import Clock, iso


class LeaseCommon:
    """One holder's lease on one namespace, over the connection `db`, waiting `wait`
    seconds for the row at most."""

    p: str  # the backend's placeholder
    db: Any
    tokens = False  # the row has a fencing token, and our hold is named by it too
    token: int | None = None  # ours, while we hold the lease (with `tokens`)
    _values = "VALUES ({0}, {0}, {0}, {0})"  # the row a take writes ({0}: the placeholder)
    _from = ""  # what an UPDATE reads first
    _using = ""  # what a DELETE reads first
    _next_token = ""  # what a take-over also sets
    _returning = ""  # what a statement returns
    _extend = "{0}"  # the expiry a renewal sets, from the one bound

    def __init__(self, db, namespace: str, clock: Clock, ttl: dt.timedelta, holder: str, wait: float = 1.0):
        self.db, self.namespace, self.clock, self.ttl, self.wait = db, namespace, clock, ttl, wait
        self.holder = holder

    def _write(self, sql: str, params: tuple, wait: float | None = None) -> bool | None:
        """Run one statement on the lease's row in a transaction of its own: whether it
        changed the row (None: the row stayed locked `wait` seconds, default `self.wait`)."""
        raise NotImplementedError

    def acquire(self) -> bool:
        """Take the lease if nobody holds it, it has expired, or it is already ours."""
        now, values = self.clock(), self._values.format(self.p)
        return (
            self._write(
                f"INSERT INTO leases (namespace, holder, acquired_at, expires_at) {values} "
                "ON CONFLICT (namespace) DO UPDATE SET holder = excluded.holder, "
                f"acquired_at = excluded.acquired_at, expires_at = excluded.expires_at{self._next_token} "
                "WHERE leases.holder = excluded.holder OR leases.expires_at <= excluded.acquired_at"
                + self._returning,
                (self.namespace, self.holder, iso(now), self._until(now)),
            )
            is True
        )

    def take_over(self, gone: str) -> bool:
        """Take the lease from `gone`, a holder known to be dead, if it still holds it."""
        now, p = self.clock(), self.p
        return (
            self._write(
                f"UPDATE leases SET holder = {p}, acquired_at = {p}, expires_at = {p}{self._next_token}"
                f"{self._from} WHERE namespace = {p} AND holder = {p}{self._returning}",
                (self.holder, iso(now), self._until(now), self.namespace, gone),
            )
            is True
        )

    def renew(self) -> bool | None:
        """Extend our lease by `ttl` from now, on the lease's own connection: True when
        renewed, False when it is no longer ours (taken over), None when its row stayed
        locked for `wait` seconds (try again later)."""
        return self._write(*self.renew_sql(own=True))

    def renew_sql(self, own: bool = False) -> tuple[str, tuple]:
        """The statement that extends our lease by `ttl` from now, for the caller's
        transaction (`own`: for the lease's own, `renew`); it changes no row once the lease
        is someone else's."""
        (ours, params), until = self._ours(), self._extend.format(self.p)
        return (
            f"UPDATE leases SET expires_at = {until}{self._from if own else ''} WHERE {ours}"
            + (self._returning if own else ""),
            (self._until(self.clock()), *params),
        )

    def release(self) -> None:
        """Give the lease back (only while it is still ours)."""
        if self.token is not None or not self.tokens:
            ours, params = self._ours()
            self._write(f"DELETE FROM leases{self._using} WHERE {ours}{self._returning}", params, 30.0)
        self.token = None

    def _ours(self) -> tuple[str, tuple]:
        """Where the row is still ours: our holder's name (with `tokens`, and our token)."""
        p = self.p
        if self.tokens:
            return f"namespace = {p} AND holder = {p} AND token = {p}", (
                self.namespace,
                self.holder,
                self.token,
            )
        return f"namespace = {p} AND holder = {p}", (self.namespace, self.holder)

    def _until(self, now: dt.datetime) -> str:
        """`ttl` from now, rounded up to the second the stored times keep: a lease is
        never shorter than its ttl (a 2 s lease would otherwise last 1 s and a bit)."""
        end = now + self.ttl
        if end.microsecond:
            end = end.replace(microsecond=0) + dt.timedelta(seconds=1)
        return iso(end)

    def current(self) -> dict | None:
        row = self.db.execute(
            f"SELECT * FROM leases WHERE namespace = {self.p}", (self.namespace,)
        ).fetchone()
        return dict(zip(row.keys(), row)) if row else None

    def close(self) -> None:
        """Nothing to free: the connection is the store's, closed with it."""
