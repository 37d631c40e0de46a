"""Grading one outcome against its gold, and summing the grades per system and type.

Evidence recall and staleness come from provenance (which pairs each recalled item came
from); answer-in-context is the crude string-and-number cross-check.
"""

from __future__ import annotations

import dataclasses
import re

from .data import Gold
from .play import FATES, Outcome

KU = "knowledge-update"
CHARS_PER_TOKEN = 4  # the approximate tokens shown: characters / 4


@dataclasses.dataclass
class Grade:
    system: str
    qid: str
    qtype: str
    evidence: bool | None  # None: the question marks no evidence turn
    stale: bool | None  # None: not a knowledge-update question with older evidence
    in_context: bool
    recalled: int
    chars: int
    calls: int
    tokens: int
    seconds: float
    cpu: float = 0.0
    miss: str | None = None  # where the newest evidence went, for a miss
    error: str | None = None
    qa: bool | None = None  # the judge's verdict, when a reader and judge ran


def grade(out: Outcome, gold: Gold) -> Grade:
    ev = stale = None
    if gold.has_evidence:
        new_at = _first(out, gold.newest)
        ev = new_at is not None
        if out.qtype == KU and gold.older:
            old_at = _first(out, gold.older)
            stale = old_at is not None and (new_at is None or old_at < new_at)
    g = Grade(
        out.system,
        out.qid,
        out.qtype,
        ev,
        stale,
        answer_in(gold.answer, out.context),
        len(out.items),
        len(out.context),
        out.calls,
        out.tokens,
        out.seconds,
        out.cpu,
        error=out.error,
    )
    if ev is False:
        g.miss = miss(out, gold)
    return g


def _first(out: Outcome, keys: frozenset) -> int | None:
    """The rank of the first recalled item derived from one of `keys`."""
    return next((n for n, item in enumerate(out.items) if item.keys & keys), None)


def miss(out: Outcome, gold: Gold) -> str:
    """Where the newest evidence went: for a policy, the most alive fate among its pairs
    ('active' means stored and active, yet not recalled; 'stored without the answer' that
    the pair's text holds the answer and none of the memories it stored does: the gate kept
    another clause); for a raw retriever, it was there and not ranked in the top k."""
    if out.error:
        return "error"
    if out.fates is None:
        return "active"
    found = min((out.fates.get(k, "never stored") for k in gold.newest), key=FATES.index)
    if found == "active" and _answer_dropped(out, gold):
        return "stored without the answer"
    return found


def _answer_dropped(out: Outcome, gold: Gold) -> bool:
    """The raw evidence turn holds the answer, and what the policy kept of it does not."""
    raw = [k for k, text in gold.texts if answer_in(gold.answer, text)]
    kept = out.kept or {}
    return bool(raw) and not any(answer_in(gold.answer, t) for k in raw for t in kept.get(k, ()))


# ---- the answer-in-context cross-check ------------------------------------------------
_NUMBER_WORDS = {
    w: i
    for i, w in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
        "fifteen sixteen seventeen eighteen nineteen twenty".split()
    )
}
_NUMBER_WORDS.update({"thirty": 30, "forty": 40, "fifty": 50, "hundred": 100})
_ORDINALS = {
    "first": 1,
    "second": 2,
    "third": 3,
    "fourth": 4,
    "fifth": 5,
    "sixth": 6,
    "seventh": 7,
    "eighth": 8,
    "ninth": 9,
    "tenth": 10,
}
_NUM = re.compile(r"\d+(?:\.\d+)?")


def normalise(text: str) -> str:
    text = text.lower().replace(",", "")
    text = re.sub(r"(\d)(st|nd|rd|th)\b", r"\1", text)
    text = re.sub(r"\b(a|an|the)\b", " ", text)
    return " ".join(re.findall(r"[a-z0-9.$%]+", text)).replace(" .", " ")


def numbers(text: str) -> set[float]:
    t = normalise(text)
    found = {float(n) for n in _NUM.findall(t)}
    for w in t.split():
        w = w.strip(".")
        if w in _NUMBER_WORDS:
            found.add(float(_NUMBER_WORDS[w]))
        elif w in _ORDINALS:
            found.add(float(_ORDINALS[w]))
    return found


def answer_in(answer: str, context: str) -> bool:
    """Whether the gold answer shows in the context: its normalised text as a substring,
    or, for an answer that holds numbers, its first number among the context's numbers
    (spelled or written), or, for a short answer, all its words. Crude by design: a
    cross-check of the provenance figures, not a score."""
    a, c = normalise(answer), normalise(context)
    if not a or not c:
        return False
    if a in c:
        return True
    first = _NUM.search(a)
    if first or numbers(answer):
        want = float(first.group()) if first else min(numbers(answer))
        return want in numbers(context)
    words = [w for w in a.split() if len(w) > 2]
    return 0 < len(words) <= 5 and all(re.search(rf"\b{re.escape(w)}\b", c) for w in words)


# ---- sums -------------------------------------------------------------------------------
@dataclasses.dataclass
class Row:
    system: str
    qtype: str
    n: int
    evidence: tuple[int, int]  # (hits, questions with evidence)
    stale: tuple[int, int]  # (stale, knowledge-update questions with older evidence)
    in_context: int
    recalled: float
    chars: float
    calls: float
    tokens: float
    seconds: float
    cpu: float
    misses: dict
    errors: int
    qa: tuple[int, int] | None  # (correct, judged), None when no judge ran

    @property
    def approx_tokens(self) -> float:
        return self.chars / CHARS_PER_TOKEN


def summarise(grades: list[Grade], system: str, qtype: str = "all") -> Row:
    gs = [g for g in grades if g.system == system and qtype in ("all", g.qtype)]
    n = len(gs) or 1
    with_ev = [g for g in gs if g.evidence is not None]
    with_old = [g for g in gs if g.stale is not None]
    misses: dict[str, int] = {}
    for g in gs:
        if g.miss:
            misses[g.miss] = misses.get(g.miss, 0) + 1
    judged = [g for g in gs if g.qa is not None]
    return Row(
        system,
        qtype,
        len(gs),
        (sum(g.evidence for g in with_ev), len(with_ev)),
        (sum(g.stale for g in with_old), len(with_old)),
        sum(g.in_context for g in gs),
        sum(g.recalled for g in gs) / n,
        sum(g.chars for g in gs) / n,
        sum(g.calls for g in gs) / n,
        sum(g.tokens for g in gs) / n,
        sum(g.seconds for g in gs) / n,
        sum(g.cpu for g in gs) / n,
        misses,
        sum(bool(g.error) for g in gs),
        (sum(g.qa for g in judged), len(judged)) if judged else None,
    )
