"""Lethe: a memory layer for LLM agents that knows when to forget.

    from engine import Memory
    mem = Memory("agent.db", policy="policies/lifecycle.yaml", offline=True)

The names below are imported on first use (PEP 562): `lethe --version`, or a program that
imports only `engine.base.errors`, does not pay for the policy compiler, the store and Jinja.
"""

import importlib

from engine.base.clock import FixedClock
from engine.base.errors import ExpectationError, FormulaError, InputError, LetheError, PolicyError, StoreError
from engine.base.lazy import lazy

_memory = lazy("engine.memory")
_scheduler = lazy("engine.run.scheduler")
_policy = lazy("engine.policy")

# name -> (module, attribute)
_LAZY = {
    "Memory": (_memory, "Memory"),
    "MemoryRecord": (_memory, "MemoryRecord"),
    "History": (_memory, "History"),
    "Scheduler": (_scheduler, "Scheduler"),
    "Policy": (_policy, "Policy"),
    "load_policy": (_policy, "load"),
}

__all__ = [
    "Memory",
    "MemoryRecord",
    "History",
    "Policy",
    "load_policy",
    "FixedClock",
    "Scheduler",
    "LetheError",
    "InputError",
    "PolicyError",
    "FormulaError",
    "StoreError",
    "ExpectationError",
]


def __getattr__(name: str):
    if name in _LAZY:
        module, attr = _LAZY[name]
        value = getattr(module, attr)
        globals()[name] = value  # a plain lookup from now on
        return value
    if name.isidentifier() and not name.startswith("_"):
        try:  # `engine.store.Store` after `import engine`, as when everything was imported
            return importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"{__name__}.{name}":
                raise
    raise AttributeError(f"module 'engine' has no attribute '{name}'")


def __dir__():
    return sorted(set(globals()) | set(_LAZY))
