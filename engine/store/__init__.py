"""The store layer: where every query the engine runs is executed.

One contract (`protocol.Store`), one subpackage per backend. `open_store(target, clock)`
picks the backend from the target: a file path is SQLite (the embedded default,
`sqlite/`), a `postgresql://` DSN is PostgreSQL (`postgres/`; psycopg 3 in the `postgres`
extra, imported only when a DSN is opened). What both spell alike is written once
(`shared.py`, `asof_reads.py`, `inspecting.py`). The rest of the engine only calls the
protocol's members and hands compiled statements (`engine.plan`) to `run`/`fetch`.
"""

from __future__ import annotations

import sys

from engine.base.clock import Clock
from engine.base.errors import StoreError
from engine.store.postgres.postgres_connection import is_dsn, masked
from engine.store.postgres.postgres_store import PostgresStore
from engine.store.shared_schema import RECALL_INDEX
from engine.store.sqlite import sqlite_file  # noqa: F401 - `store.sqlite_file.file_path` (engine.cli.base)
from engine.store.sqlite.sqlite_library import loaded
from engine.store.sqlite.sqlite_schema import MIGRATIONS, migration
from engine.store.sqlite.sqlite_store import SqliteStore, Store


def database_errors() -> tuple:
    """What a backend raises when the database itself fails (corrupt, full, locked too
    long). psycopg's errors only once psycopg is imported: importing it for a SQLite user
    would cost ~130 ms of start-up, and a store that never opened a DSN cannot raise them."""
    psycopg = sys.modules.get("psycopg")
    return (*loaded("DatabaseError"), *((psycopg.DatabaseError,) if psycopg else ()))  # sqlite3, pysqlite3


def open_store(
    target: str, clock: Clock | None = None, read_only: bool = False, progress=None, vectors: bool = False
) -> SqliteStore | PostgresStore:
    """The store for a database target: a SQLite file path, or a postgresql:// DSN;
    `read_only` never writes to it (nor upgrades it); `progress` is told each step of
    upgrading a SQLite file that already holds memories (adopting an article database
    takes seconds at 1M); `vectors` loads what embeddings need (SQLite only, for now)."""
    if is_dsn(str(target)):
        if vectors:
            raise StoreError(
                f"{masked(str(target))}: a policy with `embed:` needs a SQLite "
                "store for now (vectors live in sqlite-vec); on PostgreSQL use "
                "a policy without it, such as lifecycle"
            )
        return PostgresStore(str(target), clock, read_only=read_only)
    return SqliteStore(str(target), clock, read_only=read_only, progress=progress, vectors=vectors)


__all__ = [
    "open_store",
    "Store",
    "SqliteStore",
    "PostgresStore",
    "is_dsn",
    "masked",
    "MIGRATIONS",
    "RECALL_INDEX",
    "migration",
    "database_errors",
]
