"""The words of a cadence or a part of the day ('every morning', 'daily', 'nightly') are
compared by their contrast, not counted again as topic words: two memories saying one
habit in other cadence words merge, and two habits sharing only 'every morning' do not
(issue 40: "Standup is at 9:30 every morning" stayed apart from "The daily standup
happens at 9:30 am"). A hyphenated word counts once ('check-in' is 'checkin')."""

from __future__ import annotations

import pytest

from engine.judges import rules


@pytest.mark.parametrize(
    "a, b",
    [
        ("The backup job runs at 2am every night.", "Nightly backup job at 02:00."),
        ("User waters the plants every evening at 7pm.", "User waters the plants at 19:00 each evening."),
        ("Team check-in is at 10:15 every morning.", "The daily team checkin is at 10:15 am."),
    ],
)
def test_one_habit_in_other_cadence_words_merges(a, b):
    assert rules.cluster([(1, a), (2, b)]) == [[1, 2]]


@pytest.mark.parametrize(
    "a, b",
    [
        ("User swims every morning.", "User does yoga every morning."),
        ("User walks the dog every evening.", "User reads the news every evening."),
        ("The report is sent daily.", "The report is sent weekly."),
    ],
)
def test_two_habits_sharing_only_their_cadence_stay_apart(a, b):
    assert rules.cluster([(1, a), (2, b)]) == []
