"""What `recall --explain` runs: every memory counted by why recall would or would not
consider it, and the order keys of the ones it shows.
"""

from __future__ import annotations

from engine.plan.dialect import Dialect
from engine.plan.statement import IDS, NAMESPACE, QUERY, Kind, Statement
from engine.policy import expr as X


def _fts_join(d: Dialect) -> str:
    """Each memory's full-text score for the query bound here (NULL when it does not match)."""
    return f"LEFT JOIN ({d.fts_matches()}) AS fts ON fts.fts_id = memories.id"


def reasons_statement(policy, d, query: bool) -> Statement:
    """Every memory of a namespace counted by why recall would or would not consider it:
    'eligible' when it passes recall.where (and, for `match: filter`, matches the query;
    'no_match' when it does not), else its status when not active, else 'below_floor'.
    One GROUP BY: its cost is one scan, whatever the reasons."""
    where = policy.recall.candidates.where
    filtering = query and policy.recall.match == "filter"
    join = filtering or (query and "@relevance" in X.columns_of(where))
    where_sql, where_params = d.render(where, relevance_sql=d.relevance_sql if join else d.no_relevance)
    passing = (
        "CASE WHEN fts.fts_id IS NULL THEN 'no_match' ELSE 'eligible' END" if filtering else "'eligible'"
    )
    sql = (
        f"SELECT CASE WHEN {where_sql} THEN {passing} "
        "WHEN coalesce(\"status\", '') <> 'active' THEN coalesce(\"status\", 'unknown') "
        "ELSE 'below_floor' END AS reason, count(*) AS n\nFROM memories"
        + (("\n" + _fts_join(d)) if join else "")
        + f'\nWHERE "namespace" = {d.placeholder}\nGROUP BY reason'
    )
    return Statement(
        "recall explain: reasons" + (" (with a query)" if query else ""),
        sql,
        [*where_params, *([QUERY] if join else []), NAMESPACE],
        kind=Kind.READ,
    )


def order_keys_statement(policy, d, query: bool) -> Statement:
    """The value of each recall `order` term for the memories whose ids are bound as a
    JSON array (in the LIMIT slot, as the on_access statement binds its ids)."""
    rel = d.relevance_sql if query else d.no_relevance
    parts, params = [], []
    for i, (node, _desc) in enumerate(policy.recall.candidates.order):
        sql, p = d.render(node, relevance_sql=rel)
        parts.append(f"{sql} AS key_{i}")
        params += p
    join = ("\n" + _fts_join(d)) if query else ""
    sql = (
        f"SELECT memories.id, {', '.join(parts)}\nFROM memories{join}\n"
        f"WHERE {d.unindexed('namespace')} = {d.placeholder} "
        f"AND memories.id {d.ids_in()}"
    )
    return Statement(
        "recall explain: order keys" + (" (with a query)" if query else ""),
        sql,
        [*params, *([QUERY] if query else []), NAMESPACE, IDS],
        kind=Kind.READ,
    )


def decay_rule(policy):
    """The first pass rule that sets `decay_score` (its pass and formula), or None."""
    for name, p in policy.passes.items():
        for rule in p.rules:
            if "decay_score" in rule.set:
                return name, rule.set["decay_score"]
    return None


def decay_statement(policy, d) -> Statement | None:
    """What the decay rule (`decay_rule`) would set one memory's decay_score to at the
    time bound as now (the inspector draws it over time); None without such a rule."""
    found = decay_rule(policy)
    if found is None:
        return None
    sql, params = d.render(found[1])
    return Statement(
        f"{found[0]}: decay_score at a time",
        f"SELECT {sql} AS value\nFROM "
        f"memories\nWHERE {d.unindexed('namespace')} = {d.placeholder} AND "
        f"memories.id {d.ids_in()}",
        [*params, NAMESPACE, IDS],
        kind=Kind.READ,
    )
