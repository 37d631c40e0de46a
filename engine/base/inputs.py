"""What the Python API accepts: every argument a caller gives `Memory` is checked here
before anything runs, and a mistake is an `InputError` (a LetheError and a ValueError)
with one line naming the argument. Nothing a caller passes reaches SQLite, the clock
arithmetic or a template unchecked, so no raw TypeError, OverflowError or driver error
comes back from a wrong kind of value.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import operator
import os
from typing import Literal, overload

from engine.base.clock import iso, parse_duration, parse_time, until_end_of_day
from engine.base.errors import InputError

INT64 = 2**63 - 1  # the largest INTEGER both stores hold
MAX_DEPTH = 64  # of a keyed value's lists and objects
MAX_TEXT = 2_000_000  # characters of a memory's text, a summary, a turn, a keyed value's JSON
MAX_TAGS = 100  # tags of one memory
MAX_TAG = 1_000  # characters of one tag
LEASE_MAX = dt.timedelta(days=366)


def _kind(value) -> str:
    return type(value).__name__


@overload
def text(
    value,
    what: str,
    *,
    optional: Literal[False] = False,
    nonempty: bool = ...,
    name: bool = ...,
    limit: int = ...,
) -> str: ...
@overload
def text(
    value, what: str, *, optional: bool, nonempty: bool = ..., name: bool = ..., limit: int = ...
) -> str | None: ...
def text(
    value,
    what: str,
    *,
    optional: bool = False,
    nonempty: bool = False,
    name: bool = False,
    limit: int = MAX_TEXT,
) -> str | None:
    """`value` as text a store keeps as it is: a str, valid UTF-8 (no lone surrogate).
    A `name` (namespace, key, path) holds no NUL either: a file name stops at it, and
    PostgreSQL refuses it (a memory's text holding one is refused there by the store)."""
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise InputError(f"{what} must be text, got {_kind(value)}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InputError(f"{what} is not valid UTF-8 text ({exc.reason} at {exc.start})") from None
    if name and "\x00" in value:
        raise InputError(f"{what} contains a NUL character (at {value.index(chr(0))})")
    if nonempty and not value.strip():
        raise InputError(f"{what} must be non-empty text")
    if len(value) > limit:
        raise InputError(f"{what} is {len(value):,} characters, at most {limit:,} are stored")
    return value


@overload
def query(value, optional: Literal[False] = False) -> str: ...
@overload
def query(value, optional: bool) -> str | None: ...
def query(value, optional: bool = False) -> str | None:
    """A query: text (words are read out of it, so any text will do, even text no store
    could keep: it finds nothing)."""
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise InputError(f"a query must be text, got {_kind(value)}")
    return value


def texts(value, what: str) -> list[str] | None:
    """A list (any iterable but a string) of texts, or None."""
    if value is None:
        return None
    if isinstance(value, (str, bytes, dict)) or not _iterable(value):
        raise InputError(f"{what} must be a list of text, got {_kind(value)}")
    return [text(v, f"each of {what}") for v in value]


def tags(value) -> list[str] | None:
    """A memory's tags: at most MAX_TAGS texts of at most MAX_TAG characters."""
    found = texts(value, "tags")
    if found and len(found) > MAX_TAGS:
        raise InputError(f"{len(found)} tags, at most {MAX_TAGS} are stored")
    for tag in found or []:
        text(tag, "a tag", limit=MAX_TAG)
    return found or None


def names(value, what: str) -> list[str]:
    """Names given as one text or a list of texts."""
    return [text(value, what)] if isinstance(value, str) else texts(value, what) or []


def filters(value, allowed: tuple[str, ...]) -> dict[str, str]:
    """Filters as {name: text}, each name one of `allowed`."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InputError(f"filters must be a dict of text, got {_kind(value)}")
    for k, v in value.items():
        if k not in allowed:
            raise InputError(f"unknown filter {k!r}; use {', '.join(allowed)}")
        text(v, f"filter {k}", optional=True)
    return dict(value)


def keyset(value) -> tuple | None:
    """A page's keyset as browse() returned it: (the sort column's value, an id), or None."""
    if value is None:
        return None
    if (
        not isinstance(value, (tuple, list))
        or len(value) != 2
        or not isinstance(value[0], (str, int, float, type(None)))
        or isinstance(value[0], bool)
    ):
        raise InputError(f"after must be the (value, id) pair browse() returned, got {value!r}")
    if isinstance(value[0], float) and not math.isfinite(value[0]):
        raise InputError(f"after must be the (value, id) pair browse() returned, got {value!r}")
    if isinstance(value[0], str):
        text(value[0], "after")
    return (value[0], ident(value[1]) or 0)


def flag(value, what: str) -> bool:
    """True or False (0 and 1 too); anything else, 'yes' included, is refused."""
    if isinstance(value, bool) or (isinstance(value, int) and value in (0, 1)):
        return bool(value)
    raise InputError(f"{what} must be True or False, got {value!r}")


def callback(value, what: str):
    """None or something callable."""
    if value is not None and not callable(value):
        raise InputError(f"{what} must be a function or None, got {_kind(value)}")
    return value


def seconds(value, what: str) -> float:
    """A finite number of seconds from 0."""
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or value < 0
        or value > 366 * 86400
    ):
        raise InputError(f"{what} must be a number of seconds from 0 to a year, got {value!r}")
    return float(value)


def duration(value, what: str) -> dt.timedelta:
    """A duration: a timedelta, text such as '15m', or seconds; longer than 0, at most a year."""
    if isinstance(value, dt.timedelta):
        delta = value
    elif isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise InputError(f"{what} must be a duration such as '15m', got {_kind(value)}")
    else:
        try:
            delta = parse_duration(value)
        except ValueError as exc:
            raise InputError(f"{what}: {exc}") from None
    if not dt.timedelta(0) < delta <= LEASE_MAX:
        raise InputError(f"{what} must be longer than 0 and at most a year, got {value!r}")
    return delta


def ident(value) -> int | None:
    """A memory or turn id given by a caller: a whole number, None when no row can have it
    (below 1 or past the 64-bit INTEGER both stores hold). Anything else is refused."""
    if isinstance(value, bool):
        raise InputError(f"an id is a whole number, got {value!r}")
    try:
        value = operator.index(value)
    except TypeError:
        raise InputError(f"an id is a whole number, got {value!r}") from None
    return value if 1 <= value <= INT64 else None


def idents(value) -> list[int]:
    """Ids given as a list (any iterable but text); those no row can have are left out."""
    if isinstance(value, (str, bytes, dict)) or not _iterable(value):
        raise InputError(f"ids must be a list of whole numbers, got {_kind(value)}")
    return [i for i in map(ident, value) if i is not None]


def count(value, what: str) -> int | None:
    """A limit: None, or a whole number from 1 (past INT64 means no limit). Zero and
    negative ones are refused rather than read as SQLite's 'no limit' for -1."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise InputError(f"{what} must be a whole number from 1, got {value!r}")
    try:
        value = operator.index(value)
    except TypeError:
        raise InputError(f"{what} must be a whole number from 1, got {value!r}") from None
    if value < 1:
        raise InputError(f"{what} must be a whole number from 1, got {value!r}")
    return min(value, INT64)


def number(value, lo: float, hi: float, what: str) -> float | None:
    """None, or a finite number from lo to hi."""
    if value is None:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or not lo <= value <= hi
    ):
        raise InputError(f"{what} must be a number from {lo:g} to {hi:g}, got {value!r}")
    return float(value)


def expiry(value, now: dt.datetime) -> str | None:
    """A given expiry as stored text. One before `now` is refused: stored active, it only
    waited for the next expiry pass, and it is almost always a typo (the wrong year)."""
    if value is None or value == "":
        return None
    try:
        when = iso(until_end_of_day(value) if isinstance(value, str) else value)
        until_end_of_day(when) + LEASE_MAX  # room for the arithmetic on it
    except (ValueError, OverflowError, TypeError, AttributeError):
        raise InputError(f"expires_at: not an ISO-8601 date or time: {value!r}") from None
    if when < iso(now):  # in the same second as now is not refused: times are to the second
        raise InputError(
            f"expires_at {when} is before now ({iso(now)}): the memory would be "
            "stored already expired; give a later date, or none"
        )
    return when


def said(value, now: dt.datetime, what: str = "said_at") -> str | None:
    """When a turn was said (a datetime or ISO text), as stored text; None: now. One after
    `now` is refused: it would make the turn newer than what is said after it."""
    if value is None:
        return None
    try:
        when = iso(parse_time(value) if isinstance(value, str) else value)
    except (ValueError, OverflowError, TypeError, AttributeError):
        raise InputError(f"{what}: not an ISO-8601 date or time: {value!r}") from None
    if when > iso(now):
        raise InputError(f"{what} {when} is after now ({iso(now)}): a turn is said before it is remembered")
    return when


def moment(value, what: str = "as_of") -> dt.datetime | None:
    """A time a caller asks about (a datetime or ISO text), naive UTC; None: none given."""
    if value is None:
        return None
    try:
        return parse_time(iso(value) if isinstance(value, dt.datetime) else value)
    except (ValueError, OverflowError, TypeError, AttributeError):
        raise InputError(f"{what}: not an ISO-8601 date or time: {value!r}") from None


def clock(value) -> None:
    """A clock is a callable returning a datetime with room for the arithmetic Lethe does
    on it (leases, expiries). Its first value is checked here: one returning text failed
    at the first time the engine read, one near the year 9999 at the first lease."""
    if not callable(value):
        raise InputError(
            f"clock must be a zero-argument callable returning a datetime, got "
            f"{_kind(value)} {value!r} (for a fixed time: "
            "engine.FixedClock('2026-01-01T09:00:00'))"
        )
    first = value()
    if not isinstance(first, dt.datetime):
        raise InputError(
            f"clock must return a datetime, it returned {_kind(first)} "
            f"{first!r} (for a fixed time: engine.FixedClock({str(first)!r}), "
            "which also takes ISO text)"
        )
    try:
        first + LEASE_MAX
        first - LEASE_MAX
    except OverflowError:
        raise InputError(
            f"clock reads {first}, too near the year 1 or 9999 for the "
            "arithmetic Lethe does on it (leases, expiries)"
        ) from None


def db_path(value) -> str:
    """A database: a file path (text or path-like) or a postgresql:// DSN."""
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    return text(value, "the database path", nonempty=True, name=True)


def json_value(value, what: str = "value") -> str:
    """`value` as the JSON text it is stored as, or InputError when it is not JSON: NaN or
    infinity, bytes, a set, an object whose keys are not text, a nesting deeper than
    MAX_DEPTH, or anything else json does not write. A stored value that is not JSON made
    every later read of the namespace fail, so none is ever stored."""
    _check_json(value, what)
    try:
        found = json.dumps(value, allow_nan=False, ensure_ascii=False)
    except (TypeError, ValueError) as exc:
        raise InputError(f"{what} is not JSON: {exc}") from None
    if len(found) > MAX_TEXT:
        raise InputError(f"{what} is {len(found):,} characters of JSON, at most {MAX_TEXT:,} are stored")
    return found


def _check_json(value, what: str) -> None:
    stack = [(value, 0)]
    while stack:  # iterative: a 5,000-deep value must not overflow Python's stack
        item, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise InputError(f"{what} nests lists or objects more than {MAX_DEPTH} deep")
        if item is None or isinstance(item, (bool, int)):
            continue
        if isinstance(item, float):
            if not math.isfinite(item):
                raise InputError(f"{what} holds {item!r}, which JSON has no number for")
        elif isinstance(item, str):
            text(item, f"a text in {what}", limit=MAX_TEXT)
        elif isinstance(item, (list, tuple)):
            stack.extend((v, depth + 1) for v in item)
        elif isinstance(item, dict):
            for k, v in item.items():
                if not isinstance(k, str):
                    raise InputError(f"{what} has a key that is not text: {_kind(k)} {k!r}")
                text(k, f"a key in {what}", name=True)
                stack.append((v, depth + 1))
        else:
            raise InputError(
                f"{what} holds a {_kind(item)}, which is not JSON (use text, "
                "numbers, true/false, null, lists and objects)"
            )


def _iterable(value) -> bool:
    try:
        iter(value)
    except TypeError:
        return False
    return True
