"""The rules judges on long texts and many mentions: of overlapping date mentions the first
found wins (absolute dates before relative words), whatever their number; two long turns
are near verbatim by their word pairs."""

import random

from engine.judges.rules import dates, superseding

PHRASES = [
    "tomorrow",
    "next Friday",
    "on March 3",
    "Friday March 3",
    "since March 3",
    "for two weeks",
    "in 3 days",
    "2026-03-01",
    "this year",
    "on October 8 this year",
    "by end of month",
    "today",
    "next week",
    "the deploy",
    "we met",
    "until June 5 2027",
    "3pm",
    "for another 2 months",
    "last year",
    "Monday",
    "March",
]


def reference(text: str) -> list[tuple]:
    """What date_mentions chooses, worked out the plain way: each candidate checked against
    every one chosen before it."""
    norm = dates.normalise(text)
    chosen = []
    for m in dates._absolute_mentions(norm, text) + dates._relative_mentions(norm):
        if any(m.start < c.end and c.start < m.end for c in chosen):
            continue
        if dates._START_BEFORE.search(norm[max(0, m.start - 25) : m.start]):
            m = m._replace(is_start=True)
        chosen.append(m)
    return sorted(shown(m) for m in dates._qualified(chosen))


def shown(m) -> tuple:
    return m.start, m.end, m.label, m.absolute, m.is_start


def test_overlapping_mentions_resolve_as_one_scan_of_all_would():
    rng = random.Random(7)
    seen = 0
    for _ in range(2000):
        text = " ".join(rng.choice(PHRASES) for _ in range(rng.randint(1, 14))) + "."
        got = [shown(m) for m in dates.date_mentions(text)]
        assert got == reference(text), text
        seen += len(got)
    assert seen > 4000  # the texts did mention dates, many overlapping


def test_a_text_of_thousands_of_dates_reads_each_once():
    text = "We meet on Friday at 3pm. " * 5000
    found = dates.date_mentions(text)
    assert len(found) == 5000 and all(m.label.lower().endswith("friday") for m in found)


# -- long texts in the contradiction judge: near verbatim by word pairs, not quadratic ------


def long_turn(rng, words: int, fixed: str = "") -> str:
    vocab = (
        "the deploy runs on friday after alice reviews the staging build and bob signs "
        "off the release notes for the mobile team"
    ).split()
    return fixed + " ".join(rng.choice(vocab) for _ in range(words)) + "."


def test_a_long_turn_said_again_with_a_word_changed_confirms():
    text = long_turn(random.Random(1), 3000)
    again = text.replace(" bob ", " carol ", 1)
    assert superseding.contradiction(again, [(1, text)]) == {"supersedes": [], "confirms": [1]}


def test_long_turns_of_the_same_words_in_another_order_are_not_near_verbatim():
    rng = random.Random(2)
    text = long_turn(rng, 3000)
    shuffled = text.rstrip(".").split()
    rng.shuffle(shuffled)
    fresh, old = superseding.read(" ".join(shuffled) + "."), superseding.read(text)
    assert not superseding._near_verbatim(fresh, old)


def test_word_pairs_shared_count_as_ratio_counts_matched_words():
    assert superseding._pairs_shared("a b c d".split(), "a b c d".split()) == 1.0
    assert superseding._pairs_shared("a b c d".split(), "d c b a".split()) == 0.0
    assert superseding._pairs_shared("a b c d".split(), "a b x d".split()) == 2 * 1 / 6


BIG = "9" * 5000  # past int()'s 4,300 digits
FAR = [
    "We ship in 10000 years.",
    "Launch is in 8000 years.",
    "The lease ends in 99999999 days.",
    "The lease ends in 999999999999999999999 days.",
    f"The lease ends in {BIG} days.",
    f"We meet every {BIG} weeks.",
    f"I run {BIG} times a week.",
    f"for {BIG} more days we wait",
    "in 99999 months",
    f"in {BIG} hours",
    "for another 99999999999 weeks",
    f"The budget is {BIG}k.",
    "every 99999999999999999999 days I water the plants",
]


def test_a_date_past_the_year_9999_or_a_number_past_reading_is_no_date(tmp_path):
    """Before: 'in 10000 years' raised OverflowError out of `add`, and a `remember` of it
    stayed pending for ever (every retry failed the same way); a number of 5,000 digits
    raised ValueError. Now such a text is stored, its expiry none or a real date."""
    from engine import Memory

    with Memory(str(tmp_path / "far.db"), offline=True) as mem:
        for text in FAR:
            mem.add(text)
            mem.remember(text)
        assert mem.pending() == []
        expiries = [r.expires_at for r in mem.memories("all", None)]
    assert len(expiries) >= len(FAR)
    assert all(e is None or str(e)[:4] <= "9999" for e in expiries)
    assert dates.read_dates("in 10000 years or on 2026-03-01", dates.date(2026, 1, 1)) == [
        dates.date(2026, 3, 1)
    ]  # the one date a date can hold is still read
