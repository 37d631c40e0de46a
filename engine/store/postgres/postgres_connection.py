"""psycopg, as the PostgreSQL store uses it: DSNs and their masked form, rows read by
position or by name (as sqlite3.Row), and a connection whose errors say when the server
dropped it (`ServerGone`) or refused a call (`DatabaseFailed`), each one line. psycopg is
imported only when a DSN is opened."""

from __future__ import annotations

import contextlib
import functools
import json
import re
from typing import Any

from engine.base.distribution import extra_error
from engine.base.errors import StoreError
from engine.store.shared import NamedRow


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


def websearch(fts: str | None) -> str | None:
    """The engine's full-text queries ('"a" OR "b"', '"a" AND "b"', every token quoted) in
    websearch_to_tsquery's syntax, where OR is OR and words side by side are AND."""
    return fts.replace('" AND "', '" "') if fts else fts


def json_or_none(text: str | None):
    """JSON text read as PostgreSQL's json (and SQLite's json_valid) reads it: None for
    text that is not JSON, NaN and Infinity included."""

    def refuse(constant: str):
        raise ValueError(constant)

    try:
        return json.loads(text or "", parse_constant=refuse)
    except (ValueError, RecursionError):
        return None


def rows(cursor):
    """psycopg's row factory for `NamedRow`s."""
    names = [c.name for c in cursor.description or []]
    index = {n: i for i, n in reversed(list(enumerate(names)))}  # the first of a name wins
    return lambda values: NamedRow(values, names, index)


class DatabaseFailed(StoreError):
    """What the server (or the driver) refused, in one line: a lock or statement timeout, a
    permission, a read-only server, a full disk. Exit 1, as the CLI says of a SQLite file
    that fails (`error: the database failed: ...`)."""

    exit_code = 1


@functools.cache
def failed_as(cls: type) -> type:
    """`cls` (a psycopg error class) that is also a `DatabaseFailed`: what catches the
    psycopg error (a lock timeout as busy, LockNotAvailable) still catches it."""
    return type(cls.__name__, (DatabaseFailed, cls), {"__module__": __name__})


def one_line(exc: BaseException) -> str:
    """The server's own sentence (its primary message), else the first line of the error."""
    diag = getattr(exc, "diag", None)
    said = (getattr(diag, "message_primary", None) if diag is not None else None) or str(exc)
    return " ".join(said.strip().splitlines()[0].split()) if said.strip() else type(exc).__name__


@functools.cache
def connection_class():
    """psycopg's Connection, turning every error a call meets into a one-line StoreError
    that is still the psycopg error it was: `ServerGone` for a connection the server
    dropped (still an OperationalError: never a turn's fault), `DatabaseFailed` for
    anything else the server or the driver refused."""
    pg = psycopg()

    class ServerGone(StoreError, pg.OperationalError):
        """The server dropped the connection; the store reconnects at its next call."""

    def as_store_error(conn, exc):
        if isinstance(exc, StoreError):
            return exc
        if conn.broken or conn.closed:
            said = " ".join(str(exc).split())[:200] or type(exc).__name__
            return ServerGone(f"PostgreSQL dropped the connection ({masked(said)}); the next call reconnects")
        return failed_as(type(exc))(f"the database failed: {masked(one_line(exc))[:500]}")

    @contextlib.contextmanager
    def one_line_errors(conn):
        try:
            yield
        except pg.Error as exc:
            failed = as_store_error(conn, exc)
            if failed is exc:
                raise
            raise failed from None

    class Connection(pg.Connection):
        def execute(self, *args, **kwargs):
            with one_line_errors(self):
                return super().execute(*args, **kwargs)

        @contextlib.contextmanager
        def transaction(self, *args, **kwargs):
            with one_line_errors(self), super().transaction(*args, **kwargs) as tx:
                yield tx

    Connection.ServerGone = ServerGone
    return Connection
