"""Which SQLite library a store's connections come from, and that library's errors.

A store runs on the standard library's `sqlite3`, embeddings or not (`driver`): where
that SQLite cannot load sqlite-vec its functions are Python's, so an application's own
`sqlite3` connections share the store's SQLite. pysqlite3 only with LETHE_SQLITE=pysqlite3.
Every connection a store opens to its file (its own, its lease's, its checkpoint thread's,
nearest_beside's) must come from that same library. Two copies of SQLite in one process
do not see each other's POSIX locks: closing a connection of one drops the other's locks,
and the last connection of one deletes a WAL the other still reads ("database disk image
is malformed"; SQLite's How To Corrupt, 2.2.1). CI saw exactly that when the lease's
connection was the standard library's and the store's pysqlite3's
(tests/test_sqlite_library.py).

The same holds across stores: a file one store of this process has open through pysqlite3
is opened through pysqlite3 by the next one too, embeddings or not (`claim`), and one
open through the standard library cannot be opened with embeddings on a Python that
needs pysqlite3 for them: that is refused, with the reason, instead of corrupting it.

Errors are caught as the connection's own library raises them (`library(db)`): a
pysqlite3 OperationalError is not a `sqlite3.OperationalError`.
"""

from __future__ import annotations

import os
import sqlite3
import sys
import threading

from engine.base.distribution import extra_error
from engine.store.shared import StoreError
from engine.store.sqlite.sqlite_file import on_disk

_MODULES = ("sqlite3", "pysqlite3.dbapi2")
_OPEN: dict[str, list] = {}  # a file's real path: [the library it is open through, stores]
# (a second name for an open file, a hard link, finds its entry by the file's identity)
_OPEN_LOCK = threading.Lock()


def driver(vectors: bool):
    """The DB-API module a store connects with: the standard library's, embeddings or not
    (where it cannot load sqlite-vec, the vector functions are Python's:
    engine.store.sqlite.vectors.python_functions), so a process that also opens the file with
    `sqlite3` has one SQLite. pysqlite3 only when LETHE_SQLITE=pysqlite3 asks for it."""
    if (
        not vectors
        or os.environ.get("LETHE_SQLITE") != "pysqlite3"
        or hasattr(sqlite3.Connection, "enable_load_extension")
    ):
        return sqlite3
    try:
        from pysqlite3 import dbapi2
    except ImportError as exc:
        raise extra_error(
            exc,
            "embed",
            "embeddings (a SQLite that can load extensions, and this Python's cannot: pysqlite3-binary)",
            ("pysqlite3",),
            StoreError,
        ) from None
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


def _key(path: str) -> str | None:
    return os.path.realpath(path) if on_disk(path) else None


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them is not there (yet, or any more)
        return False


def _entry(key: str) -> str:
    """The key `key`'s file is registered under: its own, or that of an open file it is
    the same file as by another name (a hard link, a bind mount), which its real path does
    not show. Called under _OPEN_LOCK."""
    if key in _OPEN:
        return key
    return next((other for other in _OPEN if _same_file(other, key)), key)


def open_through(path: str):
    """The library a store of this process has the file at `path` open through, or None."""
    key = _key(path)
    with _OPEN_LOCK:
        entry = _OPEN.get(_entry(key)) if key else None
        return entry[0] if entry else None


def claim(path: str, vectors: bool):
    """The library a new store on `path` connects with, and the file's key to `release`
    when that store closes (or fails to open): `driver(vectors)`, unless the file is open
    through another one here already (see above). Claimed before connecting, under one
    lock, so two threads opening one file cannot pick two libraries."""
    wanted, key = driver(vectors), _key(path)
    if key is None:
        return wanted, None
    with _OPEN_LOCK:
        key = _entry(key)
        entry = _OPEN.get(key)
        if entry is None:
            _OPEN[key] = [wanted, 1]
            return wanted, key
        if entry[0] is not wanted:
            if vectors:
                raise StoreError(
                    f"cannot open {path} with embeddings while this process has it open "
                    "without them: embeddings need pysqlite3's SQLite here, the open store "
                    "uses Python's own, and two SQLite libraries on one file corrupt it; "
                    "close the other store first"
                )
            wanted = entry[0]  # pysqlite3's SQLite reads and writes a plain store as well
        entry[1] += 1
        return wanted, key


def release(key: str | None) -> None:
    """A store that `claim` gave `key` has closed (kept by the store: the key it was
    registered under when it opened, whatever the current directory or the names are now)."""
    if key:
        with _OPEN_LOCK:
            entry = _OPEN.get(key)
            if entry:
                entry[1] -= 1
                if entry[1] <= 0:
                    del _OPEN[key]
