"""The remember pipeline: gate, confidence, contradiction, expiry (or one fused call).

A turn is written to the inbox before any model is called. All judging happens outside
a write transaction; the result (the new memory, what it supersedes or reinforces, and
every event) is applied in one transaction. A model that cannot be reached leaves the
turn pending for `run_due()` to retry; nothing is lost.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field

from .judges import JudgeUnavailable, Judges
from . import steps
from .answers import today
from .policy import WriteStep


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


class Writer:
    def __init__(self, mem, judges: Judges):
        self.mem, self.judges = mem, judges

    # -- entry points
    def remember(self, user: str, assistant: str) -> list[int]:
        store = self.mem.store
        with store.transaction() as db:
            turn = db.execute("INSERT INTO inbox (namespace, user_text, assistant_text, created_at, "
                              "updated_at) VALUES (?, ?, ?, ?, ?)",
                              (self.mem.namespace, user, assistant, store.now(), store.now())).lastrowid
        return self.process(turn)

    def process(self, turn_id: int) -> list[int]:
        """Judge one inbox turn and apply it; on an outage, leave it pending."""
        store = self.mem.store
        row = store.db.execute("SELECT * FROM inbox WHERE id = ?", (turn_id,)).fetchone()
        try:
            items = self.judge_turn(row["user_text"], row["assistant_text"])
        except JudgeUnavailable as exc:
            store.db.execute("UPDATE inbox SET attempts = attempts + 1, last_error = ?, "
                             "updated_at = ? WHERE id = ?", (str(exc)[:500], store.now(), turn_id))
            return []
        return self.finish(turn_id, items)

    def finish(self, turn_id: int, items: list[Judged]) -> list[int]:
        """Apply a judged turn and close its inbox row, in one transaction (which first
        checks the turn is still pending), then re-summarise the scenes it touched."""
        store = self.mem.store
        with store.transaction() as db:
            again = db.execute("SELECT status, memory_ids FROM inbox WHERE id = ?", (turn_id,)).fetchone()
            if again["status"] != "pending":  # another process judged it meanwhile
                return json.loads(again["memory_ids"] or "[]")
            ids = []
            for judged in items:
                ids += self.apply(db, judged, source={"turn": turn_id})
            db.execute("UPDATE inbox SET status = ?, memory_ids = ?, attempts = attempts + 1, "
                       "updated_at = ? WHERE id = ?",
                       ("done" if items else "dropped", json.dumps(ids), store.now(), turn_id))
        self.summarise_scenes({j.scene for j in items if j.scene})
        return ids

    def retry_pending(self, limit: int = 100) -> int:
        """Judge pending turns, oldest first; stop at the first that stays pending (the
        model is still down, so trying the rest now would only wait on timeouts)."""
        rows = self.mem.store.db.execute(
            "SELECT id FROM inbox WHERE namespace = ? AND status = 'pending' ORDER BY id LIMIT ?",
            (self.mem.namespace, limit)).fetchall()
        tried = 0
        for r in rows:
            tried += 1
            self.process(r[0])
            status = self.mem.store.db.execute("SELECT status FROM inbox WHERE id = ?", (r[0],)).fetchone()
            if status[0] == "pending":
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
        for step in self.mem.policy.write:
            if step.step == "gate" or step.step in given:
                continue
            if step.step == "expiry" and "expires_at" in given:
                continue
            self.run_step(step, judged, {"user": content, "assistant": ""},
                          outage_fallback=True, given=given)
        if judged.confidence is None:
            judged.confidence = 1.0
        with self.mem.store.transaction() as db:
            ids = self.apply(db, judged, source={"add": True}, extra=fields)
        return ids[0]

    # -- judging
    def judge_turn(self, user: str, assistant: str) -> list[Judged]:
        """The memories a turn yields: one, none (the gate said no), or several cells
        (an extract step); steps after `extract` judge each cell."""
        items = [Judged(content=user.strip())]
        turn = {"user": user, "assistant": assistant}
        for step in self.mem.policy.write:
            if step.step == "summarise":
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
        cells, note = self.judges.ask("extract", step.judgment, variables)
        if cells is None:
            self.log_event(None, "extract_failed", note or "no usable cells")
            return []
        scale = float(self.mem.policy.params.get("salience_scale", 10))
        return [Judged(content=c["content"], importance=round(c["salience"] * scale, 3),
                       kind=c["kind"], scene=c["scene"], notes=[note] if note else [])
                for c in cells]

    def log_event(self, memory_id, event_type: str, detail) -> None:
        with self.mem.store.transaction() as db:
            self.mem.store.event(db, memory_id, event_type, detail)

    def summarise_scenes(self, scenes: set[str]) -> None:
        """Re-summarise every scene a turn touched from its cells by salience, and upsert."""
        step = next((s for s in self.mem.policy.write if s.step == "summarise"), None)
        if step is None or not scenes:
            return
        for scene in sorted(scenes):
            rows = self.mem.store.db.execute(
                "SELECT content, kind, importance FROM memories WHERE namespace = ? AND scene = ? "
                "AND status = 'active' ORDER BY importance DESC, id DESC LIMIT 20",
                (self.mem.namespace, scene)).fetchall()
            cells = [{"content": r["content"], "kind": r["kind"], "salience": r["importance"] / 10}
                     for r in rows]
            variables = {**self.variables(Judged(), {}), "scene": scene, "cells": cells}
            try:
                summary, _ = self.judges.ask("summarise", step.judgment, variables)
            except JudgeUnavailable as exc:
                self.log_event(None, "summarise_failed", f"scene {scene}: {exc}")
                continue
            if summary:
                self.mem.store.db.execute(
                    "INSERT INTO scenes (namespace, scene, summary, updated_at) VALUES (?, ?, ?, ?) "
                    "ON CONFLICT (namespace, scene) DO UPDATE SET summary = excluded.summary, "
                    "updated_at = excluded.updated_at",
                    (self.mem.namespace, scene, summary, self.mem.store.now()))

    def variables(self, judged: Judged, turn: dict, candidates=None) -> dict:
        now = self.mem.clock()
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
            value, note = self.judges.ask(kind, j, variables)
        except JudgeUnavailable:
            if not outage_fallback:
                raise
            value, note = self.judges.fallback(kind, j, variables, "model unreachable"), \
                f"{kind}: model unreachable, rules answered"
        if note:
            judged.notes.append(note)
        if value is not None:
            self.take(kind, value, judged, {c["n"]: c["id"] for c in shown}, given)

    def take(self, kind: str, value, judged: Judged, local: dict[int, int],
             given=frozenset()) -> None:
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

    def candidates(self, step: WriteStep, judged: Judged, turn: dict) -> list[dict]:
        """The policy's candidate query narrowed to the K most relevant to the new memory,
        shown to the model under local numbers 1..K, never database ids."""
        from .memory import distinctive_query

        text = judged.content if step.step == "contradiction" else \
            f"{turn.get('user', '')} {judged.content}"
        query = distinctive_query(self.mem.store.db, text)
        if not query:
            return []
        st = self.mem.plan.write_candidates[step.step]
        k = step.judgment.candidates.k if step.judgment.candidates else 20
        rows = self.mem.store.db.execute(st.sql, st.bind(self.mem.store.now(), self.mem.namespace,
                                                         query, k)).fetchall()
        return [{"n": i, "id": r["id"], "content": r["content"], "summary": r["summary"],
                 "created_at": r["created_at"], "importance": r["importance"]}
                for i, r in enumerate(rows, 1)]

    # -- applying
    def apply(self, db, judged: Judged, source: dict, extra: dict | None = None) -> list[int]:
        """Store, supersede and reinforce, with their events, in the caller's transaction."""
        if judged.confirms and not judged.supersedes:
            kept = [mid for mid in judged.confirms if self.reinforce(db, mid, source)]
            for mid in kept:
                for note in judged.notes:
                    self.mem.store.event(db, mid, "judge_fallback", note)
            if kept:
                return kept
            # every confirmed memory changed meanwhile: the turn is a memory of its own
        extra = extra or {}
        new_id = self.mem.insert(db, judged.content, summary=judged.summary, tags=judged.tags,
                                 importance=judged.importance, confidence=judged.confidence,
                                 expires_at=judged.expires_at, kind=extra.get("kind") or judged.kind,
                                 scene=extra.get("scene") or judged.scene, detail=source)
        for note in judged.notes:
            self.mem.store.event(db, new_id, "judge_fallback", note)
        for old in judged.supersedes:
            self.supersede(db, old, new_id, judged.content)
        return [new_id]

    def supersede(self, db, old: int, new_id: int, content: str) -> None:
        cur = db.execute("UPDATE memories SET status = 'superseded', contradicted_by = ? "
                         "WHERE id = ? AND namespace = ? AND status = 'active'",
                         (new_id, old, self.mem.namespace))
        if cur.rowcount:
            self.mem.store.event(db, old, "superseded", f"superseded by #{new_id}: {content[:100]}")

    def reinforce(self, db, mid: int, source: dict) -> bool:
        """Confidence + bump, one more access, now; False if the memory is no longer active."""
        bump = float(self.mem.policy.params.get("reinforce_bump", 0.1))
        cur = db.execute("UPDATE memories SET confidence = min(1.0, confidence + ?), "
                         "access_count = access_count + 1, last_accessed = ? "
                         "WHERE id = ? AND namespace = ? AND status = 'active'",
                         (bump, self.mem.store.now(), mid, self.mem.namespace))
        if not cur.rowcount:
            return False
        self.mem.refresh_rank(db, [mid])
        self.mem.store.event(db, mid, "reinforced", {"bump": bump, **source})
        return True
