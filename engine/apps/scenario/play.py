"""Playing a loaded scenario on an open Memory whose clock is a FixedClock and whose judges
ask `Script` first, so a step's `judged:` answers replay what a model once said."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field

from engine.apps.scenario.loader import REPLACED, Scenario, Step
from engine.base.clock import FixedClock, iso
from engine.base.errors import LetheError
from engine.policy import STATUSES
from engine.run import passes as P


class Script:
    """The judges' first stop: answers the current step's `judged:` entries, each once."""

    def __init__(self):
        self.answers: dict = {}

    def load(self, judged: dict) -> None:
        self.answers = dict(judged)

    def take(self, step: str):
        return self.answers.pop(step, None)


@dataclass
class Check:
    """One expectation and whether it held."""

    line: int
    step: int
    what: str
    ok: bool
    detail: str = ""

    def as_dict(self) -> dict:
        return {"line": self.line, "step": self.step, "what": self.what, "ok": self.ok, "detail": self.detail}


@dataclass
class Playback:
    """What happened while a scenario played: checks, recalls, counts over time, pass runs."""

    checks: list[Check] = field(default_factory=list)
    recalls: list[dict] = field(default_factory=list)
    timeline: list[dict] = field(default_factory=list)
    pass_runs: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def stale_recalls(self) -> int:
        return sum(1 for r in self.recalls if r["stale"])


class Player:
    """Plays one scenario on one Memory (opened with `clock` and `scripted=script`)."""

    def __init__(self, scenario: Scenario, mem, clock: FixedClock, script: Script):
        self.scenario, self.mem, self.clock, self.script = scenario, mem, clock, script
        self.out = Playback()
        self.markers: list[str] = []  # substrings marked replaced so far (see _recall)

    def play(self) -> Playback:
        self.clock.set(self.scenario.start)
        self._start_schedule()
        self._sample(force=True)
        for index, step in enumerate(self.scenario.steps):
            self.script.load(step.judged)
            getattr(self, "_" + step.action)(index, step)
            self.script.load({})
            self._sample(force=step.action == "advance")
        return self.out

    def _start_schedule(self) -> None:
        """The scheduler starts with the scenario: a pass that never ran counts as run at
        `start`, so `advance: 30d` runs a daily pass 30 times, not 31."""
        self.mem.start_schedules()

    def _sample(self, force: bool = False) -> None:
        """Counts by status now; kept when they changed (or `force`), one point per instant."""
        counts = {s: 0 for s in STATUSES}
        counts.update(self.mem.counts())
        days = (self.clock() - self.scenario.start).total_seconds() / 86400
        point = {"at": iso(self.clock()), "day": round(days, 4), "counts": counts}
        line = self.out.timeline
        if line and line[-1]["at"] == point["at"]:
            line[-1] = point
        elif force or not line or line[-1]["counts"] != counts:
            line.append(point)

    def _record(self, results) -> None:
        changed = False
        for r in results:
            self.out.pass_runs[r.name] = self.out.pass_runs.get(r.name, 0) + 1
            self.out.notes += [
                f"{iso(self.clock())} {r.name}: {n}" for n in r.notes if "nothing to compress" not in n
            ]
            changed = changed or r.changed or any(r.events.values())
        if changed:
            self._sample()

    # -- the actions
    def _add(self, index: int, step: Step) -> None:
        fields = dict(step.arg)
        self.mem.add(fields.pop("content"), **fields)

    def _remember(self, index: int, step: Step) -> None:
        self.mem.remember(step.arg["user"], step.arg["assistant"])

    def _advance(self, index: int, step: Step) -> None:
        """Move the clock to each next due time in turn and run what is due there."""
        end, ran_at = self.clock() + step.arg["delta"], None
        while True:
            due_at = self._next_due()
            if due_at is not None and ran_at is not None and due_at <= ran_at:
                due_at = ran_at + dt.timedelta(seconds=1)  # run times are stored to the second
            if due_at is None or due_at > end:
                break
            ran_at = max(due_at, self.clock())
            self.clock.set(ran_at)
            self._record(self.mem.run_due())
        self.clock.set(end)

    def _next_due(self) -> dt.datetime | None:
        last = self.mem.last_runs()
        times = [
            due
            for n, p in self.mem.policy.passes.items()
            if p.every and (due := P.next_due(last.get(n), p.every, self.clock())) is not None
        ]
        return min(times) if times else None

    def _run(self, index: int, step: Step) -> None:
        if step.arg == "due":
            self._record(self.mem.run_due())
            return
        have = [n for n in step.arg if n in self.mem.policy.passes]
        for missing in (n for n in step.arg if n not in self.mem.policy.passes):
            self.out.notes.append(
                f"line {step.line}: policy '{self.mem.policy.name}' has no pass '{missing}'; skipped"
            )
        self._record(self.mem.run(have))

    def _recall(self, index: int, step: Step) -> None:
        """Recall and check `expect`: each include must be in some recalled memory, each
        exclude in none, except in the new fact naming what it replaced (see `_holds_old`).
        Stale: a recalled memory holding a text this step excludes, or one an earlier
        expect_status said is superseded, expired or archived, with the same exception. A
        later mark does not reach back: until the scenario says so, the fact may have held."""
        recalled = self.mem.recall(step.arg)
        expect = step.expect or {"includes": [], "excludes": []}
        includes = [t.lower() for t in expect["includes"]]
        markers = list(dict.fromkeys(self.markers + [e.lower() for e in expect["excludes"]]))
        stored = self._memories()
        stale = [m.content for m in recalled if any(self._holds_old(m, t, includes, stored) for t in markers)]
        contents = [m.content for m in recalled]
        self.out.recalls.append(
            {
                "line": step.line,
                "at": iso(self.clock()),
                "query": step.arg,
                "recalled": contents,
                "stale": stale,
            }
        )
        got = "; ".join(contents) or "nothing"
        for text in expect["includes"]:
            ok = any(text.lower() in c.lower() for c in contents)
            self._check(index, step, f'recall "{step.arg}" includes "{text}"', ok, f"got: {got}")
        for text in expect["excludes"]:
            hits = [m.content for m in recalled if self._holds_old(m, text.lower(), includes, stored)]
            self._check(
                index, step, f'recall "{step.arg}" excludes "{text}"', not hits, f"got: {'; '.join(hits)}"
            )

    @staticmethod
    def _holds_old(memory, text: str, includes: list[str], stored: list[tuple]) -> bool:
        """Does `memory` state the old `text`? Not when it is the new fact naming what it
        replaced: it also holds one of the recall's includes, and an earlier memory
        already mentioned `text` ("I stopped using poetry, it's uv now")."""
        content = memory.content.lower()
        if text not in content:
            return False
        if not any(t in content for t in includes):
            return True
        first = next((i for i, c, _ in stored if text in c.lower()), memory.id)
        return memory.id <= first

    def _memories(self) -> list[tuple[int, str, str]]:
        return [(r["id"], r["content"], r["status"]) for r in self.mem.dump()]

    def _expect_status(self, index: int, step: Step) -> None:
        for text, status in step.arg.items():
            if status in REPLACED and text.lower() not in self.markers:
                self.markers.append(text.lower())
            found = self._matching(text)
            ok = any(s == status for _, s in found)
            shown = "; ".join(f"[{s}] {c}" for c, s in found) or "no memory contains it"
            self._check(index, step, f'"{text}" is {status}', ok, f"found: {shown}")

    def _matching(self, text: str) -> list[tuple[str, str]]:
        return [(c, s) for _, c, s in self._memories() if text.lower() in c.lower()]

    def _check(self, index: int, step: Step, what: str, ok: bool, detail: str) -> None:
        self.out.checks.append(Check(step.line, index, what, ok, "" if ok else detail))


def play(scenario: Scenario, mem, clock: FixedClock, script: Script) -> Playback:
    """Play `scenario` on `mem` (see `Player`); raises LetheError only for engine mistakes."""
    if not isinstance(clock, FixedClock):
        raise LetheError("a scenario needs a FixedClock to move")
    return Player(scenario, mem, clock, script).play()
