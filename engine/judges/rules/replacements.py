"""The shapes a replacement takes, each a test of a new memory against an old one: a
lexicon member swapped, a value or a polarity or a slot changed, a named object changed,
a move, a wait resolved, the other end of a scale, a handover, a team move, a new one of
a kind. The contradiction judge (`superseding`) asks them in turn.
"""

from __future__ import annotations

import re
from functools import lru_cache

from engine.judges.lexicon import lexicon, words
from engine.judges.lexicon.slots import CATEGORIES, MEMBER_OF
from engine.judges.rules.exemptions import NEW_ONE, change_clause
from engine.judges.rules.reading import (
    NEGATION,
    NEW_SIDE,
    NOT_NEGATION,
    NUMBER_WORDS,
    OPENERS,
    SIDE_BREAK,
    STRONG_CHANGE,
    Reading,
    jaccard,
    members_by_category,
    notation,
    read,
    side_words,
)
from engine.judges.rules.words import (
    CUE_WORDS,
    GENERIC,
    SLOT_OF,
    STANCE,
    STOPWORDS,
    canon,
    is_value,
    token_tuple,
)

_LEXICON = lexicon("superseding")
# verbs too common to make two memories about one subject ("my notes live in Obsidian",
# "my brother lives in Glasgow")
LIGHT_VERBS = frozenset(canon(w) for w in words(_LEXICON["light_verbs"]))


_UNIT = re.compile(r"\b\d[\d.,:]*\s+(?:of\s+)?([a-z]{2,})")


def _units(r: Reading) -> frozenset[str]:
    """What a text's numbers count: the word after each ('8 cpu cores' -> cpu)."""
    return frozenset(
        canon(m) for m in _UNIT.findall(notation(r.text)) if m not in STOPWORDS and not is_value(canon(m))
    )


def same_units(n: Reading, o: Reading) -> bool:
    mine, theirs = _units(n), _units(o)
    return not mine or not theirs or bool(mine & theirs)


# A value's own words: the label before a number ("number 7", "version 2.3", "port 8080"),
# the unit after it ("32 GB", "5 engineers") and what that unit is of ("GB of RAM"). They
# say what kind of value it is, never whose: the laptop's RAM and the server's RAM share them.
_LABELS = frozenset(words(_LEXICON["value_labels"]))
_OWN = frozenset(words(_LEXICON["own_words"]))
_OTHERS = frozenset(words(_LEXICON["others_words"]))
_PLAIN = frozenset(words(_LEXICON["plain_modifiers"]))
_CHANGE_WORDS = frozenset(canon(w) for w in words(_LEXICON["change_words"]))
# a sentence opening with one of these has no noun phrase ahead of its verb
_ADVERB = re.compile(
    r"^\s*(?:recently|finally|eventually|officially|apparently|luckily|sadly|unfortunately|"
    r"fortunately|honestly|lately|suddenly)\b(?:,\s*|\s+(?=[a-z]+ed\b))"
)
_SUBJECTS = frozenset({"i", "we"})
# after a change word, what the change acts on: the user's or the one thing ("the airline
# moved my flight"), not someone else's ("Tom moved his appointment")
_DETERMINERS = frozenset({"the", "a", "an", "my", "our", "user", "this", "that"})  # "User's": my
_WORD = re.compile(r"\$?\d[\d.,:\-]*%?|[a-z][a-z0-9'\-]*|[:;,.!?()]")
_NUMBER = re.compile(r"\$?\d[\d.,:\-]*%?|v\d+")


def _words(text: str) -> list[str]:
    """A (read) text's words in order, values in one notation, punctuation kept as words."""
    return [w.rstrip(".,") or w for w in _WORD.findall(notation(text))]


def _is_number(word: str) -> bool:
    return bool(_NUMBER.fullmatch(word)) or word in NUMBER_WORDS


def _value_words(r: Reading) -> frozenset[str]:
    """The words that belong to the text's numbers: labels, units, what a unit is of."""
    said, found = _words(r.text), set()
    for i, word in enumerate(said):
        if not _is_number(word):
            continue
        if i and said[i - 1] in _LABELS:
            found.add(said[i - 1])
        if ":" in word:
            continue  # a time of day has no unit: "the 6:50 train" is the thing it times
        rest = said[i + 1 : i + 5]
        if rest and rest[0] == "of":
            rest = rest[1:]  # "ten of the engineers"
        if rest and rest[0] not in STOPWORDS and rest[0][:1].isalpha():
            found.add(rest[0])  # the unit: "32 gb", "5 engineers"
            rest = rest[1:]
            if rest and rest[0] == "of":
                rest = [w for w in rest[1:] if w not in STOPWORDS][:1]
                found.update(w for w in rest if w[:1].isalpha())  # "gb of ram"
    return frozenset(canon(w) for w in found)


def _lead(r: Reading) -> tuple[str | None, tuple[frozenset[str], ...], tuple[str, ...]]:
    """Who the text's opening noun phrase belongs to ('own', 'other' or None for 'the'),
    its words (each as its tokens: 'iPhone' is also a phone), and the numbers that name
    it ("service 7", "ticket 4512"). It ends at the first small word, verb of the lexicon,
    change word or value; a text that opens with a value or a verb ("Two reviewers ...",
    "Upgraded the service ...") has none."""
    # "By the way, my ...": "my"; "Finally upgraded, ...", "Recently, my ...": no noun
    said, i, owner = _words(_ADVERB.sub("", OPENERS.sub("", r.text))), 0, None
    while i < len(said) and (
        said[i] in STOPWORDS or said[i] in _PLAIN or (is_value(canon(said[i])) and not _is_number(said[i]))
    ):
        if said[i] in _OWN:
            owner = "own"
        elif said[i] in _OTHERS and owner is None:
            owner = "other"
        i += 1
    if i and said[i - 1] in _SUBJECTS:
        return owner, (), ()  # "we refinanced, ...": a pronoun, then its verb
    phrase: list[frozenset[str]] = []
    ids: list[str] = []
    for j, word in enumerate(said[i:], start=i):
        if _is_number(word):
            if not phrase or not any(_is_number(w) for w in said[j + 1 :]):
                break  # the value itself: "5 engineers are ...", "the barrel holds 200"
            ids.append(word)  # "service 7 listens on port 8007": 7 names which service
            continue
        if word in _LABELS and phrase:
            continue  # "fact number 7"
        token = canon(word)
        if (
            ids
            or not word[:1].isalpha()
            or word in STOPWORDS
            or token in CUE_WORDS
            or token in LIGHT_VERBS
            or token in _CHANGE_WORDS
            or (is_value(token) and phrase)
        ):
            if token in _CHANGE_WORDS and said[j + 1 : j + 2] and said[j + 1] in _DETERMINERS:
                return owner, (), ()  # "the airline moved my flight": who changed it, not what
            break
        if is_value(token) or word in _PLAIN:
            continue
        phrase.append(frozenset(token_tuple(word)) | {token})
    return owner, tuple(phrase), tuple(ids)


def other_leads(n: Reading, o: Reading) -> bool:
    """Do the two texts open with two things ("my laptop" / "the staging server") or two
    owners' things ("my laptop" / "his laptop")?"""
    (owner_n, lead_n, _), (owner_o, lead_o, _) = _lead(n), _lead(o)
    if {owner_n, owner_o} == {"own", "other"}:
        return True
    return bool(lead_n and lead_o and not lead_n[0] & o.concepts and not lead_o[0] & n.concepts)


def same_subject(n: Reading, o: Reading) -> bool:
    """Are two texts that give a value about the same thing? They must share a word that is
    not one of both values' own words ("GB", "RAM", "number", "port") nor a common verb, and
    their opening noun phrases must not name two things: two ids of one kind ("service 7"
    / "service 9"), two phrases each led by a word the other text never says ("my road
    bike" / "the dog", "the Berlin office" / "the Lisbon office"), or the user's own thing
    and someone else's ("my team" / "Tom's team", "my passport" / "her passport").
    Determiners and the user's possessives name one thing: "my", "our", "the", "User's"."""
    valued = _value_words(n) & _value_words(o)
    (owner_n, lead_n, ids_n), (owner_o, lead_o, ids_o) = _lead(n), _lead(o)
    shared = (n.topic & o.topic) - GENERIC - LIGHT_VERBS - valued
    # a common word may lead both ("team size is 5" / "the team grew to 7"), and "we" may be
    # the team ("we're down to four engineers" / "the team is five engineers")
    same_lead = bool(lead_n and lead_o and lead_n[0] & lead_o[0])
    we_are_it = any(
        owner == "own" and not lead and their and frozenset().union(*their) <= GENERIC
        for owner, lead, their in ((owner_n, lead_n, lead_o), (owner_o, lead_o, lead_n))
    )
    if not (shared or same_lead or we_are_it):
        return False  # nothing in common but the values' own words
    if ids_n and ids_o and ids_n[0] != ids_o[0] and frozenset().union(*lead_n) & frozenset().union(*lead_o):
        return False  # "service 7" and "service 9", "ticket 4512" and "ticket 4620"
    if not lead_n or not lead_o:
        return True  # "We're down to four engineers", "Upgraded the service to ..."
    if not lead_n[0] & o.concepts and not lead_o[0] & n.concepts:
        return False  # each opens with a thing the other never names
    if {owner_n, owner_o} == {"own", "other"}:
        return False  # "my laptop" and "his laptop"
    # the user's own thing, and one led by a word the user's text never says: "my team"
    # and "Tom's team" (read "tom team"), "my passport" and "Sara's passport"
    if owner_n == "own" and owner_o != "own" and not lead_o[0] & n.concepts:
        return False
    if owner_o == "own" and owner_n != "own" and not lead_n[0] & o.concepts:
        return False
    return True


# "Tom owns billing now", "Tom took over billing": who holds a piece of work. A new holder
# of the same work replaces the old one ("Priya owns the billing service").


_HOLDS = re.compile(
    r"\b([a-z][a-z'-]+) (?:now |also )?(?:owns|leads|manages|maintains|runs|"
    r"handles|is responsible for|is in charge of|took over|takes over|"
    r"has taken over|is the owner of|is the lead of|heads)\s+([^.;,]+)"
)
_NOT_HOLDERS = frozenset(words(_LEXICON["not_holders"]))
_WORK_FILLER = frozenset(token_tuple(" ".join(words(_LEXICON["work_filler"]))))


def _holders(text: str) -> dict[str, frozenset[str]]:
    """Who holds what: person -> the work's words (without filler like 'service', 'now')."""
    found: dict[str, frozenset[str]] = {}
    for m in _HOLDS.finditer(text):
        person = m[1]
        # "User owns X" (a memory in the third person) names a holder like any name
        if person != "user" and (person in STOPWORDS or person in _NOT_HOLDERS):
            continue
        work = frozenset(token_tuple(m[2])) - GENERIC - _WORK_FILLER
        if work:
            found[person] = found.get(person, frozenset()) | work
    return found


def handover(n: Reading, o: Reading) -> bool:
    """The same work, another holder: "Tom owns billing now" replaces "Priya owns billing"."""
    mine, theirs = _holders(n.text), _holders(o.text)
    return any(
        jaccard(work, old_work) >= 0.5 and person != old_person and old_person not in mine
        for person, work in mine.items()
        for old_person, old_work in theirs.items()
    )


_MOVED_TEAM = re.compile(
    r"\b([a-z][a-z'-]+) (?:has |just |recently )*(?:moved|switched|"
    r"transferred|changed|went) (?:over )?(?:to|into) (?:the |a )?([\w-]+) team\b"
)
_ON_TEAM = re.compile(
    r"\b([a-z][a-z'-]+) (?:is|works|sits) (?:on|in|with|for) (?:the |a )?"
    r"([\w-]+) team\b"
)


def team_move(n: Reading, o: Reading) -> bool:
    """ "Priya moved to the search team" replaces "Priya is on the billing team"."""
    moved = {m[1]: m[2] for m in _MOVED_TEAM.finditer(n.text) if m[1] not in STOPWORDS}
    return any(moved.get(m[1]) not in (None, m[2]) for m in _ON_TEAM.finditer(o.text))


def member_swap(n: Reading, o: Reading) -> bool:
    """A lexicon slot now holds a member the old memory did not, and lost one it had."""
    # only members a text does not deny: "doesn't like Java" introduces nothing, and
    # "I use Helix now and I don't miss Emacs" introduces Helix
    mine, theirs = _held(n), _held(o)
    for category in sorted(mine.keys() & theirs.keys()):
        if not (mine[category] - theirs[category]) or not (theirs[category] - mine[category]):
            continue
        if n.strong_change or n.weak_change:
            if _compatible_use(n, o, category):
                return True
        elif not n.progression and _same_context(n, o, category):
            return True
    return False


def _held(r: Reading) -> dict[str, set[str]]:
    """Lexicon members per slot, leaving out those in a clause that denies them."""
    if not r.negative:
        return members_by_category(r)
    grouped: dict[str, set[str]] = {}
    for clause in re.split(r"[,;]|\b(?:and|but)\b", r.text):
        if NEGATION.search(NOT_NEGATION.sub(" ", clause)):
            continue
        for word in token_tuple(clause):
            for category in MEMBER_OF.get(word, ()):
                grouped.setdefault(category, set()).add(word)
    return grouped


def _contexts(n: Reading, o: Reading, category: str) -> tuple[frozenset[str], frozenset[str]]:
    """What each text says around the slot, without members, slot names and values."""
    noise = (
        {m for _, m in n.members | o.members}
        | GENERIC
        | {w for w, cats in SLOT_OF.items() if category in cats}
    )
    mine = (n.concepts - CUE_WORDS) - noise - {w for w in n.concepts if is_value(w)}
    theirs = (o.concepts - CUE_WORDS) - noise - {w for w in o.concepts if is_value(w)}
    return mine, theirs


def _compatible_use(n: Reading, o: Reading, category: str) -> bool:
    """After a change cue the new member may come bare ("migrated to MySQL"): it replaces
    an old member used in the same place, or one whose use is barely described, but not
    "the study tracker has a SQLite cache"."""
    # a common verb is no use of its own ("notes go in Evernote", "notes live in Obsidian")
    mine, theirs = (c - STANCE - LIGHT_VERBS for c in _contexts(n, o, category))
    if mine & theirs:
        return True
    # a clause joined by 'and'/'but'/'because' is a comment on the change ("... and I'm
    # not going back", "... because the plugins are better"), not where the member is used
    held = {m for c, m in n.members if c == category}
    clauses = re.split(r"[;]|\b(?:and|but|because|since|so|as)\b", n.text)
    using = [c for c in clauses if held & set(token_tuple(c))]
    if using and len(using) < len(clauses):
        mine = _contexts(read(" ".join(using)), o, category)[0] - STANCE
    if mine and theirs:
        return False
    return len(mine | theirs) <= 2


def _same_context(n: Reading, o: Reading, category: str) -> bool:
    """Without a change cue, a swap counts only when both texts speak of the same use."""
    mine, theirs = _contexts(n, o, category)
    if CATEGORIES[category].exclusive:
        # one editor at a time: same stance, or neither says anything else ("went vegan"
        # says no more than "is vegan": a light verb is no use of its own)
        return bool(mine & theirs) or not (mine - STANCE - LIGHT_VERBS or theirs - STANCE - LIGHT_VERBS)
    mine, theirs = mine - STANCE, theirs - STANCE
    return bool(mine & theirs) and jaccard(mine, theirs) >= 0.5


def value_change(n: Reading, o: Reading) -> bool:
    """Same subject, different date or amount ("release on May 3" -> "release May 10")."""
    if not o.values or not (n.values - o.values - _EVENT_TIMES) or not same_units(n, o):
        return False  # "this month" tells when the change happened, it is no value of it
    shared = (n.topic & o.topic) - GENERIC
    if n.strong_change:
        # in the clause that says the change: "..., so I'm looking for hiking groups" is not it
        return bool((read(change_clause(n)).topic & o.topic) - GENERIC)
    if n.progression or not (o.values - n.values):
        return False
    return bool(shared) and jaccard(n.topic, o.topic) >= 0.5


def polarity_flip(n: Reading, o: Reading) -> bool:
    """ "Drinks coffee" -> "doesn't drink coffee anymore"; "never X" -> "always X"."""
    if n.negative == o.negative or n.progression:
        return False
    return bool((n.topic & o.topic) - GENERIC) and jaccard(n.topic, o.topic) >= 0.5


def slot_change(n: Reading, o: Reading) -> bool:
    """A change cue over a shared subject, with something different on each side.

    Words after 'to'/'with' are the new value: an old memory that already mentions them
    agrees with the change ("moved to Berlin" does not supersede "works in Berlin"). When
    the cue names what changed ("moved the cluster", "the cluster was moved"), that head
    word must be in the old memory: "replaced the date picker in the frontend" leaves
    "the frontend uses React" alone."""
    if not n.strong_change or (n.values - _EVENT_TIMES and not o.values):
        return False  # a new time for something the old memory gave no time for
    # only the clause holding the cue counts: "..., CI does it" is a reason, not a change
    clause = read(
        " ".join(
            c for c in re.split(r"[,;:]|\b(?:and|but|because|since|so)\b", n.text) if STRONG_CHANGE.search(c)
        )
    )
    shared = (clause.topic & o.topic) - GENERIC - side_words(NEW_SIDE, n.text)
    if not shared or not (o.topic - clause.topic) or not (clause.topic - o.topic):
        return False
    heads = changed_heads(n.text)
    if heads:
        return bool(heads & o.topic)
    return len(shared) / len(o.topic - GENERIC) >= 0.5


# when the change happened, not a value of what changed ("moved my savings this year")
_EVENT_TIMES = frozenset({"this year", "this month", "this week", "today", "tonight", "yesterday"})
_CHANGE_VERB = (
    r"(?:switched|migrated|moved|replaced|changed|swapped|converted|rewrote|"
    r"rewritten|upgraded|downgraded|pushed|postponed|delayed|rescheduled|"
    r"cancell?ed|dropped|ditched|abandoned|increased|decreased|raised|lowered|"
    r"reduced|extended|cut|trimmed|halved|doubled|shortened)"
)
_ACTIVE_OBJECT = re.compile(
    _CHANGE_VERB + r"\s+(?:(?:the|a|an|our|my|their|its|this|"
    r"that|all|some)\s+)*((?:[\w.+#-]+\s*)+)"
)
_PASSIVE_SUBJECT = re.compile(
    r"([\w.+#-]+)\s+(?:was|were|is|are|got|has been|have been|"
    r"had been)\s+" + _CHANGE_VERB
)
_OBJECT_BREAK = SIDE_BREAK | frozenset(words(_LEXICON["object_break"]))


@lru_cache(maxsize=4096)
def changed_heads(text: str) -> frozenset[str]:
    """The nouns a change cue acts on: the last word of its object, or its passive subject."""
    heads = set()
    for m in _ACTIVE_OBJECT.finditer(text):
        phrase = []
        for word in m[1].split():
            if word in _OBJECT_BREAK:
                break
            phrase.append(word)
        if phrase:
            heads.add(canon(phrase[-1].rstrip(".")))  # "... the subscription."
    heads.update(canon(m[1]) for m in _PASSIVE_SUBJECT.finditer(text))
    return frozenset(heads - STOPWORDS - GENERIC)


_RELOCATION = re.compile(
    r"\b(?:i|we|user|they|he|she)(?: have| has| just| recently| finally)*"
    r" (?:moved|relocated) to ([a-z][\w-]*)"
)


def relocation(n: Reading, o: Reading) -> bool:
    """ "I moved to Lisbon" replaces where the user lives, unless that already says Lisbon."""
    m = _RELOCATION.search(n.text)
    if not m or m[1] in STOPWORDS or canon(m[1]) in MEMBER_OF:
        return False
    return canon("live") in o.topic and canon(m[1]) not in o.topic


_WORKPLACES = r"(office|branch|campus|site|store|plant|lab|clinic|hospital|school|warehouse|studio)"
_MOVED_TO_PLACE = re.compile(
    r"\b(?:i|we|user)(?: have| has| just| recently| finally)* (?:moved|relocated|transferred|"
    r"switched) (?:over )?to (?:the|our|a|another) ([a-z][\w-]*) " + _WORKPLACES
)
_AT_PLACE = re.compile(
    r"\b(?:work|works|working|based|sits|is|am|are) (?:from|at|in|out of) (?:the|our|a) "
    r"([a-z][\w-]*) " + _WORKPLACES
)


def workplace_move(n: Reading, o: Reading) -> bool:
    """ "I transferred to the Denver office" replaces "works from the Chicago office": the
    same kind of place, another one."""
    moved = {(m[1], m[2]) for m in _MOVED_TO_PLACE.finditer(n.text)}
    if not moved or not _USER_FIRST.match(o.text):
        return False  # "Sarah works at the Chicago office" is hers
    return any(kind == m[2] and name != m[1] for m in _AT_PLACE.finditer(o.text) for name, kind in moved)


_USER_FIRST = re.compile(r"\s*(?:user|i|we)\b")
_ABOUT_USER = re.compile(r"\b(?:user|i|my|we|our)\b")


def new_one(n: Reading, o: Reading) -> bool:
    """ "I started a new job as ..." replaces what the user's job was ("works as an
    analyst at ..."): the user's one thing of that kind, now another."""
    if not _ABOUT_USER.search(o.text):
        return False
    held = {canon(m[1] or m[2]) for m in NEW_ONE.finditer(n.text)}
    return bool(held & o.concepts)


_WAITING = re.compile(r"\b(blocked|waiting|awaiting|on hold|pending|stuck)\b")
_RESOLVED = re.compile(
    r"\b(passed|approved|resolved|unblocked|done|finished|completed|"
    r"closed|merged|landed|arrived|heard back|got back|received|signed|"
    r"cleared|fixed|granted|accepted|rejected|denied|cancel+ed)\b"
)


def resolution(n: Reading, o: Reading) -> bool:
    """ "Blocked on the security review" ends when "the security review passed"."""
    if not _WAITING.search(o.text) or _WAITING.search(n.text) or not _RESOLVED.search(n.text):
        return False
    return bool((n.topic & o.topic) - GENERIC)


# Opposite ends of one scale: a preference for one replaces a preference for the other.
_OPPOSITES = tuple((canon(a), canon(b)) for a, b in _LEXICON["opposites"])


def opposite(n: Reading, o: Reading) -> bool:
    """ "Prefers short answers" -> "likes long detailed answers": same subject, other end."""
    if n.negative != o.negative or n.progression:
        return False
    flipped = any(
        (a in n.topic and b in o.topic and b not in n.topic)
        or (b in n.topic and a in o.topic and a not in n.topic)
        for a, b in _OPPOSITES
    )
    return flipped and bool((n.topic & o.topic) - GENERIC)
