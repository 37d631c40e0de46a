"""Step kinds: the one table every part of the engine reads about a judgment.

A step kind is a question the engine asks a model (or the rules judges): whether a turn is
worth saving, how sure it is, what it contradicts, ... Each entry says where the step runs,
whether it is shown candidates, the JSON schema its answer must follow (sent to the model
as `response_format`), how its answer is checked, and what happens when the answer is
unusable. Policy validation, answer checking, the providers, the rules judges and the
write pipeline all read this table: a new step kind costs one entry here (and its judges).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from engine.steps import answers


@dataclass(frozen=True)
class StepKind:
    name: str
    phase: str  # "write" (remember pipeline), "pass" (compression), "recall"
    parse: Callable[[object, answers.Check], object]  # decoded answer -> checked value (BadAnswer)
    schema: dict  # the answer's JSON schema, strict-mode shaped (see _object)
    shows_candidates: bool = False  # the prompt lists other memories under local numbers
    fallback: str = "rules"  # default when the answer is unusable: rules, skip, keep
    after_store: bool = False  # runs once the turn's memories are stored (summarise)
    # reads only what the gate (or extract) decided, not another such step's answer: the
    # write pipeline asks all of a run of these at once (two round trips, not four)
    alongside: bool = False


# ---- answer schemas ------------------------------------------------------------------------
# Strict structured outputs want every property required and no others allowed; the
# checkers in answers.py are the real gate (a server may ignore the schema).
def _object(**properties) -> dict:
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties),
        "additionalProperties": False,
    }


def _number(lo: float, hi: float) -> dict:
    return {"type": "number", "minimum": lo, "maximum": hi}


_TEXT = {"type": "string"}
_TAGS = {"type": "array", "items": _TEXT}
_NUMBERS = {"type": "array", "items": {"type": "integer"}}
_SUPERSEDES = {"type": "array", "items": _object(n={"type": "integer"}, reason=_TEXT)}
_DATE_OR_NULL = {"anyOf": [{"type": "string", "description": "YYYY-MM-DD"}, {"type": "null"}]}
_MEMORY = dict(content=_TEXT, summary=_TEXT, tags=_TAGS, importance=_number(1, 10))
_GATE = dict(save={"type": "boolean"}, **_MEMORY)  # one memory (fused)

SCHEMAS = {
    "gate": _object(save={"type": "boolean"}, memories={"type": "array", "items": _object(**_MEMORY)}),
    "confidence": _object(confidence=_number(0, 1)),
    "contradiction": _object(supersedes=_SUPERSEDES, confirms=_NUMBERS),
    "expiry": _object(expires_at=_DATE_OR_NULL),
    "fused": _object(
        **_GATE, confidence=_number(0, 1), supersedes=_SUPERSEDES, confirms=_NUMBERS, expires_at=_DATE_OR_NULL
    ),
    "extract": _object(
        cells={
            "type": "array",
            "items": _object(
                scene=_TEXT,
                kind={"type": "string", "enum": list(answers.CELL_KINDS)},
                salience=_number(0, 1),
                content=_TEXT,
            ),
        }
    ),
    "summarise": _object(summary=_TEXT),
    "cluster": _object(clusters={"type": "array", "items": _NUMBERS}),
    "merge": _object(content=_TEXT, summary=_TEXT, tags=_TAGS),
    "select": _object(ids=_NUMBERS),
}

KINDS: dict[str, StepKind] = {
    k.name: k
    for k in (
        StepKind("gate", "write", answers.gate, SCHEMAS["gate"]),
        StepKind("confidence", "write", answers.confidence, SCHEMAS["confidence"], alongside=True),
        StepKind(
            "contradiction",
            "write",
            answers.contradiction,
            SCHEMAS["contradiction"],
            shows_candidates=True,
            alongside=True,
        ),
        StepKind("expiry", "write", answers.expiry, SCHEMAS["expiry"], alongside=True),
        StepKind("fused", "write", answers.fused, SCHEMAS["fused"], shows_candidates=True),
        StepKind("extract", "write", answers.extract, SCHEMAS["extract"]),
        StepKind("summarise", "write", answers.summarise, SCHEMAS["summarise"], after_store=True),
        StepKind("cluster", "pass", answers.cluster, SCHEMAS["cluster"], shows_candidates=True),
        StepKind("merge", "pass", answers.merge, SCHEMAS["merge"]),
        StepKind("select", "recall", answers.select, SCHEMAS["select"], shows_candidates=True),
    )
}

WRITE_KINDS = tuple(k for k, v in KINDS.items() if v.phase == "write")


def kind(name: str) -> StepKind:
    return KINDS[name]


def schema(step: str) -> dict | None:
    """The JSON schema a step's answer must follow (None for a step this table lacks)."""
    k = KINDS.get(step)
    return k.schema if k else None


def parse(step: str, answer, check: answers.Check | None = None) -> object:
    """A provider's answer (text or an object) to the step's checked value; repairs made
    on the way are listed in `check.repairs`. Raises BadAnswer."""
    check = check if check is not None else answers.Check()
    return KINDS[step].parse(answers.decode(answer, check), check)


def check_for(step: str, variables: dict) -> answers.Check:
    """What checking an answer to this step, rendered from these variables, needs to know."""
    return answers.Check.of(variables, KINDS[step].shows_candidates)
