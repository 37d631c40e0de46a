"""What each step's answer must look like, and turning a model's text into that.

Checking is strict where leniency would be silently wrong: unknown keys, "false" as a
string that reads as true, an importance on a 0-1 scale, numbers that are not finite,
ids the prompt never showed, dates before today, a truncated answer. Each of those is a
`BadAnswer`, which the judge runner retries (telling the model why) and then answers with
the step's fallback.

A few shapes are safe to repair, and every repair is written down in `Check.repairs`
(the call is then logged as `repaired`, saying what): a ```json fence, one JSON object with
plain prose before or after it, numbers or ids sent as strings ("7", "#3"), "true" and
"false" as strings, a bare list or number where an object was asked for. Nothing ever
scans prose for the first `[...]`: "memory [2] is merely related" supersedes nothing.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import re

from engine.base.clock import is_bare_date, iso, naive, until_end_of_day

# re-exported: the checkers' shared vocabulary lives in engine.steps.decoding
from engine.steps.decoding import BadAnswer, Check, decode, finished  # noqa: F401

SUMMARY_CHARS = 120
REASON_CHARS = 200


# ---- small checkers ----------------------------------------------------------------------
_DECIMAL = re.compile(r"\s*-?\d+(?:\.\d+)?\s*", re.A)
_ID_TEXT = re.compile(r"\s*#?\s*(\d{1,9})\s*", re.A)


def _object(obj, what: str, allowed: set[str], required=()) -> dict:
    if not isinstance(obj, dict):
        raise BadAnswer(f"{what} answer must be a JSON object with {_names(allowed)}, got {_short(obj)}")
    unknown = [k for k in obj if k not in allowed]
    if unknown:
        raise BadAnswer(f"unknown key {_names(unknown)} in the {what} answer; its keys are {_names(allowed)}")
    for k in required:
        if k not in obj:
            raise BadAnswer(f"the {what} answer is missing '{k}'")
    return obj


def _names(keys) -> str:
    return ", ".join(f"'{k}'" for k in sorted(keys, key=str))


def _short(v) -> str:
    """A value quoted in a message: short, and safe to make from any decoded JSON."""
    try:
        text = repr(v) if isinstance(v, str) else json.dumps(v, ensure_ascii=False, default=str)
    except (ValueError, TypeError, RecursionError):
        text = f"a {type(v).__name__}"
    return text if len(text) <= 80 else text[:77] + "..."


def _bool(v, what: str, check: Check) -> bool:
    if isinstance(v, bool):
        return v
    if isinstance(v, str) and v.strip().lower() in ("true", "false"):
        check.repaired(f"{what} {v!r} read as {v.strip().lower()}")
        return v.strip().lower() == "true"
    raise BadAnswer(f"{what} must be true or false, got {_short(v)}")


def _number(v, lo: float, hi: float, what: str, check: Check) -> float:
    if isinstance(v, str):
        if not _DECIMAL.fullmatch(v):
            raise BadAnswer(f"{what} is not a number: {_short(v)}")
        check.repaired(f"{what} {v!r} read as a number")
        v = float(v)
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise BadAnswer(f"{what} must be a number from {lo:g} to {hi:g}, got {_short(v)}")
    if not math.isfinite(v) or not lo <= v <= hi:
        raise BadAnswer(f"{what} must be a number from {lo:g} to {hi:g}, got {v!r}")
    return float(v)


def _importance(v, check: Check) -> float:
    if isinstance(v, (int, float)) and not isinstance(v, bool) and 0 < v < 1:
        raise BadAnswer(f"importance {v!r} looks like a 0-1 scale; importance is 1 to 10")
    return _number(v, 1, 10, "importance", check)


def _id(x, what: str, check: Check) -> int:
    if isinstance(x, str):
        m = _ID_TEXT.fullmatch(x)
        if not m:
            raise BadAnswer(f"{what} must hold the numbers shown, got {_short(x)}")
        check.repaired(f"{what} {x!r} read as {int(m.group(1))}")
        return int(m.group(1))
    if isinstance(x, float) and math.isfinite(x) and x == int(x):
        check.repaired(f"{what} {x!r} read as {int(x)}")
        return int(x)
    if isinstance(x, bool) or not isinstance(x, int):
        raise BadAnswer(f"{what} must hold whole numbers, got {_short(x)}")
    return x


def _ids(v, what: str, check: Check) -> list[int]:
    """Numbers the prompt showed; "3" and "#3" are 3, repeats are dropped."""
    if v is None:
        check.repaired(f"{what} null read as []")
        return []
    if not isinstance(v, list):
        raise BadAnswer(f"{what} must be a list of numbers, got {_short(v)}")
    out = [_id(x, what, check) for x in v]
    if check.shown is not None:
        unknown = [n for n in out if n not in check.shown]
        if unknown:
            raise BadAnswer(
                f"{what}: {_short(unknown)} {'was' if len(unknown) == 1 else 'were'} "
                f"not shown; use only the numbers shown ({_span(check.shown)})"
            )
    kept = list(dict.fromkeys(out))
    if len(kept) != len(out):
        check.repaired(f"{what}: dropped repeated numbers")
    return kept


def _span(shown: frozenset[int]) -> str:
    if not shown:
        return "none were shown"
    nums = sorted(shown)
    return (
        f"{nums[0]}-{nums[-1]}" if nums == list(range(nums[0], nums[-1] + 1)) else ", ".join(map(str, nums))
    )


def _text(v, what: str, check: Check, limit: int | None = None, required=True) -> str:
    if v is None and not required:
        return ""
    if not isinstance(v, str) or (required and not v.strip()):
        raise BadAnswer(f"{what} must be non-empty text, got {_short(v)}")
    text = v.strip()
    if limit and len(text) > limit:
        check.repaired(f"{what} cut to {limit} characters")
        text = text[:limit].rstrip()
    return text


def _tags(v, check: Check) -> list[str]:
    if v is None:
        return []
    if isinstance(v, str):
        check.repaired("tags given as text, split into a list")
        v = [t for t in re.split(r"[,\s]+", v) if t]
    if not isinstance(v, list) or not all(isinstance(t, str) for t in v):
        raise BadAnswer(f"tags must be a list of words, got {_short(v)}")
    return [t.strip() for t in v if t.strip()][:12]


def _summary(obj: dict, content: str, check: Check) -> str:
    given = obj.get("summary")
    if given is None or (isinstance(given, str) and not given.strip()):
        return content[:SUMMARY_CHARS]
    return _text(given, "summary", check, SUMMARY_CHARS)


# ---- one checker per step kind -------------------------------------------------------------
MEMORY_KEYS = {"content", "summary", "tags", "importance"}
GATE_KEYS = {"save", "memories"} | MEMORY_KEYS
MAX_MEMORIES = 12  # memories one turn may yield; more is a sweep, cut and said
# a gate answer that both keeps nothing and gives memories: not asked again (a model asked
# again empties the list to agree with its `false`), the step's fallback judges the turn
UNDECIDED = "save is false but memories with content were given"


def gate(obj, check: Check) -> dict:
    """{"save": bool, "memories": [{content, summary, tags, importance}, ...]}: a turn with
    several facts yields several memories. The one-memory shape (content, summary, tags
    and importance beside `save`) is read as a list of one. An item that does not fit
    (empty, not an object, a repeat of another) is dropped and the repair says so; an
    answer that saves with no usable item is a bad answer."""
    obj = _object(obj, "gate", GATE_KEYS, required=("save",))
    if not _bool(obj["save"], "save", check):
        if _says_something(obj):
            # one half of the answer keeps nothing, the other gives memories: taking either
            # half would lose a fact or keep small talk
            raise BadAnswer(UNDECIDED)
        return {"save": False}
    items = _gate_items(obj, check)
    memories: list[dict] = []
    problems: list[str] = []
    for n, item in enumerate(items, 1):
        try:
            memory = _memory(item, check)
        except BadAnswer as exc:
            problems.append(f"memory {n}: {exc}")
            continue
        if any(m["content"].casefold() == memory["content"].casefold() for m in memories):
            problems.append(f"memory {n} repeats an earlier one")
            continue
        memories.append(memory)
    if not memories:
        raise BadAnswer(
            f"save is true but no usable memory was given ({problems[0] if problems else 'none'})"
        )
    if problems:
        check.repaired(f"dropped {len(problems)} of {len(items)} memories: {'; '.join(problems)[:300]}")
    if len(memories) > MAX_MEMORIES:
        check.repaired(f"kept the first {MAX_MEMORIES} of {len(memories)} memories")
        memories = memories[:MAX_MEMORIES]
    return {"save": True, "memories": memories}


def _says_something(obj: dict) -> bool:
    """Does a gate answer hold a memory with content, in either shape?"""
    given = obj.get("memories")
    items: list = given if isinstance(given, list) else []
    found = [obj.get("content")] + [i.get("content") for i in items if isinstance(i, dict)]
    return any(isinstance(c, str) and c.strip() for c in found)


def _gate_items(obj: dict, check: Check) -> list:
    single = {k: obj[k] for k in MEMORY_KEYS if k in obj}
    if "memories" not in obj:
        return [single]
    items = obj["memories"]
    if not isinstance(items, list):
        raise BadAnswer(f"memories must be a list of objects, got {_short(items)}")
    if single.get("content") not in (None, ""):  # both shapes: the top one is a memory too
        check.repaired("content beside memories read as one more memory")
        return [single, *items]
    return items


def _memory(item, check: Check) -> dict:
    item = _object(item, "memory", MEMORY_KEYS, required=("content",))
    content = _text(item.get("content"), "content", check)
    if "importance" not in item:
        check.repaired("importance missing, 5 assumed")
    return {
        "content": content,
        "summary": _summary(item, content, check),
        "tags": _tags(item.get("tags"), check),
        "importance": _importance(item.get("importance", 5), check),
    }


def one_memory(value: dict) -> dict:
    """A gate's checked answer as one memory's fields (its first memory), for the steps
    that write one memory (fused) and for answers kept from before the list."""
    if not value.get("save"):
        return {"save": False}
    if "memories" not in value:
        return value
    return {"save": True, **value["memories"][0]}


def confidence(obj, check: Check) -> float:
    if isinstance(obj, (int, float, str)) and not isinstance(obj, bool):
        check.repaired("a bare number read as the confidence")
        return _number(obj, 0, 1, "confidence", check)
    obj = _object(obj, "confidence", {"confidence"}, required=("confidence",))
    return _number(obj["confidence"], 0, 1, "confidence", check)


def contradiction(obj, check: Check) -> dict:
    """{"supersedes": [...], "confirms": [...]}; a supersession may be {"n": 2, "reason": ...}.
    Returns the numbers, and the reasons by number."""
    if isinstance(obj, list):  # the article's shape: a bare array of superseded numbers
        check.repaired("a bare list read as supersedes")
        obj = {"supersedes": obj}
    obj = _object(obj, "contradiction", {"supersedes", "confirms"})
    if not obj:
        raise BadAnswer("the contradiction answer is empty: give 'supersedes' and 'confirms'")
    supersedes, reasons = _supersessions(obj.get("supersedes", []), check)
    confirms = _ids(obj.get("confirms", []), "confirms", check)
    both = set(supersedes) & set(confirms)
    if both:
        raise BadAnswer(f"{_short(sorted(both))} both superseded and confirmed: choose one")
    if check.max_supersedes is not None and len(supersedes) > check.max_supersedes:
        raise BadAnswer(
            f"{len(supersedes)} memories superseded; at most {check.max_supersedes} "
            "may be superseded by one new memory"
        )
    return {"supersedes": supersedes, "confirms": confirms, "reasons": reasons}


def _supersessions(v, check: Check) -> tuple[list[int], dict[int, str]]:
    if not isinstance(v, list):
        return _ids(v, "supersedes", check), {}
    numbers, reasons = [], {}
    for item in v:
        if isinstance(item, dict):
            item = _object(item, "supersedes item", {"n", "reason"}, required=("n",))
            n = _id(item["n"], "supersedes", check)
            if item.get("reason") is not None:
                reasons[n] = _text(item["reason"], "reason", check, REASON_CHARS, required=False)
            item = n
        numbers.append(item)
    return _ids(numbers, "supersedes", check), reasons


_DATE_TEXT = re.compile(
    r"\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d{1,6})?)?"
    r"(?:Z|[+-]\d{2}:?\d{2})?)?",
    re.A,
)


def expiry(obj, check: Check) -> str | None:
    if isinstance(obj, str):
        check.repaired("a bare date read as expires_at")
        obj = {"expires_at": obj}
    obj = _object(obj, "expiry", {"expires_at"}, required=("expires_at",))
    return _expires_at(obj["expires_at"], check)


def _expires_at(v, check: Check) -> str | None:
    if v is None:
        return None
    if isinstance(v, str) and v.strip().lower() in ("", "null", "none"):
        check.repaired(f"expires_at {v!r} read as null")
        return None
    if not isinstance(v, str) or not _DATE_TEXT.fullmatch(v.strip()):
        raise BadAnswer(f"expires_at must be an ISO date (YYYY-MM-DD) or null, got {_short(v)}")
    when = end_of(v.strip())
    if check.now is not None:
        today = check.now.date()
        if when.date() < today:
            raise BadAnswer(f"expires_at {v.strip()} is before today ({today.isoformat()})")
        if when < naive(check.now):
            raise BadAnswer(f"expires_at {v.strip()} has already passed (now {iso(check.now)})")
    return iso(when)


def end_of(text: str) -> dt.datetime:
    """An ISO date or datetime as the moment a memory stops being true: a date, or a
    datetime at midnight (models write `T00:00:00Z` meaning "that day"), is the end of
    that day; any other time is converted from its zone to the store's UTC."""
    try:
        if is_bare_date(text):  # the one rule, in engine.base.clock
            return until_end_of_day(text)
        when = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
        if when.time() == dt.time(0, 0):
            return dt.datetime.combine(when.date(), dt.time(23, 59, 59))
        return naive(when).replace(microsecond=0)
    except (ValueError, OverflowError) as exc:
        raise BadAnswer(f"expires_at {text!r} is not a real date: {exc}") from None


def cluster(obj, check: Check) -> list[list[int]]:
    if isinstance(obj, list):
        check.repaired("a bare list read as clusters")
        obj = {"clusters": obj}
    obj = _object(obj, "cluster", {"clusters"}, required=("clusters",))
    groups = obj["clusters"]
    if not isinstance(groups, list):
        raise BadAnswer(f"clusters must be a list of groups, got {_short(groups)}")
    out = []
    for g in groups:
        ids = _ids(g, "a cluster", check)
        if len(ids) >= 2:
            out.append(ids)
        else:
            check.repaired(f"dropped a group of {len(ids)}")
    return out


def merge(obj, check: Check) -> dict:
    obj = _object(obj, "merge", {"content", "summary", "tags"}, required=("content",))
    content = _text(obj["content"], "content", check)
    return {
        "content": content,
        "summary": _summary(obj, content, check),
        "tags": _tags(obj.get("tags"), check),
    }


def select(obj, check: Check) -> list[int]:
    if isinstance(obj, list):
        check.repaired("a bare list read as ids")
        obj = {"ids": obj}
    obj = _object(obj, "select", {"ids"}, required=("ids",))
    ids = _ids(obj["ids"], "ids", check)
    if check.top_n is not None and len(ids) > check.top_n:
        check.repaired(f"kept the first {check.top_n} of {len(ids)} ids")
        ids = ids[: check.top_n]
    return ids


FUSED_GATE_KEYS = {"save"} | MEMORY_KEYS  # one memory: its supersedes and expiry are its own
FUSED_KEYS = FUSED_GATE_KEYS | {"confidence", "supersedes", "confirms", "expires_at"}


def fused(obj, check: Check) -> dict:
    """One call for the whole write: gate, confidence, supersedes, confirms, expiry."""
    obj = _object(obj, "fused", FUSED_KEYS, required=("save",))
    out = one_memory(gate({k: v for k, v in obj.items() if k in FUSED_GATE_KEYS}, check))
    if not out["save"]:
        return out
    if "confidence" not in obj:
        raise BadAnswer("the fused answer is missing 'confidence'")
    out["confidence"] = _number(obj["confidence"], 0, 1, "confidence", check)
    out.update(
        contradiction({"supersedes": obj.get("supersedes", []), "confirms": obj.get("confirms", [])}, check)
    )
    if "expires_at" not in obj:
        check.repaired("expires_at missing: no end date")
    out["expires_at"] = _expires_at(obj.get("expires_at"), check)
    return out


CELL_KINDS = ("fact", "plan", "preference", "decision", "task", "risk")
CELL_KEYS = {"scene", "kind", "salience", "content"}


def extract(obj, check: Check) -> list[dict]:
    """Scene cells. A cell that does not fit is dropped (and the repair says so); an
    answer whose every cell is bad is a bad answer."""
    if isinstance(obj, list):
        check.repaired("a bare list read as cells")
        obj = {"cells": obj}
    obj = _object(obj, "extract", {"cells"}, required=("cells",))
    if not isinstance(obj["cells"], list):
        raise BadAnswer(f"cells must be a list, got {_short(obj['cells'])}")
    cells, problems = [], []
    for c in obj["cells"]:
        try:
            cells.append(_cell(c, check))
        except BadAnswer as exc:
            problems.append(str(exc))
    if problems and not cells:
        raise BadAnswer(f"no usable cell: {problems[0]}")
    if problems:
        check.repaired(f"dropped {len(problems)} bad cell(s): {problems[0]}")
    return cells


def _cell(c, check: Check) -> dict:
    c = _object(c, "cell", CELL_KEYS, required=("kind", "content"))
    if c["kind"] not in CELL_KINDS:
        raise BadAnswer(f"cell kind must be one of {', '.join(CELL_KINDS)}, got {_short(c['kind'])}")
    scene = c.get("scene")
    return {
        "scene": (scene.strip()[:60] if isinstance(scene, str) and scene.strip() else "general"),
        "kind": c["kind"],
        "salience": _number(c.get("salience", 0.5), 0, 1, "salience", check),
        "content": _text(c["content"], "content", check),
    }


def summarise(obj, check: Check) -> str:
    if isinstance(obj, str):
        check.repaired("a bare string read as the summary")
        obj = {"summary": obj}
    obj = _object(obj, "summarise", {"summary"}, required=("summary",))
    words = _text(obj["summary"], "summary", check).split()
    if len(words) > 100:
        check.repaired(f"summary cut from {len(words)} to 100 words")
    return " ".join(words[:100])


def today(now: dt.datetime) -> str:
    return now.date().isoformat()
