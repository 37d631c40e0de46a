"""Words that link a text to the talk ("By the way", "since") say nothing about what it is
about: two facts that share only them are two facts. (A LongMemEval S haystack lost its
answer this way: "By the way, ... tried making it at home 10 times now since ..." was
superseded by "And by the way, ... family dinners every evening since ... about 6 weeks
now". The cases here are our own.)"""

from __future__ import annotations

import pytest

from engine.judges.rules.superseding import contradiction


@pytest.mark.parametrize(
    "old, new",
    [
        (
            "By the way, User has been perfecting their espresso game - User has tried pulling a shot "
            "at home 12 times now since their friend Priya showed the user how to do it.",
            "And by the way, User has been enjoying having long walks every morning since their brother "
            "moved in with the user, it's been about 4 weeks now.",
        ),
        (
            "By the way, User has been improving their bread - User has baked it 9 times now since their "
            "friend Jo showed the user how.",
            "Oh, and by the way, User has been enjoying quiet evenings since their roommate moved out, "
            "it's been about 2 months now.",
        ),
        (
            "Speaking of which, User has run 14 races since joining the club.",
            "Speaking of which, User has been sleeping better since switching mattresses, 3 weeks now.",
        ),
    ],
)
def test_facts_sharing_only_an_opener_or_since_never_supersede(old, new):
    assert contradiction(new, [(1, old)]) == {"supersedes": [], "confirms": []}


@pytest.mark.parametrize(
    "old, new",
    [
        ("By the way, my laptop has 16 GB of RAM.", "By the way, I upgraded my laptop to 32 GB of RAM."),
        ("Our standup is at 9:30.", "Oh, and by the way, our standup moved to 10:15."),
    ],
)
def test_a_real_update_behind_an_opener_still_supersedes(old, new):
    assert contradiction(new, [(1, old)])["supersedes"] == [1]
