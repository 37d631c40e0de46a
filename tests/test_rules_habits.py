"""What repeats or is said to last has no end date; a date the rules judges read must be a
date. (Found by listing the end dates the rules gave while playing LongMemEval's dev
haystacks: a weekly habit expired on its next weekday, 'from now on' got the 'waiting'
horizon, 'have this conversation with my partner' ended the same day. The cases here are
our own.)"""

from __future__ import annotations

from datetime import date

import pytest

from engine.judges.rules.expiring import expiry
from engine.judges.rules.phrasing import third_person

SAID = date(2026, 5, 20)  # a Wednesday


@pytest.mark.parametrize(
    "content",
    [
        # a weekday with a plural part of the day, weekends, weekdays: a habit
        "User plays chess with their neighbour on Tuesday evenings.",
        "User sleeps badly on Friday nights after late shifts.",
        "User goes bouldering on weekends.",
        "User cycles to the office on weekdays.",
        # a habit said with an adverb of frequency beside one weekday
        "User usually phones their mother on Sunday.",
        "User typically does the groceries on Thursday.",
        "Pizza on Friday is a family routine for User.",
        # a change said to last: not the 'waiting' or 'for now' horizons
        "User will wait for the bus at the north stop from now on.",
        "Going forward, User is blocked from using the old VPN and uses the new one.",
        "User switched to decaf for good.",
        # 'this conversation' as a thing someone has, not the time of this chat
        "User is ready to have this conversation with their manager.",
        "User wants to start this session of physiotherapy calmly.",
    ],
)
def test_what_repeats_or_lasts_has_no_end(content):
    assert expiry(content, SAID) is None


@pytest.mark.parametrize(
    "content, expected",
    [
        # the same words as a single occasion keep their date
        ("User is going to the flea market on Saturday morning.", "2026-05-23"),
        ("User plays chess with their neighbour on Tuesday evening.", "2026-05-26"),
        ("User will be in Berlin this weekend.", "2026-05-24"),
        ("For this session, answer in Spanish.", "2026-05-20"),
        ("Until the end of this conversation, keep answers short.", "2026-05-20"),
        ("User is waiting for the plumber's quote.", "2026-06-03"),
    ],
)
def test_single_occasions_still_end(content, expected):
    assert expiry(content, SAID) == expected


@pytest.mark.parametrize(
    "content",
    [
        # a spaced dash ends a clause as a comma does: the deed after it is past
        "User has to renew the lease - User signed it in March.",
        "User needs to service the boiler \u2014 User last serviced it in October.",
    ],
)
def test_a_past_deed_after_a_dash_never_ends(content):
    assert expiry(content, SAID) is None


def test_a_present_need_with_a_date_ends_then():
    # 'needs to' looks ahead as 'need to' does, whatever -ed word follows it
    assert expiry(third_person("I need to collect the repaired bike next week."), SAID) == "2026-05-31"


@pytest.mark.parametrize(
    "said, expected",
    [
        ("I last saw my dentist in May.", "User last saw their dentist in May."),
        ("I first met Ana in Lisbon.", "User first met Ana in Lisbon."),
        ("I once lived in Oslo.", "User once lived in Oslo."),
        ("I nearly missed the train.", "User nearly missed the train."),
        # a present verb ending in -ed is conjugated, not kept as a past
        ("I need a new passport photo.", "User needs a new passport photo."),
        ("I feed the neighbour's fish on Sundays.", "User feeds the neighbour's fish on Sundays."),
    ],
)
def test_the_verb_after_i_is_conjugated_only_when_it_is_one(said, expected):
    assert third_person(said) == expected
