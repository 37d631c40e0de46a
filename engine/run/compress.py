"""Compression: a cluster judge groups memories that say the same thing, a merge judge
writes each group as one memory. Each merge commits on its own with its events; a merge
that fails (model down, bad answer, an original no longer active) leaves the originals.
Under a runner's lease each merge's commit is fenced: a runner whose lease was taken over
while it waited on a model writes nothing."""

from __future__ import annotations

import itertools

from engine.base.errors import LetheError
from engine.base.records import parse_tags
from engine.judges import JudgeUnavailable
from engine.judges import invariants as guards
from engine.plan import DEFAULT_CANDIDATES
from engine.policy import Judgment, Pass
from engine.run.context import Context, vector_store
from engine.run.passes import PassResult
from engine.run.write import store_memory
from engine.steps.answers import today


class _Conflict(Exception):
    pass


def compress(ctx: Context, p: Pass, result: PassResult) -> None:
    cluster, merge = p.cluster, p.merge
    if cluster is None or merge is None:  # the policy's loader gives a compression pass both
        raise LetheError(f"pass {p.name} compresses without a cluster and a merge judgment")
    spec = cluster.candidates or DEFAULT_CANDIDATES()
    rows = ctx.store.fetch(ctx.plan.cluster_candidates[p.name], ctx.namespace, limit=spec.limit)
    if len(rows) < max(spec.min, 2):
        result.notes.append(f"{len(rows)} candidates, fewer than {max(spec.min, 2)}: nothing to compress")
        return
    shown = [
        {
            "n": i,
            "id": r["id"],
            "content": r["content"],
            "summary": r["summary"],
            "tags": parse_tags(r["tags"]) if (r["tags"] or "").startswith("[") else [],
            "importance": r["importance"],
            "access_count": r["access_count"],
        }
        for i, r in enumerate(rows, 1)
    ]
    by_n = {c["n"]: c for c in shown}
    if ctx.policy.embed is not None:  # clusters group by similarity where vectors exist
        pairs = vector_store(ctx).pair_similarities(ctx.policy.embed.name, [c["id"] for c in shown])
        n_of = {c["id"]: c["n"] for c in shown}
        for c in shown:
            c["similar"] = {}
        for (a, b), sim in pairs.items():
            by_n[n_of[a]]["similar"][n_of[b]] = by_n[n_of[b]]["similar"][n_of[a]] = round(sim, 4)
    now = ctx.clock()
    try:
        groups, note = ctx.judges.ask(
            "cluster", cluster, {"candidates": shown, "now": now, "today": today(now)}
        )
    except JudgeUnavailable as exc:
        result.notes.append(f"cluster model unreachable, nothing merged: {exc}")
        return
    used: set[int] = set()
    for group in groups if isinstance(groups, list) else []:  # the cluster judge's checked lists
        members = [by_n[n] for n in dict.fromkeys(group) if n in by_n and n not in used]
        if len(members) < 2:
            continue
        new_id = _merge_group(ctx, p, merge, members, result, [note] if note else [])
        if new_id:
            used |= {m["n"] for m in members}


def _merge_group(
    ctx: Context, p: Pass, merge: Judgment, members: list[dict], result: PassResult, notes: list[str]
) -> int | None:
    ctx.check_lease()  # a lease lost while the last model answered: stop before the next
    apart = _different_things(members)
    if apart:
        _refuse(ctx, [m["id"] for m in members], apart, result)
        return None
    now = ctx.clock()
    try:
        merged, note = ctx.judges.ask("merge", merge, {"memories": members, "now": now, "today": today(now)})
    except JudgeUnavailable as exc:
        result.notes.append(f"merge model unreachable, originals kept: {exc}")
        return None
    if not isinstance(merged, dict):  # None: the judge found no usable answer
        result.notes.append(f"merge answer unusable, originals kept: {note}")
        return None
    ids = [m["id"] for m in members]
    notes = notes + ([note] if note else [])
    expiry = _expiry(ctx, ids)
    if isinstance(expiry, _Conflict):
        _refuse(ctx, ids, str(expiry), result)
        return None
    try:
        with ctx.transaction():
            new_id = _write_merge(ctx, p, ids, merged, expiry)
            for n in notes:  # a judgment the fallback made, not the model: say so
                ctx.store.event(new_id, "judge_fallback", n)
    except _Conflict as exc:
        result.notes.append(str(exc))
        return None
    result.changed += len(ids) + 1
    result.events["compressed"] = result.events.get("compressed", 0) + len(ids)
    return new_id


def _refuse(ctx: Context, ids: list[int], why: str, result: PassResult) -> None:
    """A merge the engine refuses whatever the judges said: the originals stay, each with
    an event saying why."""
    with ctx.transaction():
        for mid in ids:
            ctx.store.event(mid, "refused", f"merge of {ids} refused: {why}")
    result.notes.append(f"merge of {ids} refused, originals kept: {why}")


def _different_things(members: list[dict]) -> str | None:
    """Why a cluster may not be merged: two of its members are about different identified
    things (order 1001 and order 1003, room A and room B; engine/judges/invariants.py
    `supersede_refusal`), which one memory would blur into one."""
    for a, b in itertools.permutations(members, 2):
        why = guards.supersede_refusal(a["content"], b["content"])
        if why:
            return f"#{a['id']} and #{b['id']}: {why}"
    return None


def _expiry(ctx: Context, ids: list[int]) -> str | None | _Conflict:
    """The merged memory's expiry: the earliest of its members' (a merged deadline still
    expires). A dated memory never merges with an undated one: either the lasting fact
    would expire with it, or the deadline would never expire."""
    rows = [ctx.store.get(mid, ctx.namespace) for mid in ids]
    dated = [(r["id"], r["expires_at"]) for r in rows if r is not None and r["expires_at"]]
    if dated and len(dated) < len(ids):
        undated = [mid for mid in ids if mid not in dict(dated)]
        return _Conflict(
            f"{', '.join(f'#{i} expires {at}' for i, at in dated)}; "
            f"{', '.join(f'#{i}' for i in undated)} never expires"
        )
    return min(at for _, at in dated) if dated else None


def _write_merge(ctx: Context, p: Pass, ids: list[int], merged: dict, expires_at: str | None = None) -> int:
    values = ctx.store.fetch_one(ctx.plan.merge_values[p.name], ctx.namespace, ids=ids)
    if values is None:  # an aggregate has its one row; a store that gave none merges nothing
        raise _Conflict(f"merge of {ids}: their values could not be read, originals kept")
    new_id = store_memory(
        ctx,
        merged["content"],
        summary=merged["summary"],
        tags=merged["tags"],
        importance=values["importance"],
        confidence=values["confidence"],
        access_count=int(values["access_count"] or 0),
        decay_score=values["decay_score"],
        expires_at=expires_at,
        event="merged",
        detail={"merged_from": ids, "pass": p.name},
    )
    ctx.store.run(ctx.plan.merge_absorb_events, ctx.namespace, ids=ids, text=f"merged into #{new_id}")
    if ctx.store.run(ctx.plan.merge_absorb, ctx.namespace, ids=ids, new_id=new_id) != len(ids):
        raise _Conflict(f"memories {ids} changed while merging; originals kept")
    return new_id
