"""psycopg, as the PostgreSQL store uses it: DSNs and their masked form, rows read by
position or by name (as sqlite3.Row), and a connection whose errors say when the server
dropped it (`ServerGone`). psycopg is imported only when a DSN is opened."""

from __future__ import annotations

import contextlib
import functools
import re
import sys
from typing import Any

from engine.base.distribution import extra_error
from engine.base.errors import StoreError


def is_dsn(target: str) -> bool:
    return str(target).startswith(("postgresql://", "postgres://"))


def masked(dsn: str) -> str:
    """The DSN with its password replaced by ***, for messages."""
    dsn = re.sub(r"(://[^:/@?]*:)[^@]*@", r"\1***@", dsn)
    return re.sub(r"(password=)[^&\s]*", r"\1***", dsn)


def psycopg() -> Any:
    try:
        import psycopg
    except ImportError as exc:
        raise extra_error(exc, "postgres", "PostgreSQL", ("psycopg", "psycopg_binary"), StoreError) from None
    return psycopg


def pg_database_errors() -> tuple:
    """What psycopg raises when the server or the database fails: nothing until psycopg
    has been imported (by opening a DSN), so asking never imports it."""
    module = sys.modules.get("psycopg")
    return (module.DatabaseError,) if module is not None else ()


def websearch(fts: str | None) -> str | None:
    """The engine's full-text queries ('"a" OR "b"', '"a" AND "b"', every token quoted) in
    websearch_to_tsquery's syntax, where OR is OR and words side by side are AND."""
    return fts.replace('" AND "', '" "') if fts else fts


class Row(tuple):
    """A result row read by position or by column name, as sqlite3.Row is."""

    _names: list[str]
    _index: dict[str, int]

    def __new__(cls, values, names: list[str], index: dict[str, int]):
        row = super().__new__(cls, values)
        row._names, row._index = names, index
        return row

    def __getitem__(self, key):  # type: ignore[override]  # a name, as sqlite3.Row takes
        if isinstance(key, str):
            try:
                key = self._index[key]
            except KeyError:
                raise IndexError(f"no column {key!r}") from None
        return tuple.__getitem__(self, key)

    def keys(self) -> list[str]:
        return list(self._names)


def rows(cursor):
    """psycopg's row factory for `Row`s."""
    names = [c.name for c in cursor.description or []]
    index = {n: i for i, n in reversed(list(enumerate(names)))}  # the first of a name wins
    return lambda values: Row(values, names, index)


@functools.cache
def connection_class():
    """psycopg's Connection, turning the error of a connection the server dropped into
    `ServerGone`: a StoreError of one line (libpq says three) that is still an
    OperationalError, so what treats a server failure as never a turn's fault still does.
    Any other error (a lock timeout, a constraint) comes out as it was."""
    pg = psycopg()

    class ServerGone(StoreError, pg.OperationalError):
        """The server dropped the connection; the store reconnects at its next call."""

    def gone(conn, exc):
        if isinstance(exc, ServerGone) or not (conn.broken or conn.closed):
            return None
        said = " ".join(str(exc).split())[:200] or type(exc).__name__
        return ServerGone(f"PostgreSQL dropped the connection ({masked(said)}); the next call reconnects")

    class Connection(pg.Connection):
        def execute(self, *args, **kwargs):
            try:
                return super().execute(*args, **kwargs)
            except pg.OperationalError as exc:
                lost = gone(self, exc)
                if lost is None:
                    raise
                raise lost from None

        @contextlib.contextmanager
        def transaction(self, *args, **kwargs):
            try:
                with super().transaction(*args, **kwargs) as tx:
                    yield tx
            except pg.OperationalError as exc:
                lost = gone(self, exc)
                if lost is None:
                    raise
                raise lost from None

    Connection.ServerGone = ServerGone
    return Connection
