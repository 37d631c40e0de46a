"""`LetheStore`: Lethe as a LangGraph long-term memory store (a `BaseStore`).

    store = LetheStore("agent.db", offline=True)
    graph = builder.compile(store=store)      # nodes get it as `store` or `runtime.store`

A namespace tuple is one Lethe namespace, its labels joined by "." (LangGraph refuses a
label holding a period, so the join is never ambiguous): ("users", "alice") is
"users.alice", and ("default",) is the namespace `lethe` and `lethe mcp` use by default.

- `put(ns, key, value)` stores the value as a memory (`Memory.put`): its content is
  `value[text_field]` when that is text, else the value as JSON. The policy's write steps
  judge it (all but the gate), so a put that contradicts an older memory supersedes it, as
  `remember()` does; a put over an existing key supersedes the memory that was there.
  `ttl` (minutes) becomes `expires_at`; `index` is ignored (recall has its own index).
- `get(ns, key)` is the active memory under the key. One the lifecycle retired
  (superseded, expired, archived, merged) is gone, as an expired item is; a memory that
  came in another way (remember, add, a merge) answers to the key `memory-ID`.
- `search(prefix, query=...)` is Lethe's recall (access recorded) in each namespace under
  the prefix; without a query, active memories newest first. `filter` applies to values.
- `delete(ns, key)` (a put of None) forgets: the memory is archived with a reason, never
  deleted. `list_namespaces()` lists the namespaces that hold memories.

Lethe's expiry is a fixed moment, so reads never push it back (`refresh_ttl` is ignored).
"""
from __future__ import annotations

import asyncio
import datetime as dt
import json
import threading
from typing import Iterable

from ..clock import Clock, iso
from ..errors import LetheError
from ..memory import DEFAULT_POLICY, Memory
from ..policy import Policy, load
from ..records import Keyed, MemoryRecord
from . import missing_extra

try:
    from langgraph.store.base import (BaseStore, GetOp, InvalidNamespaceError, Item,
                                      ListNamespacesOp, PutOp, SearchItem, SearchOp)
except ImportError as exc:
    raise missing_extra("langgraph", "LetheStore", exc) from None

SEPARATOR = "."           # LangGraph refuses it inside a label
MEMORY_KEY = "memory-"    # the key of a memory no put() named
SCAN = 1000               # a search without a query reads at most this many per namespace


class LetheStore(BaseStore):
    """A LangGraph `BaseStore` over one Lethe database and policy; each namespace tuple is
    a Lethe namespace. `judged=False` stores values exactly as given (no write steps)."""

    supports_ttl = True

    def __init__(self, db: str, policy: str | Policy = DEFAULT_POLICY, *, offline: bool = False,
                 clock: Clock | None = None, text_field: str = "text", judged: bool = True):
        self.db = str(db)
        self.policy = policy if isinstance(policy, Policy) else load(policy)
        self.offline, self.clock = offline, clock
        self.text_field, self.judged = text_field, judged
        self.ttl_config = {"refresh_on_read": False}
        self._memories: dict[str, Memory] = {}
        self._lock = threading.RLock()  # one connection per namespace, one caller at a time

    # -- BaseStore
    def batch(self, ops: Iterable) -> list:
        """Reads first, in order, then the puts (the last put of a key wins), as
        LangGraph's own stores do."""
        ops = list(ops)
        for op in ops:
            check_labels(op)
        with self._lock:
            results = [None if isinstance(op, PutOp) else self._read(op) for op in ops]
            puts = {(op.namespace, op.key): op for op in ops if isinstance(op, PutOp)}
            for op in puts.values():
                self._put(op)
        return results

    async def abatch(self, ops: Iterable) -> list:
        return await asyncio.to_thread(self.batch, list(ops))

    def close(self) -> None:
        with self._lock:
            for mem in self._memories.values():
                mem.close()
            self._memories.clear()

    def __enter__(self) -> "LetheStore":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- the operations
    def _read(self, op):
        if isinstance(op, GetOp):
            return self._get(op)
        if isinstance(op, SearchOp):
            return self._search(op)
        if isinstance(op, ListNamespacesOp):
            return self._list_namespaces(op)
        raise LetheError(f"LetheStore cannot run {type(op).__name__}")

    def _get(self, op: GetOp) -> Item | None:
        mem = self._memory(op.namespace)
        found = self._find(mem, op.key)
        if found is None:
            return None
        return self._item(mem, found.memory, Item, op.namespace, keyed=found)

    def _put(self, op: PutOp) -> None:
        mem = self._memory(op.namespace)
        if op.value is None:
            found = self._find(mem, op.key)
            if found is not None:
                mem.forget(found.memory.id, f"deleted through the LangGraph store (key {op.key!r})")
            return
        value = dict(op.value)
        try:
            text = json.dumps(value, ensure_ascii=False, sort_keys=True)
        except (TypeError, ValueError) as exc:
            raise LetheError(f"a LangGraph value must be JSON: {exc}") from None
        content = value.get(self.text_field)
        if not isinstance(content, str) or not content.strip():
            content = text
        expires_at = None if op.ttl is None else mem.clock() + dt.timedelta(minutes=op.ttl)
        mem.put(op.key, content, value, expires_at=expires_at, judged=self.judged)

    def _search(self, op: SearchOp) -> list[SearchItem]:
        wanted = op.offset + op.limit
        hits: list[SearchItem] = []
        for namespace in self._namespaces_under(op.namespace_prefix):
            mem = self._memory(namespace)
            records = (mem.recall(op.query, top_n=wanted) if op.query
                       else mem.memories("active", max(SCAN, wanted)))
            found = 0
            for record in records:
                if not self._live(mem, record):
                    continue
                item = self._item(mem, record, SearchItem, namespace)
                if op.filter and not matches(item.value, op.filter):
                    continue
                hits.append(item)
                found += 1
                if found == wanted:
                    break
        if op.query:  # best first across namespaces; recall's own order within one
            hits.sort(key=lambda h: -(h.score or 0.0))
        return hits[op.offset:op.offset + op.limit]

    def _list_namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        spaces = [tuple(ns.split(SEPARATOR)) for ns in self._any().namespaces()]
        spaces = [ns for ns in spaces if all(namespace_matches(c.match_type, c.path, ns)
                                             for c in op.match_conditions or ())]
        if op.max_depth is not None:
            spaces = [ns[:op.max_depth] for ns in spaces]
        return sorted(set(spaces))[op.offset:op.offset + op.limit]

    # -- from LangGraph's names to Lethe's
    def _memory(self, namespace: tuple[str, ...]) -> Memory:
        if not namespace:
            raise InvalidNamespaceError("a LetheStore namespace needs at least one label")
        name = SEPARATOR.join(namespace)
        if name not in self._memories:
            self._memories[name] = Memory(self.db, policy=self.policy, namespace=name,
                                          offline=self.offline, clock=self.clock)
        return self._memories[name]

    def _any(self) -> Memory:
        return next(iter(self._memories.values()), None) or self._memory(("default",))

    def _namespaces_under(self, prefix: tuple[str, ...]) -> list[tuple[str, ...]]:
        spaces = [tuple(ns.split(SEPARATOR)) for ns in self._any().namespaces()]
        return [ns for ns in spaces if ns[:len(prefix)] == tuple(prefix)]

    def _find(self, mem: Memory, key: str) -> Keyed | None:
        """The live memory under `key`: put() named it so, or it is `memory-ID`."""
        found = mem.keyed(key)
        digits = key[len(MEMORY_KEY):]
        if found is None and key.startswith(MEMORY_KEY) and digits.isascii() and \
                digits.isdigit() and len(digits) <= 19:
            record = mem.get(int(key[len(MEMORY_KEY):]))
            if record is not None:
                found = mem.key_of(record) or Keyed(record, key, None, record.created_at)
        if found is None or not self._live(mem, found.memory):
            return None
        return found

    def _live(self, mem: Memory, record: MemoryRecord) -> bool:
        """Active and not past its expiry (the expiry pass may not have run yet)."""
        return record.status == "active" and not (
            record.expires_at and record.expires_at <= iso(mem.clock()))

    def _item(self, mem: Memory, record: MemoryRecord, kind, namespace, keyed=None):
        keyed = keyed or mem.key_of(record)
        if keyed is None or keyed.value is None:
            key = keyed.key if keyed else f"{MEMORY_KEY}{record.id}"
            keyed = Keyed(record, key, {self.text_field: record.content}, record.created_at)
        fields = {"namespace": tuple(namespace), "key": keyed.key, "value": keyed.value,
                  "created_at": _utc(record.created_at), "updated_at": _utc(keyed.put_at)}
        if kind is SearchItem:
            return SearchItem(**fields, score=record.relevance)
        return Item(**fields)


# ---- LangGraph's rules for names, as its own stores apply them ---------------------------
def check_labels(op) -> None:
    """The labels an op names, checked as BaseStore's methods check them (batch() may be
    called directly): text, not empty, no period (our separator) and no NUL."""
    if isinstance(op, (GetOp, PutOp)):
        paths = [op.namespace]
    elif isinstance(op, SearchOp):
        paths = [op.namespace_prefix]
    else:
        paths = [c.path for c in op.match_conditions or ()]
    for path in paths:
        for label in path:
            if not isinstance(label, str) or not label or SEPARATOR in label or "\x00" in label:
                raise InvalidNamespaceError(f"invalid namespace label {label!r} in {path}: "
                                            f"labels are non-empty text without '.' or NUL")


def namespace_matches(match_type: str, path: tuple, namespace: tuple) -> bool:
    """A `prefix` or `suffix` condition, where "*" matches any one label."""
    if len(namespace) < len(path):
        return False
    pairs = zip(namespace, path) if match_type == "prefix" else \
        zip(reversed(namespace), reversed(path))
    return all(p == "*" or n == p for n, p in pairs)


OPERATORS = {"$eq": lambda a, b: a == b, "$ne": lambda a, b: a != b,
             "$gt": lambda a, b: float(a) > float(b), "$gte": lambda a, b: float(a) >= float(b),
             "$lt": lambda a, b: float(a) < float(b), "$lte": lambda a, b: float(a) <= float(b)}


def matches(value, wanted) -> bool:
    """A search filter: equal values, nested mappings, or operators such as {"$gt": 3}."""
    if isinstance(wanted, dict):
        if any(k.startswith("$") for k in wanted):
            try:
                return all(OPERATORS[k](value, v) for k, v in wanted.items())
            except KeyError as exc:
                raise LetheError(f"unknown filter operator {exc.args[0]!r}") from None
            except (TypeError, ValueError):
                return False  # a comparison with a value that is not a number
        return isinstance(value, dict) and all(matches(value.get(k), v) for k, v in wanted.items())
    return value == wanted


def _utc(text: str | None) -> dt.datetime:
    when = dt.datetime.fromisoformat(text) if text else dt.datetime(1970, 1, 1)
    return when.replace(tzinfo=dt.timezone.utc)
