"""Judging a turn: the policy's write steps asked about it, before anything is stored.

The gate (or an extract step) turns a turn into the memories it yields; the steps after it
(confidence, contradiction, expiry) judge each of them, a run of steps that read only the
gate's answer asked at once. Every answer received is kept by step and item (`paid`), so
a turn retried after an outage does not pay for it again. Applying the judgments is
engine/run/write.py's.
"""

from __future__ import annotations

import contextvars
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from engine.base.clock import parse_time
from engine.base.errors import LeaseLost
from engine.judges import JudgeUnavailable
from engine.policy import WriteStep
from engine.run import neighbours as vectors
from engine.run.context import Context, number
from engine.run.matching import distinctive_query
from engine.steps import kinds as steps
from engine.steps.answers import today

MAX_ASKED = 16  # questions of one wave asked at once, at most


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
    more: list[dict] = field(default_factory=list)  # the gate's further memories of the turn
    refused: list[tuple[str, int, str]] = field(default_factory=list)  # (what, id, why): guards


class Judging:
    """Asks the policy's write steps about turns and memories, for one context."""

    def __init__(self, ctx: Context):
        self.ctx = ctx

    def judge_turn(self, user: str, assistant: str, paid: dict | None = None) -> list[Judged]:
        """The memories a turn yields: none (the gate said no), one, several (the gate
        found several facts in it), or several cells (an extract step); the steps after
        the gate or `extract` judge each of them on its own. A run of steps that read
        only the gate's answer (confidence, contradiction, expiry) is asked at once.
        `paid` holds answers already received, by step and item; new ones are added."""
        paid = {} if paid is None else paid
        items = [Judged(content=user.strip())]
        write = self.ctx.policy.write
        if write and self.ctx.judges.remote(write[0].judgment.model):  # beside the gate's call
            # (an instant gate, the rules', hides nothing: the vector is asked when wanted,
            # never for words it rewrote)
            vectors.prefetch(self.ctx, user, write)
        turn = {"user": user, "assistant": assistant}
        for group in _groups(self.ctx.policy.write):
            first = group[0]
            if first[1].step == "extract":
                items = self.extract(first[1], turn, paid, f"{first[0]}")
                continue
            self.run_steps(group, [(i, j) for i, j in enumerate(items) if j.save], turn, paid)
            items = [each for judged in items for each in (judged, *_further(judged))]
        return [j for j in items if j.save and j.content.strip()]

    def run_steps(self, group: list, items: list[tuple[int, Judged]], turn: dict, paid: dict) -> None:
        """Ask a group of steps about each of a turn's memories (item number, judgment), every
        question at once when they can be (one round trip, however many memories the gate
        found); fold the answers in in the policy's order. Every answer received is kept in
        `paid`, even when another question found its model unreachable (that error is
        raised after)."""
        keyed = [(f"{n}:{i}", step, judged) for i, judged in items for n, step in group]
        remote = self.ctx.judges.remote(*(s.judgment.model for _, s in group))
        if remote:  # the memories' own vectors (to store), asked beside this wave, not before
            vectors.ahead(self.ctx, [judged.content for _, judged in items])
        if len(keyed) <= 1 or not remote:
            for key, step, judged in keyed:
                self.run_step(step, judged, turn, paid=paid, key=key)
            return
        asked = [(key, step, judged, self.prepare(step, judged, turn)) for key, step, judged in keyed]
        with ThreadPoolExecutor(max_workers=min(len(asked), MAX_ASKED)) as pool:
            answers = [
                pool.submit(contextvars.copy_context().run, self.answer, step, prepared, paid, key)
                for key, step, _, prepared in asked
            ]  # its spans' parent
            errors = [f.exception() for f in answers]
        for (_key, step, judged, prepared), f, error in zip(asked, answers, errors):
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
        scale = number(self.ctx, "salience_scale", 10)
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
            if isinstance(summary, str) and summary:  # the summarise step's checked text
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
            variables["max_supersedes"] = int(number(self.ctx, "max_supersedes", 3))
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
        value: object
        note: str | None
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
        if vectors.at_hand(self.ctx, text) or not self.ctx.judges.remote(step.judgment.model):
            vector = vectors.vector_of(self.ctx, text)
            if step.step == "contradiction":
                judged.vector = vector  # the new memory's own vector: stored with it
        else:  # words the gate rewrote: their vector is a round trip away, and waiting for
            # it would put the model's question a wave later. The turn's own (asked beside
            # the gate) finds the neighbours; the memory's is asked beside this wave (`ahead`)
            vector = vectors.vector_of(self.ctx, (turn.get("user") or "").strip())
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


def _further(judged: Judged) -> list[Judged]:
    """The turn's further memories the gate gave beside this one, each judged on its own
    by the steps after the gate (its own contradiction candidates, its own expiry)."""
    more, judged.more = judged.more, []
    return [
        Judged(
            content=m["content"],
            summary=m.get("summary"),
            tags=list(m.get("tags") or []),
            importance=m.get("importance", 5.0),
            notes=list(judged.notes),
        )
        for m in more
    ]


def take(kind: str, value, judged: Judged, local: dict[int, int], given=frozenset()) -> None:
    """Fold a checked answer into the judgment; candidate numbers not shown are dropped,
    and fields the caller gave explicitly are kept."""
    found = dict(value) if isinstance(value, dict) else {}
    if kind in ("gate", "fused"):
        if not found["save"]:
            judged.save = "content" in given  # add() always stores what it was given
            return
        if "memories" in found:  # the gate's list: this memory is its first, the rest follow
            first, *rest = found["memories"]
            judged.more = [dict(m) for m in rest]
            found = {"save": True, **first}
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
