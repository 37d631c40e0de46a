"""A deed told in the past is a fact that stays true: the rules judges never give it an
end date, never conjugate its verb, and never take the date it happened for a value a
later plan replaces. (LongMemEval's knowledge-update and temporal-reasoning questions lost
answers to each of these; the cases here are our own.)"""

from __future__ import annotations

from datetime import date

import pytest

from engine.judges.rules.expiring import expiry
from engine.judges.rules.gating import gate
from engine.judges.rules.phrasing import third_person
from engine.judges.rules.superseding import contradiction

SAID = date(2026, 5, 20)  # a Wednesday


@pytest.mark.parametrize(
    "content",
    [
        # how long a past thing lasted, not how long it runs on
        "User volunteered at the food bank for two weeks and loved it.",
        "User stayed with their aunt in Leeds for a month.",
        "User studied Portuguese for three months before the trip.",
        # a calendar date without a year in a clause told in the past: when it happened
        "User ran the Bristol half marathon on April 12th in 1:58.",
        "User's brother bought a flat in Glasgow in February.",
        "User caught a cold on 4/30 and missed two days of work.",
        # a past deed beside a plan: the deed stays true after the plan's day
        "User adopted a rescue cat yesterday, and User is taking her to the vet on Friday.",
        "User finished the quarterly report and will present it next week.",
    ],
)
def test_a_deed_told_in_the_past_never_ends(content):
    assert expiry(content, SAID) is None


@pytest.mark.parametrize(
    "content, expected",
    [
        # a deed that arranges something running on from now: the span ends ahead
        ("User paused the newspaper delivery for two weeks.", "2026-06-03"),
        ("User borrowed their neighbour's ladder for a week.", "2026-05-27"),
        ("User is in Oslo for three more weeks.", "2026-06-10"),
        # dates that are targets, or carry their year, keep their end
        ("The review was moved to June 2.", "2026-06-02"),
        ("User renewed the parking permit until the 30th.", "2026-05-30"),
        ("User booked the venue on 2026-07-18.", "2026-07-18"),
        # a plan alone still expires
        ("User is repainting the hallway this weekend.", "2026-05-24"),
    ],
)
def test_ends_ahead_are_kept(content, expected):
    assert expiry(content, SAID) == expected


@pytest.mark.parametrize(
    "first_person, expected",
    [
        ("I sold my old bike last week.", "User sold their old bike last week."),
        ("I caught the early train.", "User caught the early train."),
        ("I swore off sugar.", "User swore off sugar."),
        ("I pre-ordered the new console.", "User pre-ordered the new console."),
        ("I re-do my budget every month.", "User re-does their budget every month."),
        ("I cycle to work.", "User cycles to work."),
    ],
)
def test_third_person_leaves_past_forms_as_they_are(first_person, expected):
    assert third_person(first_person) == expected


def test_a_plans_date_does_not_replace_the_date_an_event_happened():
    old = "User's friend Priya got married on March 8th, and User is planning her housewarming gift."
    new = "For Priya's housewarming gift, User is planning to order a custom print in July."
    assert contradiction(new, [(1, old)])["supersedes"] == []


@pytest.mark.parametrize(
    "old, new",
    [
        ("The offsite is on June 4.", "The offsite moved to June 11."),
        ("User's dentist appointment is on the 3rd of June.", "User's dentist appointment is now on June 9."),
    ],
)
def test_a_moved_date_still_supersedes(old, new):
    assert contradiction(new, [(1, old)])["supersedes"] == [1]


@pytest.mark.parametrize(
    "content, expected",
    [
        # a clause with its own subject is a fact of its own: the memory ends only if it does
        ("User has a vet appointment on Friday, but their dog Rex is already twelve.", None),
        ("User is selling the old desk this weekend, and they own three monitors.", None),
        # one subject doing two things this weekend: both end with it
        ("User is moving the sofa this weekend and painting the hallway.", "2026-05-24"),
        ("User has a dentist appointment on Friday and a haircut on Saturday.", "2026-05-23"),
    ],
)
def test_a_memory_ends_only_when_each_fact_in_it_ends(content, expected):
    assert expiry(content, SAID) == expected


# An event of the user's own on the day they tell it ("I'm playing in the charity match
# today") is something they live through, as a past deed with a time is: the gate keeps it
# and its "today" ends nothing. A work event, a plain state and a question are unchanged.
# (LongMemEval's temporal-reasoning questions ask about such days weeks later; the gate
# dropped the turn, and had it kept it, expiry would have ended it that night.)
@pytest.mark.parametrize(
    "user",
    [
        "I'm running in the city half marathon today, wish me luck.",
        "We're hosting a small dinner party tonight for my sister's birthday.",
        "My daughter and I are going to the county fair today.",
        "I have my first pottery class tonight at the community centre.",
    ],
)
def test_an_own_event_told_on_its_day_is_kept_and_never_ends(user):
    answer = gate(user, "")
    assert answer["save"], answer
    assert expiry(answer["content"], SAID) is None, answer["content"]


@pytest.mark.parametrize(
    "user, saved, ends",
    [
        ("I have a call with the auditors today.", True, "2026-05-20"),
        ("The product launch is tonight.", True, "2026-05-20"),
        ("I'm exhausted today.", False, None),
        ("Is the street festival on tonight?", False, None),
    ],
)
def test_other_days_are_as_before(user, saved, ends):
    answer = gate(user, "")
    assert answer["save"] is saved, answer
    if saved:
        assert expiry(answer["content"], SAID) == ends, answer["content"]


@pytest.mark.parametrize(
    "turn, kept",
    [
        # 'had' as the deed itself, with when: an illness, a fall, an operation lived through
        ("I recently had a nasty ear infection that kept me off work.", "ear infection"),
        ("We had a burst pipe in the kitchen last month.", "burst pipe"),
        # the user's own thing, new: where it came from is what a later question asks
        ("I'm thrilled with my new road bike, which I found at a garage sale.", "road bike"),
        ("Our brand new sofa arrived from a shop in Leeds.", "sofa"),
    ],
)
def test_a_thing_lived_through_or_newly_had_is_kept(turn, kept):
    assert kept in gate(turn, "Glad to hear it.")["content"]


@pytest.mark.parametrize(
    "turn",
    [
        "I had to leave early yesterday.",  # 'had to': no deed
        "Can you help me set up my new router?",  # a request
    ],
)
def test_had_to_and_a_request_about_a_new_thing_keep_nothing(turn):
    assert gate(turn, "Sure.")["save"] is False


def test_a_second_deed_after_and_is_the_users_too():
    # 'figured out' says nothing kept; what the user made after it does
    turn = "I recently figured out how to use the slow cooker and made a delicious beef stew."
    assert "beef stew" in gate(turn, "Nice!")["content"]
