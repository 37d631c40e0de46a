"""A thing the user has, named inside a question, is kept as a statement: "can you suggest
floor lamps that work with the Philips LED bulb I have in my bedside lamp?" tells that the
user has that bulb (issue 39: on LongMemEval the gate stored such turns without the fact,
and "what bulb is in my bedside lamp?" found nothing). A thing pointed back to ("the one I
have") or not named ("the room I have") is no fact, and a plain question stays unsaved."""

from __future__ import annotations

import pytest

from engine import FixedClock, Memory
from engine.judges import rules


@pytest.mark.parametrize(
    "turn, kept",
    [
        (
            "Any tips for descaling the Breville Barista Express I have in my kitchen?",
            "Breville Barista Express",
        ),
        ("What tyre pressure suits the Trek FX 3 that we keep in the garage?", "Trek FX 3"),
        ("Could you find a sleeve for the MacBook Air 13 I use, ideally grey?", "MacBook Air 13"),
    ],
)
def test_a_named_thing_the_user_has_is_kept(turn, kept):
    answer = rules.gate(turn, "Sure.")
    assert answer["save"] and kept in answer["content"] and not answer["content"].endswith("?")


@pytest.mark.parametrize(
    "turn",
    [
        "Is the one I have any good?",
        "Which lamp should I buy for the room I have?",
        "What is the best way to clean the tools we have?",
        "Could you recommend a good sci-fi novel?",
    ],
)
def test_no_named_thing_no_memory(turn):
    assert rules.gate(turn, "Sure.")["save"] is False


def test_recalled_by_the_thing(tmp_path):
    mem = Memory(tmp_path / "m.db", policy="lifecycle", clock=FixedClock("2026-03-02T09:00:00"), offline=True)
    mem.remember(
        "Any tips for descaling the Breville Barista Express I have in my kitchen?", "Use citric acid."
    )
    assert "Breville Barista Express" in " ".join(
        m.content for m in mem.recall("what do I keep in my kitchen?")
    )
