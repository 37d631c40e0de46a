"""Shared bits of the helper processes the reliability tests start (not a test module).

Each helper is a plain script run as `python tests/procs/NAME.py ...`, so it is a real,
separate process that can be run concurrently with others or killed with SIGKILL."""

from __future__ import annotations

import datetime as dt
import os
import signal
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

POLICIES = os.path.join(ROOT, "policies")
START = dt.datetime(2026, 1, 5, 9, 0, 0)


def policy_path(name: str) -> str:
    return name if name.endswith(".yaml") else os.path.join(POLICIES, name + ".yaml")


def die() -> None:
    """SIGKILL ourselves: no atexit, no finally, no flush, no rollback; like a power cut
    for the process (the OS keeps what was written to the file so far)."""
    os.kill(os.getpid(), signal.SIGKILL)


def is_lock_error(exc: BaseException) -> bool:
    text = f"{type(exc).__name__}: {exc}".lower()
    return "locked" in text or "busy" in text


def store_of(mem):
    """The store behind a Memory (test-only, as tests/conftest.py's)."""
    return mem._context.store
