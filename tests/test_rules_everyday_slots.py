"""The slots of everyday life (slots.yaml: bank, mobile carrier, diet, music and video
streaming, car make): a new member with a change supersedes the old one as a new editor or
database does, and a member added beside another, or said of someone else, does not (issue
40: "I moved my salary over to Starling" left "User banks with Monzo" current)."""

from __future__ import annotations

import pytest

from engine.judges import rules


def supersedes(new: str, old: str) -> bool:
    return rules.contradiction(new, [(1, old)])["supersedes"] == [1]


@pytest.mark.parametrize(
    "old, new",
    [
        ("User banks with HSBC.", "I switched my current account to Revolut in May."),
        ("User's salary is paid into Lloyds.", "My salary goes to Santander now."),
        ("User is vegetarian.", "I went fully vegan last month."),
        ("User follows a keto diet.", "I dropped keto, I'm pescatarian these days."),
        ("User listens to music on Spotify.", "I moved to Tidal for music."),
        ("User's phone plan is with Vodafone.", "I changed my carrier to Orange."),
        ("User drives a Honda Civic.", "I traded the Honda in for a Tesla."),
    ],
)
def test_a_new_member_with_a_change_supersedes(old, new):
    assert supersedes(new, old)


@pytest.mark.parametrize(
    "old, new",
    [
        ("User watches shows on Netflix.", "I also subscribed to Hulu for the sports."),
        ("User banks with Monzo.", "My sister banks with Barclays."),
        ("User is vegetarian.", "My husband is vegan."),
        ("User drives a Subaru.", "We rented a Toyota for the trip to Cornwall."),
    ],
)
def test_an_added_member_or_someone_elses_supersedes_nothing(old, new):
    assert not supersedes(new, old)
