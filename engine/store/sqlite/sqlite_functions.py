"""The SQL functions a compiled statement may call on a SQLite connection, defined by
the store on each connection it opens: the math functions where SQLite's build lacks them,
and `Dialect.kept()`, which counts the rows a pass's rule keeps (engine.plan.rules)."""

from __future__ import annotations

import math
import sqlite3

from engine.plan.dialect import Dialect
from engine.store.sqlite.sqlite_library import library


class _Counter:
    """The SQL function `Dialect.kept()`: counts the calls and returns NULL."""

    calls = 0

    def __call__(self):
        self.calls += 1


def sql_functions(db: sqlite3.Connection) -> _Counter:
    """Define on `db` the functions compiled statements may call: the math functions where
    SQLite's build lacks them, and `Dialect.kept` (returned: its count of calls)."""
    _ensure_math(db)
    kept = _Counter()
    name = Dialect.kept
    assert name is not None  # SQLite's dialect names the function (PostgreSQL's has none)
    db.create_function(name, 0, kept)
    return kept


def _ensure_math(db: sqlite3.Connection) -> None:
    """Builds of SQLite without the math functions get Python ones (slower, same results)."""
    try:
        db.execute("SELECT exp(0), ln(1), log10(1), floor(0.5), ceil(0.5), pow(2, 2), sqrt(4)")
        return
    except library(db).OperationalError:
        pass
    for name, fn, n in (
        ("exp", math.exp, 1),
        ("ln", math.log, 1),
        ("log10", math.log10, 1),
        ("floor", math.floor, 1),
        ("ceil", math.ceil, 1),
        ("pow", math.pow, 2),
        ("sqrt", math.sqrt, 1),
    ):
        db.create_function(name, n, _null_safe(fn), deterministic=True)


def _null_safe(fn):
    def wrapped(*args):
        if any(a is None for a in args):
            return None
        try:
            return fn(*args)
        except (ValueError, OverflowError):
            return None

    return wrapped
