"""Giving up a kind of thing ends the memories of having its members: "I gave up caffeine"
supersedes "drinks two coffees every morning", "I'm fully vegan now" supersedes "eats
chicken or beef most days", "quit smoking" supersedes "smokes a pack a day". The two
share no word; what ties them is lexicon/superseding.yaml's `given_up` (a kind, its
members) and `given_up_as` (what a person now is, the kinds that ends).

Only the user's own giving up counts ("my sister went vegan" ends nothing of the user's),
and only an old memory of having or liking a member, said as how things are: not a past
deed ("had a steak last night" stays true) and not a denial ("doesn't drink beer" agrees).
"""

from __future__ import annotations

import re
from functools import lru_cache

from engine.judges.lexicon import lexicon, words
from engine.judges.rules.dates import past_deed
from engine.judges.rules.reading import Reading
from engine.judges.rules.words import stems

_LEXICON = lexicon("superseding")


def _kinds() -> dict[str, tuple[str, frozenset[str]]]:
    """Each word naming a kind -> (the kind, the tokens of its members)."""
    out = {}
    for row in _LEXICON["given_up"]:
        left, _, right = row.partition(":")
        names = words(left)
        for name in names:
            out[name] = (names[0], stems(right))
    return out


_KINDS = _kinds()
_STATES = {state: words(kinds) for state, kinds in _LEXICON["given_up_as"].items()}
_MEMBERS = {kind: members for kind, members in _KINDS.values()}
# giving up, then up to four words to the kind: "gave up caffeine", "quit drinking",
# "cut out sugar and dairy", "no longer eat meat", "I'm off booze"
_GIVING_UP = re.compile(
    r"\b(?:(?:gave|give|giving|given)\s+up|quit|quitting|stopped|cut(?:ting)?\s+out|no\s+more|"
    r"no\s+longer|swore\s+off|(?:am|is|are|been|went|stay(?:ing)?)\s+off)((?:\s+[a-z]+){1,4})"
)
_NOW_AM = re.compile(
    r"\b(?:i|we|user)\s+(?:am|are|is|went|have gone|has gone|became|have become|turned)\s+"
    r"(?:(?!not\b|no\b|never\b|longer\b)[a-z]+\s+){0,2}?(%s)\b" % "|".join(_STATES)
)
# a giving up for a while: 'for Lent', 'for a week', 'until the race', 'temporarily'
_FOR_A_WHILE = re.compile(
    r"\bfor (?:lent|now|a while|(?:a|an|one|two|three|four|a few|a couple of) (?:day|week|month)s?)\b|"
    r"\buntil\b|\btemporarily\b"
)
# what stands before the user's own giving up: I, we or User and adverbs, or nothing
# ('quit gambling for good' is said of the user)
_REACH = 80  # characters before a giving up read for its subject
_OWN_BEFORE = re.compile(
    r"(?:^|\b(?:i|we|user))(?:\s+(?:[a-z]+ly|just|finally|also|have|has|had|now|already))*\s*$"
)
# an old memory of the user having or liking a thing ('User drinks two coffees', 'my
# favourite dessert is chocolate cake'), not of something the user has ('User's cat food
# has chicken in it')
_HAVING = re.compile(
    r"^\s*(?:(?:user|i|we)(?:\s+(?:[a-z]+ly|always|often|still|now|also|just))?\s+)?(?:eats?|eating|drinks?|drinking|"
    r"loves?|likes?|enjoys?|orders?|cooks?|grabs?|smokes?|vapes?|craves?|snacks?|prefers?|bets?|"
    r"plays?|is addicted|am addicted)\b|\b(?:user|my|our)\s+favou?rite\b"
)
# the words of giving up and of having, which a kind's memories share with any other
_USE = stems("eat eating drink drinking smoke smoking vape vaping bet betting gamble gambling have take use")


@lru_cache(maxsize=4096)  # asked again for every candidate of one new memory
def ended_kinds(n: Reading, states: bool = True) -> frozenset[str]:
    """The kinds the user says they gave up, or (`states`) now are without ('vegan')."""
    found: set[str] = set()
    if _FOR_A_WHILE.search(n.text):
        return frozenset()  # 'gave up caffeine for Lent' ends nothing that lasts
    for m in _GIVING_UP.finditer(n.text):
        # (the words just before it: a whole long text's prefix for each match is quadratic;
        # a cut prefix starts with '.', which the anchor '^' then cannot pass)
        before = n.text[: m.start()] if m.start() <= _REACH else "." + n.text[m.start() - _REACH : m.start()]
        if not _OWN_BEFORE.search(before):
            continue  # someone else's ('my sister quit smoking'); none is the user's
        named = [w for w in m[1].split() if w in _KINDS]
        # 'stopped drinking coffee': the coffee; 'stopped drinking': the drinking
        if len(named) > 1 and named[0] == "drinking":
            named = named[1:]
        found.update(_KINDS[w][0] for w in named)
    for m in _NOW_AM.finditer(n.text) if states else ():
        found.update(_STATES[m[1]])
    return frozenset(found)


def given_up(n: Reading, o: Reading) -> bool:
    """Does the new memory give up a kind the old one has or likes a member of?"""
    if o.negative or not _HAVING.search(o.text) or past_deed(o.text, len(o.text)) is not None:
        return False
    kinds = ended_kinds(n)
    # (an old memory that itself gives the kind up is no having of it)
    return any(_MEMBERS[k] & o.concepts for k in kinds) and not ended_kinds(o) & kinds


def gives_up_something_else(n: Reading, o: Reading) -> bool:
    """The new memory gives up a kind the old one holds no member of, and the two share
    no word but those of giving up and having: "I quit drinking" is no change to "drinks
    a lot of water", nor "stopped drinking coffee" to "doesn't drink wine". (A state,
    'went vegan', is a diet too: "is vegetarian" is its slot's old member.)"""
    shared = n.topic & o.topic
    return bool(shared and not shared - _USE and ended_kinds(n, states=False)) and not given_up(n, o)
