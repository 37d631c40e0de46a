"""Modules imported when first used, declared where the importer's imports are.

Start-up is part of what a pass costs: `lethe run --pass decay` on a small store is mostly
Python importing things the pass never calls (the rules judges alone are ~90 ms). A module
that only some commands need is declared at the top of its importer as
`name = lazy("engine.x.y")`, so it stays visible to the architecture checks
(tests/test_architecture.py reads these as imports), and is imported on the first attribute
read.
"""

from __future__ import annotations

import importlib
import threading
from types import ModuleType


class lazy:  # reads like the import it stands for
    """A module imported on first attribute access (thread-safe; then a plain lookup)."""

    def __init__(self, name: str):
        self._name = name
        self._module: ModuleType | None = None
        self._lock = threading.Lock()

    def __getattr__(self, attr: str):
        module = self._module
        if module is None:
            with self._lock:
                if self._module is None:
                    self._module = importlib.import_module(self._name)
                module = self._module
        return getattr(module, attr)

    def __repr__(self) -> str:
        state = "imported" if self._module is not None else "not imported yet"
        return f"<lazy {self._name} ({state})>"
