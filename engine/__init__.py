"""Lethe: a memory layer for LLM agents that knows when to forget.

    from engine import Memory
    mem = Memory("agent.db", policy="policies/lifecycle.yaml", offline=True)
"""
from .clock import FixedClock
from .errors import ExpectationError, FormulaError, LetheError, PolicyError, StoreError
from .memory import History, Memory, MemoryRecord
from .policy import Policy
from .policy import load as load_policy

__all__ = ["Memory", "MemoryRecord", "History", "Policy", "load_policy", "FixedClock",
           "Scheduler", "LetheError", "PolicyError", "FormulaError", "StoreError", "ExpectationError"]


def __getattr__(name):
    # the scheduler pulls in threading and logging: only load it for those who use it
    if name == "Scheduler":
        from .scheduler import Scheduler

        return Scheduler
    raise AttributeError(f"module 'engine' has no attribute {name!r}")
