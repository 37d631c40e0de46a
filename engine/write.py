"""The remember pipeline: gate, confidence, contradiction, expiry (or one fused call).

A turn is written to the inbox before any model is called. All judging happens outside
a write transaction; the result (the new memory, what it supersedes or reinforces, and
every event) is applied in one transaction. A model that cannot be reached leaves the
turn pending for `run_due()` to retry; nothing is lost.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field

from . import steps
from . import vectors
from .answers import today
from .context import Context
from .judges import JudgeUnavailable
from .lexicon.slots import related_words
from .policy import WriteStep
from .text import words


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
    kind: str | None = None
    scene: str | None = None
    vector: bytes | None = None  # the content's embedding, when the policy has a model


class Written(list):
    """What one write did. It is the list of ids stored or reinforced (what `remember()`
    has always returned), and says which were new (`stored`), which were confirmed
    (`reinforced`), which older memories each new one superseded (`superseded`, pairs of
    (old, new)), and, when a model was unreachable, why the turn is still `pending`."""

    def __init__(self, ids=(), *, pending: str | None = None):
        super().__init__(ids)
        self.stored: list[int] = []
        self.reinforced: list[int] = []
        self.superseded: list[tuple[int, int]] = []
        self.pending = pending

    def as_dict(self) -> dict:
        return {"ids": list(self), "stored": self.stored, "reinforced": self.reinforced,
                "superseded": [{"id": old, "by": new} for old, new in self.superseded],
                "pending": self.pending}


# ---- storing one memory -----------------------------------------------------------------
def store_memory(ctx: Context, content: str, *, summary=None, tags=None, importance=None,
                 confidence=None, expires_at=None, kind=None, scene=None, access_count=0,
                 decay_score=1.0, event: str = "created", detail=None) -> int:
    """Insert one memory with its rank and its creation event, in the caller's transaction."""
    row = {"content": content, "summary": summary if summary else content[:120],
           "tags": json.dumps(list(tags or []), ensure_ascii=False),
           "importance": float(5.0 if importance is None else importance),
           "confidence": float(1.0 if confidence is None else confidence),
           "access_count": int(access_count), "decay_score": float(decay_score),
           "status": "active", "created_at": ctx.now(), "last_accessed": None,
           "expires_at": expires_at, "namespace": ctx.namespace, "kind": kind, "scene": scene}
    new_id = ctx.store.insert_memory(row)
    refresh_rank(ctx, [new_id])
    ctx.store.event(new_id, event, {"importance": row["importance"], "confidence": row["confidence"],
                                    "expires_at": expires_at, **(detail or {})})
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


RARE = 2000  # a word in more memories than this does not pick contradiction candidates


def distinctive_query(ctx: Context, text: str) -> str | None:
    """An FTS5 query for the memories most like `text`, whose cost does not grow with the
    store: words found in more than RARE memories are left out (their counts stop at
    RARE + 1, so counting is bounded too); when every word is that common, all of them
    must match."""
    tokens = words(text, content_words=True)
    if not tokens:
        return None
    # a replacement names another member of the same slot: "MySQL" should find "PostgreSQL"
    related = [r for t in tokens for r in related_words(t) if r not in tokens]
    rare = [t for t in dict.fromkeys(tokens + related)
            if ctx.store.match_count(f'"{t}"', RARE) <= RARE][:64]
    return " OR ".join(f'"{t}"' for t in rare) if rare else " AND ".join(f'"{t}"' for t in tokens)


# ---- the pipeline ---------------------------------------------------------------------
class Writer:
    def __init__(self, ctx: Context):
        self.ctx = ctx

    # -- entry points
    def remember(self, user: str, assistant: str) -> Written:
        turn = self.ctx.store.add_turn(self.ctx.namespace, user, assistant)
        return self.process(turn)

    def process(self, turn_id: int) -> Written:
        """Judge one inbox turn and apply it; on an outage, leave it pending."""
        row = self.ctx.store.turn(turn_id)
        try:
            items = self.judge_turn(row["user_text"], row["assistant_text"])
        except JudgeUnavailable as exc:
            self.ctx.store.turn_failed(turn_id, str(exc))
            return Written(pending=str(exc))
        return self.finish(turn_id, items)

    def finish(self, turn_id: int, items: list[Judged]) -> Written:
        """Apply a judged turn and close its inbox row, in one transaction (which first
        checks the turn is still pending), then re-summarise the scenes it touched."""
        store = self.ctx.store
        for judged in items:  # outside the transaction; an outage leaves it to backfill
            judged.vector = judged.vector or vectors.vector_of(self.ctx, judged.content)
        with store.transaction():
            again = store.turn(turn_id)
            if again["status"] != "pending":  # another process judged it meanwhile
                return Written(json.loads(again["memory_ids"] or "[]"))
            out = Written()
            for judged in items:
                out += self.apply(judged, source={"turn": turn_id}, out=out)
            store.close_turn(turn_id, "done" if items else "dropped", list(out))
        self.summarise_scenes({j.scene for j in items if j.scene})
        return out

    def retry_pending(self, limit: int = 100) -> int:
        """Judge pending turns, oldest first; stop at the first that stays pending (the
        model is still down, so trying the rest now would only wait on timeouts)."""
        tried = 0
        for turn_id in self.ctx.store.pending_ids(self.ctx.namespace, limit):
            tried += 1
            self.process(turn_id)
            if self.ctx.store.turn(turn_id)["status"] == "pending":
                break
        return tried

    def add(self, content: str, fields: dict) -> int:
        """Store given content: every write step but the gate (a fused step keeps the given
        content); fields given by the caller win over judgments; an outage falls back to rules."""
        given = {k for k, v in fields.items() if v is not None}
        judged = Judged(content=content, summary=fields.get("summary"),
                        tags=list(fields.get("tags") or []),
                        importance=5.0 if fields.get("importance") is None else fields["importance"],
                        confidence=fields.get("confidence"), expires_at=fields.get("expires_at"))
        given |= {"content", "summary"}
        for step in self.ctx.policy.write:
            if step.step == "gate" or step.step in given:
                continue
            if step.step == "expiry" and "expires_at" in given:
                continue
            self.run_step(step, judged, {"user": content, "assistant": ""},
                          outage_fallback=True, given=given)
        if judged.confidence is None:
            judged.confidence = 1.0
        judged.vector = judged.vector or vectors.vector_of(self.ctx, judged.content)
        with self.ctx.store.transaction():
            ids = self.apply(judged, source={"add": True}, extra=fields)
        return ids[0]

    # -- judging
    def judge_turn(self, user: str, assistant: str) -> list[Judged]:
        """The memories a turn yields: one, none (the gate said no), or several cells
        (an extract step); steps after `extract` judge each cell."""
        items = [Judged(content=user.strip())]
        turn = {"user": user, "assistant": assistant}
        for step in self.ctx.policy.write:
            if steps.kind(step.step).after_store:
                continue  # runs after the cells are stored
            if step.step == "extract":
                items = self.extract(step, turn)
                continue
            for judged in items:
                if judged.save:
                    self.run_step(step, judged, turn)
        return [j for j in items if j.save and j.content.strip()]

    def extract(self, step: WriteStep, turn: dict) -> list[Judged]:
        """Seed C: the exchange as cells {scene, kind, salience, content}; salience 0-1 is
        stored as importance 0-10 (times the policy's `salience_scale`, default 10)."""
        variables = {**self.variables(Judged(), turn), "cells": []}
        cells, note = self.ctx.judges.ask("extract", step.judgment, variables)
        if cells is None:
            self.log_event(None, "extract_failed", note or "no usable cells")
            return []
        scale = float(self.ctx.policy.params.get("salience_scale", 10))
        return [Judged(content=c["content"], importance=round(c["salience"] * scale, 3),
                       kind=c["kind"], scene=c["scene"], notes=[note] if note else [])
                for c in cells]

    def log_event(self, memory_id, event_type: str, detail) -> None:
        with self.ctx.store.transaction():
            self.ctx.store.event(memory_id, event_type, detail)

    def summarise_scenes(self, scenes: set[str]) -> None:
        """Re-summarise every scene a turn touched from its cells by salience, and upsert."""
        step = next((s for s in self.ctx.policy.write if s.step == "summarise"), None)
        if step is None or not scenes:
            return
        for scene in sorted(scenes):
            rows = self.ctx.store.scene_cells(self.ctx.namespace, scene)
            cells = [{"content": r["content"], "kind": r["kind"], "salience": r["importance"] / 10}
                     for r in rows]
            variables = {**self.variables(Judged(), {}), "scene": scene, "cells": cells}
            try:
                summary, _ = self.ctx.judges.ask("summarise", step.judgment, variables)
            except JudgeUnavailable as exc:
                self.log_event(None, "summarise_failed", f"scene {scene}: {exc}")
                continue
            if summary:
                self.ctx.store.save_scene(self.ctx.namespace, scene, summary)

    def variables(self, judged: Judged, turn: dict, candidates=None) -> dict:
        now = self.ctx.clock()
        return {**turn, "now": now, "today": today(now),
                "memory": {"content": judged.content, "summary": judged.summary or judged.content[:120],
                           "tags": judged.tags},
                "candidates": candidates or []}

    def run_step(self, step: WriteStep, judged: Judged, turn: dict, outage_fallback=False,
                 given=frozenset()) -> None:
        kind, j = step.step, step.judgment
        shown = self.candidates(step, judged, turn) if steps.kind(kind).shows_candidates else []
        variables = self.variables(judged, turn, shown)
        try:
            value, note = self.ctx.judges.ask(kind, j, variables)
        except JudgeUnavailable:
            if not outage_fallback:
                raise
            value, note = self.ctx.judges.fallback(kind, j, variables, "model unreachable"), \
                f"{kind}: model unreachable, rules answered"
        if note:
            judged.notes.append(note)
        if value is not None:
            take(kind, value, judged, {c["n"]: c["id"] for c in shown}, given)

    def candidates(self, step: WriteStep, judged: Judged, turn: dict) -> list[dict]:
        """The policy's candidate query narrowed to the K most relevant to the new memory,
        shown to the model under local numbers 1..K, never database ids."""
        text = judged.content if step.step == "contradiction" else \
            f"{turn.get('user', '')} {judged.content}"
        query = distinctive_query(self.ctx, text)
        k = step.judgment.candidates.k if step.judgment.candidates else 20
        rows = self.ctx.store.fetch(self.ctx.plan.write_candidates[step.step], self.ctx.namespace,
                                    query=query, limit=k) if query else []
        rows, similar = self.with_neighbours(step.step, judged, text, rows, k)
        return [{"n": i, "id": r["id"], "content": r["content"], "summary": r["summary"],
                 "created_at": r["created_at"], "importance": r["importance"],
                 "similarity": similar.get(r["id"])}
                for i, r in enumerate(rows, 1)]

    def with_neighbours(self, step: str, judged: Judged, text: str, rows: list, k: int):
        """Hybrid candidates: the full-text ones, then up to `k` nearest neighbours not
        among them; and each one's similarity to the new memory (when it has a vector)."""
        vector = vectors.vector_of(self.ctx, text)
        if step == "contradiction":
            judged.vector = vector  # the new memory's own vector: stored with it
        near = vectors.neighbours(self.ctx, step, vector, k, [r["id"] for r in rows])
        similar = {r["id"]: round(r["similarity"], 4) for r in near}
        shown = {r["id"] for r in rows}
        extra = [r for r in near if r["id"] not in shown][:k]
        return list(rows) + extra, similar

    # -- applying
    def apply(self, judged: Judged, source: dict, extra: dict | None = None,
              out: Written | None = None) -> list[int]:
        """Store, supersede and reinforce, with their events, in the caller's transaction;
        what was done is noted in `out`."""
        store, out = self.ctx.store, Written() if out is None else out
        if judged.confirms and not judged.supersedes:
            kept = [mid for mid in judged.confirms if self.reinforce(mid, source)]
            for mid in kept:
                for note in judged.notes:
                    store.event(mid, "judge_fallback", note)
            if kept:
                out.reinforced += kept
                return kept
            # every confirmed memory changed meanwhile: the turn is a memory of its own
        extra = extra or {}
        new_id = store_memory(self.ctx, judged.content, summary=judged.summary, tags=judged.tags,
                              importance=judged.importance, confidence=judged.confidence,
                              expires_at=judged.expires_at, kind=extra.get("kind") or judged.kind,
                              scene=extra.get("scene") or judged.scene, detail=source)
        for note in judged.notes:
            store.event(new_id, "judge_fallback", note)
        vectors.save(self.ctx, new_id, judged.vector)
        out.stored.append(new_id)
        for old in judged.supersedes:
            if self.supersede(old, new_id, judged.content):
                out.superseded.append((old, new_id))
        return [new_id]

    def supersede(self, old: int, new_id: int, content: str) -> bool:
        if not self.ctx.store.run(self.ctx.plan.supersede, self.ctx.namespace, ids=[old],
                                  new_id=new_id):
            return False  # no longer active: nothing to supersede
        self.ctx.store.event(old, "superseded", f"superseded by #{new_id}: {content[:100]}")
        return True

    def reinforce(self, mid: int, source: dict) -> bool:
        """Confidence + bump, one more access, now; False if the memory is no longer active."""
        if not self.ctx.store.run(self.ctx.plan.reinforce, self.ctx.namespace, ids=[mid]):
            return False
        bump = float(self.ctx.policy.params.get("reinforce_bump", 0.1))
        self.ctx.store.event(mid, "reinforced", {"bump": bump, **source})
        return True


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
        found["supersedes"] = [local[n] for n in dict.fromkeys(found["supersedes"]) if n in local]
        found["confirms"] = [local[n] for n in dict.fromkeys(found["confirms"])
                             if n in local and local[n] not in found["supersedes"]]
    for name in ("content", "summary", "tags", "importance", "confidence", "expires_at",
                 "supersedes", "confirms"):
        if name in found and name not in given:
            setattr(judged, name, found[name])
