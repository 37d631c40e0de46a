"""Recall: the policy's candidates, a select judge that picks among them, then one UPDATE
for the chosen memories' access (the article: access_count + 1, last_accessed = now).

`explain` answers "why did it return that?": the same candidates and picks, each with its
score parts, and how many memories were left out and why, counted by one GROUP BY.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field

from . import expr as X
from .judges import JudgeUnavailable
from .answers import today
from .plan import IDS, LIMIT, NAMESPACE, QUERY, Statement

# bm25 onto 0..1, as the compiled recall statements map it (plan.candidates_statement)
RELEVANCE_SQL = "coalesce(-fts.score / (1.0 - fts.score), 0.0)"
FTS_JOIN = ("LEFT JOIN (SELECT rowid AS fts_id, bm25(memories_fts) AS score FROM memories_fts "
            "WHERE memories_fts MATCH {p}) AS fts ON fts.fts_id = memories.id")
# statuses recall explains by name, in this order; others found are listed after them
STATUSES = ("archived", "superseded", "expired", "compressed")


def recall(mem, query: str, top_n: int | None = None) -> list:
    candidates, chosen = choose(mem, query, top_n, relevance=False)
    if chosen and mem.plan.access is not None:
        st = mem.plan.access
        with mem.store.transaction() as db:
            db.execute(st.sql, st.bind(mem.store.now(), mem.namespace, ids=chosen))
    by_id = {c.id: c for c in candidates}
    out = []
    for mid in chosen:
        fresh = mem.get(mid)
        fresh.relevance = by_id[mid].relevance
        out.append(fresh)
    return out


def choose(mem, query: str, top_n: int | None = None,
           relevance: bool = True) -> tuple[list, list[int]]:
    """The candidates in the policy's recall order (each with its relevance to `query`),
    and the ids the select judge picks among them (the first `top_n` without a judge)."""
    rec = mem.policy.recall
    top_n = top_n or rec.top_n
    candidates = mem.candidates(query, scored=True, relevance=relevance)
    if rec.select is not None and candidates:
        chosen = _select(mem, rec, query, candidates, top_n)
    else:
        chosen = [c.id for c in candidates[:top_n]]
    return candidates, chosen


def _select(mem, rec, query: str, candidates: list, top_n: int) -> list[int]:
    shown = [{"n": i, "id": c.id, "summary": c.summary or c.content[:120], "content": c.content,
              "confidence": c.confidence, "decay_score": c.decay_score}
             for i, c in enumerate(candidates, 1)]
    now = mem.clock()
    variables = {"query": query, "candidates": shown, "top_n": top_n, "now": now, "today": today(now)}
    try:
        picked, _ = mem.judges.ask("select", rec.select, variables)
    except JudgeUnavailable:  # recall must answer: the rules judge picks instead
        picked = mem.judges.fallback("select", rec.select, variables, "model unreachable")
    local = {c["n"]: c["id"] for c in shown}
    return [local[n] for n in dict.fromkeys(picked or []) if n in local][:top_n]


# ---- explain --------------------------------------------------------------------------
@dataclass
class Explained:
    """One recall candidate: its place in the recall order, its score parts, and whether
    the select step picked it."""

    memory: object               # MemoryRecord
    position: int                # 1-based, in the policy's recall order
    chosen: bool
    order_keys: list = field(default_factory=list)  # the value of each `order` term

    def as_dict(self) -> dict:
        m = self.memory
        return {"id": m.id, "position": self.position, "chosen": self.chosen,
                "importance": m.importance, "confidence": m.confidence,
                "decay": m.decay_score, "relevance": m.relevance, "rank": m.rank,
                "order_keys": self.order_keys, "access_count": m.access_count,
                "summary": m.summary or m.content[:120]}


@dataclass
class Explanation:
    """Why recall returns what it returns for one query."""

    query: str
    policy: str
    where: str                   # the policy's recall.where, as written
    order: str                   # the policy's recall.order, as written
    limit: int
    select: str | None           # "model via template", or None without a select step
    top_n: int
    candidates: list[Explained]
    filtered: dict[str, int]     # memories never considered, by reason
    eligible: int                # memories passing recall.where (before the limit)
    picks: list[int] = field(default_factory=list)  # chosen ids, in the order recall returns them

    @property
    def chosen(self) -> list[Explained]:
        by_id = {c.memory.id: c for c in self.candidates}
        return [by_id[i] for i in self.picks]

    @property
    def beyond_limit(self) -> int:
        return max(0, self.eligible - len(self.candidates))

    @property
    def not_chosen(self) -> int:
        return sum(1 for c in self.candidates if not c.chosen)

    def as_dict(self) -> dict:
        return {"query": self.query, "policy": self.policy, "where": self.where,
                "order": self.order, "limit": self.limit, "select": self.select,
                "top_n": self.top_n, "chosen": self.picks,
                "candidates": [c.as_dict() for c in self.candidates],
                "filtered": self.filtered, "eligible": self.eligible,
                "beyond_limit": self.beyond_limit, "not_chosen": self.not_chosen}


def explain(mem, query: str, top_n: int | None = None) -> Explanation:
    """What recall would return for `query` and why: every candidate with its importance,
    confidence, decay, relevance, rank and order keys, which ones the select step picks,
    and counts of the memories left out (archived, superseded, expired, compressed, below
    the recall floor, beyond the candidate limit). Records no access: explaining a recall
    does not change what the next one returns."""
    from .memory import fts_query

    rec = mem.policy.recall
    candidates, picks = choose(mem, query, top_n)
    fts = fts_query(query) if query else None
    keys = _order_keys(mem, fts, [c.id for c in candidates])
    explained = [Explained(c, i, c.id in picks, keys.get(c.id, []))
                 for i, c in enumerate(candidates, 1)]
    counts = _reasons(mem, fts)
    eligible = counts.pop("eligible", 0)
    src = rec.candidates.source
    return Explanation(query, mem.policy.name, str(src.get("where", "status = 'active'")),
                       str(src.get("order", "rank")), rec.candidates.limit,
                       f"{rec.select.model} via {rec.select.prompt}" if rec.select else None,
                       top_n or rec.top_n, explained, counts, eligible, picks)


def reasons_statement(policy, d, query: bool) -> Statement:
    """Every memory of a namespace counted by why recall would or would not consider it:
    'eligible' when it passes recall.where (and, for `match: filter`, matches the query;
    'no_match' when it does not), else its status when not active, else 'below_floor'.
    One GROUP BY: its cost is one scan, whatever the reasons."""
    where = policy.recall.candidates.where
    filtering = query and policy.recall.match == "filter"
    join = filtering or (query and "@relevance" in X.columns_of(where))
    where_sql, where_params = d.render(where, relevance_sql=RELEVANCE_SQL if join else "0.0")
    passing = ("CASE WHEN fts.fts_id IS NULL THEN 'no_match' ELSE 'eligible' END"
               if filtering else "'eligible'")
    sql = (f"SELECT CASE WHEN {where_sql} THEN {passing} "
           "WHEN coalesce(\"status\", '') <> 'active' THEN coalesce(\"status\", 'unknown') "
           "ELSE 'below_floor' END AS reason, count(*) AS n\nFROM memories"
           + (("\n" + FTS_JOIN.format(p=d.placeholder)) if join else "")
           + f"\nWHERE \"namespace\" = {d.placeholder}\nGROUP BY reason")
    return Statement("recall explain: reasons", sql,
                     [*where_params, *([QUERY] if join else []), NAMESPACE])


def _reasons(mem, fts: str | None) -> dict[str, int]:
    st = reasons_statement(mem.policy, mem.plan.dialect, bool(fts))
    found = {r["reason"]: r["n"] for r in mem.store.db.execute(st.sql, st.bind(
        mem.store.now(), mem.namespace, fts))}
    out = {s: found.pop(s, 0) for s in STATUSES}
    out["below_floor"] = found.pop("below_floor", 0)
    eligible = found.pop("eligible", 0)
    if fts and mem.policy.recall.match == "filter":
        no_match = found.pop("no_match", 0)
        if not eligible:  # nothing matched: `match: filter` recalls from the top candidates
            eligible, no_match = no_match, 0
        out["no_match"] = no_match
    out.update(sorted(found.items()))  # status words the policy made up
    out["eligible"] = eligible
    return out


def order_keys_statement(policy, d, query: bool) -> Statement:
    """The value of each recall `order` term for the memories whose ids are bound as a
    JSON array (in the LIMIT slot, as the on_access statement binds its ids)."""
    rel = RELEVANCE_SQL if query else "0.0"
    parts, params = [], []
    for i, (node, _desc) in enumerate(policy.recall.candidates.order):
        sql, p = d.render(node, relevance_sql=rel)
        parts.append(f"{sql} AS key_{i}")
        params += p
    join = ("\n" + FTS_JOIN.format(p=d.placeholder)) if query else ""
    sql = (f"SELECT memories.id, {', '.join(parts)}\nFROM memories{join}\n"
           f"WHERE {d.unindexed('namespace')} = {d.placeholder} "
           f"AND memories.id IN (SELECT value FROM json_each({d.placeholder}))")
    return Statement("recall explain: order keys", sql,
                     [*params, *([QUERY] if query else []), NAMESPACE, IDS])


def _order_keys(mem, fts: str | None, ids: list[int]) -> dict[int, list]:
    if not ids:
        return {}
    st = order_keys_statement(mem.policy, mem.plan.dialect, bool(fts))
    rows = mem.store.db.execute(st.sql, st.bind(mem.store.now(), mem.namespace, fts, ids=ids))
    return {r[0]: list(r[1:]) for r in rows}
