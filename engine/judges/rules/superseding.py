"""The contradiction judge: which older memories a new one supersedes or restates."""
from __future__ import annotations

import difflib
import re

from ...lexicon import lexicon, words
from .guards import NEW_ONE, change_clause, change_said, guarded
from .reading import (NEGATION, notation, NEW_SIDE, NOT_NEGATION, OLD_SIDE, SIDE_BREAK, STRONG_CHANGE,
                      Reading, clearly_nearest, conflict, gist, jaccard, members_by_category,
                      read, side_words)
from ...lexicon.slots import CATEGORIES, MEMBER_OF
from .words import (CUE_WORDS, GENERIC, SLOT_OF, STANCE, STOPWORDS, WORD_RE, canon, is_value,
                    token_tuple)

_LEXICON = lexicon("superseding")


def contradiction(new: str, candidates: list[tuple[int, str]],
                  similar: dict[int, float] | None = None) -> dict:
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
        if _near_verbatim(fresh, old):
            confirms.append(number)  # said again, perhaps a word changed: a confirmation
        elif guarded(fresh, old, new or "", text or "") or _left_elsewhere(fresh, old):
            continue
        elif _replaces(fresh, old) or _changed(fresh, old, similar.get(number),
                                               number == nearest):
            supersedes.append(number)
        elif _restates(fresh, old):
            confirms.append(number)
    return {"supersedes": supersedes, "confirms": confirms}


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
    shared = (n.topic & o.topic) - GENERIC
    if not shared - _LIGHT:
        shared = set()  # only a common verb in common
    sizes = sorted((len(n.topic - GENERIC) or 1, len(o.topic - GENERIC) or 1))
    # a stray shared name ("Google") is not a shared subject: the overlap must count on both
    by_words = len(shared) / sizes[0] >= 0.3 and len(shared) / sizes[1] >= 0.25
    by_strict = len(shared) / sizes[0] >= 0.5
    close = by_words if similarity is None else \
        similarity >= _SIMILAR or (similarity >= _RELATED and (shared or nearest))
    if not close or not (shared or similarity is not None):
        return False
    # a value or a setting of the same thing: words in common beyond the common verbs,
    # and numbers counting the same unit ("32 GB of RAM" and "8 CPU cores" are two)
    values = bool(n.values - o.values) and bool(o.values - n.values) and bool(shared) \
        and _same_units(n, o)
    mine, theirs = _settings(n), _settings(o)
    flipped = bool(shared) and any((a in mine and b in theirs and b not in mine)
                                   or (b in mine and a in theirs and a not in mine)
                                   for a, b in _FLIPS)
    if values or flipped:
        return True
    # a change word alone needs more in common, and something of the old left behind
    left = o.topic - n.topic - GENERIC - _LIGHT
    if not (change_said(n) and left and (similarity is not None or by_strict)
            and ((n.topic - o.topic) or n.negative != o.negative)):
        return False
    return _acts_on(n, o, whole_text_close=similarity is not None)


def _acts_on(n: Reading, o: Reading, whole_text_close: bool) -> bool:
    """Does the change the new memory tells of act on what the old one says? Only the
    clause saying it counts ("tests are no longer required, CI does it": the reason's CI
    is not what changed), and a change verb with a named object acts on that object
    ("replaced the date picker in the frontend" leaves "the frontend uses React")."""
    heads = _changed_heads(n.text)
    if heads and not heads & o.topic and (n.topic & o.topic) - GENERIC - _LIGHT:
        return False  # the words in common are not what the change acts on
    said = change_clause(n)
    if whole_text_close and token_tuple(said) == token_tuple(n.text):
        return True  # the change is all it says, and the embeddings found it close
    return bool((read(said).topic & o.topic) - GENERIC - _LIGHT)


# verbs too common to make two memories about one subject ("my notes live in Obsidian",
# "my brother lives in Glasgow")
_LIGHT = frozenset(canon(w) for w in words(_LEXICON["light_verbs"]))
_ENDED = re.compile(r"\b(?:no more|no longer|ditched|dropped|scrapped|cancel+ed|gave up|"
                    r"quit|stopped|sold|turned off|disabled|left)\b")
_SIMILAR = 0.55   # cosine at which two memories are about the same thing
_RELATED = 0.40   # cosine at which a shared distinctive word confirms it
_LEAD = 0.15      # how far the nearest must stand ahead of the next to be the one meant


_TURNED = ((re.compile(r"\b(?:turn|turned|turns|switch|switched|shut|shuts) (?:\w+ ){0,3}?off\b"),
            canon("disabled")),
           (re.compile(r"\b(?:turn|turned|turns|switch|switched) (?:\w+ ){0,3}?on\b"),
            canon("enabled")))


def _settings(r: Reading) -> frozenset[str]:
    """Its words, with a setting said as a phrase read as its word ('turned X off' is
    'disabled'), so that a flip is seen however it is said."""
    return r.concepts | {word for pattern, word in _TURNED if pattern.search(r.text)}


def _left_elsewhere(n: Reading, o: Reading) -> bool:
    """The new memory names what it left behind ("switched me from ibuprofen to
    naproxen"), and this old memory holds none of it nor a member of the same slot: it
    is about something else that merely shares a word ("the knee")."""
    left = side_words(_FROM, n.text) if n.strong_change else frozenset()
    return bool(left) and not left & o.concepts and not _member_swap(n, o)


# the thing left behind, named explicitly ("from ibuprofen", "instead of Slack")
_FROM = re.compile(r"\b(?:from|instead of|rather than|away from)\s+([\w.+#\- ]+)")


_UNIT = re.compile(r"\b\d[\d.,:]*\s+(?:of\s+)?([a-z]{2,})")


def _units(r: Reading) -> frozenset[str]:
    """What a text's numbers count: the word after each ('8 cpu cores' -> cpu)."""
    return frozenset(canon(m) for m in _UNIT.findall(notation(r.text))
                     if m not in STOPWORDS and not is_value(canon(m)))


def _same_units(n: Reading, o: Reading) -> bool:
    mine, theirs = _units(n), _units(o)
    return not mine or not theirs or bool(mine & theirs)


def _replaces(n: Reading, o: Reading) -> bool:
    if not n.topic or not o.topic:
        return False
    if n.strong_change and not o.negative and side_words(OLD_SIDE, n.text) & o.topic:
        return True  # the new text names what it left behind, and the old one held it
    if n.additive:
        return False
    return any(test(n, o) for test in (_member_swap, _value_change, _polarity_flip,
                                        _slot_change, _relocation, _resolution, _opposite,
                                        _handover, _team_move, _new_one))


def _near_verbatim(n: Reading, o: Reading) -> bool:
    """The same words in (nearly) the same order, with nothing in conflict and the same
    thing left behind: "moved CI from Jenkins to GitHub" is not "from GitHub to Jenkins"."""
    a, b = WORD_RE.findall(n.text), WORD_RE.findall(o.text)
    if not a or not b or conflict(n, o):
        return False
    if side_words(OLD_SIDE, n.text) != side_words(OLD_SIDE, o.text):
        return False
    return difflib.SequenceMatcher(None, a, b, autojunk=False).ratio() >= 0.85


# "Tom owns billing now", "Tom took over billing": who holds a piece of work. A new holder
# of the same work replaces the old one ("Priya owns the billing service").
_HOLDS = re.compile(r"\b([a-z][a-z'-]+) (?:now |also )?(?:owns|leads|manages|maintains|runs|"
                    r"handles|is responsible for|is in charge of|took over|takes over|"
                    r"has taken over|is the owner of|is the lead of|heads)\s+([^.;,]+)")
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


def _handover(n: Reading, o: Reading) -> bool:
    """The same work, another holder: "Tom owns billing now" replaces "Priya owns billing"."""
    mine, theirs = _holders(n.text), _holders(o.text)
    return any(jaccard(work, old_work) >= 0.5 and person != old_person and old_person not in mine
               for person, work in mine.items() for old_person, old_work in theirs.items())


_MOVED_TEAM = re.compile(r"\b([a-z][a-z'-]+) (?:has |just |recently )*(?:moved|switched|"
                         r"transferred|changed|went) (?:over )?(?:to|into) (?:the |a )?([\w-]+) team\b")
_ON_TEAM = re.compile(r"\b([a-z][a-z'-]+) (?:is|works|sits) (?:on|in|with|for) (?:the |a )?"
                      r"([\w-]+) team\b")


def _team_move(n: Reading, o: Reading) -> bool:
    """"Priya moved to the search team" replaces "Priya is on the billing team"."""
    moved = {m[1]: m[2] for m in _MOVED_TEAM.finditer(n.text) if m[1] not in STOPWORDS}
    return any(moved.get(m[1]) not in (None, m[2]) for m in _ON_TEAM.finditer(o.text))


def _member_swap(n: Reading, o: Reading) -> bool:
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


def _contexts(n: Reading, o: Reading, category: str) -> tuple[set[str], set[str]]:
    """What each text says around the slot, without members, slot names and values."""
    noise = ({m for _, m in n.members | o.members} | GENERIC
             | {w for w, cats in SLOT_OF.items() if category in cats})
    mine = (n.concepts - CUE_WORDS) - noise - {w for w in n.concepts if is_value(w)}
    theirs = (o.concepts - CUE_WORDS) - noise - {w for w in o.concepts if is_value(w)}
    return mine, theirs


def _compatible_use(n: Reading, o: Reading, category: str) -> bool:
    """After a change cue the new member may come bare ("migrated to MySQL"): it replaces
    an old member used in the same place, or one whose use is barely described, but not
    "the study tracker has a SQLite cache"."""
    # a common verb is no use of its own ("notes go in Evernote", "notes live in Obsidian")
    mine, theirs = (c - STANCE - _LIGHT for c in _contexts(n, o, category))
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
        # one editor at a time: same stance, or neither says anything else
        return bool(mine & theirs) or not (mine - STANCE or theirs - STANCE)
    mine, theirs = mine - STANCE, theirs - STANCE
    return bool(mine & theirs) and jaccard(mine, theirs) >= 0.5


def _value_change(n: Reading, o: Reading) -> bool:
    """Same subject, different date or amount ("release on May 3" -> "release May 10")."""
    if not n.values or not o.values or not (n.values - o.values) or not _same_units(n, o):
        return False
    shared = (n.topic & o.topic) - GENERIC
    if n.strong_change:
        return bool(shared)
    if n.progression or not (o.values - n.values):
        return False
    return bool(shared) and jaccard(n.topic, o.topic) >= 0.5


def _polarity_flip(n: Reading, o: Reading) -> bool:
    """"Drinks coffee" -> "doesn't drink coffee anymore"; "never X" -> "always X"."""
    if n.negative == o.negative or n.progression:
        return False
    return bool((n.topic & o.topic) - GENERIC) and jaccard(n.topic, o.topic) >= 0.5


def _slot_change(n: Reading, o: Reading) -> bool:
    """A change cue over a shared subject, with something different on each side.

    Words after 'to'/'with' are the new value: an old memory that already mentions them
    agrees with the change ("moved to Berlin" does not supersede "works in Berlin"). When
    the cue names what changed ("moved the cluster", "the cluster was moved"), that head
    word must be in the old memory: "replaced the date picker in the frontend" leaves
    "the frontend uses React" alone."""
    if not n.strong_change or (n.values - _EVENT_TIMES and not o.values):
        return False  # a new time for something the old memory gave no time for
    # only the clause holding the cue counts: "..., CI does it" is a reason, not a change
    clause = read(" ".join(c for c in re.split(r"[,;:]|\b(?:and|but|because|since|so)\b",
                                               n.text) if STRONG_CHANGE.search(c)))
    shared = (clause.topic & o.topic) - GENERIC - side_words(NEW_SIDE, n.text)
    if not shared or not (o.topic - clause.topic) or not (clause.topic - o.topic):
        return False
    heads = _changed_heads(n.text)
    if heads:
        return bool(heads & o.topic)
    return len(shared) / len(o.topic - GENERIC) >= 0.5


# when the change happened, not a value of what changed ("moved my savings this year")
_EVENT_TIMES = frozenset({"this year", "this month", "this week", "today", "tonight",
                          "yesterday"})
_CHANGE_VERB = (r"(?:switched|migrated|moved|replaced|changed|swapped|converted|rewrote|"
                r"rewritten|upgraded|downgraded|pushed|postponed|delayed|rescheduled|"
                r"cancell?ed|dropped|ditched|abandoned|increased|decreased|raised|lowered|"
                r"reduced|extended)")
_ACTIVE_OBJECT = re.compile(_CHANGE_VERB + r"\s+(?:(?:the|a|an|our|my|their|its|this|"
                            r"that|all|some)\s+)*((?:[\w.+#-]+\s*)+)")
_PASSIVE_SUBJECT = re.compile(r"([\w.+#-]+)\s+(?:was|were|is|are|got|has been|have been|"
                              r"had been)\s+" + _CHANGE_VERB)
_OBJECT_BREAK = SIDE_BREAK | frozenset(words(_LEXICON["object_break"]))


def _changed_heads(text: str) -> frozenset[str]:
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


_RELOCATION = re.compile(r"\b(?:i|we|user|they|he|she)(?: have| has| just| recently| finally)*"
                         r" (?:moved|relocated) to ([a-z][\w-]*)")


def _relocation(n: Reading, o: Reading) -> bool:
    """"I moved to Lisbon" replaces where the user lives, unless that already says Lisbon."""
    m = _RELOCATION.search(n.text)
    if not m or m[1] in STOPWORDS or canon(m[1]) in MEMBER_OF:
        return False
    return canon("live") in o.topic and canon(m[1]) not in o.topic


_ABOUT_USER = re.compile(r"\b(?:user|i|my|we|our)\b")


def _new_one(n: Reading, o: Reading) -> bool:
    """"I started a new job as ..." replaces what the user's job was ("works as an
    analyst at ..."): the user's one thing of that kind, now another."""
    if not _ABOUT_USER.search(o.text):
        return False
    held = {canon(m[1] or m[2]) for m in NEW_ONE.finditer(n.text)}
    return bool(held & o.concepts)


_WAITING = re.compile(r"\b(blocked|waiting|awaiting|on hold|pending|stuck)\b")
_RESOLVED = re.compile(r"\b(passed|approved|resolved|unblocked|done|finished|completed|"
                       r"closed|merged|landed|arrived|heard back|got back|received|signed|"
                       r"cleared|fixed|granted|accepted|rejected|denied|cancel+ed)\b")


def _resolution(n: Reading, o: Reading) -> bool:
    """"Blocked on the security review" ends when "the security review passed"."""
    if not _WAITING.search(o.text) or _WAITING.search(n.text) or not _RESOLVED.search(n.text):
        return False
    return bool((n.topic & o.topic) - GENERIC)


# Opposite ends of one scale: a preference for one replaces a preference for the other.
_OPPOSITES = tuple((canon(a), canon(b)) for a, b in _LEXICON["opposites"])


def _opposite(n: Reading, o: Reading) -> bool:
    """"Prefers short answers" -> "likes long detailed answers": same subject, other end."""
    if n.negative != o.negative or n.progression:
        return False
    flipped = any((a in n.topic and b in o.topic and b not in n.topic)
                  or (b in n.topic and a in o.topic and a not in n.topic)
                  for a, b in _OPPOSITES)
    return flipped and bool((n.topic & o.topic) - GENERIC)


def _restates(n: Reading, o: Reading) -> bool:
    # a change can restate an older change ("moved to MySQL" / "migrated to MySQL")
    if (n.strong_change and not o.strong_change) or n.progression or conflict(n, o):
        return False
    return jaccard(gist(n), gist(o)) >= 0.6
