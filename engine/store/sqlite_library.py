"""Which SQLite library a store's connections come from, and that library's errors.

A store runs on the standard library's `sqlite3`, or on pysqlite3's when embeddings are
on and this Python's SQLite cannot load extensions (`driver`). Every connection a store
opens to its file (its own, its lease's, its checkpoint thread's, nearest_beside's) must
come from that same library. Two copies of SQLite in one process do not see each other's
POSIX locks: closing a connection of one drops the other's locks, and the last connection
of one deletes a WAL the other still reads ("database disk image is malformed"; SQLite's
How To Corrupt, 2.2.1). CI saw exactly that when the lease's connection was the standard
library's and the store's pysqlite3's (tests/test_sqlite_library.py).

So errors are caught as the connection's own library raises them (`library(db)`): a
pysqlite3 OperationalError is not a `sqlite3.OperationalError`.
"""
from __future__ import annotations

import sqlite3
import sys

from .common import StoreError

_MODULES = ("sqlite3", "pysqlite3.dbapi2")


def driver(vectors: bool):
    """The DB-API module a store connects with: the standard library's, unless embeddings
    are on and it cannot load extensions (a Python built without them), then pysqlite3."""
    if not vectors or hasattr(sqlite3.Connection, "enable_load_extension"):
        return sqlite3
    try:
        from pysqlite3 import dbapi2
    except ImportError:
        raise StoreError("embeddings need a SQLite that can load extensions, and this "
                         "Python's cannot: pip install 'lethe[embed]' (pysqlite3-binary)") from None
    return dbapi2


def library(db):
    """The DB-API module the connection `db` came from (sqlite3, or pysqlite3's dbapi2)."""
    for cls in type(db).__mro__:
        if cls.__name__ == "Connection" and cls.__module__ in _MODULES:
            return sys.modules[cls.__module__]
    return sqlite3


def loaded(name: str) -> tuple:
    """The exception class `name` ("DatabaseError", ...) of every SQLite library this
    process has imported: what any store of it may raise."""
    return tuple(getattr(sys.modules[m], name) for m in _MODULES if m in sys.modules)
