"""What never supersedes, whatever the words in common: an idea or a hypothetical, a
memory about the past, or another item of the same kind (another invoice, room, person).

The contradiction judge (superseding.py) asks `guarded` before any of its tests, and
`change_said` whether a new memory says that something changed at all.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import lru_cache
from types import MappingProxyType

from engine.judges.lexicon import lexicon, words
from engine.judges.lexicon.slots import MEMBER_OF
from engine.judges.rules.dates import FULL_MONTH_RE
from engine.judges.rules.expiring import RECURRING
from engine.judges.rules.reading import NUMBER_WORDS, ORDINAL_WORDS, PARTING, STRONG_CHANGE, Reading, undated
from engine.judges.rules.words import GENERIC, STANCE, STOPWORDS, canon, is_value

_LEXICON = lexicon("superseding")

# A change said without the built-in change verbs ("ditched", "turned off", "no more X").
_CHANGE = re.compile(
    r"\b(?:%s)\b|\bno more\b|\bup to\b|\bdown to\b|\bturned off\b|"
    r"\bswitched off\b|\bgave up\b|\bmoved out\b|\bfrom now on\b|"
    r"\bthese days\b|\bnot \w+ any ?more\b" % "|".join(words(_LEXICON["change_words"]))
)
# the user's one thing of a kind, now another: "I started a new job", "my new dentist";
# the gate writes memories in the third person, so "User started ..." and "user's new
# dentist" (read as "user new dentist") say the same
NEW_ONE = re.compile(
    r"\b(?:i|we|user)(?: have| has| just| recently| finally)* (?:started|"
    r"got|have|has|bought|found|signed|moved into) (?:a|an|my|our|their) "
    r"new ([a-z]+)|\b(?:my|our|user) new ([a-z]+)\b"
)
_HYPOTHETICAL = re.compile(
    r"\b(?:%s)\b|\bat some point\b|\bnot decided\b|\bin case\b" % "|".join(words(_LEXICON["hypothetical"]))
)
# "lived in Montreal before Toronto", "used to work at IBM": the past, told as the past.
# A procedure's "before" ("run the tests before pushing") is not: it needs a past verb.
_PAST = re.compile(
    r"\bused to\b|\b(?:%s|\w+ed)\b[^.;]*\bbefore\b(?! \w+ing\b)" % "|".join(words(_LEXICON["past_verbs"]))
)
_ID_NOUNS = frozenset(words(_LEXICON["id_nouns"]))
_NAME = re.compile(
    r"(?<![.!?:;]\s)(?<!^)(?<!\w)([A-Z][\w.-]*[a-z0-9][\w.-]*"
    r"(?:\s+[A-Z][\w-]+)*)"
)
# words in front of a noun that do not make it another thing: "my old laptop", "always
# run the tests", "never run the tests"
_PLAIN_MODIFIERS = frozenset(words(_LEXICON["plain_modifiers"]))


def change_said(n: Reading) -> bool:
    """Does the new memory say that something changed (a change verb or word)?"""
    return n.strong_change or bool(_CHANGE.search(n.text)) or bool(NEW_ONE.search(n.text))


def change_clause(n: Reading) -> str:
    """The clauses of the new memory that say the change: '..., CI does it' is a reason."""
    clauses = re.split(r"[,;:]|\b(?:and|but|because|since|so)\b", n.text)
    said = [c for c in clauses if _CHANGE.search(c) or STRONG_CHANGE.search(c)]
    return " ".join(said) or n.text


def guarded(n: Reading, o: Reading, new: str, old: str) -> bool:
    """What never supersedes: an idea or a hypothetical ("if we get the grant, we might
    move"), a new memory about the past, or a different item of the same kind (its
    identifying number, name or modifier differs). Dates are no modal verbs: "May 10"."""
    if not n.strong_change and (_HYPOTHETICAL.search(undated(new)) or _PAST.search(n.text)):
        return True
    if (
        n.strong_change
        and re.search(r"\bif\b|\bunless\b|\bwhether\b", n.text)
        and _HYPOTHETICAL.search(undated(new))
    ):
        return True  # "if we get the grant, we might move the lab to Boston instead"
    if _someone_elses(n.text) and not _someone_elses(o.text):
        return True  # "User's sister quit smoking" is no change to "User smokes a pack a day"
    if _someone_elses(o.text) and not _someone_elses(n.text) and _USER_FIRST.match(n.text):
        return True  # "We relocated to Austin" is no change to "User's brother lives in Glasgow"
    if _named_ones_own_change(new, old):
        return True  # "Tom switched to a Pixel" is no change to "User's phone is an iPhone"
    if _one_deed_beside_a_habit(n.text, o.text):
        return True  # "I sold 30 cookies at the bake sale" ends no "bakes cookies every weekend"
    return _other_item(n, o, new, old)


# a memory about another person: "User's sister ...", "my husband ...", "she ..."
_SOMEONE = re.compile(
    r"^\s*(?:(?:user|my|our|his|her|their)\s+(?:[a-z]+\s+)?(?:%s)\b|(?:he|she|they)\b)"
    % "|".join(words(_LEXICON["people"]))
)


# a deed the user did once; parting with a thing; a habit of making things
_ONE_DEED = re.compile(
    r"\b(?:i|we)\s+(?:just\s+|finally\s+|also\s+)?(?:sold|gave|made|took|brought|had|[a-z]{3,}ed)\b"
)
_PARTING = re.compile(rf"(?:{PARTING}|gave)\b.*")
_MAKING = re.compile(
    r"\b(?:bakes?|makes?|grows?|knits?|brews?|cooks?|sews?|paints?|builds?|crafts?|roasts?|"
    r"writes?|prints?|carves?|draws?|weaves?|quilts?|crochets?)\b"
)


# someone named, switching to something with no object of the change: their own switch
_NAMED_SWITCH = re.compile(
    r"^\s*([A-Z][a-z]+)(?: [A-Z][a-z]+)?\s+(?:just |recently |finally |also |has |have )*"
    r"(?:switched|migrated|changed|upgraded|downgraded|went)(?: over| back)? to\b"
)
_NOT_NAMES = frozenset({"i", "we", "user", "the", "our", "my", "they", "he", "she", "you", "everyone"})


def _named_ones_own_change(new: str, old: str) -> bool:
    """ "Tom switched to MySQL" tells what Tom uses now: no change of a memory that is not
    about Tom ("User's app uses PostgreSQL"). A named thing ("Postgres") is no person."""
    m = _NAMED_SWITCH.match(new)
    if m is None or m[1].lower() in _NOT_NAMES or canon(m[1].lower()) in MEMBER_OF:
        return False
    return not re.search(rf"\b{re.escape(m[1])}\b", old, re.IGNORECASE)


def _one_deed_beside_a_habit(new: str, old: str) -> bool:
    """Is the new memory a deed done once and the old one a habit it does not end? Doing
    something once changes no habit ('we baked bread for the party' / 'bakes sourdough every
    Sunday'), nor does parting with what a habit makes ('sold 30 cookies at the bake sale' /
    'bakes cookies every weekend'); a change said ('rescheduled', 'migrated', 'sold the
    bike') ends one."""
    if not RECURRING.search(old) or RECURRING.search(new) or not _ONE_DEED.search(new):
        return False
    said = [m[0] for pattern in (STRONG_CHANGE, _CHANGE) for m in pattern.finditer(new)]
    return all(_PARTING.fullmatch(w) for w in said) and (not said or bool(_MAKING.search(old)))


def _someone_elses(text: str) -> bool:
    """Is the (normalised) memory about someone other than the user, by its subject, with
    the user nowhere in it after that ('my wife and I switched', 'my manager moved us')?"""
    m = _SOMEONE.match(text)
    return m is not None and not _USER_TOO.search(text, m.end())


_USER_FIRST = re.compile(r"\s*(?:i|we|user)\b")
_USER_TOO = re.compile(r"\b(?:i|me|we|us|our|ours|user)\b")


def _ids(text: str) -> dict[str, str]:
    """Identifying numbers by the noun they follow ('invoice 1043' -> {invoic: 1043})."""
    found = {}
    for m in re.finditer(r"\b([a-z]+)\s+#?([a-z]?\d[\w-]*)\b", text):
        if m[1] in _ID_NOUNS:
            found[canon(m[1])] = m[2]
    return found


def _names(text: str) -> set[str]:
    """Capitalised names inside a sentence, without months, weekdays and the tools of the
    lexicon (a tool is what fills a slot - what a change replaces - not another item)."""
    found = set()
    for m in _NAME.findall(text):
        # (a sentence's last word comes with its period: 'on Fridays.')
        said = [w.strip(".") for w in m.lower().split()]
        kept = " ".join(canon(w) for w in said if w and not is_value(canon(w)) and canon(w) not in MEMBER_OF)
        if kept and kept not in ("user", "i"):
            found.add(kept)
    return found


# Where a sentence's subject ends: its first verb ("Order 1003 | is delayed", "Room B |
# holds 30", "Flight BA119 | leaves at 11").
_VERB = re.compile(
    r"\b(?:is|are|was|were|has|have|had|will|would|can|could|must|should|"
    r"does|did|do|holds?|leaves|departs|arrives|lands|costs|starts|ends|runs|"
    r"takes|needs|goes|opens|closes|seats|fits|meets|includes|contains|"
    r"belongs|stays|[a-z]{3,}ed)\b",
    re.IGNORECASE,
)
# An identifier: a number, code or capital letter after a noun ("order 1003", "Room B",
# "ticket PROJ-318"), a code of its own ("BA117"), a month or quarter in front of a noun
# ("the March invoice", "the Q1 report").
_AFTER_NOUN = re.compile(r"\b([A-Za-z]{2,})\s+#?([A-Z](?![\w'])|[A-Za-z]{0,5}-?\d[\w-]*)")
_CODE = re.compile(r"\b([A-Z]{2,})-?(\d+)\b")
_BEFORE_NOUN = re.compile(rf"\b({FULL_MONTH_RE}|q[1-4])\s+([a-z]{{3,}})\b", re.IGNORECASE)


_PREPOSITION = re.compile(r"\b(?:on|at|in|to|for|with|from|by|until|of|into|about)\b", re.IGNORECASE)


def _subject(text: str) -> str:
    """The words before the sentence's first verb or preposition ("Service 7 now listens
    | on port 8107"): what the sentence is about, not the values it gives."""
    ends = [m.start() for m in (_VERB.search(text), _PREPOSITION.search(text)) if m and m.start() > 0]
    return text[: min(ends)] if ends else text


def subject_ids(text: str) -> dict[str, str]:
    """The identifiers in a text's subject, by the noun they name: 'Order 1003 is
    delayed' -> {order: 1003}; 'The April invoice was 1,450' -> {invoic: april}."""
    subject, found = _subject(text), {}
    for m in _AFTER_NOUN.finditer(subject):
        noun = m[1].lower()
        if noun not in STOPWORDS and not re.fullmatch(FULL_MONTH_RE, noun):
            found[canon(noun)] = m[2].lower()
    for m in _CODE.finditer(subject):
        found.setdefault("code " + m[1].lower(), m[2])
    for m in _BEFORE_NOUN.finditer(subject):
        if m[2].lower() not in STOPWORDS:
            found.setdefault(canon(m[2].lower()), m[1].lower())
    return found


def other_ids(new: str, old: str) -> bool:
    """Two items of one kind told apart by their identifier in the subject position
    ("Order 1003" / "Order 1001", "Room B" / "Room A", "the April invoice" / "the March
    invoice"), unless the new text names the old identifier as well (what it replaces)."""
    ids_n, ids_o = subject_ids(new), subject_ids(old)
    said = new.lower()
    return any(
        ids_n[k] != ids_o[k] and not re.search(rf"\b{re.escape(ids_o[k])}\b", said)
        for k in ids_n.keys() & ids_o.keys()
    )


def other_item(new: str, old: str) -> bool:
    """Two items told apart by an identifier in the subject, or by their names ("the
    review with Acme" / "the review with Globex"): never the same thing said twice."""
    if other_ids(new, old):
        return True
    names_n, names_o = _names(new), _names(old)
    return bool(names_n and names_o and not _overlap(names_n, names_o))


def _other_item(n: Reading, o: Reading, new: str, old: str) -> bool:
    if other_ids(new, old):
        return True  # "Order 1003 is delayed" is no change of order 1001, said as a change or not
    if change_said(n):
        # "Dana left; my new manager is Femi", "the samples are in room C4 now": a name,
        # number or kind replaced, not another item
        return False
    ids_n, ids_o = _ids(n.text), _ids(o.text)
    if any(ids_n[k] != ids_o[k] for k in ids_n.keys() & ids_o.keys()):
        return True
    names_n, names_o = _names(new), _names(old)
    if names_n and names_o and not _overlap(names_n, names_o):
        return True  # "the review with Acme" / "the review with Globex"
    return _modifiers_differ(n, o)


def _overlap(a: set[str], b: set[str]) -> bool:
    words_a = {w for x in a for w in x.split()}
    return bool(words_a & {w for x in b for w in x.split()})


@lru_cache(maxsize=4096)
def _before(text: str) -> Mapping[str, str]:
    """Each head noun of `text` with the word in front of it (read-only: it is cached, as
    the new memory's text is read again for every candidate it is compared with)."""
    tokens = re.findall(r"[a-z][a-z0-9-]*", text)
    return MappingProxyType(
        {canon(b): a for a, b in zip(tokens, tokens[1:]) if _says_which(a) and not is_value(a)}
    )


@lru_cache(maxsize=4096)
def qualifiers(text: str, after_only: bool = False) -> Mapping[str, frozenset[str]]:
    """Each noun of a (read) text with the words that say which one it is: the word in
    front ("the trip budget"), unless `after_only`, and the noun after "for", "of" or
    "to", values between skipped ("budget for the trip", "budgets 300 a month for
    groceries", "flight to Lisbon"). Read-only: it is cached."""
    tokens = [t.rstrip(".,:") for t in re.findall(r"[a-z0-9][a-z0-9.,:-]*", text)]  # "401k": one word
    changed = next((i for i, w in enumerate(tokens) if STRONG_CHANGE.fullmatch(w)), len(tokens))
    found: dict[str, set[str]] = {}
    for i, word in enumerate(tokens):
        head = canon(word)
        if word in STOPWORDS or is_value(head) or not word[:1].isalpha():
            continue
        before = tokens[i - 1] if i else ""
        if not after_only and before[:1].isalpha() and _qualifies(before) and not before.endswith("ed"):
            found.setdefault(head, set()).add(canon(before))
        rest = tokens[i + 1 : i + 7]
        for j, after in enumerate(rest[:5]):
            if after in ("for", "of") or (after == "to" and i < changed):
                # ("moved my flight to May 5": after a change, "to" says where it went)
                said = [w for w in rest[j + 1 :] if w not in STOPWORDS and w not in _PLAIN_MODIFIERS][:1]
                if said and said[0][:1].isalpha() and _qualifies(said[0]):
                    found.setdefault(head, set()).add(canon(said[0]))
                break
            if not (after[:1].isdigit() or after in STOPWORDS or is_value(canon(after))):
                break
    return MappingProxyType({head: frozenset(words) for head, words in found.items()})


def _qualifies(word: str) -> bool:
    return _says_which(word) and word != "user" and not is_value(canon(word))


def _says_which(word: str) -> bool:
    """Can this word in front of a noun say which one it is? Not a small word, a plain
    modifier ("my old laptop"), a number or an ordinal ("third grade" / "fourth grade": a
    value, not which one), nor a stance."""
    return (
        word not in STOPWORDS
        and word not in _PLAIN_MODIFIERS
        and word not in NUMBER_WORDS
        and word not in ORDINAL_WORDS
        and canon(word) not in STANCE
    )


def _modifiers_differ(n: Reading, o: Reading) -> bool:
    """A shared head noun with a different word in front: 'kitchen renovation' and
    'bathroom renovation', 'Pro plan' and 'Team plan' are two things."""
    mine, theirs = _before(n.text), _before(o.text)
    shared = (n.topic & o.topic) - GENERIC
    return any(
        h in mine
        and h in theirs
        and canon(mine[h]) != canon(theirs[h])
        and canon(mine[h]) not in o.concepts
        and canon(theirs[h]) not in n.concepts
        for h in shared
    )
