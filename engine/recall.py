"""Recall: the policy's candidates, a select judge that picks among them, then one UPDATE
for the chosen memories' access (the article: access_count + 1, last_accessed = now)."""
from __future__ import annotations

import json

from .judges import JudgeUnavailable
from .judges.answers import today


def recall(mem, query: str, top_n: int | None = None) -> list:
    rec = mem.policy.recall
    top_n = top_n or rec.top_n
    candidates = mem.candidates(query, scored=True)
    if rec.select is not None and candidates:
        chosen = _select(mem, rec, query, candidates, top_n)
    else:
        chosen = [c.id for c in candidates[:top_n]]
    if chosen and mem.plan.access is not None:
        st = mem.plan.access
        with mem.store.transaction() as db:
            db.execute(st.sql, st.bind(mem.store.now(), mem.namespace, None, json.dumps(chosen)))
    by_id = {c.id: c for c in candidates}
    out = []
    for mid in chosen:
        fresh = mem.get(mid)
        fresh.relevance = by_id[mid].relevance
        out.append(fresh)
    return out


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
