"""Reading a judge's answer: the classes every checker shares (`BadAnswer`, `Check`), and
turning a model's text into one JSON value, with every repair written down."""

from __future__ import annotations

import datetime as dt
import json
import re
from dataclasses import dataclass, field

MAX_ANSWER_CHARS = 100_000  # a judge answer is a few hundred characters


class BadAnswer(ValueError):
    """An answer that does not fit the step's schema."""


@dataclass
class Check:
    """What checking one answer needs besides the answer, and what it had to repair."""

    shown: frozenset[int] | None = None  # numbers the prompt showed (None: not checked)
    now: dt.datetime | None = None  # dates before today are refused
    top_n: int | None = None  # select keeps at most this many
    max_supersedes: int | None = None  # contradiction refuses more than this many
    repairs: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # set aside, not repaired (reasoning)

    def repaired(self, what: str) -> None:
        self.repairs.append(what)

    @classmethod
    def of(cls, variables: dict, shows_candidates: bool) -> "Check":
        """The check for an answer to a prompt rendered from these template variables."""
        shown = None
        if shows_candidates:
            shown = frozenset(
                c["n"]
                for c in variables.get("candidates") or ()
                if isinstance(c, dict) and isinstance(c.get("n"), int)
            )
        now = variables.get("now")
        return cls(
            shown=shown,
            now=now if isinstance(now, dt.datetime) else None,
            top_n=_whole_or_none(variables.get("top_n")),
            max_supersedes=_whole_or_none(variables.get("max_supersedes")),
        )


def _whole_or_none(v) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else None


# ---- the text of an answer to a JSON value ----------------------------------------------
_REASONING = re.compile(r"\A\s*<(think|thinking|reasoning)>.*?</\1>", re.S | re.I)
_FENCE = re.compile(r"```[ \t]*(?:json|JSON)?[ \t]*\n?(.*?)\n?[ \t]*```", re.S)
_PLAIN_PROSE = re.compile(r"[^{}\[\]`]*")  # prose that cannot hide another JSON value


def finished(finish_reason, refusal) -> None:
    """A completion the model did not finish, or refused, is a bad answer whatever it says."""
    if isinstance(refusal, str) and refusal.strip():
        raise BadAnswer(f"the model refused: {refusal.strip()[:160]}")
    if finish_reason == "length":
        raise BadAnswer("the answer was cut off (finish_reason 'length'): answer shorter")
    if finish_reason == "content_filter":
        raise BadAnswer("the answer was withheld by a content filter (finish_reason 'content_filter')")


def decode(answer, check: Check) -> object:
    """A provider's answer to a JSON value: objects from the rules judges pass through,
    text is read as JSON after setting reasoning aside; repairs go into `check`."""
    if not isinstance(answer, str):
        return answer
    if len(answer) > MAX_ANSWER_CHARS:
        raise BadAnswer(f"the answer is {len(answer)} characters long; a judgment is a short JSON object")
    text = set_aside_reasoning(answer, check).strip()
    if not text:
        raise BadAnswer("empty answer")
    text = _unfence(text, check)
    try:
        return loads(text)
    except BadAnswer as exc:
        if not str(exc).startswith("not JSON"):
            raise
    return _object_in_prose(text, check)


def set_aside_reasoning(text: str, check: Check) -> str:
    """Drop `<think>...</think>` before the answer (and a reasoning preamble that only
    closes the tag); an unclosed `<think>` means the model never got to answer."""
    kept = text
    while m := _REASONING.match(kept):
        kept = kept[m.end() :]
    head = kept.lstrip()[:8].lower()
    if head.startswith(("<think>", "<thinkin", "<reasoni")):
        raise BadAnswer("the answer is all reasoning: <think> was never closed")
    close = kept.find("</think>")
    if close >= 0 and not re.search(r"[{\[]", kept[:close]):
        kept = kept[close + len("</think>") :]
    if len(kept) != len(text):
        check.notes.append(f"reasoning set aside ({len(text) - len(kept)} characters)")
    return kept


def _unfence(text: str, check: Check) -> str:
    m = _FENCE.search(text)
    if m is None:
        return text
    fences = _FENCE.findall(text)
    if len(fences) > 1:
        raise BadAnswer("the answer holds several code blocks: give one JSON object")
    if text[: m.start()].strip() or text[m.end() :].strip():
        check.repaired("took the JSON out of the one code block in prose")
    else:
        check.repaired("removed a code fence")
    return fences[0].strip()


def _object_in_prose(text: str, check: Check) -> object:
    """One JSON object at the start or the end of the text, the rest plain prose with no
    brackets: "Here it is: {...}" or "{...} I chose this because ...". Nothing else."""
    decoder = json.JSONDecoder(parse_constant=_no_constant)
    for start in {0, text.find("{")} - {-1}:
        if not _PLAIN_PROSE.fullmatch(text[:start]):
            continue
        try:
            value, end = decoder.raw_decode(text, start)
        except (ValueError, RecursionError):
            continue
        if isinstance(value, dict) and _PLAIN_PROSE.fullmatch(text[end:]):
            where = "before" if start else "after"
            check.repaired(f"ignored the prose {where} the JSON object")
            return value
    raise BadAnswer(f"not JSON: {text[:80]!r}")


def _no_constant(name: str):
    raise BadAnswer(f"{name} is not a number JSON allows")


def loads(text: str) -> object:
    """json.loads that refuses NaN and Infinity and survives any nesting."""
    try:
        return json.loads(text, parse_constant=_no_constant)
    except RecursionError:
        raise BadAnswer("the answer is nested too deeply") from None
    except ValueError as exc:
        if isinstance(exc, BadAnswer):
            raise
        raise BadAnswer(f"not JSON: {text[:80]!r}") from None
