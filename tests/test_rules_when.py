"""A question naming a past time relative to when it is asked ("what did I buy 10 days
ago?", "last Saturday") is about what the user said then: the rules recall favours the
memories said within that time, whatever words they used."""

from __future__ import annotations

import datetime as dt
from datetime import date

import pytest

from engine import FixedClock, Memory
from engine.judges.rules.selecting import select
from engine.judges.rules.when import asked_window

TODAY = date(2026, 9, 18)  # a Friday


@pytest.mark.parametrize(
    "query, first, last",
    [
        ("Which museum did I visit 12 days ago?", date(2026, 9, 5), date(2026, 9, 7)),
        ("what did I cook three weeks ago", date(2026, 8, 25), date(2026, 8, 31)),
        ("Who called me last Tuesday?", date(2026, 9, 14), date(2026, 9, 16)),
        ("Who called me last Friday?", date(2026, 9, 10), date(2026, 9, 12)),
        ("What did I order yesterday?", date(2026, 9, 16), date(2026, 9, 17)),
        ("Where did I go last weekend?", date(2026, 9, 11), date(2026, 9, 14)),
        ("What book did I finish last month?", date(2026, 7, 27), date(2026, 9, 5)),
        ("what did I fix a couple of days ago", date(2026, 9, 14), date(2026, 9, 18)),
    ],
)
def test_a_relative_time_is_a_window_of_days(query, first, last):
    assert asked_window(query, TODAY) == (first, last)


@pytest.mark.parametrize(
    "query", ["What is my sister's name?", "How many days ago did I start?", "When is the meetup?", ""]
)
def test_no_window_when_no_past_time_is_named(query):
    assert asked_window(query, TODAY) is None


CANDIDATES = [
    (1, "User's favourite gadget is an old Kindle."),
    (2, "User picked up a cast-iron skillet at the flea market."),
    (3, "User's gadget drawer is full of cables."),
]
SAID = {1: date(2026, 6, 2), 2: date(2026, 9, 8), 3: date(2026, 9, 1)}


def test_what_was_said_in_the_window_is_picked_without_a_shared_word():
    query = "What gadget did I buy 10 days ago?"
    assert select(query, CANDIDATES, 2, said=SAID, today=TODAY)[0] == 2
    assert 2 not in select(query, CANDIDATES, 2)  # without the times: words only


def test_times_outside_any_window_change_nothing():
    query = "What is my favourite gadget?"
    assert select(query, CANDIDATES, 3, said=SAID, today=TODAY) == select(query, CANDIDATES, 3)


def test_recall_finds_the_turn_said_on_the_day_the_question_names(tmp_path):
    start = dt.datetime(2026, 8, 1, 10, 0)
    clock = FixedClock(start)
    with Memory(str(tmp_path / "m.db"), policy="lifecycle", offline=True, clock=clock) as mem:
        turns = [
            (0, "My favourite kitchen gadget is the old waffle iron my grandmother left me."),
            (20, "I just bought a dehydrator at the farmers' market."),
            (30, "I keep my spare batteries and cables in the kitchen drawer."),
        ]
        for days, text in turns:
            clock.set(start + dt.timedelta(days=days))
            assert mem.remember(text, "Nice!").stored
        clock.set(start + dt.timedelta(days=30, hours=2))
        recalled = [m.content for m in mem.recall("Which kitchen gadget did I get 10 days ago?")]
        assert recalled and "dehydrator" in recalled[0]


# what a memory tells of its own time: said on one day, about an earlier one
FENCE = "User repainted the garden fence two weeks ago."  # said yesterday, done two weeks before
DOOR = "User repainted the bathroom door."  # said yesterday, about yesterday
SAID_YESTERDAY = {1: date(2026, 9, 17), 2: date(2026, 9, 17)}


def test_a_memory_counts_from_the_day_it_tells_not_the_day_it_was_said():
    for query in ("What did I repaint 15 days ago?", "What did I repaint 16 days ago?"):
        assert select(query, [(1, DOOR), (2, FENCE)], 2, said=SAID_YESTERDAY, today=TODAY)[0] == 2


def test_a_memory_without_a_time_of_its_own_counts_from_the_day_it_was_said():
    query = "What did I repaint yesterday?"
    assert select(query, [(1, FENCE), (2, DOOR)], 2, said=SAID_YESTERDAY, today=TODAY)[0] == 2
