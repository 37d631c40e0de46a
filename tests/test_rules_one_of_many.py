"""A change to one of several things ("I sold one of my bikes") is not a change to the one
thing an old memory is about ("User's bike is a Brompton"): which one is not said. A count
of what the user owns moves on when the new count is the user's ("owns 3 bikes" -> "I own
2 bikes now"), never when it is someone else's (issue 40: a supersession between memories
about different things loses a fact)."""

from __future__ import annotations

import pytest

from engine.judges import rules


def superseded(new: str, olds: list[str]) -> list[str]:
    numbered = list(enumerate(olds, 1))
    return [olds[n - 1] for n in rules.contradiction(new, numbered)["supersedes"]]


@pytest.mark.parametrize(
    "new, one",
    [
        ("I sold one of my guitars last month.", "User's guitar is a Gibson Les Paul."),
        ("We gave away two of our chairs.", "User's chair is an Aeron from 2019."),
        ("I sold one of our two cars last week.", "User's car is a red Mazda 3."),
        ("I returned one of the lamps I bought.", "The lamp in the study is an IKEA Ranarp."),
    ],
)
def test_one_of_many_is_not_the_one(new, one):
    assert superseded(new, [one]) == []


def test_naming_the_one_still_supersedes_it():
    assert superseded("I sold the Les Paul.", ["User's guitar is a Gibson Les Paul."]) != []


@pytest.mark.parametrize(
    "new, count",
    [
        ("I have 2 cats now.", "User has three cats."),
        ("I gave one away, so I own 4 guitars now.", "User owns 5 guitars."),
        ("We now have 3 kids.", "User has 2 kids."),
    ],
)
def test_the_users_own_count_moves_on(new, count):
    assert superseded(new, [count]) == [count]


@pytest.mark.parametrize(
    "new, count",
    [
        ("My sister has 2 cats now.", "User has three cats."),
        ("Our neighbour owns 4 guitars now.", "User owns 5 guitars."),
    ],
)
def test_someone_elses_count_is_not_the_users(new, count):
    assert superseded(new, [count]) == []


def test_through_remember_and_the_engines_guard(tmp_path):
    # the engine's guard reads a subject up to its verb: 'owns' and 'sold' are verbs, so the
    # counts are no identifiers of two different things ('2' and '3' bikes)
    from engine import FixedClock, Memory

    mem = Memory(tmp_path / "m.db", policy="lifecycle", clock=FixedClock("2026-03-02T09:00:00"), offline=True)
    count, one = mem.add("User owns 3 bikes."), mem.add("User's bike is a Brompton.")
    mem.remember("I sold one of my bikes, so I own 2 bikes now.", "Noted.")
    assert (mem.get(count).status, mem.get(one).status) == ("superseded", "active")
