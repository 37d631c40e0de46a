"""A pytest plugin for tests/run_in_two.py: the seconds each test file took, summed over its
tests' setup, call and teardown, written as JSON to the path in LETHE_FILE_DURATIONS."""

from __future__ import annotations

import json
import os
from collections import defaultdict

_seconds: defaultdict[str, float] = defaultdict(float)


def pytest_runtest_logreport(report) -> None:
    _seconds[report.nodeid.split("::", 1)[0]] += report.duration


def pytest_sessionfinish(session) -> None:
    path = os.environ.get("LETHE_FILE_DURATIONS")
    if path:
        with open(path, "w", encoding="utf-8") as out:
            json.dump(dict(_seconds), out)
