"""Lethe: a memory layer for LLM agents that knows when to forget.

    from engine import Memory
    mem = Memory("agent.db", policy="policies/lifecycle.yaml", offline=True)
"""
from .clock import FixedClock
from .errors import ExpectationError, FormulaError, LetheError, PolicyError, StoreError
from .memory import History, Memory, MemoryRecord
from .scheduler import Scheduler
from .policy import Policy
from .policy import load as load_policy

__all__ = ["Memory", "MemoryRecord", "History", "Policy", "load_policy", "FixedClock",
           "Scheduler", "LetheError", "PolicyError", "FormulaError", "StoreError", "ExpectationError"]

