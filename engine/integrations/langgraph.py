"""`LetheStore`: Lethe as a LangGraph long-term memory store (a `BaseStore`).

    store = LetheStore("agent.db", offline=True)
    graph = builder.compile(store=store)      # nodes get it as `store` or `runtime.store`

A namespace tuple is one Lethe namespace, its labels joined by "." (LangGraph refuses a
label holding a period, so the join is never ambiguous): ("users", "alice") is
"users.alice", and ("default",) is the namespace `lethe` and `lethe mcp` use by default.

It keeps BaseStore's contract, as LangGraph's own stores do; docs/integrations.md says
how each call reads in Lethe. In short: `put` keeps the value as LangGraph's stores do and
stores a memory whose text is its indexed fields, never retiring another key's item unless
`judged=True`; `get` returns it until it is deleted or its `ttl` passes, whatever the
lifecycle did (`item.status` says what); `search` with a query scores live items by their
memory's relevance among recall's candidates; `delete` archives the memory with a reason.
`store.as_of(T)` reads the store as it stood at T (BaseStore's calls have no place for a
time; docs/time.md). A memory that came another way answers to `get(ns, "memory-ID")`.
"""

from __future__ import annotations

import asyncio
import base64
import copy
import datetime as dt
import json
import math
import threading
from typing import Any, Iterable, Mapping

from engine.base.clock import Clock, iso
from engine.base.errors import LetheError
from engine.base.inputs import moment
from engine.base.text import words
from engine.integrations import missing_extra
from engine.memory import DEFAULT_POLICY, Memory
from engine.policy import Policy, load

try:
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
    from langgraph.store.base import (
        BaseStore,
        GetOp,
        InvalidNamespaceError,
        Item,
        ListNamespacesOp,
        PutOp,
        SearchItem,
        SearchOp,
    )
    from langgraph.store.base.embed import get_text_at_path, tokenize_path
except ImportError as exc:
    raise missing_extra("langgraph", "LetheStore", exc) from None

SEPARATOR = "."  # LangGraph refuses it inside a label
MEMORY_KEY = "memory-"  # the key of a memory no put() named
SERDE = JsonPlusSerializer()


class LetheValueError(LetheError, ValueError):
    """A bad argument to the store, where LangGraph's own stores raise ValueError."""


class LetheItem(Item):
    """An `Item` with the lifecycle status of the memory behind it."""

    __slots__ = ("status",)


class LetheSearchItem(SearchItem):
    """A `SearchItem` with the lifecycle status of the memory behind it."""

    __slots__ = ("status",)


class LetheStore(BaseStore):
    """A LangGraph `BaseStore` over one Lethe database and policy; each namespace tuple is
    a Lethe namespace."""

    supports_ttl = True

    def __init__(
        self,
        db: str,
        policy: str | Policy = DEFAULT_POLICY,
        *,
        offline: bool = False,
        clock: Clock | None = None,
        text_field: str = "text",
        judged: bool = False,
        index: Mapping | None = None,
        ttl: Mapping | None = None,
    ):
        self.db = str(db)
        self.policy = policy if isinstance(policy, Policy) else load(policy)
        self.offline, self.clock = offline, clock
        self.text_field, self.judged = text_field, judged
        self.fields = _paths((index or {}).get("fields"), "index fields")
        self.index_config = dict(index) if index else None
        self.ttl_config = {"refresh_on_read": True, **(ttl or {})}
        _minutes(self.ttl_config.get("default_ttl"))
        self._memories: dict[str, Memory] = {}
        self._lock = threading.RLock()  # one connection per namespace, one caller at a time
        self._at: dt.datetime | None = None  # a view as of a time (as_of): read only
        self._owns = True  # closes its namespaces' connections (a view shares its store's)

    def as_of(self, when) -> "LetheStore":
        """This store read as it stood at `when` (a datetime or ISO text): `get`, `search`
        and `list_namespaces` answer with the items put by then that were live then, each
        with its memory's status then (rebuilt from the events, docs/time.md); a read
        refreshes no ttl, and a put or delete is refused. It shares this store's
        connections: closing it closes nothing."""
        view = copy.copy(self)
        view._at, view._owns = moment(when), False
        return view

    # -- BaseStore
    def batch(self, ops: Iterable) -> list:
        """Reads first, in order, then the puts (the last put of a key wins), as
        LangGraph's own stores do."""
        ops = list(ops)
        for op in ops:
            check_op(op)
        with self._lock:
            self._seen: dict[tuple, dict] = {}  # a namespace's items, read once per batch
            results = [None if isinstance(op, PutOp) else self._read(op) for op in ops]
            puts = {(op.namespace, op.key): op for op in ops if isinstance(op, PutOp)}
            for op in puts.values():
                self._put(op)
        return results

    async def abatch(self, ops: Iterable) -> list:
        return await asyncio.to_thread(self.batch, list(ops))

    def close(self) -> None:
        if not self._owns:
            return
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
        raise LetheValueError(f"Unknown operation type: {type(op)}")

    def _get(self, op: GetOp) -> Item | None:
        mem = self._memory(op.namespace)
        state = self._items(op.namespace).get(op.key)
        if state is None and op.key.startswith(MEMORY_KEY):
            state = self._unkeyed(mem, op.key)
        if state is None:
            return None
        if op.refresh_ttl and self._at is None:
            self._refresh(mem, state)
        return self._item(state, LetheItem, op.namespace)

    def _put(self, op: PutOp) -> None:
        if self._at is not None:
            raise LetheValueError(
                f"the store as of {iso(self._at)} is read only: put through the store itself"
            )
        mem = self._memory(op.namespace)
        if op.value is None:
            state = self._items(op.namespace).get(op.key)
            if state is not None:
                mem.mark_key(
                    state["memory_id"],
                    op.key,
                    None,
                    detail={"deleted": True},
                    reason=f"deleted through the LangGraph store (key {op.key!r})",
                )
            return
        if not isinstance(op.value, Mapping):
            raise LetheValueError(f"a LangGraph value is a dict, not {type(op.value).__name__}")
        value, minutes = dict(op.value), _minutes(op.ttl)
        index = op.index if op.index is False else _paths(op.index, "index")
        stored, packed = encode(value)
        now = mem.clock()
        expires = None if minutes is None else now + dt.timedelta(minutes=minutes)
        detail = {"ttl": minutes, "expires": expires and iso(expires), "index": index, "packed": packed}
        mem.put(
            op.key, self._content(value, index), stored, detail=detail, expires_at=expires, judged=self.judged
        )

    def _search(self, op: SearchOp) -> list[SearchItem]:
        found = []
        for namespace in self._namespaces_under(op.namespace_prefix):
            items = list(self._items(namespace).values())
            items += self._unkeyed_active(self._memory(namespace), items)
            found += [
                (namespace, s)
                for s in items
                if not op.filter or all(compare(_decoded(s).get(k), v) for k, v in op.filter.items())
            ]
        ranked = self._ranked(op.query, found) if op.query else [(ns, s, None) for ns, s in found]
        page = ranked[op.offset : op.offset + op.limit]
        for ns, state, _ in page:
            if op.refresh_ttl and self._at is None:
                self._refresh(self._memory(ns), state)
        return [self._item(state, LetheSearchItem, ns, score=score) for ns, state, score in page]

    def _ranked(self, query: str, found: list) -> list:
        """Active indexed items by their memory's relevance to `query`, best first; then
        the unindexed and those the lifecycle retired, unscored, in their order."""
        relevance: dict[int, float] = {}
        for namespace in {ns for ns, _ in found} if self._at is None else ():
            mem = self._memory(namespace)
            held = sum(1 for n, _ in found if n == namespace)
            for record in mem.candidates(query, limit=max(held, 1), scored=True):
                relevance[record.id] = record.relevance or 0.0
        if self._at is not None:  # full-text relevance is not rebuilt as of a time
            relevance = {s["memory_id"]: self._share(query, s) for _, s in found}
        scored = [
            (ns, s, relevance.get(s["memory_id"], 0.0))
            for ns, s in found
            if s["status"] == "active" and s.get("index") is not False
        ]
        scored.sort(key=lambda hit: -hit[2])  # stable: ties keep their put order
        rest = [(ns, s, None) for ns, s in found if s["status"] != "active" or s.get("index") is False]
        return scored + rest

    def _share(self, query: str, state: dict) -> float:
        """As of a time: the share of the query's words the item's text holds."""
        asked = set(words(query))
        held = set(words(self._content(_decoded(state), state.get("index"))))
        return len(asked & held) / len(asked) if asked else 0.0

    def _list_namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        spaces = [tuple(ns.split(SEPARATOR)) for ns in self._spaces()]
        spaces = [
            ns
            for ns in spaces
            if all(namespace_matches(c.match_type, c.path, ns) for c in op.match_conditions or ())
        ]
        if op.max_depth is not None:
            spaces = [ns[: op.max_depth] for ns in spaces]
        return sorted(set(spaces))[op.offset : op.offset + op.limit]

    # -- items: the newest put of each key, from the namespace's keyed events
    def _items(self, namespace: tuple[str, ...]) -> dict[str, dict]:
        """Live items by key, in the order their keys were first put (a key deleted and
        put again goes last, as in InMemoryStore)."""
        if namespace in self._seen:
            return self._seen[namespace]
        mem, items = self._memory(namespace), dict[str, dict]()
        at = None if self._at is None else iso(self._at)
        for event in mem.key_events():
            if at is not None and event["at"] > at:
                continue  # recorded after the view's time
            key = event["key"]
            if event.get("deleted"):
                items.pop(key, None)
            elif event.get("refreshed") and key in items:
                items[key]["expires"] = event.get("expires")
            elif not event.get("refreshed"):
                first = items.get(key, {}).get("created", event["at"])
                items[key] = {**event, "created": first, "updated": event["at"]}
        now = at or iso(mem.clock())
        live = {k: s for k, s in items.items() if not (s.get("expires") and s["expires"] <= now)}
        for state in live.values():
            if at is not None:
                then = mem.get(state["memory_id"], as_of=at)
                state["status"] = then.status if then else state["status"]
            if state.get("value") is None and not state.get("packed"):
                record = mem.get(state["memory_id"], as_of=at)  # put() by another caller, no value
                state["value"] = {self.text_field: record.content if record else ""}
        self._seen[namespace] = live
        return live

    def _unkeyed(self, mem: Memory, key: str) -> dict | None:
        digits = key[len(MEMORY_KEY) :]
        if not (digits.isascii() and digits.isdigit() and len(digits) <= 19):
            return None
        record = mem.get(int(digits), as_of=self._at)
        if record is None or record.status != "active" or self._keyed(mem, record):
            return None
        return self._state_of(record)

    def _keyed(self, mem: Memory, record) -> bool:
        """Whether a put() stored or confirmed the memory (by the view's time)."""
        if self._at is None:
            return mem.key_of(record) is not None
        return any(e["event_type"] == "keyed" for e in mem.history(record.id, as_of=self._at).events)

    def _unkeyed_active(self, mem: Memory, items: list) -> list[dict]:
        """The namespace's active memories no put() stored, for a search with a query."""
        keyed = {s["memory_id"] for s in items}
        return [
            self._state_of(r)
            for r in mem.candidates(as_of=self._at)
            if r.id not in keyed and not self._keyed(mem, r)
        ]

    def _state_of(self, record) -> dict:
        return {
            "key": f"{MEMORY_KEY}{record.id}",
            "memory_id": record.id,
            "status": record.status,
            "value": {self.text_field: record.content},
            "created": record.created_at,
            "updated": record.created_at,
        }

    def _refresh(self, mem: Memory, state: dict) -> None:
        """Push a live item's expiry back by its ttl (a `keyed` event; the memory's
        expires_at follows while it is active)."""
        if not state.get("ttl"):
            return
        expires = mem.clock() + dt.timedelta(minutes=state["ttl"])
        if state.get("expires") == iso(expires):
            return
        mem.mark_key(
            state["memory_id"],
            state["key"],
            None,
            expires_at=expires,
            detail={"refreshed": True, "expires": iso(expires)},
        )
        state["expires"] = iso(expires)

    def _content(self, value: dict, index) -> str:
        """The memory's text: the indexed fields' text, else the value as JSON."""
        texts: list[str] = []
        paths = self.fields if index is None or index is False else index
        if paths is None:
            text = value.get(self.text_field)
            texts = [text] if isinstance(text, str) else []
        else:
            for path in paths:
                texts += get_text_at_path(value, path if path == "$" else tokenize_path(path))
        text = "\n".join(t for t in texts if isinstance(t, str) and t.strip())
        return text or json.dumps(value, ensure_ascii=False, default=str)

    def _item(self, state: dict, kind, namespace, **score):
        item = kind(
            namespace=tuple(namespace),
            key=state["key"],
            value=_decoded(state),
            created_at=_utc(state["created"]),
            updated_at=_utc(state["updated"]),
            **score,
        )
        item.status = state["status"]
        return item

    # -- from LangGraph's names to Lethe's
    def _memory(self, namespace: tuple[str, ...]) -> Memory:
        if not namespace:
            raise InvalidNamespaceError("a LetheStore namespace needs at least one label")
        name = SEPARATOR.join(namespace)
        if name not in self._memories:
            self._memories[name] = Memory(
                self.db, policy=self.policy, namespace=name, offline=self.offline, clock=self.clock
            )
        return self._memories[name]

    def _spaces(self) -> list[str]:
        """The namespaces that hold memories (as of the view's time: recorded by then)."""
        names = self._any().namespaces()
        if self._at is None:
            return names
        return [
            n for n in names if self._memory(tuple(n.split(SEPARATOR))).memories("all", 1, as_of=self._at)
        ]

    def _any(self) -> Memory:
        return next(iter(self._memories.values()), None) or self._memory(("default",))

    def _namespaces_under(self, prefix: tuple[str, ...]) -> list[tuple[str, ...]]:
        spaces = [tuple(ns.split(SEPARATOR)) for ns in self._spaces()]
        spaces = [ns for ns in spaces if ns[: len(prefix)] == tuple(prefix)]
        # the order they were first written in, as InMemoryStore keeps them
        first = {ns: min((s["memory_id"] for s in self._items(ns).values()), default=0) for ns in spaces}
        return sorted(spaces, key=lambda ns: first[ns])


# ---- values: as LangGraph's stores keep them ---------------------------------------------
def encode(value: dict) -> tuple[Any, dict | None]:
    """(the value as JSON, None) when JSON holds it exactly; else (None, the value packed by
    LangGraph's serializer), which keeps dates, sets, bytes and NaN. One that neither can
    hold (a 5,000-deep value, an object of no known type) is refused."""
    try:
        if json.loads(json.dumps(value, allow_nan=False)) == value:
            return value, None
    except (TypeError, ValueError, RecursionError):
        pass
    try:
        kind, data = SERDE.dumps_typed(value)
    except (TypeError, ValueError, RecursionError) as exc:
        raise LetheValueError(f"a LangGraph value Lethe cannot store: {exc}") from None
    return None, {"type": kind, "data": base64.b64encode(data).decode("ascii")}


def _decoded(state: dict) -> dict:
    packed = state.get("packed")
    if packed:
        return SERDE.loads_typed((packed["type"], base64.b64decode(packed["data"])))
    return state["value"]


def _minutes(ttl) -> float | None:
    """A ttl in minutes: None, or a finite number above 0 (LangGraph's ValueError)."""
    if ttl is None:
        return None
    if isinstance(ttl, bool) or not isinstance(ttl, (int, float)) or not math.isfinite(ttl) or ttl <= 0:
        raise LetheValueError(f"ttl is a number of minutes above 0, not {ttl!r}")
    return float(ttl)


def _paths(paths, what: str) -> list[str] | None:
    if paths is None:
        return None
    if isinstance(paths, str) or not all(isinstance(p, str) and p for p in paths):
        raise LetheValueError(f"{what}: a list of field paths, not {paths!r}")
    return list(paths)


# ---- LangGraph's rules for names and filters, as its own stores apply them ----------------
def check_op(op) -> None:
    """The labels an op names, checked as BaseStore's methods check them (batch() may be
    called directly): text, not empty, no period (our separator) and no NUL."""
    if isinstance(op, (GetOp, PutOp)):
        paths = [op.namespace]
    elif isinstance(op, SearchOp):
        paths = [op.namespace_prefix]
    elif isinstance(op, ListNamespacesOp):
        paths = [c.path for c in op.match_conditions or ()]
    else:
        raise LetheValueError(f"Unknown operation type: {type(op)}")
    for path in paths:
        for label in path:
            if not isinstance(label, str) or not label or SEPARATOR in label or "\x00" in label:
                raise InvalidNamespaceError(
                    f"invalid namespace label {label!r} in {path}: "
                    f"labels are non-empty text without '.' or NUL"
                )


def namespace_matches(match_type: str, path: tuple, namespace: tuple) -> bool:
    """A `prefix` or `suffix` condition, where "*" matches any one label."""
    if match_type not in ("prefix", "suffix"):
        raise LetheValueError(f"Unsupported match type: {match_type}")
    if len(namespace) < len(path):
        return False
    pairs = zip(namespace, path) if match_type == "prefix" else zip(reversed(namespace), reversed(path))
    return all(p == "*" or n == p for n, p in pairs)


OPERATORS = {
    "$eq": lambda a, b: a == b,
    "$ne": lambda a, b: a != b,
    "$gt": lambda a, b: float(a) > float(b),
    "$gte": lambda a, b: float(a) >= float(b),
    "$lt": lambda a, b: float(a) < float(b),
    "$lte": lambda a, b: float(a) <= float(b),
}


def compare(value, wanted) -> bool:
    """A search filter as LangGraph's stores read it: equal values, nested mappings, lists
    item by item, or operators such as {"$gt": 3} (an unknown one is a ValueError)."""
    if isinstance(wanted, dict):
        if any(k.startswith("$") for k in wanted):
            unknown = [k for k in wanted if k not in OPERATORS]
            if unknown:
                raise LetheValueError(f"Unsupported operator: {unknown[0]}")
            return all(OPERATORS[k](value, v) for k, v in wanted.items())
        return isinstance(value, dict) and all(compare(value.get(k), v) for k, v in wanted.items())
    if isinstance(wanted, (list, tuple)):
        return (
            isinstance(value, (list, tuple))
            and len(value) == len(wanted)
            and all(compare(a, b) for a, b in zip(value, wanted))
        )
    return value == wanted


def _utc(text: str | None) -> dt.datetime:
    when = dt.datetime.fromisoformat(text) if text else dt.datetime(1970, 1, 1)
    return when.replace(tzinfo=dt.timezone.utc)
