"""Reliability of the API's edges (issue 42): every input mistake is a `LetheError` with a
one-line message, a keyed value that is not JSON is refused at the put (never a namespace
that cannot be read), and a closed pipe ends a command quietly."""

from __future__ import annotations

import inspect
import os
import subprocess
import sys

import pytest

from engine import FixedClock, LetheError, Memory
from engine.base.errors import InputError
from tests.helpers import store_of

HOSTILE = (
    123,
    -5,
    True,
    1e308,
    float("nan"),
    float("inf"),
    [1],
    {"a": 1},
    b"x",
    "\ud800",
    "a\x00b",
    "-5s",
    "",
    object(),
)


def _one_line(exc: BaseException) -> None:
    assert "\n" not in str(exc), str(exc)


@pytest.fixture
def mem(tmp_path):
    with Memory(str(tmp_path / "m.db"), offline=True, clock=FixedClock("2026-03-02T09:00:00")) as m:
        m.add("User prefers tabs over spaces.", judged=False)
        yield m


PUBLIC = [
    name
    for name, f in inspect.getmembers(Memory, inspect.isfunction)
    if not name.startswith("_") and name not in ("close",)
]


@pytest.mark.parametrize("method", PUBLIC)
def test_every_public_method_refuses_any_bad_argument_with_a_lethe_error(mem, method):
    """Before: `add(scene=[1])` raised sqlite3.ProgrammingError, `recall(123)` TypeError,
    `run_due(lease_ttl='-5s')` ValueError. Now every argument of every public method, given
    a value of the wrong kind, is a LetheError (or is used), never another exception."""
    sig = inspect.signature(getattr(Memory, method))
    params = [
        p
        for p in sig.parameters.values()
        if p.name != "self" and p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)
    ]
    good = {
        "user": "hi",
        "assistant": "",
        "content": "User likes tea.",
        "key": "k",
        "query": "tabs",
        "memory_id": 1,
        "reason": "why",
        "names": ["decay"],
        "status": "active",
        "memory": None,
        "text": "tabs",
        "history": None,
        "step": "answer",
        "model": "a-model",
        "started": 0.0,
        "passes": ["decay"],
    }
    for param in params:
        for bad in HOSTILE:
            args = {p.name: good[p.name] for p in params if p.default is p.empty and p.name in good}
            if param.name == "memory" or method == "key_of":
                continue
            args[param.name] = bad
            try:
                getattr(mem, method)(**args)
            except LetheError as exc:
                _one_line(exc)
            except Exception as exc:  # the point of the test
                pytest.fail(f"{method}({param.name}={bad!r}) raised {type(exc).__name__}: {exc}")


@pytest.mark.parametrize(
    "kwargs",
    [
        {"namespace": "\ud800"},
        {"namespace": "a\x00b"},
        {"namespace": 5},
        {"policy": 5},
        {"offline": "yes"},
        {"read_only": [1]},
    ],
)
def test_a_bad_memory_argument_is_a_lethe_error(tmp_path, kwargs):
    with pytest.raises(LetheError) as err:
        Memory(str(tmp_path / "m.db"), **kwargs).close()
    _one_line(err.value)


@pytest.mark.parametrize("path", ["a\x00b.db", "\ud800.db", 5, b"m.db", ""])
def test_a_bad_database_path_is_a_lethe_error(tmp_path, monkeypatch, path):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(LetheError) as err:
        Memory(path, offline=True).close()
    _one_line(err.value)


def test_a_clock_too_near_the_year_9999_is_refused_at_the_start(tmp_path):
    """Before: FixedClock('9999-12-31T23:59:59') was accepted and run_due() raised
    OverflowError from the lease arithmetic."""
    with pytest.raises(LetheError) as err:
        Memory(str(tmp_path / "m.db"), offline=True, clock=FixedClock("9999-12-31T23:59:59"))
    _one_line(err.value)


def test_input_errors_are_also_value_errors():
    assert issubclass(InputError, LetheError) and issubclass(InputError, ValueError)


# -- keyed values (finding 1): refused at the put, never a namespace that cannot be read
NOT_JSON = [
    float("nan"),
    float("inf"),
    {"a": float("nan")},
    [float("-inf")],
    b"bytes",
    {1, 2},
    {"a": object()},
    {1: "int key"},
    {(1, 2): "tuple key"},
]


def _deep(n: int):
    value: list = []
    for _ in range(n):
        value = [value]
    return value


@pytest.mark.parametrize("value", [*NOT_JSON, _deep(5000)], ids=[*map(repr, NOT_JSON), "5000 deep"])
def test_a_keyed_value_that_is_not_json_is_refused_and_the_namespace_stays_readable(mem, value):
    """Before: `put(key, content, {"a": nan})` stored invalid JSON in the `keyed` event and
    every later keyed()/put() of the namespace raised `malformed JSON`; bytes and sets
    raised raw errors, a 5,000-deep value RecursionError."""
    mem.put("good", "User prefers dark mode.", {"theme": "dark"})
    with pytest.raises(InputError) as err:
        mem.put("bad", "User scored well.", value)
    _one_line(err.value)
    assert mem.keyed("bad") is None
    assert mem.keyed("good").value == {"theme": "dark"}
    mem.put("later", "User likes tea.", {"n": 1})
    assert mem.keyed("later").value == {"n": 1}


def test_a_json_value_comes_back_as_it_went_in(mem):
    value = {"a": [1, 2.5, None, True, "x"], "b": {"c": "\u00e9"}}
    mem.put("k", "User likes tea.", value)
    assert mem.keyed("k").value == value


def test_a_namespace_whose_keyed_event_holds_bad_json_stays_readable(mem):
    """A store written before the check (NaN in a keyed event): the rest of the namespace
    is still read, and the bad key reads as having no value."""
    mid = mem.put("good", "User prefers dark mode.", {"theme": "dark"})
    other = mem.add("User likes tea.", judged=False)
    with store_of(mem).transaction():  # as json.dumps wrote it before the check
        store_of(mem).event(other, "keyed", '{"key": "bad", "value": NaN}')
    assert mem.keyed("good").memory.id == mid
    mem.put("later", "User likes green tea.", {"n": 1})
    assert mem.keyed("later").value == {"n": 1}


# -- a closed pipe (finding 13)
def _lethe(*args, env=None) -> str:
    return f"{sys.executable} -m engine.cli " + " ".join(args)


@pytest.mark.parametrize(
    "command", ["ls --db {db} --limit 5000", "validate lifecycle", "ls --db {db} --limit 5000 --json"]
)
def test_a_closed_pipe_ends_quietly_with_the_usual_exit_code(tmp_path, command):
    """Before: `lethe ls | head -1` ended with `internal error: BrokenPipeError` (rc 2)."""
    db = tmp_path / "m.db"
    with Memory(str(db), offline=True) as m:
        for i in range(300):
            m.add(f"Memory number {i} with some words to make the listing long.", judged=False)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    script = (
        f"set -o pipefail; {_lethe(command.format(db=db))} | head -c 1 >/dev/null; "
        'echo "rc=${PIPESTATUS[0]}" >&2'
    )
    done = subprocess.run(["bash", "-c", script], capture_output=True, text=True, cwd=root, timeout=120)
    assert "internal error" not in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert "BrokenPipe" not in done.stderr and "Exception ignored" not in done.stderr, done.stderr
    assert done.stderr.strip().splitlines()[-1] == "rc=0", done.stderr


@pytest.mark.parametrize("command", [["validate", "lifecycle"], ["validate", "lifecycle", "--json"]])
def test_a_pipe_whose_reader_has_gone_before_the_first_write_ends_quietly(command):
    """`lethe validate ... | head`: validate's few lines fit in the pipe's buffer, so a
    reader that goes after they are written breaks nothing (the test above passes either
    way). Here the reader is gone before the command writes: its first line meets the
    closed pipe, as it does whenever `head` has gone first. Before: `internal error:
    BrokenPipeError` (rc 2), then Python's `Exception ignored ... BrokenPipeError`."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    read, write = os.pipe()
    os.close(read)  # every write to `write` now fails with EPIPE
    try:
        done = subprocess.run(
            [sys.executable, "-m", "engine.cli", *command],
            stdout=write,
            stderr=subprocess.PIPE,
            text=True,
            cwd=root,
            timeout=120,
        )
    finally:
        os.close(write)
    assert "internal error" not in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert "BrokenPipe" not in done.stderr and "Exception ignored" not in done.stderr, done.stderr
    assert done.returncode == 0, done.stderr
