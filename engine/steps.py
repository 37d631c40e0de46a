"""Step kinds: the one table every part of the engine reads about a judgment.

A step kind is a question the engine asks a model (or the rules judges): whether a turn is
worth saving, how sure it is, what it contradicts, ... Each entry says where the step runs,
whether it is shown candidates, how its answer is checked, and what happens when the
answer is unusable. Policy validation, answer checking, the rules provider and the write
pipeline all read this table: a new step kind costs one entry here (and its judges).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from . import answers


@dataclass(frozen=True)
class StepKind:
    name: str
    phase: str                  # "write" (remember pipeline), "pass" (compression), "recall"
    parse: Callable[[object], object]   # a decoded answer -> the checked value (BadAnswer)
    shows_candidates: bool = False      # the prompt lists other memories under local numbers
    fallback: str = "rules"             # default when the answer is unusable: rules, skip, keep
    after_store: bool = False           # runs once the turn's memories are stored (summarise)


KINDS: dict[str, StepKind] = {k.name: k for k in (
    StepKind("gate", "write", answers.gate),
    StepKind("confidence", "write", answers.confidence),
    StepKind("contradiction", "write", answers.contradiction, shows_candidates=True),
    StepKind("expiry", "write", answers.expiry),
    StepKind("fused", "write", answers.fused, shows_candidates=True),
    StepKind("extract", "write", answers.extract),
    StepKind("summarise", "write", answers.summarise, after_store=True),
    StepKind("cluster", "pass", answers.cluster, shows_candidates=True),
    StepKind("merge", "pass", answers.merge),
    StepKind("select", "recall", answers.select, shows_candidates=True),
)}

WRITE_KINDS = tuple(k for k, v in KINDS.items() if v.phase == "write")


def kind(name: str) -> StepKind:
    return KINDS[name]


def parse(step: str, answer) -> object:
    """A provider's answer (text or an object) to the step's checked value."""
    return KINDS[step].parse(answers.parse_json(answer))
