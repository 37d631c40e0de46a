"""Calendar words the rules' date reader resolves (engine/judges/rules/calendar_days.py):
named days, seasons, parts of a month, the n-th weekday of a month, spans that end on the
date meant and 'the week of' a date (issue 40: "the rest are dates (range ends, 'due the
18th', month spans)"). Each memory's end is the latest day it can mean; a yearly name
said of a habit, of the past or as part of a thing's name ends nothing. Said on Tuesday
2026-03-10 unless a case says otherwise."""

from __future__ import annotations

from datetime import date

import pytest

from engine.judges import rules
from engine.judges.rules.calendar_days import _easter, nth_weekday
from engine.judges.rules.reading import read
from engine.judges.rules.selecting import select
from engine.judges.rules.when import asked_window

TODAY = "2026-03-10"


@pytest.mark.parametrize(
    "content, expected",
    [
        ("The office is closed between Christmas and New Year.", "2027-01-01"),
        ("My cousin is staying with us until Thanksgiving.", "2026-11-26"),
        ("The pool is open until Labor Day.", "2026-09-07"),
        ("The gym is closed for Memorial Day.", "2026-05-25"),
        ("I'm hosting my family for Christmas Eve dinner.", "2026-12-24"),
        ("The church bake sale runs until Easter Sunday.", "2026-04-05"),
        ("I'm taking a pottery class this fall.", "2026-11-30"),
        ("The bridge will be closed for repairs until late summer.", "2026-08-31"),
        ("The hotel renovation will finish by the end of spring.", "2026-05-31"),
        ("My daughter's swim lessons continue until the middle of summer.", "2026-07-31"),
        ("The beta program is open until mid-April.", "2026-04-15"),
        ("We're renting the cabin through early June.", "2026-06-10"),
        ("Parking on Elm Street is banned until the start of May.", "2026-05-01"),
        ("The interns leave at the end of August 2026.", "2026-08-31"),
        ("The deadline for the grant is the last Friday of March.", "2026-03-27"),
        ("The team retreat is the second Tuesday of next month.", "2026-04-14"),
        ("The all-hands is the last Friday of this month.", "2026-03-27"),
        ("Summer term runs June-August.", "2026-08-31"),
        ("The market stall is open Jun\u2013Aug.", "2026-08-31"),
        ("I'll be in Berlin from the 3rd to the 7th of next month.", "2026-04-07"),
        ("I have jury duty the week of March 16.", "2026-03-22"),
    ],
)
def test_a_calendar_word_ends_on_the_day_it_means(content, expected):
    assert rules.expiry(content, TODAY) == expected


@pytest.mark.parametrize(
    "content",
    [
        "I love Christmas more than any other holiday.",  # no word makes it a time
        "Thanksgiving is my favorite holiday.",
        "My new year's resolution is to read twelve books.",
        "I usually fall asleep around eleven.",  # 'fall' the verb
        "Every summer we rent a cabin in Maine.",  # a habit
        "Every year on Halloween we carve pumpkins.",
        "Rent is due the first Monday of the month.",  # every month
        "Last summer we hiked the Dolomites.",  # the past
        "We spent Christmas in Vermont.",
    ],
)
def test_a_yearly_name_of_a_habit_or_the_past_ends_nothing(content):
    assert rules.expiry(content, TODAY) is None


def test_a_season_in_a_things_name_is_no_time():
    # 'spring break' is a week off, not the spring: the week named beside it ends it
    assert rules.expiry("The kids are off for spring break this week.", "2026-03-25") == "2026-03-29"
    assert rules.expiry("This summer we are going to Spain.", TODAY) == "2026-08-31"


def test_a_season_said_inside_it_and_next_year():
    # said in July: this summer is the one running; 'next summer' the one after
    assert rules.expiry("We're subletting the flat for this summer.", "2026-07-02") == "2026-08-31"
    assert rules.expiry("My brother moves in with us next summer.", "2026-07-02") == "2027-08-31"
    # said in March: winter has ended, the next one runs into February 2027
    assert rules.expiry("The ski lodge job lasts until the end of winter.", TODAY) == "2027-02-28"


def test_said_inside_a_span_of_named_days_it_ends_on_the_coming_one():
    assert rules.expiry("The office is closed between Christmas and New Year.", "2026-12-26") == "2027-01-01"


def test_a_window_outside_the_calendar_is_none():
    assert asked_window("what did I do last Sunday?", date(1, 1, 1)) is None
    assert asked_window("What did I do last year?", date(1, 1, 1)) is None


def test_a_named_day_past_this_year_is_next_years():
    assert rules.expiry("The lights stay up until Halloween.", "2026-11-02") == "2027-10-31"


@pytest.mark.parametrize(
    "year, day",
    [
        (2024, date(2024, 3, 31)),
        (2025, date(2025, 4, 20)),
        (2026, date(2026, 4, 5)),
        (2027, date(2027, 3, 28)),
        (2038, date(2038, 4, 25)),
    ],
)
def test_easter(year, day):
    assert _easter(year) == day


def test_nth_weekday():
    assert nth_weekday(2026, 11, 4, 3) == date(2026, 11, 26)  # Thanksgiving
    assert nth_weekday(2026, 5, -1, 0) == date(2026, 5, 25)  # the last Monday of May
    assert nth_weekday(2026, 2, 5, 0) is None  # February 2026 has four Mondays


def test_named_days_are_values_a_contradiction_can_tell_apart():
    # 'the party moved from Christmas to New Year's Eve': two different days
    assert "12-25" in read("The office party is on Christmas Day.").values
    assert "12-31" in read("The office party is on New Year's Eve.").values


ASKED = date(2026, 5, 20)


@pytest.mark.parametrize(
    "query, first, last",
    [
        ("What did I buy in March?", date(2026, 2, 26), date(2026, 4, 3)),
        ("Which restaurant did I try in early April?", date(2026, 3, 29), date(2026, 4, 13)),
        ("What did I buy in December?", date(2025, 11, 28), date(2026, 1, 3)),  # last year's
        ("Where did we go last summer?", date(2025, 5, 25), date(2025, 9, 7)),
        ("What did I cook on Thanksgiving?", date(2025, 11, 25), date(2025, 11, 29)),
        ("What did I do over Christmas?", date(2025, 12, 23), date(2025, 12, 27)),
        ("Where was I on Easter Sunday?", date(2026, 4, 3), date(2026, 4, 7)),
        # a day of the month is that day, not the month; a year said is that year's
        ("What did I do on May 5?", date(2026, 5, 3), date(2026, 5, 7)),
        ("Where did I eat on June 30th?", date(2025, 6, 28), date(2025, 7, 2)),  # last year's
        ("What did I buy in March 2025?", date(2025, 2, 26), date(2025, 4, 3)),
        ("What did I cook on Christmas 2024?", date(2024, 12, 23), date(2024, 12, 27)),
        ("Where did we go in the summer of 2024?", date(2024, 5, 25), date(2024, 9, 7)),
        ("What did I do on May 5, 2025?", date(2025, 5, 3), date(2025, 5, 7)),
        ("What did I eat in March at 7 pm?", date(2026, 2, 26), date(2026, 4, 3)),  # a time, not a day
        ("What did I buy in March 3 times?", date(2026, 2, 26), date(2026, 4, 3)),  # a count
        ("What did I watch on May 5 2025?", date(2025, 5, 3), date(2025, 5, 7)),
        ("What did I do on February 29?", date(2024, 2, 27), date(2024, 3, 2)),  # the last leap day
    ],
)
def test_a_question_about_a_named_past_time_is_its_days(query, first, last):
    assert asked_window(query, ASKED) == (first, last)


@pytest.mark.parametrize(
    "query",
    [
        "What am I doing in June?",  # ahead, not about what was
        "What may I have missed?",  # the verb
        "Is the pool open in the summer?",
    ],
)
def test_no_named_window_for_a_question_about_now_or_ahead(query):
    assert asked_window(query, ASKED) is None


def test_what_was_said_in_the_named_month_is_picked_without_a_shared_word():
    candidates = [
        (1, "User's favourite kitchen tool is a garlic press."),
        (2, "User picked up a cast-iron skillet at the flea market."),
        (3, "User wants a new kitchen knife."),
    ]
    said = {1: date(2026, 1, 12), 2: date(2026, 3, 14), 3: date(2026, 5, 2)}
    query = "What kitchen thing did I buy in March?"
    assert select(query, candidates, 2, said=said, today=ASKED)[0] == 2
    assert 2 not in select(query, candidates, 2)  # without the times: words only


@pytest.mark.parametrize(
    "content, today, expected",
    [
        # a year beside a yearly name picks the year (was: the next occurrence, a year early)
        ("We're closed until Christmas 2027.", TODAY, "2027-12-25"),
        ("The pilot runs until Thanksgiving 2027.", TODAY, "2027-11-25"),
        ("The exhibit stays until Easter 2028.", TODAY, "2028-04-16"),
        ("The lease runs until the summer of 2027.", TODAY, "2027-08-31"),
        ("The lease runs until summer, 2027.", TODAY, "2027-08-31"),
        ("I'm away until Christmas, 2027 will be busy.", TODAY, "2026-12-25"),  # another clause's year
        ("Grandma stays with us until Christmas next year.", TODAY, "2027-12-25"),
        ("The trial lasts until late spring next year.", TODAY, "2027-05-31"),
        ("The office is closed over Christmas this year.", TODAY, "2026-12-25"),
        # a part of a month already past this year is next year's
        ("The promo runs until mid-March.", "2026-03-20", "2027-03-15"),
        ("The discount lasts until early March.", "2026-03-20", "2027-03-10"),
        ("The discount lasts until the end of March.", "2026-03-20", "2026-03-31"),
        # a named day written with its abbreviation's period
        ("I'm off work until St. Patrick's Day.", "2026-03-02", "2026-03-17"),
    ],
)
def test_the_year_a_calendar_word_means(content, today, expected):
    assert rules.expiry(content, today) == expected


def test_a_weekday_of_this_month_that_has_passed_is_not_next_months():
    # said on March 30: this month's last Friday was the 27th; April's is not what was said
    # (a day already past ends nothing a memory could keep)
    assert rules.expiry("The sale ends the last Friday of this month.", "2026-03-30") is None
