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

from engine.base.clock import iso, parse_time
from engine.base.records import FIELD_NAMES, MemoryRecord, parse_tags
from engine.policy import expr as X
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
    when = iso(at)
    events: dict[int, list] = {}
    for e in ctx.store.events_by([r["id"] for r in rows], when):
        events.setdefault(e["memory_id"], []).append(e)
    out, rank, decay = [], _rank(ctx), _decay_rules(ctx)
    for row in rows:
        m = {k: row[k] for k in row.keys()}
        m.update(status="active", contradicted_by=None, merged_into=None, access_count=0, last_accessed=None)
        for e in events.get(row["id"], []):
            _fold(m, e)
        m["decay_score"] = _decay(ctx, decay, m, at)
        record = MemoryRecord(
            **{k: v for k, v in m.items() if k in FIELD_NAMES and k != "tags"}, tags=parse_tags(m.get("tags"))
        )
        record.rank = _value(rank, m, at, ctx)
        out.append(record)
    return out


def _fold(m: dict, e) -> None:
    kind, detail = e["event_type"], _json(e["detail"])
    if kind in STATUS_OF:
        m["status"] = STATUS_OF[kind]
        found = REPLACED.search(e["detail"] or "") if isinstance(e["detail"], str) else None
        if kind == "superseded" and found:
            m["contradicted_by"] = int(found.group(1))
        if kind == "compressed" and found:
            m["merged_into"] = int(found.group(1))
    if kind in ("created", "merged") and isinstance(detail, dict):
        for key in ("importance", "confidence", "expires_at"):
            if key in detail:
                m[key] = detail[key]
    elif kind == "reinforced":
        bump = detail.get("bump", 0.1) if isinstance(detail, dict) else 0.1
        m["confidence"] = min(1.0, (m["confidence"] or 0) + bump)
        m["access_count"] += 1
        m["last_accessed"] = e["occurred_at"]
    elif kind in ("updated", "corrected", "normalised") and isinstance(detail, dict):
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


def _decay(ctx: Context, rules: list, m: dict, at: dt.datetime) -> float:
    """The decay pass's `decay_score` formula at T (the stored one when no rule applies)."""
    for rule in rules:
        if rule.when is None or _value(rule.when, m, at, ctx):
            value = _value(rule.set["decay_score"], m, at, ctx)
            return 1.0 if value is None else float(value)
    return m.get("decay_score") if m.get("decay_score") is not None else 1.0


_RANKS: dict = {}


def _rank(ctx: Context) -> X.Node:
    """The policy's rank formula as IR, compiled once per policy."""
    key = id(ctx.policy)
    if key not in _RANKS or _RANKS[key][0] is not ctx.policy:
        _RANKS[key] = (
            ctx.policy,
            X.compile_formula(
                ctx.policy.scores.get("rank", "importance * confidence * decay_score"), ctx.policy.scope()
            ),
        )
    return _RANKS[key][1]


def _days(later, earlier) -> float | None:
    if later is None or earlier is None:
        return None
    later = later if isinstance(later, dt.datetime) else parse_time(later)
    earlier = earlier if isinstance(earlier, dt.datetime) else parse_time(earlier)
    return round((later - earlier).total_seconds() / 86400 * 1000) / 1000


def _value(node: X.Node, m: dict, at: dt.datetime, ctx: Context = None):
    """A formula's value over one memory at `at`, SQL-like: NULL (None) propagates through
    arithmetic. The IR is turned into Python closures once per node."""
    fn = _COMPILED.get(id(node))
    if fn is None or fn[0] is not node:
        fn = _COMPILED[id(node)] = (node, _compile(node))
    return fn[1](m, at)


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
    raise X.FormulaError(f"cannot evaluate {type(node).__name__} as of a time")


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
    one = {
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
    raise X.FormulaError(f"cannot evaluate {name}() as of a time")


# ---- the reads ------------------------------------------------------------------------
def candidates(
    ctx: Context, query: str | None, at: dt.datetime, limit: int | None = None
) -> list[MemoryRecord]:
    """Recall's candidates at T: the memories recorded by T (matching `query` in full text
    when given) that its `where` keeps at T, in its order at T."""
    rec = ctx.policy.recall.candidates
    limit = rec.limit if limit is None else limit
    rows = ctx.store.recorded_by(ctx.namespace, iso(at), query, min(limit * SCAN, 5000))
    records = [(r, _row(r)) for r in state_at(ctx, rows, at)]
    kept = [(r, m) for r, m in records if _value(rec.where, m, at, ctx)]
    for node, descending in reversed(rec.order):  # a stable sort, last key first
        kept.sort(key=lambda p: _sortable(_value(node, p[1], at, ctx)), reverse=descending)
    return [r for r, _ in kept[:limit]]


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
    by_id = {c.id: c for c in shown}
    return [by_id[i] for i in chosen]


def get(ctx: Context, memory_id: int, at: dt.datetime) -> MemoryRecord | None:
    row = ctx.store.get(memory_id, ctx.namespace)
    if row is None or not _recorded(ctx, row, at):
        return None
    return state_at(ctx, [row], at)[0]


def _recorded(ctx: Context, row, at: dt.datetime) -> bool:
    events = ctx.store.events_by([row["id"]], iso(at))
    return bool(events) or (not ctx.store.events(row["id"]) and (row["created_at"] or "") <= iso(at))


def _row(r: MemoryRecord) -> dict:
    return r.as_dict() | {"rank": r.rank, "relevance": r.relevance}


def _sortable(value):
    return (value is not None, value if value is not None else 0)
