"""The official LongMemEval JSON, split into what the agent sees and what grading reads.

A `Case` is a question with its dated chat history, as pairs (a user turn and the
assistant turn that follows it, the unit `Memory.remember` takes), each at its own time.
A `Gold` holds the answer and which pairs are evidence (`has_answer`): `play` is handed
only the case, so nothing played can read the answer before recall.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import json
import re

Key = tuple[int, int]  # (session number in played order, pair number in the session)

TURN_GAP = dt.timedelta(minutes=1)  # between the pairs of one session (dates are per session)


@dataclasses.dataclass(frozen=True)
class Pair:
    key: Key
    at: dt.datetime
    user: str
    assistant: str


@dataclasses.dataclass(frozen=True)
class Case:
    """What the agent sees: the history in time order, then the question at its date."""

    qid: str
    qtype: str
    question: str
    asked_at: dt.datetime
    pairs: tuple[Pair, ...]


@dataclasses.dataclass(frozen=True)
class Gold:
    """What only grading reads. `newest`: the evidence pairs of the newest session holding
    evidence; `older`: the evidence pairs of earlier sessions (the superseded values, for
    knowledge-update)."""

    qid: str
    answer: str
    newest: frozenset
    older: frozenset
    texts: tuple = ()  # (key, the pair's raw text) of each newest evidence pair

    @property
    def has_evidence(self) -> bool:
        return bool(self.newest)


_DATE = re.compile(r"^\s*(\d{4})/(\d{1,2})/(\d{1,2})\s*(?:\([A-Za-z]+\))?\s*(\d{1,2}):(\d{2})\s*$")


def parse_date(text: str) -> dt.datetime:
    """'2023/05/30 (Tue) 23:40' -> datetime(2023, 5, 30, 23, 40)."""
    m = _DATE.match(text)
    if not m:
        raise ValueError(f"not a LongMemEval date: {text!r}")
    y, mo, d, h, mi = map(int, m.groups())
    return dt.datetime(y, mo, d, h, mi)


def pairs_of(turns: list[dict]) -> list[tuple[str, str, bool]]:
    """A session's turns as (user, assistant, evidence) pairs: each user turn with the
    assistant turns that follow it (none when another user turn follows at once); an
    assistant turn before any user turn has nothing to answer and is left out. A pair is
    evidence when either of its turns is marked `has_answer`."""
    out: list[list] = []
    for turn in turns:
        text, ev = turn.get("content") or "", bool(turn.get("has_answer"))
        if turn.get("role") == "user":
            out.append([text, "", ev])
        elif out:
            pair = out[-1]
            pair[1] = f"{pair[1]}\n{text}" if pair[1] else text
            pair[2] = pair[2] or ev
    return [tuple(p) for p in out if p[0].strip()]


def split(raw: dict) -> tuple[Case, Gold]:
    """One question of the official format as (Case, Gold)."""
    sessions = sorted(
        zip(map(parse_date, raw["haystack_dates"]), raw["haystack_session_ids"], raw["haystack_sessions"]),
        key=lambda s: s[0],
    )
    answer_sessions = set(raw.get("answer_session_ids") or [])
    pairs, evidence = [], []  # evidence: per session holding any, its evidence keys
    for s, (when, sid, turns) in enumerate(sessions):
        keys = []
        for j, (user, assistant, ev) in enumerate(pairs_of(turns)):
            pairs.append(Pair((s, j), when + j * TURN_GAP, user, assistant))
            if ev and (not answer_sessions or sid in answer_sessions):
                keys.append((s, j))
        if keys:
            evidence.append(keys)
    newest = frozenset(evidence[-1]) if evidence else frozenset()
    older = frozenset(k for keys in evidence[:-1] for k in keys)
    case = Case(
        raw["question_id"],
        raw["question_type"],
        raw["question"],
        parse_date(raw["question_date"]),
        tuple(pairs),
    )
    texts = tuple((p.key, f"{p.user}\n{p.assistant}") for p in pairs if p.key in newest)
    return case, Gold(raw["question_id"], str(raw["answer"]), newest, older, texts)


def split_of(qid: str) -> str:
    """'dev' when the last hex digit of sha1(question_id) is even, else 'held': a fixed
    split, so a change is made looking at dev questions and checked on held ones."""
    return "dev" if int(hashlib.sha1(qid.encode("utf-8")).hexdigest()[-1], 16) % 2 == 0 else "held"


def load(
    paths: list[str],
    types: list[str] | None = None,
    limit: int | None = None,
    ids: list[str] | None = None,
    part: str | None = None,
) -> list[tuple[Case, Gold]]:
    """The questions of `paths` (official JSON lists), of `types` if given, of the `part`
    ('dev' or 'held', see split_of) if given, the first `limit` of each type if given, in
    file order; a question id seen twice is read once."""
    seen, per_type, out = set(), {}, []
    for path in paths:
        with open(path, encoding="utf-8") as fh:
            raw = json.load(fh)
        for q in raw:
            qid, qtype = q["question_id"], q["question_type"]
            if qid in seen or (types and qtype not in types) or (ids and qid not in ids):
                continue
            if part is not None and split_of(qid) != part:
                continue
            if limit is not None and per_type.get(qtype, 0) >= limit:
                continue
            seen.add(qid)
            per_type[qtype] = per_type.get(qtype, 0) + 1
            out.append(split(q))
    return out
