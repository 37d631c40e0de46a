"""A formula's IR: the small typed tree a policy's formula compiles to
(engine.policy.formula_compiler), with the names it may read (memory columns, time words,
functions) and the scope a formula is compiled in.

The dialect (engine.plan.dialect) turns the IR into SQL text with bound parameters:
nothing from a policy is ever pasted into SQL.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

NUM, TEXT, BOOL, TIME, JSON, NULL = "num", "text", "bool", "time", "json", "null"

# Memory columns a formula may read, with their types.
COLUMNS: dict[str, str] = {
    "id": NUM,
    "content": TEXT,
    "summary": TEXT,
    "tags": JSON,
    "importance": NUM,
    "confidence": NUM,
    "access_count": NUM,
    "decay_score": NUM,
    "status": TEXT,
    "contradicted_by": NUM,
    "created_at": TIME,
    "last_accessed": TIME,
    "expires_at": TIME,
    "namespace": TEXT,
    "kind": TEXT,
    "scene": TEXT,
    "rank": NUM,
}
# the columns that hold a memory's text (kept apart from the rest on SQLite: a formula
# reads them there, engine.plan.dialect)
TEXT_COLUMNS = ("content", "summary", "tags")
TIME_WORDS = {"now": TIME, "idle_days": NUM, "age_days": NUM, "days_to_expiry": NUM}
SCALAR_FUNCS = {  # name: (min args, max args)
    "exp": (1, 1),
    "ln": (1, 1),
    "log": (1, 1),
    "floor": (1, 1),
    "ceil": (1, 1),
    "abs": (1, 1),
    "pow": (2, 2),
    "min": (2, 8),
    "max": (2, 8),
    "coalesce": (2, 8),
    "clamp": (3, 3),
    "sqrt": (1, 1),
}
AGGREGATES = {"avg", "max", "min", "sum", "count"}
CONSTANT_NAMES = {
    "null": None,
    "None": None,
    "NULL": None,
    "true": True,
    "True": True,
    "false": False,
    "False": False,
}


# ---- IR ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Node:
    type: str


@dataclass(frozen=True)
class Const(Node):
    value: object
    param: str | None = field(default=None, compare=False)  # the param it came from, if any


@dataclass(frozen=True)
class Col(Node):
    name: str


@dataclass(frozen=True)
class TimeWord(Node):
    name: str


@dataclass(frozen=True)
class Relevance(Node):
    pass


@dataclass(frozen=True)
class Similarity(Node):
    """Cosine similarity of a memory's embedding to the query (recall) or to the new
    memory (write candidates); 0 for a memory without one."""


@dataclass(frozen=True)
class Func(Node):
    name: str
    args: tuple


@dataclass(frozen=True)
class Agg(Node):
    name: str
    arg: Node


@dataclass(frozen=True)
class BinOp(Node):
    op: str
    left: Node
    right: Node


@dataclass(frozen=True)
class Neg(Node):
    arg: Node


@dataclass(frozen=True)
class Cmp(Node):
    op: str
    left: Node
    right: Node


@dataclass(frozen=True)
class BoolOp(Node):
    op: str
    items: tuple


@dataclass(frozen=True)
class Not(Node):
    arg: Node


@dataclass(frozen=True)
class IsNull(Node):
    arg: Node
    negated: bool


@dataclass(frozen=True)
class In(Node):
    arg: Node
    values: tuple
    negated: bool


@dataclass
class Scope:
    """What names a formula may use. `scores` are formula texts, compiled on demand."""

    params: Mapping[str, object] = field(default_factory=dict)
    scores: Mapping[str, str] = field(default_factory=dict)
    allow_time: bool = True
    allow_relevance: bool = False
    allow_aggregates: bool = False
    allow_similarity: bool = False  # the policy declares an embedding model
    used: set | None = None  # when given, the params a formula reads are added to it

    def names(self) -> set[str]:
        """Every name a formula may use here (for did-you-mean)."""
        found = set(COLUMNS) | set(self.params) | set(self.scores) | {"null", "true", "false"}
        found |= set(TIME_WORDS) if self.allow_time else set()
        found |= {"similarity"} if self.allow_similarity else set()
        return found | ({"relevance"} if self.allow_relevance else set())


def columns_of(node: Node) -> set[str]:
    """Memory columns a compiled formula reads (time words count as their columns)."""
    found: set[str] = set()
    _walk(node, found)
    return found


def _walk(node: Node, found: set[str]) -> None:
    if isinstance(node, Col):
        found.add(node.name)
    elif isinstance(node, TimeWord):
        found.add("@" + node.name)
    elif isinstance(node, Relevance):
        found.add("@relevance")
    elif isinstance(node, Similarity):
        found.add("@similarity")
    for child in _children(node):
        _walk(child, found)


def _children(node: Node):
    if isinstance(node, (Func, BoolOp)):
        return node.args if isinstance(node, Func) else node.items
    if isinstance(node, (BinOp, Cmp)):
        return (node.left, node.right)
    if isinstance(node, (Neg, Not, IsNull, Agg)):
        return (node.arg,)
    if isinstance(node, In):
        return (node.arg, *node.values)
    return ()
