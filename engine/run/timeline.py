"""A turn judged late: judged against what was said before it, never over what came after.

A memory's `created_at` is when it was said (the turn's time in the inbox), and the clock
at judging is the time its events were recorded (docs/time.md). A turn is usually judged
the moment it arrives; one left pending (no key, a model outage) may be judged after
memories said later. Judged in said order it could never supersede those, so here it does
not either: when the judges say it replaces a memory said after it, or (asked the other
way round) that such a memory replaces it, it is stored already superseded by the earliest
of them, with the link and the event, as if the turns had been judged in the order said.
A later memory about another identified thing (engine/judges/invariants.py
`supersede_refusal`) never retires it, whatever the judges say; the refusal is an event on
the late memory.
"""

from __future__ import annotations

from engine.base.errors import LetheError
from engine.base.inputs import INT64
from engine.judges import JudgeUnavailable
from engine.judges import invariants as guards
from engine.run.context import number

AFTER = 20  # memories said after a late turn looked at besides those its search found
ASKED = 5  # of those, the earliest asked whether they replace it (a model call each)


def in_said_order(writer, said: str | None, items: list) -> list:
    """Fold what came after `said` into each judgment of a turn said then: `supersedes`
    keeps only memories said before it, and `superseded_by` names the memory said after
    it that replaces it (id, content, said time, reason), if any."""
    ctx = writer.ctx
    if not said or said >= ctx.now():
        return items  # judged as it arrives: nothing can have been said after it
    for judged in items:
        rows = [ctx.store.get(i, ctx.namespace) for i in dict.fromkeys(judged.shown)]
        # and the first memories said after it, whether or not its own search found them
        # (what a later memory's search finds is not what an earlier one's finds)
        rows += ctx.store.browse(
            ctx.namespace,
            {"status": "active"},
            sort="created_at",
            descending=False,
            after=(said, INT64),
            limit=AFTER,
        )
        later = sorted(
            {
                r["id"]: r
                for r in rows
                if r is not None and r["status"] == "active" and (r["created_at"] or "") > said
            }.values(),
            key=lambda r: (r["created_at"], r["id"]),
        )
        if not later:
            continue
        after = {r["id"] for r in later}
        named = [r for r in later if r["id"] in judged.supersedes and _allowed(r, judged)]
        judged.supersedes = [i for i in judged.supersedes if i not in after]
        if not named:  # the judges read it as the newer: ask whether a later one replaces it,
            # in said order, up to the first that does (the earliest is the one that counts);
            # only the first ASKED: a backlog of late turns after an outage costs a few
            # calls a turn, not twenty (an old fact left active beside its successor is
            # found again by recall's judges; nothing is lost)
            asked = [r for r in later if r["id"] not in judged.confirms][:ASKED]
            first = next(
                (r for r in asked if _replaces(writer, r, judged, said) and _allowed(r, judged)),
                None,
            )
            named = [first] if first is not None else []
        if named:
            first = named[0]
            judged.superseded_by = [
                first["id"],
                first["content"],
                first["created_at"],
                judged.reasons.pop(first["id"], None),
            ]
    return items


def _allowed(later, judged) -> bool:
    """Whether the guard (engine/judges/invariants.py `supersede_refusal`) lets the memory
    said `later` retire the late one; a refusal is kept on the judgment, for its event."""
    why = guards.supersede_refusal(later["content"], judged.content)
    if why:
        judged.refused.append(("superseded_by", later["id"], why))
    return why is None


def _replaces(writer, later, judged, said: str) -> bool:
    """Whether the policy's contradiction judge, shown `later` as the new memory and the
    late one as its only candidate, says `later` supersedes it (what judging the two in
    the order said would have asked). A policy without a contradiction step says no."""
    step = next((s for s in writer.ctx.policy.write if s.step == "contradiction"), None)
    if step is None:
        return False
    probe = type(judged)(content=later["content"], summary=later["summary"])
    shown = [
        {
            "n": 1,
            "id": None,
            "content": judged.content,
            "summary": judged.summary or judged.content[:120],
            "created_at": said,
            "importance": judged.importance,
            "similarity": None,
        }
    ]
    with writer.ctx.store.saying(later["created_at"]):  # asked on the day the later one was said
        variables = writer.judging.variables(probe, {"user": later["content"], "assistant": ""}, shown)
    variables["max_supersedes"] = int(number(writer.ctx, "max_supersedes", 3))
    try:
        value, _ = writer.ctx.judges.ask("contradiction", step.judgment, variables)
    except JudgeUnavailable:
        raise
    except LetheError:
        return False  # no usable answer: nothing is superseded (the turn's own judgment stands)
    return bool(value) and 1 in (value.get("supersedes") or [])


def apply_later(writer, judged, new_id: int, out) -> None:
    """Store the late memory as superseded by the one said after it (in the caller's
    transaction), the event carrying when that one was said."""
    if not judged.superseded_by:
        return
    later, content, said, reason = judged.superseded_by
    with writer.ctx.store.saying(said):
        if writer.supersede(new_id, later, content, reason):
            out.superseded.append((new_id, later))
