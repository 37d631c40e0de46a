"""Read-only access to the tables of an import's source (engine.store.transfer), or of its
destination seen as one: a SQLite file or a PostgreSQL database, with the SQL written
once with its placeholder (`p`)."""

from __future__ import annotations

import os
import sqlite3
import urllib.parse
from typing import Any

from engine.base.errors import StoreError
from engine.store.postgres.postgres_connection import is_dsn, masked, psycopg
from engine.store.postgres.postgres_schema import PG_MIGRATIONS
from engine.store.sqlite.sqlite_file import file_path
from engine.store.sqlite.sqlite_library import open_through
from engine.store.sqlite.sqlite_schema import MIGRATIONS


class Source:
    """Read-only access to the source's tables; `p` is its backend's placeholder."""

    db: Any

    def __init__(self, target: str, query: str | None = None):
        self.pg = is_dsn(target)
        self.p = "%s" if self.pg else "?"
        if not self.pg and query is None and not os.path.isfile(file_path(target)):
            raise StoreError(
                f"no database at {target}: nothing to import (give the "
                "agent_memory.db, Lethe file or postgresql:// DSN to copy)"
            )
        try:
            if self.pg:
                self.db = psycopg().connect(target, autocommit=True)
            else:  # `immutable`: an adopted copy nobody writes, read after its file is gone
                path = file_path(target)  # a `file:` URI: the file it names, read as ours
                uri = "file:" + urllib.parse.quote(os.path.abspath(path))
                sql = open_through(path) or sqlite3  # the library it is open through here
                self.db = sql.connect(f"{uri}?{query or read_mode(path)}", uri=True)
                self.db.execute("SELECT count(*) FROM sqlite_master").fetchone()
        except Exception as exc:
            shown = masked(target)
            raise StoreError(f"cannot open the source {shown}: {str(exc).splitlines()[0]}") from None

    def has(self, table: str) -> bool:
        return bool(self.columns(table))

    def behind(self) -> list[str]:
        """The migrations the source lacks (all of them for an article database)."""
        done = (
            {r[0] for r in self.q("SELECT name FROM lethe_migrations")}
            if self.has("lethe_migrations")
            else set()
        )
        return [fn.__name__ for fn in (PG_MIGRATIONS if self.pg else MIGRATIONS) if fn.__name__ not in done]

    def q(self, sql: str, params=()) -> Any:
        return self.db.execute(sql, params)

    def columns(self, table: str) -> list[str]:
        if self.pg:
            rows = self.q(
                "SELECT column_name FROM information_schema.columns WHERE table_name = %s "
                "AND table_schema = current_schema() ORDER BY ordinal_position",
                (table,),
            )
            return [r[0] for r in rows]
        return [r[1] for r in self.q(f'PRAGMA table_info("{table}")')]


def dst_columns(dst, table: str) -> list[str]:
    return Source.columns(as_source(dst), table)


def as_source(dst) -> Source:
    view = Source.__new__(Source)
    view.pg, view.db, view.p = dst.information_schema, dst.db, dst.p  # its catalog
    return view


def read_mode(path: str) -> str:
    """How to open a SQLite source without writing beside it: a WAL-mode file with no
    -wal left (nobody writes it) as immutable, since reading it otherwise creates -wal and
    -shm files; any other file read-only, under SQLite's locks."""
    wal = path + "-wal"
    try:
        with open(path, "rb") as f:
            header = f.read(20)
    except OSError:
        return "mode=ro"  # the open itself reports what is wrong
    in_wal_mode = len(header) == 20 and header[:16] == b"SQLite format 3\x00" and header[18] == 2
    if in_wal_mode and not (os.path.exists(wal) and os.path.getsize(wal)):
        return "immutable=1"
    return "mode=ro"
