"""Giving up a kind of thing ends the memories of having its members, though the two share
no word: "I gave up caffeine" supersedes "drinks two coffees every morning", "I'm fully
vegan now" supersedes "eats chicken or beef most days" (issue 40; superseding.yaml's
`given_up`). Someone else's giving up, a past deed, a denial, a thing the user merely has,
and a memory that shares only the verb of having ("quit drinking" / "drinks a lot of
water") are left alone; so is a shared number word ("quit smoking two weeks ago" / "drinks
two coffees")."""

from __future__ import annotations

import pytest

from engine import FixedClock, Memory
from engine.judges import rules


def superseded(new: str, olds: list[str]) -> list[int]:
    return rules.contradiction(new, list(enumerate(olds, 1)))["supersedes"]


@pytest.mark.parametrize(
    "new, old",
    [
        ("I gave up caffeine completely in January.", "User drinks two coffees every morning."),
        ("I'm fully vegan now, no animal products at all.", "User eats chicken or beef most days."),
        ("User is vegetarian these days.", "User loves a good steak."),
        ("I quit drinking last month.", "User loves a cold beer on Fridays."),
        ("I stopped drinking coffee.", "User drinks two coffees every morning."),
        ("I quit smoking two weeks ago!", "User smokes a pack a day."),
        ("I cut out sugar and dairy.", "User's favourite dessert is chocolate cake."),
        ("I no longer eat fish.", "User orders sushi every Friday."),
        ("Quit gambling for good.", "User plays poker online most nights."),
        ("I quit coffee.", "Drinks coffee every morning"),
    ],
)
def test_giving_up_a_kind_supersedes_having_one_of_it(new, old):
    assert superseded(new, [old]) == [1]


@pytest.mark.parametrize(
    "new, old",
    [
        ("My sister went vegan.", "User eats chicken or beef most days."),  # someone else's
        ("User's sister quit smoking.", "User smokes a pack a day."),
        ("I'm fully vegan now.", "User's cat food has chicken in it."),  # the cat's
        ("I gave up caffeine.", "User had an espresso after lunch yesterday."),  # a past deed
        ("I quit drinking.", "User doesn't drink wine."),  # agrees
        ("I quit drinking last month.", "User drinks a lot of water."),  # only the verb
        ("I stopped drinking coffee.", "User doesn't drink wine."),
        ("I quit smoking two weeks ago!", "User drinks two coffees every morning."),  # a number
        ("I quit my job.", "User drinks two coffees every morning."),
        ("I gave up on the guitar.", "User loves a cold beer on Fridays."),
        ("I'm not vegan.", "User eats chicken most days."),  # a denial is no diet
        ("I am no longer vegan.", "User eats chicken most days."),
        ("I gave up meat.", "User has a dog that eats chicken."),  # the dog's
        ("I gave up alcohol.", "User has a wine cellar."),  # a thing the user has
        ("I gave up caffeine for Lent.", "User drinks two coffees every morning."),  # a while
        ("We're off booze for the whole of dry January.", "We always have wine with dinner."),
        ("I gave up caffeine for a week last year.", "User drinks two coffees every morning."),
    ],
)
def test_what_giving_up_does_not_end(new, old):
    assert superseded(new, [old]) == []


def test_through_remember_the_old_memory_is_found_without_a_shared_word(tmp_path):
    # the candidates of a contradiction come from full text: the kind's members are asked
    # for beside the new memory's own words, among memories it shares nothing with
    mem = Memory(tmp_path / "m.db", policy="lifecycle", clock=FixedClock("2026-03-02T09:00:00"), offline=True)
    for text in [
        f"User's project {i} uses the {c} framework." for i, c in enumerate("ABCDEFGHIJKLMNOPQRSTUVWX")
    ]:
        mem.add(text)
    coffee = mem.add("User drinks two coffees every morning.")
    mem.remember("I gave up caffeine completely, it was wrecking my sleep.", "Good call.")
    assert mem.get(coffee).status == "superseded"


@pytest.mark.parametrize(
    "new, old",
    [
        ("User's sister quit smoking.", "User smokes a pack a day."),
        ("My husband stopped using Dropbox.", "User keeps every invoice in Dropbox."),
        ("She no longer eats meat.", "User eats chicken or beef most days."),
    ],
)
def test_someone_elses_change_is_no_change_of_the_users(new, old):
    assert superseded(new, [old]) == []


@pytest.mark.parametrize(
    "new, old",
    [
        ("My wife and I switched to Linux.", "User uses Windows."),
        ("My husband and I quit smoking.", "User smokes a pack a day."),
        ("My manager switched us to Python.", "User codes in Java."),
    ],
)
def test_a_change_the_user_is_part_of_is_the_users(new, old):
    assert superseded(new, [old]) == [1]


def test_someone_elses_change_still_supersedes_what_was_said_of_them():
    assert superseded("My husband stopped using Dropbox.", ["My husband keeps his files in Dropbox."]) == [1]


@pytest.mark.parametrize(
    "turn, content",
    [
        ("I gave up caffeine completely, it was wrecking my sleep.", "User gave up caffeine completely"),
        ("I quit drinking.", "User quit drinking."),
        ("I cut out sugar and dairy.", "User cut out sugar and dairy."),
        ("I no longer eat meat.", "User no longer eats meat."),  # not 'noes longer eat'
    ],
)
def test_the_gate_keeps_giving_something_up(turn, content):
    assert rules.gate(turn, "Good call.")["content"].startswith(content)
