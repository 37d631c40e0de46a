"""A sentence whose subject is a pronoun ("It needs new brakes") speaks of what the sentence
before it named: the rules gate keeps the two as one memory. Judged alone, "it" was either
dropped (no subject worth keeping) or stored as a memory that no query about the thing
could find. Sentences about different things stay memories of their own."""

from __future__ import annotations

import pytest

from engine.judges.rules.gating import memories


def contents(user: str) -> list[str]:
    return [m["content"] for m in memories(user, "")["memories"]]


@pytest.mark.parametrize(
    "user, words",
    [
        ("We adopted a greyhound in March. She is scared of thunderstorms.", ("greyhound", "thunderstorms")),
        ("I moved my blog to Hugo last week. It builds in under a second now.", ("Hugo", "second")),
        ("My landlord replaced the boiler. It makes a rattling noise at night.", ("boiler", "rattling")),
        (
            "I bought a used Volvo estate in May. It needs new brakes. It also has a cracked windscreen.",
            ("Volvo", "brakes", "windscreen"),
        ),
    ],
)
def test_a_pronoun_subject_joins_the_sentence_it_points_back_to(user, words):
    (one,) = contents(user)
    assert all(w in one for w in words), one


@pytest.mark.parametrize(
    "user, n",
    [
        ("I live in Lyon. My brother lives in Nice.", 2),  # two things: two memories
        ("Have you heard of Hugo? It is a static site generator.", 0),  # a question says nothing
        ("Thanks for the help! It's great.", 0),
    ],
)
def test_other_sentences_are_judged_as_before(user, n):
    assert len(contents(user)) == n, contents(user)


@pytest.mark.parametrize(
    "user, words",
    [
        # an opener before the pronoun ("For Sophia, it was ...")
        (
            "I keep a list of where I met my clients. For Marta, it was the climbing gym on Elm Street.",
            ("Marta", "climbing"),
        ),
    ],
)
def test_an_opener_before_the_pronoun_still_points_back(user, words):
    (one,) = contents(user)
    assert all(w in one for w in words), one


@pytest.mark.parametrize(
    "user, word",
    [
        ("The new rug is from Dunelm.", "Dunelm"),
        ("The replacement kettle came from Argos, and it works fine.", "Argos"),
        ("The couch is from West Elm.", "West Elm"),
    ],
)
def test_a_definite_subject_with_a_name_for_its_value_is_kept(user, word):
    (one,) = contents(user)
    assert word in one, one


@pytest.mark.parametrize("user", ["The weather is lovely today.", "The movie was great."])
def test_a_definite_subject_with_no_value_is_not(user):
    assert contents(user) == []
