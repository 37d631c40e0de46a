"""Recall's rules select weighs the thing a question asks about ("what kind of lens did I
buy": lens) above the words of its asking ("buy", "recently"), when that word tells the
candidates apart (issue 39)."""

from __future__ import annotations

import pytest

from engine.judges import rules
from engine.judges.rules.selecting import asked_head

FILLER = [
    "User's sister lives in Leeds.",
    "The team meets on Mondays.",
    "User prefers tea over coffee.",
    "User is learning Portuguese.",
    "User's landlord fixed the boiler.",
    "User volunteers at the food bank.",
]


@pytest.mark.parametrize(
    "question, head",
    [
        ("What kind of lens did I purchase most recently?", {"len"}),
        ("Which brand of running shoes do I wear for races?", {"run", "sho"}),
        ("What was the restaurant that we booked for Friday?", {"restaurant"}),
        ("Which pair of boots did I waterproof last week?", {"boot"}),
        ("How many books have I read this year?", set()),
        ("Where do I keep my passport?", set()),
    ],
)
def test_the_head_of_a_question(question, head):
    assert asked_head(question) == head


def test_the_thing_asked_about_outranks_the_words_of_asking():
    memories = [
        (1, "User completed the first purchase on the new store account."),
        (2, "User recently started going to the climbing gym."),
        (3, "User's new 85mm portrait lens arrived from the shop."),
        (4, "User sold the old kit lens to a friend."),
        *enumerate(FILLER, 5),
    ]
    picked = rules.select("What kind of lens did I purchase most recently?", memories, 2)
    assert set(picked) == {3, 4}
