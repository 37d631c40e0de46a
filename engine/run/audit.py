"""Reads and edits for auditing one namespace's memories (the inspector, `lethe ui`): a
page of memories under filters, a memory's neighbours (what it replaced, the turn it came
from, the model calls around its events), model use and pass runs over time, and the
edits that keep the record: restore and correct, each with its event.
"""

from __future__ import annotations

import datetime as dt
import json

from engine.base.clock import iso, parse_time
from engine.base.errors import LetheError
from engine.base.records import MemoryRecord
from engine.judges.embeddings import cosine
from engine.plan.explain import decay_rule, decay_statement
from engine.run import neighbours as vectors
from engine.run.context import Context, vector_store
from engine.run.recall import get as get_record
from engine.run.write import refresh_rank, store_memory
from engine.store.inspecting import SORTS  # noqa: F401 - the orders a page may take

# events a judge or a merge decided: the model calls logged just before them judged them
JUDGED_EVENTS = ("created", "superseded", "reinforced", "merged", "updated", "compressed")
CALL_WINDOW = dt.timedelta(seconds=60)
RESTORABLE = ("archived", "expired")
# what a pass or an edit records, for the activity chart
ACTIVITY_EVENTS = (
    "created",
    "superseded",
    "reinforced",
    "archived",
    "expired",
    "merged",
    "compressed",
    "forgotten",
    "restored",
    "corrected",
)


def browse(
    ctx: Context, filters: dict, sort: str, descending: bool, after: tuple | None, limit: int
) -> tuple[list[MemoryRecord], tuple | None]:
    """One page of memories and the keyset of the next page (None on the last one)."""
    rows = ctx.store.browse(ctx.namespace, filters, sort, descending, after, limit + 1)
    more = len(rows) > limit
    rows = rows[:limit]
    last = rows[-1] if more else None
    return MemoryRecord.from_rows(rows), (None if last is None else (last[sort], last["id"]))


def detail_of(event: dict) -> dict:
    """An event's detail as a mapping when it is a JSON object, else {}."""
    try:
        value = json.loads(event.get("detail") or "")
    except (TypeError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def neighbours(ctx: Context, memory: MemoryRecord, events: list[dict]) -> dict:
    """What surrounds a memory: the memories it superseded or absorbed (`replaced`), those
    it was merged from (its `merged` event), the turn it came from, and the model calls
    logged in the minute before each event a judge decided (the log names no memory: these
    are the calls of that moment in this namespace)."""
    turn_id = next((detail_of(e).get("turn") for e in events if e["event_type"] == "created"), None)
    turn = ctx.store.inbox_turn(ctx.namespace, turn_id) if isinstance(turn_id, int) else None
    calls, seen = [], set()
    for e in events:
        if e["event_type"] not in JUDGED_EVENTS or not e.get("occurred_at"):
            continue
        try:
            end = parse_time(e["occurred_at"])
        except ValueError:
            continue
        for call in ctx.store.calls_between(ctx.namespace, iso(end - CALL_WINDOW), iso(end)):
            if call["id"] not in seen:
                seen.add(call["id"])
                calls.append({**call, "event": e["event_type"]})
    return {"replaced": ctx.store.replaced(ctx.namespace, memory.id), "turn": turn, "calls": calls}


def activity(ctx: Context) -> dict:
    """Model use (per step and model; per day, step, model and outcome), each pass's last
    run, and the lifecycle events per day."""
    return {
        "costs": ctx.store.costs(ctx.namespace),
        "calls_by_day": ctx.store.calls_by_day(ctx.namespace),
        "pass_runs": ctx.store.pass_runs(ctx.namespace),
        "events_by_day": ctx.store.events_by_day(ctx.namespace, ACTIVITY_EVENTS),
    }


def restore(ctx: Context, memory: MemoryRecord, reason: str) -> bool:
    """An archived (forgotten, decayed) or expired memory becomes active again, fresh
    (decay 1, accessed now; an expired one loses its expiry), with a `restored` event
    that keeps `reason` and what it was. False when it is in neither status."""
    if memory.status not in RESTORABLE:
        return False
    with ctx.store.transaction():
        if not ctx.store.restore_memory(ctx.namespace, memory.id, memory.status):
            return False
        refresh_rank(ctx, [memory.id])
        ctx.store.event(
            memory.id, "restored", {"reason": reason, "was": memory.status, "expires_at": memory.expires_at}
        )
    return True


def correct(ctx: Context, memory: MemoryRecord, content: str, reason: str) -> int:
    """A new memory with `content` (the old one's kind, scene, tags and importance) that
    supersedes `memory`, with `reason` in both events; the new id. The old one must be
    active."""
    if memory.status != "active":
        raise LetheError(
            f"memory #{memory.id} is {memory.status}: only an active memory is corrected (restore it first)"
        )
    with ctx.store.transaction():
        new_id = store_memory(
            ctx,
            content,
            tags=memory.tags,
            importance=memory.importance,
            kind=memory.kind,
            scene=memory.scene,
            detail={"corrects": memory.id, "reason": reason},
        )
        if not ctx.store.run(ctx.plan.supersede, ctx.namespace, ids=[memory.id], new_id=new_id):
            raise LetheError(f"memory #{memory.id} changed meanwhile: nothing corrected")
        ctx.store.event(
            memory.id, "superseded", f"superseded by #{new_id}: {content[:100]} (why: corrected: {reason})"
        )
    return new_id


DECAY_POINTS = 40


def decay_curve(ctx: Context, memory: MemoryRecord, days_ahead: int) -> dict | None:
    """The decay_score the policy's decay rule would give `memory` (with its values as they
    are now) at DECAY_POINTS times from its creation to `ahead` past now: the formula
    evaluated, not a history (a pass records no event per score). None without a decay
    rule or a creation time."""
    st = decay_statement(ctx.policy, ctx.plan.dialect)
    if st is None or not memory.created_at:
        return None
    try:
        start = parse_time(memory.created_at)
        end = ctx.clock() + dt.timedelta(days=min(days_ahead, 3650))
    except (ValueError, OverflowError):
        return None
    if end <= start:
        return None
    points = []
    for i in range(DECAY_POINTS + 1):
        when = start + (end - start) * i / DECAY_POINTS
        row = ctx.store.fetch_one(st, ctx.namespace, iso(when), ids=[memory.id])
        if row is not None and isinstance(row[0], (int, float)):
            points.append((iso(when), float(row[0])))
    return {
        "pass": decay_rule(ctx.policy)[0],
        "points": points,
        "now": iso(ctx.clock()),
        "threshold": ctx.policy.params.get("archive_below"),
    }


def similar(ctx: Context, text: str, limit: int) -> list[tuple[MemoryRecord, float]]:
    """The memories of any status whose stored vector is nearest `text`'s, most similar
    first, with the cosine: the vector index's shortlist, rescored exactly. [] when the
    embedding model gives no usable vector (unreachable, offline)."""
    if ctx.policy.embed is None:
        raise LetheError(
            f"policy {ctx.policy.name} has no embedding model (`embed:`): "
            "similarity needs one; the text filter searches full text"
        )
    vector = vectors.fits(ctx, vectors.vector_of(ctx, text))
    if vector is None:
        return []
    model = ctx.policy.embed.name
    store = vector_store(ctx)
    shortlist = store.nearest(ctx.namespace, model, vector, limit)
    found = store.vectors_of(ctx.namespace, model, shortlist)
    best = sorted(((cosine(vector, v), i) for i, v in found.items()), reverse=True)[:limit]
    out = []
    for score, memory_id in best:
        record = get_record(ctx, memory_id)
        if record is not None:
            out.append((record, round(score, 4)))
    return out
