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
Loading never touches a database; playing (`engine.apps.scenario.play`) does.
"""

from __future__ import annotations

import datetime as dt
import os
from dataclasses import dataclass, field
from typing import Any

from engine.base.clock import is_bare_date, iso, parse_duration, parse_time
from engine.base.errors import PolicyError
from engine.policy import STATUSES, yamldoc
from engine.steps.kinds import KINDS

ACTIONS = ("add", "remember", "advance", "run", "recall", "expect_status")
ADD_FIELDS = {"content", "summary", "tags", "importance", "confidence", "expires_at", "kind", "scene"}
# statuses that say a memory no longer holds: recalling it is a stale recall
REPLACED = ("superseded", "expired", "archived")
DEFAULT_START = "2026-01-05T09:00:00"


@dataclass(frozen=True)
class Step:
    """One step: its action, the action's (validated) argument, and where it was written."""

    action: str
    arg: Any  # its shape is the action's: text, {"user", "assistant"}, {"delta", "text"}, ...
    line: int
    expect: dict | None = None  # recall only: {"includes": [...], "excludes": [...]}
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
            raise doc.error(
                path + (key,), f"unknown key '{key}' (allowed: {', '.join(sorted(allowed))})", of_key=True
            )


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
    out: dict[str, Any] = {"content": _text(doc, value.get("content"), path + ("content",), "content")}
    for key, lo, hi in (("importance", 0, 10), ("confidence", 0, 1)):
        v = value.get(key)
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or not lo <= v <= hi):
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
        if (
            isinstance(when, dt.date)
            and not isinstance(when, dt.datetime)
            or isinstance(when, str)
            and is_bare_date(when)
        ):
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
    if (
        not isinstance(names, list)
        or not names
        or not all(isinstance(n, str) and n.isidentifier() for n in names)
    ):
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
        raise doc.error(path, 'expect_status takes {"substring of a memory": status, ...}')
    for text, status in value.items():
        _text(doc, text, path + (text,), "the substring")
        if status not in STATUSES:
            raise doc.error(path + (text,), f"unknown status {status!r} (use one of: {', '.join(STATUSES)})")
    return dict(value)


def _judged(doc, value, path: tuple) -> dict:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise doc.error(path, "judged takes {step_name: answer, ...}")
    for step in value:
        if step not in KINDS:
            raise doc.error(
                path + (step,), f"unknown judge step '{step}' (known: {', '.join(KINDS)})", of_key=True
            )
    # a YAML null is the answer "no date" / "nothing": keep it distinct from "no answer"
    return {k: ("null" if v is None else v) for k, v in value.items()}


_ARGS = {
    "add": _add,
    "remember": _remember,
    "advance": _advance,
    "run": _run,
    "recall": _recall,
    "expect_status": _expect_status,
}
