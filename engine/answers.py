"""What each step's answer must look like, and turning a model's text into that.

Models wrap JSON in prose or code fences, answer a bare list where an object was asked
for, or send numbers as strings; those are accepted. Anything else is a `BadAnswer`,
which the judge runner retries once and then answers with the step's fallback.
"""
from __future__ import annotations

import datetime as dt
import json
import re

from .clock import iso, parse_time


class BadAnswer(ValueError):
    """An answer that does not fit the step's schema."""


def parse_json(text) -> object:
    if not isinstance(text, str):
        return text
    s = re.sub(r"^```(?:json)?\s*|\s*```$", "", text.strip())
    try:
        return json.loads(s)
    except ValueError:
        pass
    for opener, closer in (("{", "}"), ("[", "]")):
        i, j = s.find(opener), s.rfind(closer)
        if 0 <= i < j:
            try:
                return json.loads(s[i:j + 1])
            except ValueError:
                continue
    if re.fullmatch(r"-?\d+(\.\d+)?", s):
        return float(s)
    raise BadAnswer(f"not JSON: {text[:80]!r}")


def _number(v, lo, hi, what) -> float:
    if isinstance(v, str):
        try:
            v = float(v.strip())
        except ValueError:
            raise BadAnswer(f"{what} is not a number: {v!r}") from None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not lo <= v <= hi:
        raise BadAnswer(f"{what} must be a number from {lo} to {hi}, got {v!r}")
    return float(v)


def _numbers(v, what) -> list[int]:
    if v is None:
        return []
    if not isinstance(v, list):
        raise BadAnswer(f"{what} must be a list of numbers, got {v!r}")
    out = []
    for x in v:
        if isinstance(x, str) and x.strip().lstrip("#[").rstrip("]").isdigit():
            x = int(x.strip().lstrip("#[").rstrip("]"))
        if isinstance(x, bool) or not isinstance(x, (int, float)) or int(x) != x:
            raise BadAnswer(f"{what} must hold whole numbers, got {x!r}")
        out.append(int(x))
    return out


def _text(v, what, limit=None, required=True) -> str:
    if v is None and not required:
        return ""
    if not isinstance(v, str) or (required and not v.strip()):
        raise BadAnswer(f"{what} must be non-empty text, got {v!r}")
    return v.strip()[:limit] if limit else v.strip()


def _tags(v) -> list[str]:
    if v is None:
        return []
    if isinstance(v, str):
        v = [t for t in re.split(r"[,\s]+", v) if t]
    if not isinstance(v, list):
        raise BadAnswer(f"tags must be a list, got {v!r}")
    return [str(t).strip() for t in v if str(t).strip()][:12]


def gate(obj) -> dict:
    if not isinstance(obj, dict) or "save" not in obj:
        raise BadAnswer("gate answer must be an object with 'save'")
    if not obj["save"]:
        return {"save": False}
    content = _text(obj.get("content"), "content")
    return {"save": True, "content": content,
            "summary": _text(obj.get("summary") or content, "summary", 120),
            "tags": _tags(obj.get("tags")),
            "importance": _number(obj.get("importance", 5), 0, 10, "importance")}


def confidence(obj) -> float:
    if isinstance(obj, dict):
        obj = obj.get("confidence")
    return _number(obj, 0, 1, "confidence")


def contradiction(obj) -> dict:
    if isinstance(obj, list):  # the article's shape: a bare array of superseded ids
        return {"supersedes": _numbers(obj, "supersedes"), "confirms": []}
    if not isinstance(obj, dict):
        raise BadAnswer("contradiction answer must be a list or an object")
    return {"supersedes": _numbers(obj.get("supersedes", []), "supersedes"),
            "confirms": _numbers(obj.get("confirms", []), "confirms")}


def expiry(obj) -> str | None:
    if isinstance(obj, dict):
        obj = obj.get("expires_at")
    if obj in (None, "", "null", "none", "None"):
        return None
    if not isinstance(obj, str):
        raise BadAnswer(f"expires_at must be an ISO date or null, got {obj!r}")
    try:
        when = parse_time(obj)
    except ValueError as exc:
        raise BadAnswer(str(exc)) from None
    if len(obj.strip()) == 10:  # a bare date: true through the end of that day
        when = when.replace(hour=23, minute=59, second=59)
    return iso(when)


def cluster(obj) -> list[list[int]]:
    if isinstance(obj, dict):
        obj = obj.get("clusters")
    if not isinstance(obj, list):
        raise BadAnswer("cluster answer must be a list of groups")
    return [g for g in (_numbers(g, "a cluster") for g in obj) if len(set(g)) >= 2]


def merge(obj) -> dict:
    if not isinstance(obj, dict):
        raise BadAnswer("merge answer must be an object")
    content = _text(obj.get("content"), "content")
    return {"content": content, "summary": _text(obj.get("summary") or content, "summary", 120),
            "tags": _tags(obj.get("tags"))}


def select(obj) -> list[int]:
    if isinstance(obj, dict):
        obj = obj.get("ids", obj.get("selected"))
    return _numbers(obj, "selected ids")


def fused(obj) -> dict:
    """One call for the whole write: gate, confidence, supersedes, confirms, expiry."""
    if not isinstance(obj, dict):
        raise BadAnswer("fused answer must be an object")
    out = gate(obj)
    if not out["save"]:
        return out
    out["confidence"] = confidence(obj.get("confidence", 0.5))
    out.update(contradiction({"supersedes": obj.get("supersedes", []),
                              "confirms": obj.get("confirms", [])}))
    out["expires_at"] = expiry(obj.get("expires_at"))
    return out


def extract(obj) -> list[dict]:
    """Scene cells; bad cells are dropped, a bad answer gives no cells."""
    if isinstance(obj, dict):
        obj = obj.get("cells")
    if not isinstance(obj, list):
        raise BadAnswer("extract answer must be a list of cells")
    kinds = {"fact", "plan", "preference", "decision", "task", "risk"}
    cells = []
    for c in obj:
        if isinstance(c, dict) and c.get("kind", c.get("cell_type")) in kinds and \
                isinstance(c.get("content"), str) and c["content"].strip():
            cells.append({"scene": str(c.get("scene") or "general")[:60],
                          "kind": c.get("kind", c.get("cell_type")),
                          "salience": _number(c.get("salience", 0.5), 0, 1, "salience"),
                          "content": c["content"].strip()})
    return cells


def summarise(obj) -> str:
    if isinstance(obj, dict):
        obj = obj.get("summary")
    words = _text(obj, "summary").split()
    return " ".join(words[:100])


def today(now: dt.datetime) -> str:
    return now.date().isoformat()
