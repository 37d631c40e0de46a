"""Recall's rules select fits a question to a memory in the words of the same family
(recall.yaml `related`): "what pet do I have" finds the beagle, "what computer" the
MacBook, "when do I go to Japan" the flight to Kyoto, though they share no word (issue 40:
the rules judges missed synonyms and kinds). A kind fits the thing it is a kind of, never
another kind of it, and only for a word no memory says itself."""

from __future__ import annotations

import pytest

from engine import FixedClock, Memory
from engine.judges import rules
from engine.judges.rules.selecting import RELATED
from engine.judges.rules.words import canon

FILLER = [
    "User prefers window seats on trains.",
    "The quarterly planning review is on the first Monday.",
    "User volunteers at the food bank on Saturdays.",
    "User is learning Portuguese with an app.",
    "The staging server runs Debian 12.",
    "User's favourite band is Radiohead.",
]


@pytest.mark.parametrize(
    "question, memory",
    [
        ("what pet do I have?", "User has a beagle called Rufus."),
        ("what computer do I code on?", "User codes on a MacBook Air from 2022."),
        ("when do I go to Japan?", "User flies to Kyoto on May 3."),
        ("how much is my mortgage?", "User's home loan costs 1,200 euros a month."),
        ("what bike do I ride?", "User commutes on a Brompton bicycle."),
        ("which instrument is Ana learning?", "Ana started cello lessons in September."),
        ("who is my family doctor?", "User's GP is Dr. Okafor on Mill Lane."),
        ("what does my kid like to eat?", "User's daughter only eats pasta with butter."),
        ("how do I stay fit?", "User runs 5K every morning before work."),
        ("what music do I like?", "User listens mostly to jazz, especially Coltrane."),
        ("who is my favourite artist?", "User's favourite singer is Adele."),
        ("when is my physiotherapy?", "User's physio session is on Thursday at 5pm."),
        ("any fears I have?", "User is afraid of flying."),
        ("which medicines should I avoid?", "User is allergic to penicillin."),
        ("what am I growing?", "User planted tomatoes and basil on the balcony."),
        ("do I have any medical conditions?", "User has type 2 diabetes."),
        # who mends what, and who is over whom
        ("the bathroom pipe is dripping, who do I call?", "User's plumber is Tomasz, 555-0199."),
        ("a socket stopped working, who fixes that?", "User's electrician is Ana Ruiz."),
        ("who is my boss?", "User's department head is Ms. Ortiz."),
    ],
)
def test_a_question_fits_a_memory_of_its_family(question, memory):
    candidates = list(enumerate([*FILLER[:3], memory, *FILLER[3:]], 1))
    assert rules.select(question, candidates, 3)[:1] == [4]


def test_through_the_public_api(tmp_path):
    mem = Memory(tmp_path / "m.db", policy="lifecycle", clock=FixedClock("2026-03-02T09:00:00"))
    for text in [*FILLER, "User has a beagle called Rufus."]:
        mem.add(text)
    assert [m.content for m in mem.recall("what pet do I have?")][:1] == ["User has a beagle called Rufus."]


def test_two_kinds_of_one_thing_do_not_fit_each_other():
    # a son is a kind of child, a daughter too: asking about the son is not asking about her
    candidates = list(enumerate([*FILLER, "User's daughter Lea loves her art class."], 1))
    assert rules.select("what does my son love?", candidates, 3) == []
    assert canon("daughter") not in RELATED[canon("son")]
    assert canon("son") in RELATED[canon("kid")]  # ... while 'my kid' asks about either


def test_a_memory_saying_the_word_itself_needs_no_family():
    # 'coffee' is said by a memory: the latte (a kind of coffee) is no answer beside it
    latte, coffee = "User orders a latte every afternoon.", "User drinks filter coffee at home."
    asked = "what kind of coffee do I like?"
    assert rules.select(asked, list(enumerate([*FILLER, latte, coffee], 1)), 3) == [8]
    # ... while with no memory saying it, the kind is what the question asks for
    assert rules.select(asked, list(enumerate([*FILLER, latte], 1)), 3) == [7]


def test_generic_words_belong_to_no_family():
    # 'work' and 'project' are in too many memories to say which one a question means
    assert canon("work") not in RELATED and canon("project") not in RELATED


def test_a_word_names_one_family_only():
    # two rows naming one token (or two words stemmed alike: 'career' and 'car') would join
    # their families: a question about a price would reach the budget, one about a car a job
    from engine.judges.lexicon import lexicon, words
    from engine.judges.rules.words import GENERIC

    named: dict[str, list[str]] = {}
    for row in lexicon("recall")["related"]:
        for token in {canon(w) for w in words(row.partition(":")[0])} - GENERIC:
            named.setdefault(token, []).append(row[:40])
    assert {token: rows for token, rows in named.items() if len(rows) > 1} == {}
    assert canon("car") not in RELATED[canon("occupation")]


@pytest.mark.parametrize(
    "question, memory",
    [
        ("which plants do I look after?", "User repots the houseplants every spring."),
        ("do I need a new brush?", "User's electric toothbrush needs a new head."),
        ("when is my checkup?", "User's annual check-up is booked with Dr. Lee."),
    ],
)
def test_a_word_found_whole_inside_a_longer_one_fits_it(question, memory):
    # a compound's last part ('houseplant'), a longer form: what no family row lists
    candidates = list(enumerate([*FILLER[:3], memory, *FILLER[3:]], 1))
    assert rules.select(question, candidates, 3)[:1] == [4]


def test_a_short_word_inside_a_longer_one_is_no_match():
    # 'art' in 'start', 'bike' in 'motorbike': under five letters, a part says too little
    candidates = list(enumerate([*FILLER, "User will start the new job on Monday."], 1))
    assert 7 not in rules.select("what art do I like?", candidates, 3)


def test_a_department_head_is_a_boss_and_a_head_is_not():
    candidates = list(enumerate([*FILLER[:3], "User hit their head on a kitchen cabinet.", *FILLER[3:]], 1))
    assert 4 not in rules.select("who is my boss?", candidates, 3)
