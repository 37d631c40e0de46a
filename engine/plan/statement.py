"""A compiled statement: SQL text with its parameters, where a marker parameter stands
for a value known only when the statement runs (now, the namespace, a query, ids...).
`engine.plan` builds them; the store binds and runs them. Nothing pasted from a policy or
a memory ever reaches the SQL text: values travel as parameters.
"""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass, field

from engine.plan.dialect import NOW

NAMESPACE = object()  # marker parameter: the namespace the plan runs for
QUERY = object()  # marker parameter: the full-text query of a recall
LIMIT = object()  # marker parameter: a limit chosen at call time
IDS = object()  # marker parameter: memory ids, as a JSON array
FROM_ID = object()  # marker parameters: the id range one batch of a batched pass covers
TO_ID = object()
NEW_ID = object()  # marker parameter: the memory that supersedes or absorbs others
TEXT = object()  # marker parameter: event text written by the engine (never SQL)
VECTOR = object()  # marker parameter: the embedding of the query or the new memory
FLOOR = object()  # marker parameter: the floor of recall's index (engine.store.sqlite.recall_head)


class Kind(enum.Enum):
    """What a statement does, for the code that runs it (which never reads its SQL)."""

    READ = "read"  # a SELECT: rows, values or a count
    WRITE_MEMORIES = "write memories"  # an UPDATE of memories' rows
    INSERT_EVENTS = "insert events"  # an INSERT ... SELECT into memory_events


@dataclass
class Statement:
    label: str  # for people: `lethe compile`, progress lines
    sql: str
    params: list = field(default_factory=list)
    kind: Kind = field(kw_only=True)
    event: str | None = field(default=None, kw_only=True)  # the event type an INSERT_EVENTS records
    rule: str | None = field(default=None, kw_only=True)  # a pass's rule it belongs to: "decay.rules[0]"
    counts_skipped: bool = False  # a SELECT count(*) of the rows a rule leaves alone
    counts_kept: bool = False  # an UPDATE that counts the rows it keeps (Dialect.kept)
    # an UPDATE that sets a status other than active: the rows it changes leave the active ones
    leaves_active: bool = False
    # the same SELECT over the head of the ranking only (`rank >= :floor`), which a store
    # whose recall index holds only the head runs first (engine.store.sqlite.recall_head)
    head: "Statement | None" = None

    def __post_init__(self):
        if (self.kind is Kind.INSERT_EVENTS) != (self.event is not None):
            raise ValueError(f"{self.label}: an INSERT_EVENTS statement, and only one, names its event")

    def bind(
        self,
        now: str,
        namespace: str,
        query: str | None = None,
        limit: int | None = None,
        ids: list[int] | None = None,
        id_range: tuple[int, int] = (0, 0),
        new_id: int | None = None,
        text: str | None = None,
        vector: bytes | None = None,
        floor: float | None = None,
    ) -> list:
        table = {
            id(NOW): now,
            id(NAMESPACE): namespace,
            id(QUERY): query,
            id(LIMIT): limit,
            id(IDS): json.dumps(ids or []),
            id(FROM_ID): id_range[0],
            id(TO_ID): id_range[1],
            id(NEW_ID): new_id,
            id(TEXT): text,
            id(VECTOR): vector,
            id(FLOOR): floor,
        }
        return [table.get(id(p), p) if id(p) in table else p for p in self.params]

    def shown_params(self) -> list:
        names = {
            id(NOW): ":now",
            id(NAMESPACE): ":namespace",
            id(QUERY): ":query",
            id(LIMIT): ":limit",
            id(IDS): ":ids",
            id(FROM_ID): ":from_id",
            id(TO_ID): ":to_id",
            id(NEW_ID): ":new_id",
            id(TEXT): ":text",
            id(VECTOR): ":vector",
            id(FLOOR): ":floor",
        }
        return [names.get(id(p), p) for p in self.params]
