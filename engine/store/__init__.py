"""The store layer: where every query the engine runs is executed.

One interface, one module per backend. `open_store(target, clock)` picks the backend from
the target: a file path is SQLite (the embedded default, `sqlite.py`). A second backend
(PostgreSQL) is a module beside it offering the same methods; the rest of the engine
only calls those methods and hands compiled statements (`engine.plan`) to `run`/`fetch`.
"""
from __future__ import annotations

from ..clock import Clock
from .migrations import MIGRATIONS, RECALL_INDEX, migration
from .sqlite import SqliteStore, Store


def open_store(target: str, clock: Clock | None = None, vectors: bool = False):
    """The store for a database target (today: a SQLite file path); `vectors` loads what
    embeddings need."""
    return SqliteStore(str(target), clock, vectors=vectors)


__all__ = ["open_store", "Store", "SqliteStore", "MIGRATIONS", "RECALL_INDEX", "migration"]
