"""What the agent believed at a past time: recall, list and get `as_of` T (docs/time.md).

The state of a memory at T is rebuilt from its events recorded by T (`occurred_at`): its
status (created, merged and restored make it active; superseded, expired, archived,
forgotten and compressed retire it), what replaced it, its confidence and importance (as
created, then each `reinforced` bump and `updated` change), its expiry, and its access
(each reinforcement). Its text, kind and scene never change. The policy's scores are then
evaluated at T in Python over those values: the decay pass's `decay_score` formula, then
recall's `where` and order, so a store that recorded nothing after T gives the same
answer. Only the candidates are rebuilt: the memories recorded by T that match the query
(engine.store.asof_reads), never a replay of the store. No access is recorded.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import re
from typing import Callable

from engine.base.clock import iso, parse_time
from engine.base.errors import FormulaError
from engine.base.records import FIELD_NAMES, MemoryRecord, parse_tags
from engine.judges.rules.asking import asks_about_the_past
from engine.policy import expr as X
from engine.policy.formula_compiler import compile_formula
from engine.run import recall as R
from engine.run.context import Context

STATUS_OF = {
    "created": "active",
    "merged": "active",
    "restored": "active",
    "superseded": "superseded",
    "expired": "expired",
    "archived": "archived",
    "forgotten": "archived",
    "compressed": "compressed",
}
REPLACED = re.compile(r"(?:superseded by|merged into) #(\d+)")
SCAN = 1  # memories rebuilt per candidate recall keeps (the recall limit times this, capped)


def state_at(ctx: Context, rows, at: dt.datetime) -> list[MemoryRecord]:
    """The memories of `rows` (recorded by `at`) as they stood at `at`."""
    return [_record(m) for m in _states(ctx, rows, at)]


def _states(ctx: Context, rows, at: dt.datetime) -> list[dict]:
    """Each memory of `rows` at `at` as a dict of its columns (tags a list), its events
    recorded by then folded in, its `decay_score` and `rank` evaluated then."""
    if not rows:
        return []
    events: dict[int, list] = {}
    for e in ctx.store.events_by([r["id"] for r in rows], iso(at)):
        events.setdefault(e[0], []).append(e)
    names, rank = list(rows[0].keys()), _fn(_rank(ctx))
    decay = [(None if r.when is None else _fn(r.when), _fn(r.set["decay_score"])) for r in _decay_rules(ctx)]
    out = []
    for row in rows:
        m = dict(zip(names, row))
        m.update(status="active", contradicted_by=None, merged_into=None, access_count=0, last_accessed=None)
        for e in events.get(m["id"], ()):
            _fold(m, e)
        m["tags"] = parse_tags(m.get("tags"))
        m["decay_score"] = _decay(decay, m, at)
        m["rank"], m["relevance"] = rank(m, at), None
        out.append(m)
    return out


def _record(m: dict) -> MemoryRecord:
    return MemoryRecord(**{k: v for k, v in m.items() if k in FIELD_NAMES})


# a reinforcement's detail as the engine writes it (read without a JSON parse; else parsed)
_BUMP = re.compile(r'\{"bump": (-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)(?:, "(?:turn|add)": (?:\d+|true))?\}\Z')
_DETAILED = frozenset({"created", "merged", "reinforced", "updated", "corrected", "normalised"})


def _fold(m: dict, e) -> None:
    """One event (memory_id, event_type, detail, occurred_at, said_at) into the state."""
    kind, text = e[1], e[2]
    status = STATUS_OF.get(kind)
    if status is not None:
        m["status"] = status
        if kind in ("superseded", "compressed") and isinstance(text, str):
            found = REPLACED.search(text)
            if found:
                m["contradicted_by" if kind == "superseded" else "merged_into"] = int(found.group(1))
    if kind not in _DETAILED:
        return  # its detail changes nothing the state holds: not parsed
    plain = _BUMP.match(text) if kind == "reinforced" and isinstance(text, str) else None
    detail = {"bump": float(plain.group(1))} if plain else _json(text)
    if kind in ("created", "merged"):
        if isinstance(detail, dict):
            for key in ("importance", "confidence", "expires_at"):
                if key in detail:
                    m[key] = detail[key]
    elif kind == "reinforced":
        bump = detail.get("bump", 0.1) if isinstance(detail, dict) else 0.1
        if not isinstance(bump, (int, float)) or isinstance(bump, bool):
            bump = 0.1
        m["confidence"] = min(1.0, (m["confidence"] or 0) + bump)
        m["access_count"] += 1
        m["last_accessed"] = e[3]
    elif isinstance(detail, dict):
        changed = detail.get("fields", detail)
        for key, change in changed.items():
            if key in ("importance", "confidence", "expires_at", "summary", "tags") and isinstance(
                change, dict
            ):
                m[key] = change.get("to", change.get("now", m.get(key)))


def _json(text):
    try:
        return json.loads(text) if text else None
    except ValueError:
        return None


# ---- the policy's formulas, evaluated over one memory at T ----------------------------
def _decay_rules(ctx: Context) -> list:
    return [r for p in ctx.policy.passes.values() for r in p.rules if "decay_score" in r.set]


def _decay(rules: list, m: dict, at: dt.datetime) -> float:
    """The decay pass's `decay_score` formula at T (the stored one when no rule applies);
    `rules` as (when, decay_score) compiled."""
    for when, formula in rules:
        if when is None or when(m, at):
            value = formula(m, at)
            return 1.0 if value is None else float(value)
    stored = m.get("decay_score")
    return 1.0 if stored is None else float(stored)


_RANKS: dict = {}


def _rank(ctx: Context) -> X.Node:
    """The policy's rank formula as IR, compiled once per policy."""
    key = id(ctx.policy)
    if key not in _RANKS or _RANKS[key][0] is not ctx.policy:
        _RANKS[key] = (
            ctx.policy,
            compile_formula(
                ctx.policy.scores.get("rank", "importance * confidence * decay_score"), ctx.policy.scope()
            ),
        )
    return _RANKS[key][1]


def _days(later, earlier) -> float | None:
    if later is None or earlier is None:
        return None
    later = later if isinstance(later, dt.datetime) else _time(later)
    earlier = earlier if isinstance(earlier, dt.datetime) else _time(earlier)
    return round((later - earlier).total_seconds() / 86400 * 1000) / 1000


def _time(text: str) -> dt.datetime:
    """A stored time (naive ISO text); another spelling through parse_time."""
    try:
        when = dt.datetime.fromisoformat(text)
    except (TypeError, ValueError):
        return parse_time(text)
    return when if when.tzinfo is None else parse_time(text)


def _value(node: X.Node, m: dict, at: dt.datetime, ctx: Context | None = None):
    """A formula's value over one memory at `at`, SQL-like: NULL (None) propagates through
    arithmetic."""
    return _fn(node)(m, at)


def _fn(node: X.Node):
    """The formula as a Python closure (m, at) -> value, made once per node."""
    fn = _COMPILED.get(id(node))
    if fn is None or fn[0] is not node:
        fn = _COMPILED[id(node)] = (node, _compile(node))
    return fn[1]


_COMPILED: dict = {}
_TIMES = {
    "now": lambda m, at: iso(at),
    "idle_days": lambda m, at: _days(at, m.get("last_accessed") or m.get("created_at")),
    "age_days": lambda m, at: _days(at, m.get("created_at")),
    "days_to_expiry": lambda m, at: _days(m.get("expires_at"), at),
}


def _compile(node: X.Node):
    if isinstance(node, X.Const):
        value = node.value
        return lambda m, at: value
    if isinstance(node, X.Col):
        name = node.name
        return lambda m, at: m.get(name)
    if isinstance(node, X.TimeWord):
        return _TIMES[node.name]
    if isinstance(node, (X.Relevance, X.Similarity)):
        return lambda m, at: m.get("relevance") or 0.0
    if isinstance(node, (X.Neg, X.Not, X.IsNull)):
        a = _compile(node.arg)
        if isinstance(node, X.Neg):
            return lambda m, at: None if (x := a(m, at)) is None else -x
        if isinstance(node, X.Not):
            return lambda m, at: None if (x := a(m, at)) is None else not x
        return lambda m, at: (a(m, at) is None) != node.negated
    if isinstance(node, X.In):
        a, values = _compile(node.arg), [_compile(x) for x in node.values]
        return lambda m, at: (
            None if (x := a(m, at)) is None else (x in [v(m, at) for v in values]) != node.negated
        )
    if isinstance(node, X.BoolOp):
        items, every = [_compile(x) for x in node.items], node.op == "and"
        return lambda m, at: (all if every else any)(f(m, at) for f in items)
    if isinstance(node, (X.BinOp, X.Cmp)):
        left, right, op = _compile(node.left), _compile(node.right), _OPS[node.op]

        def binary(m, at):
            a, b = left(m, at), right(m, at)
            return None if a is None or b is None else op(a, b)

        return binary
    if isinstance(node, X.Func):
        args, name = [_compile(x) for x in node.args], node.name
        return lambda m, at: _func(name, [f(m, at) for f in args])
    raise FormulaError(f"cannot evaluate {type(node).__name__} as of a time")


_OPS = {
    "+": lambda a, b: a + b,
    "-": lambda a, b: a - b,
    "*": lambda a, b: a * b,
    "/": lambda a, b: None if b == 0 else a / b,
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
    "=": lambda a, b: a == b,
    "==": lambda a, b: a == b,
    "!=": lambda a, b: a != b,
}


def _func(name: str, args: list):
    if name == "coalesce":
        return next((a for a in args if a is not None), None)
    if any(a is None for a in args):
        return None
    if name in ("min", "max"):
        return (min if name == "min" else max)(args)
    if name == "clamp":
        return max(args[1], min(args[2], args[0]))
    one: dict[str, Callable] = {
        "exp": lambda x: math.exp(min(x, 709)),
        "floor": math.floor,
        "ceil": math.ceil,
        "abs": abs,
        "ln": lambda x: math.log(x) if x > 0 else None,
        "log": lambda x: math.log10(x) if x > 0 else None,
    }
    if name in one:
        return one[name](args[0])
    if name == "pow":
        try:
            return math.pow(args[0], args[1])
        except (ValueError, OverflowError):
            return None
    raise FormulaError(f"cannot evaluate {name}() as of a time")


# ---- the reads ------------------------------------------------------------------------
def candidates(
    ctx: Context, query: str | None, at: dt.datetime, limit: int | None = None, rec=None
) -> list[MemoryRecord]:
    """Recall's candidates at T (or `rec`'s, recall.fallback's): the memories recorded by T
    (matching `query` in full text when given) that its `where` keeps at T, in its order."""
    rec = rec or ctx.policy.recall.candidates
    limit = rec.limit if limit is None else limit
    rows = ctx.store.recorded_by(ctx.namespace, iso(at), query, min(limit * SCAN, 5000))
    where = _fn(rec.where)
    kept = [m for m in _states(ctx, rows, at) if where(m, at)]
    for node, descending in reversed(rec.order):  # a stable sort, last key first
        value = _fn(node)
        kept.sort(key=lambda m: _sortable(value(m, at)), reverse=descending)
    return [_record(m) for m in kept[:limit]]


def memories(
    ctx: Context, statuses: tuple[str, ...] | None, at: dt.datetime, limit: int
) -> list[MemoryRecord]:
    """The memories recorded by T whose status at T is one of `statuses` (None: any),
    newest first, at most `limit`: read a page at a time, each rebuilt, until enough."""
    out: list[MemoryRecord] = []
    below, page = None, min(max(limit, 50), 1000)
    while len(out) < limit:
        rows = ctx.store.recorded_by(ctx.namespace, iso(at), None, page, below)
        if not rows:
            break
        below = rows[-1]["id"]
        out += [_record(m) for m in _states(ctx, rows, at) if statuses is None or m["status"] in statuses]
    return out[:limit]


def recall(ctx: Context, query: str, at: dt.datetime, top_n: int | None = None) -> list[MemoryRecord]:
    """What recall would have returned at T: the candidates at T, picked by the policy's
    select judge (at most top_n). Records no access."""
    rec = ctx.policy.recall
    top_n = top_n or rec.top_n
    shown = candidates(ctx, query, at)
    if rec.select is not None and shown:
        chosen = R._select(ctx, rec, query, shown, top_n, {})
    else:
        chosen = [c.id for c in shown[:top_n]]
    # recall.fallback, as recall does it
    if not chosen and rec.past is not None and rec.select is not None and asks_about_the_past(query):
        shown = R.not_forgotten(ctx, candidates(ctx, query, at, rec.past.k, rec.past))
        chosen = R._select(ctx, rec, query, shown, top_n, {}, past=True) if shown else []
    by_id = {c.id: c for c in shown}
    return [by_id[i] for i in chosen]


def get(ctx: Context, memory_id: int, at: dt.datetime) -> MemoryRecord | None:
    row = ctx.store.get(memory_id, ctx.namespace)
    if row is None or not _recorded(ctx, row, at):
        return None
    return state_at(ctx, [row], at)[0]


def _recorded(ctx: Context, row, at: dt.datetime) -> bool:
    """Whether the memory had been recorded by `at` as engine.store.asof_reads reads it: said
    by then, and its first event (when it has one) recorded by then."""
    if row["created_at"] is None or row["created_at"] > iso(at):
        return False
    return bool(ctx.store.events_by([row["id"]], iso(at))) or not ctx.store.events(row["id"])


def _sortable(value):
    return (value is not None, value if value is not None else 0)
