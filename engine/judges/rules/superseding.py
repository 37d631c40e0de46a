"""The contradiction judge: which older memories a new one supersedes or restates."""

from __future__ import annotations

import difflib
import re
from collections import Counter

from engine.judges.lexicon import lexicon
from engine.judges.rules.exemptions import change_clause, change_said, guarded, other_item, qualifiers
from engine.judges.rules.giving_up import given_up, gives_up_something_else
from engine.judges.rules.reading import (
    NUMBER_WORDS,
    OLD_SIDE,
    Reading,
    clearly_nearest,
    conflict,
    gist,
    jaccard,
    read,
    side_words,
)
from engine.judges.rules.replacements import (
    LIGHT_VERBS,
    changed_heads,
    handover,
    member_swap,
    new_one,
    opposite,
    other_leads,
    polarity_flip,
    relocation,
    resolution,
    same_subject,
    same_units,
    slot_change,
    team_move,
    value_change,
    workplace_move,
)
from engine.judges.rules.words import CUE_WORDS, GENERIC, STOPWORDS, WORD_RE, canon, token_tuple

_LEXICON = lexicon("superseding")


def contradiction(
    new: str, candidates: list[tuple[int, str]], similar: dict[int, float] | None = None
) -> dict:
    """Which candidates the NEW memory supersedes, and which it merely restates.

    Supersede = the same slot gets a new filler: a lexicon member replaced by another
    ("uses PostgreSQL" -> "migrated to MySQL"), a date or amount moved ("deadline March 15"
    -> "pushed to April 1"), the thing left behind named after a change cue ("stopped
    using poetry"), a flipped polarity on the same topic, a change cue acting on a shared
    subject, a move ("I moved to Lisbon" vs "lives in Berlin"), a wait that ended
    ("blocked on the review" / "the review passed"), or the other end of a scale ("short"
    / "detailed" answers). Additive ("also", "too") and progress ("added", "finished")
    wording never supersedes. Negative words that affirm the change ("... and I'm not
    going back", "nobody misses Slack") do not block it, and a member the text denies
    ("doesn't like Java") is never the one that replaces. Confirm = the same content
    words (after stemming and synonyms) with no conflict in polarity, lexicon member, date
    or amount; a repeat word for word (or nearly: "We switched from poetry to uv." and
    "We have switched from poetry to uv!") is always a confirmation, never a change."""
    fresh = read(new or "")
    similar = similar or {}
    # the one memory a change sharing no word with it can be about ("gave up caffeine" /
    # "drinks two coffees"): the candidate clearly nearest in meaning
    nearest = clearly_nearest(similar, _RELATED, _LEAD)
    supersedes, confirms = [], []
    for number, text in candidates:
        old = read(text or "")
        if _same_thing(fresh, old, new or "", text or "") and _near_verbatim(fresh, old):
            confirms.append(number)  # said again, in other small words: a confirmation
        elif guarded(fresh, old, new or "", text or ""):
            continue
        elif not fresh.additive and _count_moved(fresh, old):
            supersedes.append(number)  # "4 painting projects" -> "my 5th painting project"
        elif given_up(fresh, old):
            supersedes.append(number)  # "gave up caffeine" -> "drinks two coffees every morning"
        elif gives_up_something_else(fresh, old):
            continue
        elif _left_elsewhere(fresh, old) or _other_subject(fresh, old) or _one_of_many(fresh, old):
            continue
        elif _another_one_changed(fresh, old):
            continue
        elif _replaces(fresh, old) or _changed(fresh, old, similar.get(number), number == nearest):
            supersedes.append(number)
        elif _same_thing(fresh, old, new or "", text or "") and _restates(fresh, old):
            confirms.append(number)
    return {"supersedes": supersedes, "confirms": confirms}


def _same_thing(n: Reading, o: Reading, new: str, old: str) -> bool:
    """Could the new memory be the old one said again? Not when each holds a content word
    the other lacks ("deploys with Pulumi" / "deploys with Terraform", "the meeting with
    Bob" / "with Alice"), nor when an identifier or a name tells two items apart: a
    repeat has the same content words, numbers, names and dates."""
    mine, theirs = _content_words(n), _content_words(o)
    if _unmatched(mine, theirs) and _unmatched(theirs, mine):
        return False
    return not other_item(new, old)


def _content_words(r: Reading) -> frozenset[str]:
    return gist(r) - GENERIC


def _unmatched(a: frozenset[str], b: frozenset[str]) -> set[str]:
    """Words of `a` that `b` holds neither as such nor as a clipping ('prod' /
    'production')."""
    return {
        w
        for w in a
        if w not in b
        and not any(len(x) >= 4 and len(w) >= 4 and (x.startswith(w) or w.startswith(x)) for x in b)
    }


def _another_one_changed(n: Reading, o: Reading) -> bool:
    """The change acts on a thing the old memory also names, but each says which one with
    a word the other never says ("raised the trip budget" leaves "budgets 300 a month for
    groceries", "moved my Lisbon flight" leaves "the flight to Madrid"), or the old memory
    names it only to say which of another thing it means, a thing the new one never names
    ("moved all my accounts to Ally" leaves "uses a password manager for every account";
    "upgraded the service to Python 3.12" moves "Python 3.11 for the service", and a new
    date for the report "the deadline for the report")."""
    mine, theirs = qualifiers(n.text), qualifiers(o.text)
    heads = changed_heads(n.text) & o.topic
    if any(
        mine.get(head) and theirs.get(head) and not mine[head] & o.concepts and not theirs[head] & n.concepts
        for head in heads
    ):
        return True
    if n.values and o.values and all(_WHEN.fullmatch(v) for v in n.values | o.values):
        return False  # a new date for the report is a new date for its deadline
    if _ENDED.search(n.text):
        return False  # "cancelled the gym" ends "a membership for the gym" too
    # which of a thing the new memory never names ("staging" alone names the staging server)
    after = qualifiers(o.text, after_only=True)
    only_which = {word for head, said in after.items() if head not in n.concepts for word in said - {head}}
    return bool(heads) and heads <= only_which - theirs.keys()


# a value that says when: a weekday or month, a date, a time of day, a day of the month
_WHEN = re.compile(r"[a-z][a-z ]*|q[1-4]|\d{4}-\d\d(?:-\d\d)?|\d\d-\d\d|\d\d?:\d\d|\d\d?")


def _other_subject(n: Reading, o: Reading) -> bool:
    """A new value, and the old memory's value is another thing's: "my laptop has 32 GB of
    RAM" is no new value of "the staging server has 16 GB of RAM", nor "Helix number 2" of
    "fact number 7". Whatever the test that would take it for a change (a value moved, a
    change verb over a shared word, embeddings finding the two close), two subjects that
    share only a unit, a label or a verb never supersede each other."""
    return bool(n.values and o.values and n.values - o.values) and not same_subject(n, o)


_FLIPS = tuple((canon(a), canon(b)) for a, b in _LEXICON["flips"])


def _changed(n: Reading, o: Reading, similarity: float | None, nearest: bool = False) -> bool:
    """The general case: the same subject (shared distinctive words, or, with embeddings,
    a close meaning, or being clearly the nearest in meaning) and something said about it
    that differs - a value (a number, a time, an amount, also in words), a flipped
    setting, or any difference once the new memory says that something changed.
    Additions and progress never replace."""
    ended = bool(_ENDED.search(n.text))  # "no more Webflow, we wrote our own"
    if n.additive or (n.progression and not ended) or not n.topic or not o.topic:
        return False
    shared = (n.topic & o.topic) - GENERIC - _NUMBERS  # 'two weeks' / 'two coffees': no subject
    if not shared - LIGHT_VERBS:
        shared = frozenset()  # only a common verb in common
    sizes = sorted((len(n.topic - GENERIC) or 1, len(o.topic - GENERIC) or 1))
    # a stray shared name ("Google") is not a shared subject: the overlap must count on both
    by_words = len(shared) / sizes[0] >= 0.3 and len(shared) / sizes[1] >= 0.25
    by_strict = len(shared) / sizes[0] >= 0.5
    close = (
        by_words
        if similarity is None
        else similarity >= _SIMILAR or (similarity >= _RELATED and (shared or nearest))
    )
    if not close or not (shared or similarity is not None):
        return False
    # a value or a setting of the same thing: words in common beyond the common verbs,
    # and numbers counting the same unit ("32 GB of RAM" and "8 CPU cores" are two)
    values = (
        bool(n.values - o.values)
        and bool(o.values - n.values)
        and bool(shared)
        and same_units(n, o)
        and not _dates_apart(n, o)
    )
    mine, theirs = _settings(n), _settings(o)
    flipped = bool(shared) and any(
        (a in mine and b in theirs and b not in mine) or (b in mine and a in theirs and a not in mine)
        for a, b in _FLIPS
    )
    if values or flipped:
        return True
    # a change word alone needs more in common, and something of the old left behind
    left = o.topic - n.topic - GENERIC - LIGHT_VERBS
    if not (
        change_said(n)
        and left
        and (similarity is not None or by_strict)
        and ((n.topic - o.topic) or n.negative != o.negative)
    ):
        return False
    return _acts_on(n, o, whole_text_close=similarity is not None)


def _dates_apart(n: Reading, o: Reading) -> bool:
    """Do the two memories' differing values date different kinds of thing: on one side
    only when a past deed happened ('got engaged on May 15th'), on the other only a time
    ahead ('a getaway in August')? A plan's date is no new value of an event's."""
    mine, theirs = n.values - o.values, o.values - n.values
    return (theirs <= o.past and not mine & n.past) or (mine <= n.past and not theirs & o.past)


def _acts_on(n: Reading, o: Reading, whole_text_close: bool) -> bool:
    """Does the change the new memory tells of act on what the old one says? Only the
    clause saying it counts ("tests are no longer required, CI does it": the reason's CI
    is not what changed), and a change verb with a named object acts on that object
    ("replaced the date picker in the frontend" leaves "the frontend uses React")."""
    heads = changed_heads(n.text)
    if heads and not heads & o.topic and (n.topic & o.topic) - GENERIC - LIGHT_VERBS:
        return False  # the words in common are not what the change acts on
    said = change_clause(n)
    if whole_text_close and token_tuple(said) == token_tuple(n.text):
        return True  # the change is all it says, and the embeddings found it close
    return bool((read(said).topic & o.topic) - GENERIC - LIGHT_VERBS)


_ENDED = re.compile(
    r"\b(?:no more|no longer|ditched|dropped|scrapped|cancel+ed|gave up|"
    r"quit|stopped|sold|turned off|disabled|left)\b"
)
_SIMILAR = 0.55  # cosine at which two memories are about the same thing
_RELATED = 0.40  # cosine at which a shared distinctive word confirms it
_LEAD = 0.15  # how far the nearest must stand ahead of the next to be the one meant


_TURNED = (
    (
        re.compile(r"\b(?:turn|turned|turns|switch|switched|shut|shuts) (?:\w+ ){0,3}?off\b"),
        canon("disabled"),
    ),
    (re.compile(r"\b(?:turn|turned|turns|switch|switched) (?:\w+ ){0,3}?on\b"), canon("enabled")),
)


def _settings(r: Reading) -> frozenset[str]:
    """Its words, with a setting said as a phrase read as its word ('turned X off' is
    'disabled'), so that a flip is seen however it is said."""
    return r.concepts | {word for pattern, word in _TURNED if pattern.search(r.text)}


def _left_elsewhere(n: Reading, o: Reading) -> bool:
    """The new memory names what it left behind ("switched me from ibuprofen to
    naproxen"), and this old memory holds none of it nor a member of the same slot: it
    is about something else that merely shares a word ("the knee")."""
    left = side_words(_FROM, n.text) if n.strong_change else frozenset()
    return bool(left) and not left & o.concepts and not member_swap(n, o)


# the thing left behind, named explicitly ("from ibuprofen", "instead of Slack")
_FROM = re.compile(r"\b(?:from|instead of|rather than|away from)\s+([\w.+#\- ]+)")


def _replaces(n: Reading, o: Reading) -> bool:
    if not n.topic or not o.topic:
        return False
    if n.strong_change and not o.negative and side_words(OLD_SIDE, n.text) & o.topic - _NUMBERS:
        # the new text names what it left behind, and the old one held it (a number word
        # they share is no thing: "quit smoking two weeks ago" / "drinks two coffees")
        return True
    if n.additive:
        return False
    return any(
        test(n, o)
        for test in (
            member_swap,
            value_change,
            polarity_flip,
            slot_change,
            relocation,
            workplace_move,
            resolution,
            opposite,
            handover,
            team_move,
            new_one,
        )
    )


_ORDINALS = {
    "first": "1",
    "second": "2",
    "third": "3",
    "fourth": "4",
    "fifth": "5",
    "sixth": "6",
    "seventh": "7",
    "eighth": "8",
    "ninth": "9",
    "tenth": "10",
}
# a count of things ("4 painting projects", "my 5th project", "thirteen books"): the number
# and up to two words after it, the last being what is counted
_COUNTED = re.compile(
    r"\b(\d+|%s)(?:st|nd|rd|th)?\s+((?:[a-z-]+\s+)?[a-z-]+)" % "|".join([*NUMBER_WORDS, *_ORDINALS])
)


def _counts(text: str) -> dict[str, tuple[str, frozenset[str]]]:
    """What a text counts, by the counted noun: {noun: (number, the words before it)}."""
    found = {}
    for m in _COUNTED.finditer(text):
        number = NUMBER_WORDS.get(m[1]) or _ORDINALS.get(m[1]) or m[1]
        said = m[2].split()
        if said[1:] == ["of"] or text[m.end() :].lstrip().startswith("of "):
            continue  # a measure of something ("32 GB of RAM"), not a count of things
        if said[-1] in STOPWORDS or said[-1] in ("now", "so", "left", "total"):
            said = said[:1]  # "2 bikes now": the count ends at a small word
        *before, noun = said
        if noun in STOPWORDS:
            continue
        found[canon(noun)] = (number, frozenset(canon(w) for w in before))
    return found


def _count_moved(n: Reading, o: Reading) -> bool:
    """A running count of the same things, moved on ("has completed 4 painting projects"
    -> "just finished my 5th painting project", "read 12 books this year" -> "now read 13
    books this year"): the same counted noun with the same words before it, another
    number, and something else in common besides the count."""
    if not (n.progression or n.weak_change or change_said(n)):
        return False  # a count moves on when the text says so ("just finished", "now")
    mine, theirs = _counts(n.text), _counts(o.text)
    for noun in mine.keys() & theirs.keys():
        (a, words_a), (b, words_b) = mine[noun], theirs[noun]
        if a == b or words_a != words_b:
            continue
        shared = (n.topic & o.topic) - GENERIC - LIGHT_VERBS - {noun}
        # or nothing but the count of what one has: "owns 3 bikes" -> "I own 2 bikes now"
        owned = not (o.topic - {noun} - GENERIC - LIGHT_VERBS - _OWNING - _NUMBERS) and all(
            _USER_OWNS.search(r.text) for r in (n, o)
        )
        if (shared or owned) and not _other_subject_count(n, o):
            return True
    return False


_OWNING = frozenset(canon(w) for w in ("own", "owns", "owned", "has", "have", "got"))
_NUMBERS = frozenset(canon(w) for w in NUMBER_WORDS)  # "three" in "owns three bikes"
# the user as the owner: "I own", "we now have", "User has" (not "my sister has")
_USER_OWNS = re.compile(
    r"(?:^|[,;] (?:so |and )?|\bso )(?:i|we|user)(?: now| still| currently)? (?:own|owns|have|has|got)\b"
)
# "one of my bikes", "two of the cars", "some of our plants": a part of a set
_PART_OF = re.compile(
    r"\b(?:one|two|three|four|five|some|several|a few|a couple|\d+) of "
    r"(?:my|our|the|his|her|their|its|these|those) (?:(?:two|three|four|five|six|\d+) )?([a-z]+)"
)


def _one_of_many(n: Reading, o: Reading) -> bool:
    """The new memory acts on one of several things ("I sold one of my bikes") and the old
    one is about one such thing ("User's bike is a Brompton"): which one is not said, so
    it is not this one, unless the new memory names something of it ("... the Brompton").
    A count of them ("owns 3 bikes") moves on by `_count_moved` instead."""
    parts = {canon(m[1]) for m in _PART_OF.finditer(n.text)} & o.concepts
    if not parts:
        return False
    return not ((n.topic & o.topic) - parts - GENERIC - LIGHT_VERBS - CUE_WORDS)


def _other_subject_count(n: Reading, o: Reading) -> bool:
    """Counts of two things ("my laptop has 32 GB" / "the server has 16 GB") or of two
    owners' things ("her sister has 3 kids" / "User has 2 kids")."""
    return other_leads(n, o)


def _near_verbatim(n: Reading, o: Reading) -> bool:
    """The same words in (nearly) the same order, with nothing in conflict and the same
    thing left behind: "moved CI from Jenkins to GitHub" is not "from GitHub to Jenkins"."""
    a, b = WORD_RE.findall(n.text), WORD_RE.findall(o.text)
    if not a or not b or conflict(n, o):
        return False
    if side_words(OLD_SIDE, n.text) != side_words(OLD_SIDE, o.text):
        return False
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    if matcher.real_quick_ratio() < NEAR or matcher.quick_ratio() < NEAR:
        return False  # bounds of ratio() from the lengths and the shared words: linear
    if len(a) + len(b) > LONG_WORDS:
        # ratio() is quadratic in the words (two similar 15,000-word turns: 11 s a pair):
        # long texts are near verbatim when their word pairs, in order, are shared as much
        return _pairs_shared(a, b) >= NEAR
    return matcher.ratio() >= NEAR


NEAR = 0.85  # near verbatim: this share of the words in the same order
LONG_WORDS = 1000  # texts longer than this together are compared by their word pairs


def _pairs_shared(a: list[str], b: list[str]) -> float:
    """The share of adjacent word pairs two texts have in common (as ratio() counts
    matched words: twice the shared, over both)."""
    pa, pb = Counter(zip(a, a[1:])), Counter(zip(b, b[1:]))
    total = sum(pa.values()) + sum(pb.values())
    return 2 * sum((pa & pb).values()) / total if total else 0.0


def _restates(n: Reading, o: Reading) -> bool:
    # a change can restate an older change ("moved to MySQL" / "migrated to MySQL")
    if (n.strong_change and not o.strong_change) or n.progression or conflict(n, o):
        return False
    return jaccard(gist(n), gist(o)) >= 0.6
