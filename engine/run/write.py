"""The remember pipeline: gate, confidence, contradiction, expiry (or one fused call).

A turn is written to the inbox before any model is called. All judging happens outside
a write transaction; the result (the new memory, what it supersedes or reinforces, and
every event) is applied in one transaction. A model that cannot be reached leaves the
turn pending for `run_due()` to retry; nothing is lost.
"""

from __future__ import annotations

import contextvars
import datetime as dt
import json
import math
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from engine.base.clock import iso, parse_time
from engine.base.errors import LeaseLost, LetheError
from engine.base.records import parse_tags, pending_reasons  # noqa: F401 - where callers look
from engine.judges import JudgeUnavailable
from engine.judges import invariants as guards
from engine.policy import WriteStep
from engine.run import neighbours as vectors
from engine.run import timeline
from engine.run.context import Context
from engine.run.matching import distinctive_query
from engine.steps import kinds as steps
from engine.steps.answers import today


@dataclass
class Judged:
    """What the judges decided about one new memory."""

    save: bool = True
    content: str = ""
    summary: str | None = None
    tags: list = field(default_factory=list)
    importance: float = 5.0
    confidence: float = 1.0
    expires_at: str | None = None
    supersedes: list[int] = field(default_factory=list)
    confirms: list[int] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    reasons: dict[int, str] = field(default_factory=dict)  # superseded id -> the model's reason
    kind: str | None = None
    scene: str | None = None
    vector: bytes | None = None  # the content's embedding, when the policy has a model
    shown: list[int] = field(default_factory=list)  # candidates the supersede steps were shown
    superseded_by: list = field(default_factory=list)  # [id, content, said, reason]: timeline


class Written(list):
    """What one write did. It is the list of ids stored or reinforced (what `remember()`
    has always returned), and says which were new (`stored`), which were confirmed
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
    def __init__(self, ctx: Context):
        self.ctx = ctx

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
        paid = json.loads(row["judged"] or "{}")  # what an earlier attempt was told
        try:
            with self.ctx.store.saying(row["created_at"]):  # when it was said: docs/time.md
                items = self.judge_turn(row["user_text"], row["assistant_text"], paid)
                out = self.finish(turn_id, timeline.in_said_order(self, row["created_at"], items))
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
        self.summarise_scenes({j.scene for j in items if j.scene})
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
        """Judge the pending turns whose time has come, oldest first; return how many this
        round judged (not turns that stay pending or were queued meanwhile). A turn that
        fails is recorded and the next tried; an outage stops the round, the rest given back."""
        judged = 0
        with self.ctx.store.claimed_turns(self.ctx.namespace, limit) as claimed:
            for turn_id in claimed:
                written = self.process(turn_id)
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
            confidence=fields.get("confidence"),
            expires_at=fields.get("expires_at"),
        )
        given |= {"content", "summary"}
        for step in self.ctx.policy.write:
            if step.step == "gate" or step.step in given or steps.kind(step.step).after_store:
                continue  # an after-store step (summarise) runs once the memory is stored
            if step.step == "expiry" and "expires_at" in given:
                continue
            self.run_step(step, judged, {"user": content, "assistant": ""}, outage_fallback=True, given=given)
        if judged.confidence is None:
            judged.confidence = 1.0
        judged.vector = judged.vector or vectors.vector_of(self.ctx, judged.content)
        with self.ctx.store.transaction():
            ids = self.apply(judged, source={"add": True}, extra=fields)
        self.summarise_scenes({s for s in (fields.get("scene"), judged.scene) if s})
        return ids[0]

    # -- judging
    def judge_turn(self, user: str, assistant: str, paid: dict | None = None) -> list[Judged]:
        """The memories a turn yields: one, none (the gate said no), or several cells
        (an extract step); steps after `extract` judge each cell. A run of steps that read
        only the gate's answer (confidence, contradiction, expiry) is asked at once.
        `paid` holds answers already received, by step and item; new ones are added."""
        paid = {} if paid is None else paid
        items = [Judged(content=user.strip())]
        vectors.prefetch(self.ctx, user, self.ctx.policy.write)  # beside the gate's call
        turn = {"user": user, "assistant": assistant}
        for group in _groups(self.ctx.policy.write):
            first = group[0]
            if first[1].step == "extract":
                items = self.extract(first[1], turn, paid, f"{first[0]}")
                continue
            for i, judged in enumerate(items):
                if judged.save:
                    self.run_steps(group, judged, turn, paid, i)
        return [j for j in items if j.save and j.content.strip()]

    def run_steps(self, group: list, judged: Judged, turn: dict, paid: dict, item: int) -> None:
        """Ask a group of steps about one memory, at once when they can be; fold the answers
        in in the policy's order. Every answer received is kept in `paid`, even when another
        step of the group found its model unreachable (that error is raised after)."""
        keyed = [(f"{n}:{item}", step) for n, step in group]
        if len(keyed) == 1 or not self.ctx.judges.remote(*(s.judgment.model for _, s in keyed)):
            for key, step in keyed:
                self.run_step(step, judged, turn, paid=paid, key=key)
            return
        asked = [(key, step, self.prepare(step, judged, turn)) for key, step in keyed]
        with ThreadPoolExecutor(max_workers=len(asked)) as pool:
            answers = [
                pool.submit(contextvars.copy_context().run, self.answer, step, prepared, paid, key)
                for key, step, prepared in asked
            ]  # its spans' parent
            errors = [f.exception() for f in answers]
        for (_, step, prepared), f, error in zip(asked, answers, errors):
            if error is None:
                self.fold(step, judged, f.result(), prepared[1])
        unreachable = next((e for e in errors if e is not None), None)
        if unreachable is not None:
            raise unreachable

    def extract(
        self, step: WriteStep, turn: dict, paid: dict | None = None, key: str = "extract"
    ) -> list[Judged]:
        """Seed C: the exchange as cells {scene, kind, salience, content}; salience 0-1 is
        stored as importance 0-10 (times the policy's `salience_scale`, default 10)."""
        paid = {} if paid is None else paid
        variables = {**self.variables(Judged(), turn), "cells": []}
        if key not in paid:
            paid[key] = list(self.ctx.judges.ask("extract", step.judgment, variables)) + [{}]
        cells, note, _ = paid[key]
        if cells is None:
            self.log_event(None, "extract_failed", note or "no usable cells")
            return []
        scale = float(self.ctx.policy.params.get("salience_scale", 10))
        return [
            Judged(
                content=c["content"],
                importance=round(c["salience"] * scale, 3),
                kind=c["kind"],
                scene=c["scene"],
                notes=[note] if note else [],
            )
            for c in cells
        ]

    def log_event(self, memory_id, event_type: str, detail) -> None:
        with self.ctx.transaction():
            self.ctx.store.event(memory_id, event_type, detail)

    def summarise_scenes(self, scenes: set[str]) -> None:
        """Re-summarise every scene a turn touched from its cells by salience, and upsert."""
        step = next((s for s in self.ctx.policy.write if s.step == "summarise"), None)
        if step is None or not scenes:
            return
        for scene in sorted(scenes):
            rows = self.ctx.store.scene_cells(self.ctx.namespace, scene)
            cells = [
                {"content": r["content"], "kind": r["kind"], "salience": r["importance"] / 10} for r in rows
            ]
            variables = {**self.variables(Judged(), {}), "scene": scene, "cells": cells}
            try:
                summary, _ = self.ctx.judges.ask("summarise", step.judgment, variables)
            except (LeaseLost, *self.ctx.store.busy_errors):
                raise
            except Exception as exc:  # the turn is stored: a summary can wait for the next one
                self.log_event(None, "summarise_failed", f"scene {scene}: {exc}")
                continue
            if summary:
                self.ctx.store.save_scene(self.ctx.namespace, scene, summary)

    def variables(self, judged: Judged, turn: dict, candidates=None) -> dict:
        # a turn is judged on the day it was said, however late (docs/time.md)
        now = parse_time(self.ctx.store.said_at) if self.ctx.store.said_at else self.ctx.clock()
        return {
            **turn,
            "now": now,
            "today": today(now),
            "memory": {
                "content": judged.content,
                "summary": judged.summary or judged.content[:120],
                "tags": judged.tags,
            },
            "candidates": candidates or [],
        }

    def run_step(
        self,
        step: WriteStep,
        judged: Judged,
        turn: dict,
        outage_fallback=False,
        given=frozenset(),
        paid: dict | None = None,
        key: str | None = None,
    ) -> None:
        prepared = self.prepare(step, judged, turn)
        if paid is None or key is None:
            paid, key = {}, step.step
        self.fold(step, judged, self.answer(step, prepared, paid, key, outage_fallback), prepared[1], given)

    def prepare(self, step: WriteStep, judged: Judged, turn: dict) -> tuple[dict, dict]:
        """A step's template variables, and its local candidate numbers -> memory ids."""
        shown = self.candidates(step, judged, turn) if steps.kind(step.step).shows_candidates else []
        variables = self.variables(judged, turn, shown)
        if step.step in ("contradiction", "fused"):  # the steps that may supersede
            variables["max_supersedes"] = int(self.ctx.policy.params.get("max_supersedes", 3))
        return variables, {c["n"]: c["id"] for c in shown}

    def answer(
        self,
        step: WriteStep,
        prepared: tuple[dict, dict],
        paid: dict,
        key: str,
        outage_fallback: bool = False,
    ) -> list:
        """[value, note, local numbers] for a step, from `paid` or asked now (and kept)."""
        if key in paid:
            return paid[key]
        kind, variables, local = step.step, prepared[0], prepared[1]
        if kind == "contradiction" and not local:
            value, note = {"supersedes": [], "confirms": [], "reasons": {}}, None  # nothing to compare
        else:
            try:
                value, note = self.ctx.judges.ask(kind, step.judgment, variables)
            except JudgeUnavailable as exc:
                if not outage_fallback:
                    raise
                value, note = (
                    self.ctx.judges.fallback(kind, step.judgment, variables, f"model unreachable: {exc}"),
                    f"{kind}: model unreachable, rules answered",
                )
        paid[key] = [value, note, {str(n): mid for n, mid in local.items()}]
        return paid[key]

    def fold(self, step: WriteStep, judged: Judged, answered: list, local: dict, given=frozenset()) -> None:
        value, note, kept = answered
        if note:
            judged.notes.append(note)
        if value is not None:
            # the numbers the model was shown when it answered (kept with a paid answer)
            take(step.step, value, judged, {int(n): mid for n, mid in kept.items()} or local, given)

    def candidates(self, step: WriteStep, judged: Judged, turn: dict) -> list[dict]:
        """The policy's candidate query narrowed to the K most relevant to the new memory,
        shown to the model under local numbers 1..K, never database ids."""
        text = judged.content if step.step == "contradiction" else f"{turn.get('user', '')} {judged.content}"
        query = distinctive_query(self.ctx, text)
        k = step.judgment.candidates.k if step.judgment.candidates else 20
        vector = vectors.vector_of(self.ctx, text)
        if step.step == "contradiction":
            judged.vector = vector  # the new memory's own vector: stored with it
        started = vectors.search(self.ctx, step.step, vector, k)  # beside the full-text query
        rows = (
            self.ctx.store.fetch(
                self.ctx.plan.write_candidates[step.step], self.ctx.namespace, query=query, limit=k
            )
            if query
            else []
        )
        # hybrid: the full-text ones, then up to k nearest neighbours not among them
        near = vectors.neighbours(self.ctx, step.step, vector, k, [r["id"] for r in rows], started)
        similar = {r["id"]: round(r["similarity"], 4) for r in near}
        shown = {r["id"] for r in rows}
        rows = list(rows) + [r for r in near if r["id"] not in shown][:k]
        return [
            {
                "n": i,
                "id": r["id"],
                "content": r["content"],
                "summary": r["summary"],
                "created_at": r["created_at"],
                "importance": r["importance"],
                "similarity": similar.get(r["id"]),
            }
            for i, r in enumerate(rows, 1)
        ]

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
        refused ones, as (what, id, why). A refused confirm stores the new memory."""
        judged.confirms, judged.supersedes, refused = guards.screen(
            judged.content, judged.confirms, judged.supersedes, self.text_of
        )
        return refused

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
        bump = float(self.ctx.policy.params.get("reinforce_bump", 0.1))
        self.ctx.store.event(mid, "reinforced", {"bump": bump, **source})
        return True


def _groups(write: list[WriteStep]) -> list[list[tuple[int, WriteStep]]]:
    """The write steps judged before storing, in order, with each run of steps that read
    only the gate's answer (`alongside` in engine/steps/kinds.py) as one group."""
    groups: list[list[tuple[int, WriteStep]]] = []
    for n, step in enumerate(write):
        kind = steps.kind(step.step)
        if kind.after_store:
            continue  # runs after the cells are stored
        if kind.alongside and groups and steps.kind(groups[-1][-1][1].step).alongside:
            groups[-1].append((n, step))
        else:
            groups.append([(n, step)])
    return groups


def take(kind: str, value, judged: Judged, local: dict[int, int], given=frozenset()) -> None:
    """Fold a checked answer into the judgment; candidate numbers not shown are dropped,
    and fields the caller gave explicitly are kept."""
    found = dict(value) if isinstance(value, dict) else {}
    if kind in ("gate", "fused"):
        if not found["save"]:
            judged.save = "content" in given  # add() always stores what it was given
            return
    if kind == "confidence":
        found = {"confidence": value}
    if kind == "expiry":
        found = {"expires_at": value}
    if kind in ("contradiction", "fused"):
        judged.shown += local.values()
        found["supersedes"] = [local[n] for n in dict.fromkeys(found["supersedes"]) if n in local]
        found["confirms"] = [
            local[n]
            for n in dict.fromkeys(found["confirms"])
            if n in local and local[n] not in found["supersedes"]
        ]
        judged.reasons.update(
            {local[int(n)]: r for n, r in (found.get("reasons") or {}).items() if int(n) in local}
        )
    for name in (
        "content",
        "summary",
        "tags",
        "importance",
        "confidence",
        "expires_at",
        "supersedes",
        "confirms",
    ):
        if name in found and name not in given:
            setattr(judged, name, found[name])
