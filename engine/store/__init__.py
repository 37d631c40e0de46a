"""The store layer: where every query the engine runs is executed.

One interface, one module per backend. `open_store(target, clock)` picks the backend from
the target: a file path is SQLite (the embedded default, `sqlite.py`). A second backend
(PostgreSQL) is a module beside it offering the same methods; the rest of the engine
only calls those methods and hands compiled statements (`engine.plan`) to `run`/`fetch`.
"""
from __future__ import annotations

import sqlite3

from ..clock import Clock
from .migrations import MIGRATIONS, RECALL_INDEX, migration
from .sqlite import SqliteStore, Store

# what a backend raises when the database itself fails (corrupt, full, locked too long)
DATABASE_ERRORS = (sqlite3.DatabaseError,)


def open_store(target: str, clock: Clock | None = None, read_only: bool = False,
               vectors: bool = False):
    """The store for a database target (today: a SQLite file path); `read_only` never
    writes to it (nor upgrades it); `vectors` loads what embeddings need."""
    return SqliteStore(str(target), clock, read_only=read_only, vectors=vectors)


__all__ = ["open_store", "Store", "SqliteStore", "MIGRATIONS", "RECALL_INDEX", "migration",
           "DATABASE_ERRORS"]
