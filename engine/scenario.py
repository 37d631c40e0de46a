"""Scenarios: simulated weeks or months of conversation, with expectations, played on a Memory.

A scenario file (YAML, in `scenarios/`) names a start time and a list of steps:

    name: switched from poetry to uv
    start: 2026-01-05T09:00:00
    steps:
      - remember: {user: "I manage dependencies with poetry.", assistant: "Noted."}
      - advance: 40d                  # due passes run at their schedule on the way
      - remember: {user: "I stopped using poetry, it's uv now.", assistant: "Got it."}
      - recall: "which dependency manager should I use?"
        expect: {includes: ["uv"], excludes: ["with poetry"]}
      - expect_status: {"with poetry": superseded}

`load` validates a file and reports mistakes as `file:line:col: steps[2].advance: ...`.
`play` runs a loaded scenario on an open Memory whose clock is a FixedClock and whose
judges ask `Script` first, so a step's `judged:` answers replay what a model once said.
Loading never touches a database; only `play` does.
"""
from __future__ import annotations

import datetime as dt
import os
from dataclasses import dataclass, field

from . import passes as P
from . import yamldoc
from .clock import FixedClock, iso, parse_duration, parse_time
from .errors import LetheError, PolicyError
from .steps import KINDS
from .policy import STATUSES

ACTIONS = ("add", "remember", "advance", "run", "recall", "expect_status")
ADD_FIELDS = {"content", "summary", "tags", "importance", "confidence", "expires_at", "kind", "scene"}
# statuses that say a memory no longer holds: recalling it is a stale recall
REPLACED = ("superseded", "expired", "archived")
DEFAULT_START = "2026-01-05T09:00:00"


@dataclass(frozen=True)
class Step:
    """One step: its action, the action's (validated) argument, and where it was written."""

    action: str
    arg: object
    line: int
    expect: dict | None = None          # recall only: {"includes": [...], "excludes": [...]}
    judged: dict = field(default_factory=dict)

    def label(self) -> str:
        if self.action == "recall":
            return f'recall "{self.arg}"'
        if self.action == "advance":
            return f"advance {self.arg['text']}"
        if self.action == "run":
            return "run " + ("due" if self.arg == "due" else ", ".join(self.arg))
        return self.action


@dataclass
class Scenario:
    name: str
    start: dt.datetime
    steps: list[Step]
    file: str
    description: str = ""

    def expectations(self) -> int:
        """How many checks a run makes: one per includes/excludes substring and status entry."""
        n = 0
        for s in self.steps:
            if s.action == "recall" and s.expect:
                n += len(s.expect["includes"]) + len(s.expect["excludes"])
            elif s.action == "expect_status":
                n += len(s.arg)
        return n


# ---- loading ------------------------------------------------------------------------
def load(path: str) -> Scenario:
    """Read and validate a scenario file; every mistake is a PolicyError with file:line:col."""
    if not os.path.isfile(path):
        raise PolicyError(f"scenario not found: {path}")
    doc = yamldoc.load(path)
    data = doc.data
    if not isinstance(data, dict):
        raise doc.error((), "a scenario is a mapping with name, start and steps")
    _keys(doc, data, (), {"name", "start", "steps", "description"})
    name = data.get("name")
    if not isinstance(name, str) or not name.strip():
        raise doc.error(("name",), "name must be non-empty text")
    start = _time(doc, ("start",), data.get("start", DEFAULT_START))
    steps = data.get("steps")
    if not isinstance(steps, list) or not steps:
        raise doc.error(("steps",), "steps must be a non-empty list")
    parsed = [_step(doc, raw, ("steps", i)) for i, raw in enumerate(steps)]
    description = data.get("description") or ""
    if not isinstance(description, str):
        raise doc.error(("description",), "description must be text")
    return Scenario(name.strip(), start, parsed, doc.file, description.strip())


def _keys(doc, data: dict, path: tuple, allowed: set) -> None:
    for key in data:
        if key not in allowed:
            raise doc.error(path + (key,), f"unknown key '{key}' (allowed: "
                            f"{', '.join(sorted(allowed))})", of_key=True)


def _step(doc, raw, path: tuple) -> Step:
    if not isinstance(raw, dict):
        raise doc.error(path, f"a step is a mapping with one of: {', '.join(ACTIONS)}")
    actions = [k for k in raw if k in ACTIONS]
    if len(actions) != 1:
        what = "no action" if not actions else f"{len(actions)} actions ({', '.join(actions)})"
        raise doc.error(path, f"a step needs exactly one of {', '.join(ACTIONS)}; found {what}")
    action = actions[0]
    _keys(doc, raw, path, {action, "judged"} | ({"expect"} if action == "recall" else set()))
    arg = _ARGS[action](doc, raw[action], path + (action,))
    expect = _expect(doc, raw.get("expect"), path + ("expect",)) if action == "recall" else None
    line = (doc.mark(path) or yamldoc.Mark(doc.file, 0, 0)).line
    return Step(action, arg, line, expect, _judged(doc, raw.get("judged"), path + ("judged",)))


def _text(doc, value, path: tuple, what: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise doc.error(path, f"{what} must be non-empty text, got {value!r}")
    return value


def _time(doc, path: tuple, value) -> dt.datetime:
    if isinstance(value, dt.datetime):
        return parse_time(iso(value))
    if isinstance(value, dt.date):
        return dt.datetime(value.year, value.month, value.day)
    try:
        return parse_time(str(value))
    except ValueError as exc:
        raise doc.error(path, str(exc)) from None


def _add(doc, value, path: tuple) -> dict:
    if isinstance(value, str):
        value = {"content": value}
    if not isinstance(value, dict):
        raise doc.error(path, "add takes text, or a mapping with content and optional fields")
    _keys(doc, value, path, ADD_FIELDS)
    out = {"content": _text(doc, value.get("content"), path + ("content",), "content")}
    for key, lo, hi in (("importance", 0, 10), ("confidence", 0, 1)):
        v = value.get(key)
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float))
                              or not lo <= v <= hi):
            raise doc.error(path + (key,), f"{key} must be a number from {lo} to {hi}, got {v!r}")
        out[key] = v
    tags = value.get("tags")
    if isinstance(tags, str):
        tags = [t.strip() for t in tags.split(",") if t.strip()]
    if tags is not None and (not isinstance(tags, list) or not all(isinstance(t, str) for t in tags)):
        raise doc.error(path + ("tags",), "tags must be a list of text")
    out["tags"] = tags
    if value.get("expires_at") is not None:
        when = value["expires_at"]
        out["expires_at"] = iso(_time(doc, path + ("expires_at",), when))
        if isinstance(when, dt.date) and not isinstance(when, dt.datetime) or \
                isinstance(when, str) and len(when.strip()) == 10:
            out["expires_at"] = out["expires_at"][:10]  # a bare date: add() makes it the day's end
    for key in ("summary", "kind", "scene"):
        if value.get(key) is not None:
            out[key] = _text(doc, value[key], path + (key,), key)
    return out


def _remember(doc, value, path: tuple) -> dict:
    if isinstance(value, str):
        value = {"user": value}
    if not isinstance(value, dict):
        raise doc.error(path, "remember takes {user: ..., assistant: ...}")
    _keys(doc, value, path, {"user", "assistant"})
    assistant = value.get("assistant", "")
    if not isinstance(assistant, str):
        raise doc.error(path + ("assistant",), f"assistant must be text, got {assistant!r}")
    return {"user": _text(doc, value.get("user"), path + ("user",), "user"), "assistant": assistant}


def _advance(doc, value, path: tuple) -> dict:
    try:
        delta = parse_duration(value)
    except ValueError as exc:
        raise doc.error(path, str(exc)) from None
    if delta <= dt.timedelta(0):
        raise doc.error(path, f"advance must move the clock forward, got {value!r}")
    return {"text": str(value), "delta": delta}


def _run(doc, value, path: tuple):
    if value == "due":
        return "due"
    names = [value] if isinstance(value, str) else value
    if not isinstance(names, list) or not names or \
            not all(isinstance(n, str) and n.isidentifier() for n in names):
        raise doc.error(path, f"run takes 'due' or a list of pass names, got {value!r}")
    return list(names)


def _recall(doc, value, path: tuple) -> str:
    return _text(doc, value, path, "the recall query")


def _expect(doc, value, path: tuple) -> dict | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise doc.error(path, "expect takes {includes: [...], excludes: [...]}")
    _keys(doc, value, path, {"includes", "excludes"})
    out = {}
    for key in ("includes", "excludes"):
        items = value.get(key) or []
        items = [items] if isinstance(items, str) else items
        if not isinstance(items, list):
            raise doc.error(path + (key,), f"{key} must be a list of text")
        out[key] = [_text(doc, t, path + (key, i), f"{key}[{i}]") for i, t in enumerate(items)]
    return out


def _expect_status(doc, value, path: tuple) -> dict:
    if not isinstance(value, dict) or not value:
        raise doc.error(path, "expect_status takes {\"substring of a memory\": status, ...}")
    for text, status in value.items():
        _text(doc, text, path + (text,), "the substring")
        if status not in STATUSES:
            raise doc.error(path + (text,), f"unknown status {status!r} (use one of: "
                            f"{', '.join(STATUSES)})")
    return dict(value)


def _judged(doc, value, path: tuple) -> dict:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise doc.error(path, "judged takes {step_name: answer, ...}")
    for step in value:
        if step not in KINDS:
            raise doc.error(path + (step,), f"unknown judge step '{step}' (known: "
                            f"{', '.join(KINDS)})", of_key=True)
    # a YAML null is the answer "no date" / "nothing": keep it distinct from "no answer"
    return {k: ("null" if v is None else v) for k, v in value.items()}


_ARGS = {"add": _add, "remember": _remember, "advance": _advance, "run": _run,
         "recall": _recall, "expect_status": _expect_status}


# ---- playing ------------------------------------------------------------------------
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
        return {"line": self.line, "step": self.step, "what": self.what, "ok": self.ok,
                "detail": self.detail}


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
        have = {r[0] for r in self.mem.store.db.execute(
            "SELECT pass FROM pass_runs WHERE namespace = ?", (self.mem.namespace,))}
        scheduled = [n for n, p in self.mem.policy.passes.items() if p.every and n not in have]
        if scheduled:
            with self.mem.store.transaction() as db:
                for name in scheduled:
                    P.record_run(db, self.mem.namespace, name, self.mem.store.now(), 0)

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
            self.out.notes += [f"{iso(self.clock())} {r.name}: {n}" for n in r.notes
                               if "nothing to compress" not in n]
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
        last = {r[0]: parse_time(r[1]) for r in self.mem.store.db.execute(
            "SELECT pass, last_run_at FROM pass_runs WHERE namespace = ?", (self.mem.namespace,))}
        times = [last[n] + p.every if n in last else self.clock()
                 for n, p in self.mem.policy.passes.items() if p.every]
        return min(times) if times else None

    def _run(self, index: int, step: Step) -> None:
        if step.arg == "due":
            self._record(self.mem.run_due())
            return
        have = [n for n in step.arg if n in self.mem.policy.passes]
        for missing in (n for n in step.arg if n not in self.mem.policy.passes):
            self.out.notes.append(f"line {step.line}: policy '{self.mem.policy.name}' has no "
                                  f"pass '{missing}'; skipped")
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
        stale = [m.content for m in recalled
                 if any(self._holds_old(m, t, includes, stored) for t in markers)]
        contents = [m.content for m in recalled]
        self.out.recalls.append({"line": step.line, "at": iso(self.clock()), "query": step.arg,
                                 "recalled": contents, "stale": stale})
        got = "; ".join(contents) or "nothing"
        for text in expect["includes"]:
            ok = any(text.lower() in c.lower() for c in contents)
            self._check(index, step, f'recall "{step.arg}" includes "{text}"', ok, f"got: {got}")
        for text in expect["excludes"]:
            hits = [m.content for m in recalled
                    if self._holds_old(m, text.lower(), includes, stored)]
            self._check(index, step, f'recall "{step.arg}" excludes "{text}"', not hits,
                        f"got: {'; '.join(hits)}")

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
        rows = self.mem.store.db.execute("SELECT id, content, status FROM memories WHERE "
                                         "namespace = ? ORDER BY id", (self.mem.namespace,))
        return [(r[0], r[1], r[2]) for r in rows]

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
