"""Which thing a change acts on (issue 40: a real update must win, and nothing else may be
retired): a budget, a flight or a renovation is one of several, said by a word in front or
after "for"/"of"; a noun the old memory holds only to say which of another thing it means
("a password manager for every account") is not what it is about; a sentence that opens
with "we" and a verb, or with who made the change ("the clinic moved my appointment"),
names no thing of its own; a time of day names the bus it times; and a thing of a kind
("a Pixel") finds the memory about that kind ("User's phone")."""

from __future__ import annotations

import datetime as dt

import pytest

from engine import FixedClock, Memory
from engine.judges import rules


def supersedes(new: str, old: str) -> bool:
    return rules.contradiction(new, [(1, old)])["supersedes"] == [1]


@pytest.mark.parametrize(
    "old, new",
    [
        # another one of the same kind, told apart by a word in front or after "for"
        ("User budgets 300 a month for groceries.", "We raised the holiday budget to 5000."),
        ("The budget for the kitchen is 12k.", "We cut the garden budget to 2k."),
        ("User's flight to Oslo is on June 3.", "The airline moved my Rome flight to June 9."),
        # the changed thing is only which of another thing the old memory means
        ("User uses a password manager for every account.", "I moved all my accounts over to Monzo."),
        ("User keeps a spare key for the shed.", "We moved the shed behind the garage."),
        ("User has a reminder set for the dentist appointment.", "I moved the dentist appointment."),
    ],
)
def test_a_change_to_another_one_leaves_the_old_memory(old, new):
    assert not supersedes(new, old)


@pytest.mark.parametrize(
    "old, new",
    [
        ("The marketing budget is 20k.", "We raised the marketing budget to 25k."),
        ("User's budget for the trip is 1500 dollars.", "We raised the trip budget to 2500 dollars."),
        ("The deadline for the grant report is Friday.", "We pushed the grant report to Monday."),
        ("Uses Python 3.10 for the worker.", "Upgraded the worker to Python 3.12."),
        # a pronoun and its verb open the sentence: no thing of its own to tell apart
        ("User's mortgage rate is 6.4%.", "We refinanced, the rate is 5.2% now."),
        # who made the change opens it: what changed comes after
        ("User's dentist appointment is on March 3.", "The clinic moved my dentist appointment to March 10."),
        # a time of day names the bus, it is no unit of the time
        ("User catches the 8:05 bus.", "I've started taking the 7:40 bus instead."),
        # an adverb opening the sentence is no thing either
        ("User's phone is a Galaxy S21.", "Finally switched, I'm on an iPhone 15 now."),
        # everyday slots
        ("User keeps passwords in LastPass.", "Switched to Bitwarden after the breach."),
    ],
)
def test_a_change_to_the_same_one_supersedes(old, new):
    assert supersedes(new, old)


def test_a_thing_of_a_kind_finds_the_memory_about_that_kind(tmp_path):
    """The contradiction step's candidates come from full-text search: "Pixel" shares no
    word with "User's phone is an iPhone 13.", so the kind (phone) must pick it."""
    clock = FixedClock(dt.datetime(2026, 3, 10, 9))
    with Memory(str(tmp_path / "m.db"), offline=True, clock=clock) as mem:
        mem.add("User's cat is called Miso.", judged=False)
        old = mem.add("User's phone is an iPhone 13.", judged=False)
        assert mem.remember("Finally upgraded, I'm on a Pixel 9 now.", "Noted.").stored
        assert old in {r.id for r in mem.memories("superseded")}


@pytest.mark.parametrize(
    "old, new, replaced",
    [
        # a place in a sequence is a value, as "3rd" is: not which grade or floor it is
        ("User's daughter is in seventh grade.", "My daughter started eighth grade this fall.", True),
        ("User's office is on the fourth floor.", "Our office is on the ninth floor now.", True),
        ("User's daughter is in fifth grade.", "My son is in sixth grade.", False),
        ("User's office is on the fourth floor.", "The gym is on the ninth floor.", False),
    ],
)
def test_an_ordinal_is_a_value(old, new, replaced):
    assert supersedes(new, old) is replaced


@pytest.mark.parametrize(
    "old, new",
    [
        # someone else's change of their own thing, said with their name
        ("User's dentist appointment is Wednesday.", "Tom moved his dentist appointment to Friday."),
        ("Our barbecue is on Saturday.", "The Smiths moved their barbecue to Sunday."),
        ("User's phone is an iPhone 13.", "Tom switched to a Pixel last week."),
        ("User's app uses PostgreSQL.", "Priya switched to MySQL for her side project."),
        ("User works from the Chicago office.", "I transferred to the Denver office."),  # control
        # a word that is no phone, and a fraction that is no place in a sequence
        ("User's phone is an iPhone 15.", "I switched to pixel art for the game sprites."),
        ("User's rent is 1800 a month.", "I now spend a third of my salary on rent."),
    ],
)
def test_someone_elses_change_and_lookalikes_leave_the_old_memory(old, new):
    assert supersedes(new, old) is ("Chicago" in old)


def test_a_gate_memory_says_whose_thing_a_change_moved():
    """The gate writes "my" as "User's" when the user was not named before it: "The airline
    moved their flight" would be the airline's flight."""
    assert rules.gate("The airline moved my Oslo flight to June 9.", "Ok.")["content"] == (
        "The airline moved User's Oslo flight to June 9."
    )
    moved = "The airline moved User's Oslo flight to June 9."
    assert supersedes(moved, "User's flight to Oslo is on June 3.")
