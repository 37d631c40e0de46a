"""The remember pipeline: gate, confidence, contradiction, expiry (or one fused call).

A turn is written to the inbox before any model is called. All judging happens outside
a write transaction; the result (the new memory, what it supersedes or reinforces, and
every event) is applied in one transaction. A model that cannot be reached leaves the
turn pending for `run_due()` to retry; nothing is lost.
"""

from __future__ import annotations

import datetime as dt
import json
import math

from engine.base.clock import iso
from engine.base.errors import LeaseLost, LetheError
from engine.base.records import parse_tags, pending_reasons  # noqa: F401 - where callers look
from engine.judges import JudgeUnavailable
from engine.judges import invariants as guards
from engine.run import neighbours as vectors
from engine.run import timeline
from engine.run.context import Context, number
from engine.run.judging import Judged, Judging
from engine.steps import kinds as steps


class Written(list):
    """What one write did. It is the list of ids stored or reinforced (what `remember()`
    returns), and says which were new (`stored`), which were confirmed
    (`reinforced`), which older memories each new one superseded (`superseded`, pairs of
    (old, new)), and, when a model was unreachable, why the turn is still `pending`."""

    def __init__(self, ids=(), *, pending: str | None = None, outage: bool = False):
        super().__init__(ids)
        self.stored: list[int] = []
        self.reinforced: list[int] = []
        self.superseded: list[tuple[int, int]] = []
        self.expiring: list[tuple[int, str]] = []
        self.refused: list[dict] = []  # a judge's confirms or supersedes the guards refused
        self.pending = pending
        self.outage = outage  # pending because a model was unreachable

    def as_dict(self) -> dict:
        return {
            "ids": list(self),
            "stored": self.stored,
            "reinforced": self.reinforced,
            "superseded": [{"id": old, "by": new} for old, new in self.superseded],
            "expiring": [{"id": i, "expires_at": at} for i, at in self.expiring],
            "pending": self.pending,
        }


MAX_FAILURES = 3  # failures (not outages) before a turn is parked as failed
BACKOFF = dt.timedelta(minutes=1)  # before the second try; four times that before the third


# ---- storing one memory -----------------------------------------------------------------
def store_memory(
    ctx: Context,
    content: str,
    *,
    summary=None,
    tags=None,
    importance=None,
    confidence=None,
    expires_at=None,
    kind=None,
    scene=None,
    access_count=0,
    decay_score=1.0,
    event: str = "created",
    detail=None,
) -> int:
    """Insert one memory with its rank and its creation event, in the caller's transaction.
    A number that is not finite (from any source) is refused before anything is written."""
    row = {
        "content": content,
        "summary": summary if summary else content[:120],
        "tags": json.dumps(list(tags or []), ensure_ascii=False),
        "importance": float(5.0 if importance is None else importance),
        "confidence": float(1.0 if confidence is None else confidence),
        "access_count": int(access_count),
        "decay_score": float(decay_score),
        "status": "active",
        "created_at": ctx.store.said_at or ctx.now(),
        "last_accessed": None,
        "expires_at": expires_at,
        "namespace": ctx.namespace,
        "kind": kind,
        "scene": scene,
    }
    for name in ("importance", "confidence", "decay_score"):
        if not math.isfinite(row[name]):
            raise LetheError(f"{name} must be a finite number, got {row[name]!r}")
    new_id = ctx.store.insert_memory(row)
    refresh_rank(ctx, [new_id])
    ctx.store.event(
        new_id,
        event,
        {
            "importance": row["importance"],
            "confidence": row["confidence"],
            "expires_at": expires_at,
            **(detail or {}),
        },
    )
    return new_id


def forget(ctx: Context, memory_id: int, reason: str) -> bool:
    """Archive an active memory with a `forgotten` event giving the reason; False when it
    is not active (it keeps its status). Nothing is ever deleted."""
    with ctx.store.transaction():
        if not ctx.store.run(ctx.plan.forget, ctx.namespace, ids=[memory_id]):
            return False
        ctx.store.event(memory_id, "forgotten", {"reason": reason})
    return True


def refresh_rank(ctx: Context, ids: list[int]) -> None:
    ctx.store.run(ctx.plan.rank_refresh_ids, ctx.namespace, ids=ids)


# ---- the pipeline ---------------------------------------------------------------------
class Writer:
    """Remembers turns: each one kept in the inbox, judged (engine/run/judging.py), and
    what the judges decided applied in one transaction."""

    def __init__(self, ctx: Context):
        self.ctx = ctx
        self.judging = Judging(ctx)

    # -- entry points
    def remember(self, user: str, assistant: str, said_at: str | None = None) -> Written:
        turn = self.ctx.store.add_turn(self.ctx.namespace, user, assistant, said_at)
        return self.process(turn, raise_errors=True)

    def process(self, turn_id: int, raise_errors: bool = False) -> Written:
        """Judge one inbox turn and apply it. A model outage leaves it pending for the next
        run. Anything else that goes wrong judging or applying it (a hostile answer, a
        template that fails on its text) is recorded on the turn and delays its next try;
        after MAX_FAILURES such failures it is parked as `failed` (see `lethe pending`).
        With `raise_errors` an engine error (a broken policy) is raised after recording."""
        row = self.ctx.store.turn(turn_id)
        if row is None:
            raise LetheError(f"no inbox turn #{turn_id} in namespace '{self.ctx.namespace}'")
        try:
            return self._judge(row, raise_errors)
        except BaseException:
            # whatever stopped it (the server gone, a lost lease, an interrupt): the turn
            # stays pending and its claim is given back, so any worker may take it at once
            # (when the server cannot be told, the claim runs out: CLAIM in the store)
            self.ctx.store.release_turns([turn_id])
            raise

    def _judge(self, row, raise_errors: bool) -> Written:
        paid = json.loads(row["judged"] or "{}")  # what an earlier attempt was told
        try:
            with self.ctx.store.saying(row["created_at"]):  # when it was said: docs/time.md
                items = self.judging.judge_turn(row["user_text"], row["assistant_text"], paid)
                out = self.finish(row["id"], timeline.in_said_order(self, row["created_at"], items))
        except JudgeUnavailable as exc:
            self.turn_failed(row, str(exc), outage=True, paid=paid)
            return Written(pending=str(exc), outage=True)
        except (LeaseLost, *self.ctx.store.busy_errors):
            raise  # the store's or the runner's trouble, not the turn's
        except Exception as exc:
            why = self.turn_failed(row, f"{type(exc).__name__}: {exc}", outage=False, paid=paid)
            if raise_errors and isinstance(exc, LetheError):
                raise
            return Written(pending=why)
        self.judging.summarise_scenes({j.scene for j in items if j.scene})
        return out

    def turn_failed(self, row, error: str, outage: bool, paid: dict | None = None) -> str:
        """Record a failed attempt: an outage is tried again at the next run, any other
        failure after a backoff (1 min, then 4 min), and is parked at the third."""
        failures = row["failures"] + (0 if outage else 1)
        status, retry_at = "pending", None
        if failures >= MAX_FAILURES:
            status = "failed"
        elif not outage:
            retry_at = iso(self.ctx.clock() + BACKOFF * 4 ** (failures - 1))
        judged = json.dumps(paid, ensure_ascii=False) if paid else None
        self.ctx.store.turn_failed(row["id"], error, failures, retry_at, status, judged)
        if status == "failed":
            return f"parked as failed after {failures} failures: {error}"
        return error + (f" (next try after {retry_at})" if retry_at else "")

    def finish(self, turn_id: int, items: list[Judged]) -> Written:
        """Apply a judged turn and close its inbox row, in one transaction (which first
        checks the turn is still pending)."""
        store = self.ctx.store
        for judged in items:  # outside the transaction; an outage leaves it to backfill
            judged.vector = judged.vector or vectors.vector_of(self.ctx, judged.content)
        with self.ctx.transaction():  # fenced when a runner retries the turn under its lease
            again = store.turn(turn_id)
            if again is None:  # gone meanwhile (its namespace forgotten): nothing to apply
                return Written()
            if again["status"] != "pending":  # another process judged it meanwhile
                return Written(json.loads(again["memory_ids"] or "[]"))
            store.lock_memories([i for j in items for i in j.supersedes + j.confirms + j.superseded_by[:1]])
            out = Written()
            for judged in items:
                out += self.apply(judged, source={"turn": turn_id}, out=out)
            store.close_turn(turn_id, "done" if items else "dropped", list(out))
        return out

    def retry_pending(self, limit: int = 100) -> int:
        """Judge up to `limit` pending turns whose time has come, oldest first; return how
        many this round judged (not turns that stay pending or were queued meanwhile). A
        turn that fails is recorded and the next tried; an outage stops the round.

        The round judges the turns pending as it starts (those queued meanwhile are the next
        round's), each claimed as its judging starts, one at a time: a round claims only the
        turn it is judging, so however it stops (an outage, the server gone, a lost lease,
        a kill) it leaves at most that one claimed, never a backlog waiting out its claims."""
        judged, tried = 0, set[int]()
        this_round = set(self.ctx.store.pending_ids(self.ctx.namespace, limit))
        while this_round - tried:
            with self.ctx.store.claimed_turns(self.ctx.namespace, 1) as claimed:
                if not claimed or claimed[0] in tried or claimed[0] not in this_round:
                    break  # none left, one this round left pending, or the next round's
                tried.add(claimed[0])
                written = self.process(claimed[0])
            if written.outage:
                break
            judged += written.pending is None
        return judged

    def add(self, content: str, fields: dict) -> int:
        """Store given content: every write step but the gate (a fused step keeps the given
        content); fields given by the caller win over judgments; an outage falls back to rules."""
        given = {k for k, v in fields.items() if v is not None}
        judged = Judged(
            content=content,
            summary=fields.get("summary"),
            tags=list(fields.get("tags") or []),
            importance=5.0 if fields.get("importance") is None else fields["importance"],
            confidence=1.0 if fields.get("confidence") is None else fields["confidence"],
            expires_at=fields.get("expires_at"),
        )
        given |= {"content", "summary"}
        for step in self.ctx.policy.write:
            if step.step == "gate" or step.step in given or steps.kind(step.step).after_store:
                continue  # an after-store step (summarise) runs once the memory is stored
            if step.step == "expiry" and "expires_at" in given:
                continue
            self.judging.run_step(
                step, judged, {"user": content, "assistant": ""}, outage_fallback=True, given=given
            )
        judged.vector = judged.vector or vectors.vector_of(self.ctx, judged.content)
        with self.ctx.store.transaction():
            ids = self.apply(judged, source={"add": True}, extra=fields)
        self.judging.summarise_scenes({s for s in (fields.get("scene"), judged.scene) if s})
        return ids[0]

    # -- applying
    def apply(
        self, judged: Judged, source: dict, extra: dict | None = None, out: Written | None = None
    ) -> list[int]:
        """Store, supersede and reinforce, with their events, in the caller's transaction;
        what was done is noted in `out`."""
        store, out = self.ctx.store, Written() if out is None else out
        extra = extra or {}
        refused = self.screen(judged)
        if judged.confirms and not judged.supersedes:
            kept = [mid for mid in judged.confirms if self.reinforce(mid, source)]
            for mid in kept:
                for note in judged.notes:
                    store.event(mid, "judge_fallback", note)
                self.take_given(mid, extra)
            if kept:
                out.reinforced += kept
                return kept
            # every confirmed memory changed meanwhile: the turn is a memory of its own
        new_id = store_memory(
            self.ctx,
            judged.content,
            summary=judged.summary,
            tags=judged.tags,
            importance=judged.importance,
            confidence=judged.confidence,
            expires_at=judged.expires_at,
            kind=extra.get("kind") or judged.kind,
            scene=extra.get("scene") or judged.scene,
            detail=source,
        )
        for note in judged.notes:
            store.event(new_id, "judge_fallback", note)
        for what, old, why in refused:  # said on the new memory: what was refused and why
            store.event(new_id, "refused", f"{what} #{old} refused: {why}")
            out.refused.append({"id": new_id, what: old, "why": why})
        vectors.save(self.ctx, new_id, judged.vector)
        out.stored.append(new_id)
        if judged.expires_at:
            out.expiring.append((new_id, judged.expires_at))
        for old in judged.supersedes:
            if self.supersede(old, new_id, judged.content, judged.reasons.get(old)):
                out.superseded.append((old, new_id))
        timeline.apply_later(self, judged, new_id, out)
        return [new_id]

    def screen(self, judged: Judged) -> list[tuple[str, int, str]]:
        """Keep the confirms and supersedes the guards let through (engine/judges/invariants.py); the
        refused ones, as (what, id, why), with those refused before (a later memory's
        supersession of a late one, engine/run/timeline.py). A refused confirm stores the new
        memory."""
        judged.confirms, judged.supersedes, refused = guards.screen(
            judged.content, judged.confirms, judged.supersedes, self.text_of
        )
        return judged.refused + refused

    def text_of(self, mid: int) -> str:
        row = self.ctx.store.get(mid, self.ctx.namespace)
        return row["content"] if row is not None else ""

    def take_given(self, mid: int, given: dict) -> None:
        """add() of content a memory already holds: that memory takes the values the caller
        gave (tags join its own), with an `updated` event saying what changed, so nothing
        given is dropped."""
        row = self.ctx.store.get(mid, self.ctx.namespace)
        if row is None:  # not in this namespace: nothing of it to update
            return
        changes = {}
        for col in self.ctx.store.UPDATABLE:
            value = given.get(col)
            if value is None:
                continue
            if col == "tags":
                value = json.dumps(
                    list(dict.fromkeys(parse_tags(row["tags"]) + list(value))), ensure_ascii=False
                )
            if value != row[col]:
                changes[col] = value
        if not changes:
            return
        self.ctx.store.update_memory(self.ctx.namespace, mid, changes)
        refresh_rank(self.ctx, [mid])
        self.ctx.store.event(
            mid,
            "updated",
            {"by": "add", "fields": {c: {"from": row[c], "to": v} for c, v in changes.items()}},
        )

    def supersede(self, old: int, new_id: int, content: str, reason: str | None = None) -> bool:
        if not self.ctx.store.run(self.ctx.plan.supersede, self.ctx.namespace, ids=[old], new_id=new_id):
            return False  # no longer active: nothing to supersede
        why = f" (why: {reason})" if reason else ""
        self.ctx.store.event(old, "superseded", f"superseded by #{new_id}: {content[:100]}{why}")
        return True

    def reinforce(self, mid: int, source: dict) -> bool:
        """Confidence + bump, one more access, now; False if the memory is no longer active."""
        if not self.ctx.store.run(self.ctx.plan.reinforce, self.ctx.namespace, ids=[mid]):
            return False
        bump = number(self.ctx, "reinforce_bump", 0.1)
        self.ctx.store.event(mid, "reinforced", {"bump": bump, **source})
        return True
