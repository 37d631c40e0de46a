"""What a write and a merge run, compiled like the passes (`lethe compile` shows them):
supersede, forget, reinforce, and compression's merged values and absorbed cluster.
"""

from __future__ import annotations

from engine.plan.dialect import NOW, Dialect
from engine.plan.rules import assignments
from engine.plan.statement import IDS, NAMESPACE, NEW_ID, TEXT, Kind, Statement
from engine.policy import Pass, Policy, schema
from engine.policy import expr as X
from engine.policy.formula_compiler import compile_formula


def supersede_statement(d: Dialect) -> Statement:
    """The memories a new one contradicts become superseded, linked to it."""
    return Statement(
        "write: supersede",
        f'UPDATE {d.rows} SET "status" = {d.placeholder}, '
        f'"contradicted_by" = {d.placeholder}\nWHERE {d.unindexed("namespace")} = '
        f'{d.placeholder} AND "id" {d.ids_in()} AND "status" = {d.placeholder}',
        ["superseded", NEW_ID, NAMESPACE, IDS, "active"],
        kind=Kind.WRITE_MEMORIES,
    )


def forget_statement(d: Dialect) -> Statement:
    """Forgetting archives (never deletes): the memory leaves recall, its history stays."""
    return Statement(
        "forget",
        f'UPDATE {d.rows} SET "status" = {d.placeholder}\nWHERE '
        f'{d.unindexed("namespace")} = {d.placeholder} AND "id" {d.ids_in()} '
        f'AND "status" = {d.placeholder}',
        ["archived", NAMESPACE, IDS, "active"],
        kind=Kind.WRITE_MEMORIES,
    )


def reinforce_statement(policy: Policy, d: Dialect) -> Statement:
    """A turn that confirms a memory: confidence + `reinforce_bump` (param, default 0.1, at
    most 1.0), one more access, accessed now; its rank follows."""
    bump = "reinforce_bump" if "reinforce_bump" in policy.params else "0.1"
    scope = policy.scope()
    sets = {
        "confidence": compile_formula(f"min(1.0, confidence + {bump})", scope),
        "access_count": compile_formula("access_count + 1", scope),
        "last_accessed": compile_formula("now", scope),
    }
    set_sql, set_params = assignments(policy, sets, d)
    return Statement(
        "write: reinforce",
        f"UPDATE {d.rows}\nSET {set_sql}\n"
        f'WHERE {d.unindexed("namespace")} = {d.placeholder} AND "id" {d.ids_in()} '
        f'AND "status" = {d.placeholder}',
        set_params + [NAMESPACE, IDS, "active"],
        kind=Kind.WRITE_MEMORIES,
    )


# what a merged memory gets for the fields its pass's `merge.result` leaves out
MERGE_DEFAULTS = {k.name: k.default for k in schema.section("merge result").keys}


def merge_values_statement(p: Pass, d: Dialect) -> Statement:
    """A merged memory's values: the pass's `merge.result` formulas (avg, max, ... over the
    cluster), the defaults for the rest, in one SELECT over the cluster's ids."""
    scope = X.Scope(params={}, scores={}, allow_aggregates=True, allow_time=False)
    parts, params = [], []
    for col, default in MERGE_DEFAULTS.items():
        node = p.merge_result.get(col) or compile_formula(default, scope)
        sql, ps = d.render(node)
        parts.append(f"{sql} AS {d.quote(col)}")
        params += ps
    return Statement(
        f"{p.name}: merged values",
        f"SELECT {', '.join(parts)}\nFROM {d.rows}\n"
        f'WHERE {d.unindexed("namespace")} = {d.placeholder} AND "id" {d.ids_in()}',
        params + [NAMESPACE, IDS],
        kind=Kind.READ,
    )


ABSORBED = "compressed"  # the event a memory absorbed into a merged one records


def absorb_events_statement(d: Dialect) -> Statement:
    return Statement(
        "merge: events of the absorbed",
        "INSERT INTO memory_events (memory_id, "
        f'event_type, detail, occurred_at)\nSELECT "id", {d.placeholder}, '
        f"{d.placeholder}, {d.placeholder} FROM {d.rows}\nWHERE "
        f'{d.unindexed("namespace")} = {d.placeholder} AND "id" {d.ids_in()} '
        f'AND "status" = {d.placeholder}',
        [ABSORBED, TEXT, NOW, NAMESPACE, IDS, "active"],
        kind=Kind.INSERT_EVENTS,
        event=ABSORBED,
    )


def absorb_statement(d: Dialect) -> Statement:
    return Statement(
        "merge: absorb the cluster",
        f'UPDATE {d.rows} SET "status" = {d.placeholder}, '
        f'"merged_into" = {d.placeholder}\nWHERE {d.unindexed("namespace")} = '
        f'{d.placeholder} AND "id" {d.ids_in()} AND "status" = {d.placeholder}',
        ["compressed", NEW_ID, NAMESPACE, IDS, "active"],
        kind=Kind.WRITE_MEMORIES,
    )
