"""A count that holds now, told beside a plan or goal with a date (issue 39: a
knowledge-update answer is such a count, and it expired with the plan told beside it):
"has 12 vintage cameras now and is going to a camera fair on Saturday" is still true on
Sunday. A date that is the thing's own ("the concert, which is on April 4") still ends it."""

from __future__ import annotations

import pytest

from engine.judges import rules

SAID = "2026-03-10T09:00:00"


@pytest.mark.parametrize(
    "memory",
    [
        "User has 9 houseplants now and is going to the plant swap on Saturday.",
        "User is on their 4th marathon block, which they plan to finish by June 7.",
        "User has 1,200 subscribers, hoping to reach 1,500 by the end of April.",
        "User has visited 23 national parks, with Zion next in May.",
    ],
)
def test_a_count_that_holds_now_outlives_the_plan_beside_it(memory):
    assert rules.expiry(memory, SAID) is None


@pytest.mark.parametrize(
    "memory, end",
    [
        ("User has 2 tickets for the concert, which is on April 4.", "2026-04-04"),
        ("User is in a code freeze now, which lasts until the 20th.", "2026-03-20"),
        ("User has a dentist appointment at 3pm, which is on March 18.", "2026-03-18"),
        ("User is going to a camera fair on Saturday.", "2026-03-14"),
        # the count's own scope, not the goal beside it
        ("User has read 7 books this year and wants to finish an eighth by March 31.", "2026-12-31"),
    ],
)
def test_the_things_own_date_still_ends_it(memory, end):
    assert (rules.expiry(memory, SAID) or "")[:10] == end
