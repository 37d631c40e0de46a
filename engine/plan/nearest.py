"""Statements reading the vector index's neighbours: which of the ids the store's index
shortlisted pass a step's candidate query, and how similar each memory is to a bound vector.
"""

from __future__ import annotations

from engine.plan.dialect import Dialect
from engine.plan.statement import IDS, LIMIT, NAMESPACE, VECTOR, Kind, Statement
from engine.policy.types import Candidates


def similarity_sql(d: Dialect, joined: bool) -> tuple[str, list]:
    """`similarity`: cosine of the memory's vector (alias v) to the bound one; 0 without
    one, for one of another size (a corrupt row), and where the cosine is NULL (a zero
    vector): never NULL, which a formula or a prompt could not use."""
    if not joined:
        return "0.0", []
    p = d.placeholder
    return (
        f"coalesce(CASE WHEN length(v.vector) = length({p}) "
        f"THEN 1.0 - vec_distance_cosine(v.vector, {p}) END, 0.0)",
        [VECTOR, VECTOR],
    )


def neighbours_statement(label: str, c: Candidates, d: Dialect, model: str) -> Statement:
    """The nearest neighbours the store's vector index found (ids bound as a JSON array),
    kept only when they pass the step's candidate `where`, most similar first."""
    sim = similarity_sql(d, True)
    where_sql, where_params = d.render(c.where, relevance_sql="0.0", similarity=sim)
    sql = (
        f"SELECT memories.*, 0.0 AS relevance, {sim[0]} AS similarity\n"
        f"FROM memory_vectors AS v CROSS JOIN memories ON memories.id = v.memory_id\n"
        f"WHERE v.memory_id {d.ids_in()} AND v.model = {d.placeholder} "
        f'AND memories."namespace" = {d.placeholder} AND {where_sql}\n'
        f"ORDER BY similarity DESC, memories.id DESC\nLIMIT {d.placeholder}"
    )
    return Statement(label, sql, [*sim[1], IDS, model, NAMESPACE, *where_params, LIMIT], kind=Kind.READ)
