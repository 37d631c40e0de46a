"""A pass's rules as statements: per rule an optional INSERT of its events and one UPDATE,
both under the rule's WHERE, guarded so that no unusable value (NULL, NaN, infinite) is
ever written; and the reach count that decides how a pass rewrites its rows.
"""

from __future__ import annotations

from engine.plan.dialect import NOW, Dialect
from engine.plan.statement import FROM_ID, NAMESPACE, TO_ID, Kind, Statement
from engine.policy import Pass, Policy, Rule
from engine.policy import expr as X


def id_range(d: Dialect) -> tuple[str, list]:
    """The test of one id range (`from_id <= id < to_id`), bound when the statement runs."""
    return f'"id" >= {d.placeholder} AND "id" < {d.placeholder}', [FROM_ID, TO_ID]


def pass_statements(policy: Policy, p: Pass, d: Dialect, ranged: bool = False) -> list[Statement]:
    """A batched pass's statements cover one id range each time they run (and, `ranged`,
    those a one-transaction pass runs instead once it gives way to a writer); the
    namespace test is then written `+namespace` so SQLite walks the id range, not the
    namespace."""
    batch = id_range(d) if p.batch or ranged else None
    out = []
    for i, rule in enumerate(p.rules):  # the label is the rule's name in its events too
        out += rule_statements(policy, rule, d, f"{p.name}.rules[{i}]", batch)
    return out


def reach_statement(p: Pass, d: Dialect, ranged: bool = False) -> Statement:
    """How many rows a pass's rules reach, counted before the first one runs (a later
    rule may reach rows an earlier one changes; the count is for choosing how to write).
    `ranged`: within one id range (what is left of a pass that gave way to a writer)."""
    whens = [r.when for r in p.rules if r.when is not None]
    ns = d.unindexed("namespace") if ranged else d.quote("namespace")
    sql, params = f"{ns} = {d.placeholder}", [NAMESPACE]
    if ranged:
        r_sql, r_params = id_range(d)
        sql, params = f"{sql} AND {r_sql}", params + r_params
    if len(whens) == len(p.rules):  # every rule has a `when`
        rendered = [d.render(w) for w in _union(whens)]
        sql += " AND (" + " OR ".join(w for w, _ in rendered) + ")"
        params += [x for _, ps in rendered for x in ps]
    label = f"{p.name} reach" + (" in a range" if ranged else "")
    return Statement(label, f"SELECT count(*) FROM {d.rows}\nWHERE {sql}", params, kind=Kind.READ)


def due_statement(p: Pass, d: Dialect) -> Statement | None:
    """Whether any row is due for a pass: one row of those its rules reach, or none. When
    none is, no rule can change a row (each later rule sees the rows the earlier ones
    left as they were), so the pass writes nothing and emits no event: only its run is
    recorded. For a pass whose every rule has a `when` (expiry's `expires_at < now`, which
    an index answers); a rule without one reaches the whole namespace. None: no probe."""
    whens = [r.when for r in p.rules if r.when is not None]
    if not whens or len(whens) < len(p.rules):
        return None
    rendered = [d.render(w) for w in _union(whens)]
    sql = f"{d.quote('namespace')} = {d.placeholder} AND (" + " OR ".join(w for w, _ in rendered) + ")"
    params = [NAMESPACE, *(x for _, ps in rendered for x in ps)]
    return Statement(f"{p.name} due", f"SELECT 1 FROM {d.rows}\nWHERE {sql}\nLIMIT 1", params, kind=Kind.READ)


def _union(whens: list[X.Node]) -> list[X.Node]:
    """The rules' conditions to OR together for the reach count. When one of them is a
    conjunct of every other (decay's `status = 'active'` and `status = 'active' and
    decay_score < x`), it alone is their union, and a count an index can answer."""
    for w in whens:
        if all(v == w or (isinstance(v, X.BoolOp) and v.op == "and" and w in v.items) for v in whens):
            return [w]
    return whens


def pass_writes(policy: Policy, p: Pass) -> tuple[str, ...]:
    """The columns a pass's rules write, the stored rank included when it follows them."""
    cols = {c for r in p.rules for c in r.set}
    if cols & X.columns_of(policy.rank):
        cols.add("rank")
    return tuple(sorted(cols))


def rule_statements(
    policy: Policy, rule: Rule, d: Dialect, label: str, extra_where: tuple[str, list] | None = None
) -> list[Statement]:
    """A rule is an optional INSERT ... SELECT of its events, then one UPDATE.

    Both read the same WHERE; the events go first so they see the rows before the change,
    and both run in the caller's transaction. A rule whose formulas can come out NULL, NaN
    or infinite on some rows (`confidence / access_count` where access_count is 0) never
    writes that, and its events leave those rows out. Where the dialect has a function to
    count them (`Dialect.kept`, SQLite), the UPDATE computes each new value once per row,
    keeps the old values of a row where one is unusable and counts it there
    (`_kept_assignments`): those are reported as skipped. Elsewhere the UPDATE also
    requires every computed value to be usable, and a count of the rows the rule is for
    goes first: those it did not change are the skipped."""
    where_sql, where_params = _where(rule.when, d, extra_where)
    guard_sql, guard_params = _usable(rule.set, d)
    kept = bool(guard_sql) and d.kept is not None and d.row_value_set  # _kept_assignments
    guarded = (
        (f"{where_sql} AND {guard_sql}", where_params + guard_params)
        if guard_sql
        else (where_sql, where_params)
    )
    out = []
    if guard_sql and not kept:  # rows the rule is for, before it runs
        out.append(
            Statement(
                f"{label} rows (the skipped: those it does not change)",
                f"SELECT count(*) FROM {d.rows}\nWHERE {where_sql}",
                list(where_params),
                kind=Kind.READ,
                rule=label,
                counts_skipped=True,
            )
        )
    if rule.event:
        detail_sql, detail_params = _detail(rule, d, label)
        out.append(
            Statement(
                f"{label} event {rule.event}",
                "INSERT INTO memory_events (memory_id, event_type, detail, occurred_at)\n"
                f'SELECT "id", {d.placeholder}, {detail_sql}, {d.placeholder}\nFROM {d.rows}\n'
                f"WHERE {guarded[0]}",
                [rule.event, *detail_params, NOW, *guarded[1]],
                kind=Kind.INSERT_EVENTS,
                event=rule.event,
                rule=label,
            )
        )
    status = rule.set.get("status")
    leaves = isinstance(status, X.Const) and status.value != "active"
    if rule.set:
        if kept:
            set_sql, set_params = _kept_assignments(policy, rule.set, d)
            out.append(
                Statement(
                    f"{label} update",
                    f"UPDATE {d.rows}\nSET {set_sql}\nWHERE {where_sql}",
                    set_params + where_params,
                    kind=Kind.WRITE_MEMORIES,
                    rule=label,
                    counts_kept=True,
                    leaves_active=leaves,
                )
            )
        else:
            set_sql, set_params = assignments(policy, rule.set, d)
            out.append(
                Statement(
                    f"{label} update",
                    f"UPDATE {d.rows}\nSET {set_sql}\nWHERE {guarded[0]}",
                    set_params + guarded[1],
                    kind=Kind.WRITE_MEMORIES,
                    rule=label,
                    leaves_active=leaves,
                )
            )
    return out


# the name a rule's UPDATE gives its test that every new value of a row can be stored
USABLE = "usable"

# the largest finite REAL: NULL, NaN (which SQLite reads as NULL) and +-inf fall outside
FINITE = 1.7976931348623157e308


def _usable(sets: dict[str, X.Node], d: Dialect) -> tuple[str, list]:
    """A condition true only where every computed value of a rule's `set` can be stored:
    a number that is finite, a time that is not NULL. Literals need no check (`null` is
    written as asked)."""
    parts, params = [], []
    for node in sets.values():
        if isinstance(node, X.Const):
            continue
        sql, p = d.render(node)
        if node.type == X.NUM:
            parts.append(f"({sql}) BETWEEN {d.placeholder} AND {d.placeholder}")
            params += [*p, -FINITE, FINITE]
        else:
            parts.append(f"({sql}) IS NOT NULL")
            params += p
    return (f"({' AND '.join(parts)})" if parts else ""), params


def _where(when: X.Node | None, d: Dialect, extra=None) -> tuple[str, list]:
    ns = d.unindexed("namespace") if extra else d.quote("namespace")
    sql, params = f"{ns} = {d.placeholder}", [NAMESPACE]
    if when is not None:
        w_sql, w_params = d.render(when)
        sql, params = f"{sql} AND {w_sql}", params + w_params
    if extra:
        sql, params = f"{sql} AND {extra[0]}", params + list(extra[1])
    return sql, params


def assignments(policy: Policy, sets: dict[str, X.Node], d: Dialect) -> tuple[str, list]:
    """The SET list of an UPDATE writing `sets`, and the stored rank when it follows them."""
    parts, params = [], []
    for col, node in sets.items():
        sql, p = d.render(node)
        parts.append(f"{d.quote(col)} = {sql}")
        params += p
    if set(sets) & X.columns_of(policy.rank):
        # keep the stored rank current: computed from the values this UPDATE writes
        sql, p = d.render(policy.rank, overrides=sets)
        parts.append(f'"rank" = {sql}')
        params += p
    return ",\n    ".join(parts), params


def _kept_assignments(policy: Policy, sets: dict[str, X.Node], d: Dialect) -> tuple[str, list]:
    """`SET (a, rank) = (SELECT CASE WHEN usable THEN new_a ELSE coalesce(kept(), a) END,
    CASE WHEN usable THEN <rank of new_a> ELSE rank END FROM (SELECT new_a, <new_a is usable>
    AS usable FROM (SELECT <a's formula> AS new_a)))`: each new value is computed once per
    row (the decay formula's julianday and exp are most of a 1M decay's CPU,
    bench/RESULTS.md), not again in a guard, and a row where one is unusable keeps every
    value it had. The dialect's `kept` function, called for those rows alone, counts the row
    (the rule's skipped) and returns NULL: the old value never passes through Python (text
    that is not UTF-8 could not)."""
    inner, inner_params = [], []
    for col, node in sets.items():
        sql, p = d.render(node)
        inner.append(f"{sql} AS {d.quote('new_' + col)}")
        inner_params += p
    news = {c: X.Col(node.type, "new_" + c) for c, node in sets.items()}
    usable_sql, usable_params = _usable(
        {c: news[c] for c, node in sets.items() if not isinstance(node, X.Const)}, d
    )
    cols, outer, outer_params, usable = list(sets), [], [], d.quote(USABLE)
    for i, col in enumerate(cols):
        old = f"memories.{d.quote(col)}"
        outer.append(
            f"CASE WHEN {usable} THEN {d.quote('new_' + col)} ELSE "
            f"{f'coalesce({d.kept}(), {old})' if i == 0 else old} END"
        )
    if set(sets) & X.columns_of(policy.rank):
        rank_sql, rank_params = d.render(policy.rank, overrides=news)
        cols.append("rank")
        outer.append(f'CASE WHEN {usable} THEN {rank_sql} ELSE memories."rank" END')
        outer_params += rank_params
    picked = ", ".join(d.quote("new_" + c) for c in sets)
    sql = (
        f"({', '.join(d.quote(c) for c in cols)}) = (SELECT {', '.join(outer)}\n"
        f"    FROM (SELECT {picked}, {usable_sql} AS {usable}\n"
        f"    FROM (SELECT {', '.join(inner)})))"
    )
    # in the order they appear: the outer list, then the usable test, then the formulas
    return sql, outer_params + usable_params + inner_params


def _detail(rule: Rule, d: Dialect, label: str) -> tuple[str, list]:
    """Event detail as JSON: the rule, and each set column's value before and after."""
    before, after, params_b, params_a = [], [], [], []
    for col, node in rule.set.items():
        before.append(f"{d.text_param}, {d.quote(col)}")
        params_b.append(col)
        sql, p = d.render(node)
        after.append(f"{d.text_param}, {sql}")
        params_a += [col, *p]
    obj, key = d.json_object, d.text_param
    sql = f"{obj}({key}, {key}, {key}, {obj}({', '.join(before)}), {key}, {obj}({', '.join(after)}))"
    return sql, ["rule", label, "from", *params_b, "to", *params_a]
