"""The pass lease on PostgreSQL: the namespace's row in `leases`, with a fencing token that
grows at every take-over (a row, not an advisory lock, so it works behind a transaction-
pooling proxy: docs/postgres.md). It has its own connection (the store's
`lease_connection`), so taking or renewing it never waits on the store's; a statement
waits at most `wait` seconds for the row, then gives up, as SQLite's does."""

from __future__ import annotations

from engine.store.shared_lease import LeaseCommon


class PostgresLease(LeaseCommon):
    """One holder's lease on one namespace, over the store's lease connection."""

    p = "%s"
    tokens = True
    _values = "SELECT {0}, {0}, {0}, {0} FROM waiting"
    _from, _using = " FROM waiting", " USING waiting"
    _next_token = ", token = leases.token + 1"
    _returning = " RETURNING token"
    _extend = "greatest(expires_at, {0})"

    def _write(self, sql: str, params: tuple, wait: float | None = None) -> bool | None:
        """One round trip, in autocommit: it reads `waiting` (a CTE setting lock_timeout
        for its own transaction) before it reaches the row (a lock on the whole table waits
        the connection's lock_timeout instead). The row's token is ours once returned."""
        import psycopg

        ms = str(int((wait or self.wait) * 1000))
        try:
            row = self.db.execute(
                "WITH waiting AS (SELECT set_config('lock_timeout', %s, true)) " + sql, (ms, *params)
            ).fetchone()
        except psycopg.errors.LockNotAvailable:
            return None
        if row is not None:
            self.token = row[0]
        return row is not None
