"""A change told in a chat turn (issue 40; LongMemEval's knowledge updates are told this
way): the turn opens with a few words before a colon and ends with a request, the change
is a number ported or a transfer to another office, and the rest of the turn is about
something else that must not be taken for what changed."""

from __future__ import annotations

import pytest

from engine.judges import rules


def supersedes(new: str, old: str) -> bool:
    return rules.contradiction(new, [(1, old)])["supersedes"] == [1]


@pytest.mark.parametrize(
    "turn, kept, left_out",
    [
        (
            "Quick one: our retro moved to Wednesdays at 4, so can you help me move my focus blocks?",
            "Our retro moved to Wednesdays at 4.",
            ["Quick one", "focus blocks"],
        ),
        (
            "Random question: my landlord raised the rent to 1800, any tips for negotiating it down?",
            "My landlord raised the rent to 1800.",
            ["Random question", "negotiating"],
        ),
    ],
)
def test_a_lead_in_and_a_request_are_not_the_memory(turn, kept, left_out):
    answer = rules.gate(turn, "Sure.")
    assert answer["save"]
    for words in left_out:
        assert words not in answer["content"]
    # what is kept is the statement, in the third person
    assert rules.gate(kept, "Sure.")["content"] == answer["content"]


@pytest.mark.parametrize(
    "old, new",
    [
        ("User's mobile plan is with Verizon.", "I ported my number from Verizon to Visible last week."),
        ("User works at the Boston branch.", "I transferred to the Austin branch in October."),
        ("User is based in the Leeds office.", "We relocated to the Manchester office this spring."),
    ],
)
def test_a_port_or_a_transfer_supersedes(old, new):
    assert supersedes(new, old)


@pytest.mark.parametrize(
    "old, new",
    [
        # someone else's transfer, another kind of place, the same office named again
        ("User works at the Boston branch.", "My sister transferred to the Austin branch."),
        ("User works at the Boston branch.", "I transferred to the Austin school board as a volunteer."),
        ("User is based in the Leeds office.", "I moved to the Leeds office last year."),
        # the change's own time is no new value, and the clause after it is about another thing
        (
            "User's book club meets on the first Tuesday at 7.",
            "I switched jobs this month, so I'm hunting for a book club near the new office.",
        ),
    ],
)
def test_what_the_rest_of_the_turn_says_changes_nothing(old, new):
    assert not supersedes(new, old)


@pytest.mark.parametrize(
    "turn, kept",
    [
        # a time of day is no lead-in before a colon
        (
            "My flight is at 7:45 tomorrow morning, any tips for sleeping on the plane?",
            "User's flight is at 7:45 tomorrow morning.",
        ),
        ("I wake at 5:15 on weekdays, is that too early?", "User wakes at 5:15 on weekdays."),
    ],
)
def test_a_time_before_the_request_stays_in_the_memory(turn, kept):
    assert rules.gate(turn, "Sure.")["content"] == kept


@pytest.mark.parametrize(
    "old, new",
    [
        # ending the thing ends what was for it; a new time for it is a new time for its deadline
        ("User has a membership for the climbing gym.", "Finally cancelled the climbing gym."),
        ("Deadline for the grant report is May 30.", "Pushed the grant report to next month."),
    ],
)
def test_ending_or_moving_the_thing_moves_what_was_for_it(old, new):
    assert supersedes(new, old)
