"""Compression: a cluster judge groups memories that say the same thing, a merge judge
writes each group as one memory. Each merge commits on its own with its events; a merge
that fails (model down, bad answer, an original no longer active) leaves the originals."""
from __future__ import annotations

import json

from .judges import JudgeUnavailable
from .answers import today
from .passes import PassResult
from .policy import Pass
from .plan import DEFAULT_CANDIDATES


class _Conflict(Exception):
    pass


def compress(mem, p: Pass, result: PassResult) -> None:
    spec = p.cluster.candidates or DEFAULT_CANDIDATES()
    st = mem.plan.cluster_candidates[p.name]
    rows = mem.store.db.execute(st.sql, st.bind(mem.store.now(), mem.namespace, None, spec.limit)).fetchall()
    if len(rows) < max(spec.min, 2):
        result.notes.append(f"{len(rows)} candidates, fewer than {max(spec.min, 2)}: nothing to compress")
        return
    shown = [{"n": i, "id": r["id"], "content": r["content"], "summary": r["summary"],
              "tags": json.loads(r["tags"] or "[]") if (r["tags"] or "").startswith("[") else [],
              "importance": r["importance"], "access_count": r["access_count"]}
             for i, r in enumerate(rows, 1)]
    now = mem.clock()
    try:
        groups, note = mem.judges.ask("cluster", p.cluster, {"candidates": shown, "now": now,
                                                            "today": today(now)})
    except JudgeUnavailable as exc:
        result.notes.append(f"cluster model unreachable, nothing merged: {exc}")
        return
    by_n, used = {c["n"]: c for c in shown}, set()
    for group in groups or []:
        members = [by_n[n] for n in dict.fromkeys(group) if n in by_n and n not in used]
        if len(members) < 2:
            continue
        new_id = _merge_group(mem, p, members, result, [note] if note else [])
        if new_id:
            used |= {m["n"] for m in members}


def _merge_group(mem, p: Pass, members: list[dict], result: PassResult,
                 notes: list[str]) -> int | None:
    now = mem.clock()
    try:
        merged, note = mem.judges.ask("merge", p.merge, {"memories": members, "now": now,
                                                        "today": today(now)})
    except JudgeUnavailable as exc:
        result.notes.append(f"merge model unreachable, originals kept: {exc}")
        return None
    if merged is None:
        result.notes.append(f"merge answer unusable, originals kept: {note}")
        return None
    ids = [m["id"] for m in members]
    notes = notes + ([note] if note else [])
    try:
        with mem.store.transaction() as db:
            new_id = _write_merge(mem, db, p, ids, merged)
            for n in notes:  # a judgment the fallback made, not the model: say so
                mem.store.event(db, new_id, "judge_fallback", n)
    except _Conflict as exc:
        result.notes.append(str(exc))
        return None
    result.changed += len(ids) + 1
    result.events["compressed"] = result.events.get("compressed", 0) + len(ids)
    return new_id


def _write_merge(mem, db, p: Pass, ids: list[int], merged: dict) -> int:
    values = _aggregates(mem, db, p, ids)
    new_id = mem.insert(db, merged["content"], summary=merged["summary"], tags=merged["tags"],
                        importance=values.get("importance"), confidence=values.get("confidence"),
                        event="merged", detail={"merged_from": ids, "pass": p.name})
    db.execute("UPDATE memories SET access_count = ?, decay_score = ? WHERE id = ?",
               (int(values.get("access_count") or 0), values.get("decay_score", 1.0), new_id))
    mem.refresh_rank(db, [new_id])
    members = json.dumps(ids)
    db.execute("INSERT INTO memory_events (memory_id, event_type, detail, occurred_at) "
               "SELECT id, 'compressed', ?, ? FROM memories WHERE id IN (SELECT value FROM json_each(?)) "
               "AND namespace = ? AND status = 'active'",
               (f"merged into #{new_id}", mem.store.now(), members, mem.namespace))
    cur = db.execute("UPDATE memories SET status = 'compressed' WHERE id IN (SELECT value FROM "
                     "json_each(?)) AND namespace = ? AND status = 'active'", (members, mem.namespace))
    if cur.rowcount != len(ids):
        raise _Conflict(f"memories {ids} changed while merging; originals kept")
    return new_id


def _aggregates(mem, db, p: Pass, ids: list[int]) -> dict:
    """The merge result's formulas (avg, max, ... over the cluster), computed in SQL."""
    defaults = {"importance": "max(importance)", "confidence": "avg(confidence)",
                "access_count": "max(access_count)"}
    out = {}
    for col, node in p.merge_result.items():
        sql, params = mem.plan.dialect.render(node)
        out[col] = db.execute(f"SELECT {sql} FROM memories WHERE id IN (SELECT value FROM json_each(?))",
                              params + [json.dumps(ids)]).fetchone()[0]
    for col, agg in defaults.items():
        if col not in out:
            out[col] = db.execute(f"SELECT {agg} FROM memories WHERE id IN "
                                  "(SELECT value FROM json_each(?))", (json.dumps(ids),)).fetchone()[0]
    return out
