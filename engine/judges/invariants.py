"""Invariants the engine keeps whatever a judge (a model or the rules) answers.

A judge's answer is hostile input. These checks read only the memories' text, so they
hold for every provider:

- `repeat_refusal`: a new memory is dropped as a repeat of an old one (`confirms`) only
  when the old one already says everything the new one says: every content word, number,
  name, date and id of the new memory is in the old one, and both say it the same way
  round (a "not" on one side only is another fact).
- `supersede_refusal`: a memory about one identified thing (order 1003, room B, the April
  invoice, the meeting with Bob) never retires a memory about another (order 1001, room A,
  March's invoice, the meeting with Alice), unless the new memory names the old value as
  the one replaced. A real update differs in what is said about the thing (its date, its
  tool, its count), not in which thing it is.
- `example_answers`: the JSON example answers a prompt shows, so that an answer equal to
  one is refused (a small model copies them).

Each returns why it refuses (a sentence for the memory's history), or None.
"""

from __future__ import annotations

import json
import re

# Words the pipeline itself writes into memories: the gate states the user's words in
# the third person ("User prefers ...", "their laptop") and models report speech ("User
# says ..."). They say nothing about the fact, so they neither match nor distinguish.
SPEAKER_WORDS = frozenset(
    """user users user's their theirs them themselves says said
thinks mentioned mentions states stated tells told""".split()
)

_STOP = frozenset(
    """a an and are as at be been being but by can could did do does for from
had has have he her his how i if in into is it its just me my of on or our she so than
that the then there these they this those to too us was we were what when where which who
why will with would you your also about again all am any because both each few more most
other over same some such only own very should shall must now currently still
really please kindly yes ok okay always""".split()
)
_NEGATIONS = frozenset("not no never none nothing nobody neither nor without".split())
_MONTHS = (
    "january february march april may june july august september october november "
    "december jan feb mar apr jun jul aug sep sept oct nov dec"
).split()
_DAYS = "monday tuesday wednesday thursday friday saturday sunday".split()
_NUMBER_WORDS = {
    w: str(i)
    for i, w in enumerate("zero one two three four five six seven eight nine ten eleven twelve".split())
}
_TOKEN = re.compile(r"[A-Za-z][A-Za-z0-9'+#._-]*[A-Za-z0-9+#]|[A-Za-z]|#?\d[\w.:/-]*\w|#?\d")
_ORDINAL = re.compile(r"^(\d+)(?:st|nd|rd|th)$")
# words that end a subject: auxiliaries, copulas and common verbs of memories
_VERBS = frozenset(
    """is are was were be been being am has have had will would can could
should must may might shall do does did isn't aren't wasn't weren't won't can't doesn't
don't didn't hasn't haven't holds hold held uses use used runs run ran needs need lives
live costs cost takes take took starts start started ends end ended moved moves move
prefers prefer likes like wants want works work deploys deploy ships ship lands land
belongs belong sits sit seats seat fits fit contains contain includes include owes owe
falls fall happens happen goes go went got gets get meets meet opens open closes close
begins begin began stays stay says said thinks think should've
owns own sold sells sell bought buys drives drove keeps kept plays reads eats ate drinks drank
pays paid earns makes made gave gives leaves came comes saw sees wrote writes found finds
knows knew teaches taught studies visits attends loves hates enjoys finishes completes""".split()
)


def _norm(token: str) -> str:
    """A token as compared: lower case, a possessive, plural or ordinal dropped, a number
    word as its digits ("five" = "5", "5th" = "5")."""
    t = token.lower().strip("'.-_")
    if t.endswith("'s"):
        t = t[:-2]
    t = _NUMBER_WORDS.get(t, t)
    m = _ORDINAL.match(t)
    if m:
        return m[1]
    if t.startswith("#") and t[1:].isdigit():
        return t[1:]
    if len(t) > 3 and t.isalpha() and t.endswith("s") and not t.endswith("ss"):
        t = t[:-3] + "y" if t.endswith("ies") else t[:-1]
    return t


def tokens(text: str) -> list[tuple[str, str]]:
    """(surface, normalised) for every token of a text, in order."""
    return [(m[0], _norm(m[0])) for m in _TOKEN.finditer(text or "")]


def content_words(text: str) -> set[str]:
    """The words that carry a memory's meaning: no stopwords, no pipeline speaker words."""
    return {n for s, n in tokens(text) if n and not {n, s.lower()} & (_STOP | SPEAKER_WORDS)}


def negated(text: str) -> bool:
    low = (text or "").lower()
    return any(n in _NEGATIONS for _, n in tokens(low)) or "n't" in low


def identifiers(text: str) -> set[str]:
    """Numbers, ids, names, months and weekdays: what tells one thing from another."""
    out = set()
    toks = tokens(text)
    for i, (surface, n) in enumerate(toks):
        if not n or surface.lower() in SPEAKER_WORDS:
            continue
        if any(ch.isdigit() for ch in n) or n in _MONTHS or n in _DAYS:
            out.add(n)
        elif surface[:1].isupper() and i > 0 and surface not in ("I",):
            out.add(n)  # a name: capitalised inside the sentence
        elif len(surface) == 1 and surface.isupper() and surface != "I":
            out.add(n)  # "room B"
    return out


# ---- a repeat ---------------------------------------------------------------------------
def repeat_refusal(new: str, old: str) -> str | None:
    """Why `new` may not be dropped as a repeat of `old` (None when `old` already says it)."""
    missing = sorted(content_words(new) - content_words(old))
    if missing:
        return (
            "the new memory says "
            + ", ".join(f"'{w}'" for w in missing[:6])
            + " that the confirmed one does not"
        )
    if negated(new) != negated(old):
        return "one of them says 'not' and the other does not"
    return None


# ---- a supersession -----------------------------------------------------------------------
def subject(text: str) -> list[tuple[str, str]]:
    """The tokens before the first verb of each sentence, pipeline speaker words left out
    ("User says order 1003 is delayed" -> order 1003)."""
    out: list[tuple[str, str]] = []
    for sentence in re.split(r"(?<=[.!?;])\s+", text or ""):
        toks = [t for t in tokens(sentence) if t[0].lower() not in SPEAKER_WORDS]
        for surface, n in toks:
            low = surface.lower()
            if low in _VERBS or (low.endswith("ed") and len(low) > 4 and not surface[:1].isupper()):
                break
            out.append((surface, n))
    return out


def _subject_parts(text: str) -> tuple[set[str], set[str]]:
    """The subject's identifiers and its words. A sentence's capitalised first word is a
    name only when written as one's ("Bob's meeting", "Sara's birthday"): "Readable code
    matters" and "Always write readable code" name nothing. It counts as a word too."""
    toks = subject(text)
    ids = identifiers(" ".join(s for s, _ in toks))
    words = {n for s, n in toks if n and n not in _STOP and n not in ids and n not in _NEGATIONS}
    if toks and toks[0][0][:1].isupper() and toks[0][1] not in _STOP and _POSSESSIVE.match(text.lstrip()):
        ids.add(toks[0][1])
    return ids, words


_POSSESSIVE = re.compile(r"[A-Z][\w-]*['\u2019]s\b")


def supersede_refusal(new: str, old: str) -> str | None:
    """Why `new` may not supersede `old`: both are about one kind of thing (a word of their
    subjects in common) but each subject names an identifier the other lacks, and the new
    memory does not name the old one's as replaced."""
    new_ids, new_words = _subject_parts(new)
    old_ids, old_words = _subject_parts(old)
    only_new, only_old = new_ids - old_ids, old_ids - new_ids
    if not only_new or not only_old or not (new_words & old_words):
        return None
    said = {n for _, n in tokens(new)}
    if only_old <= said:  # "order 1001 was replaced by order 1003": the old one is named
        return None
    return (
        f"they are about different things: {_quoted(only_new)} in the new memory, "
        f"{_quoted(only_old)} in the old one"
    )


def _quoted(values: set[str]) -> str:
    return ", ".join(f"'{v}'" for v in sorted(values))


def screen(
    content: str, confirms: list[int], supersedes: list[int], text_of
) -> tuple[list[int], list[int], list[tuple[str, int, str]]]:
    """The ids of a judgment's confirms and supersedes that hold for the new memory's
    `content` (`text_of(id)` reads an old memory's text), and the refused ones as
    (what, id, why)."""
    refused: list[tuple[str, int, str]] = []
    kept: dict[str, list[int]] = {"confirms": [], "supersedes": []}
    for what, ids, test in (
        ("confirms", confirms, repeat_refusal),
        ("supersedes", supersedes, supersede_refusal),
    ):
        for mid in ids:
            why = test(content, text_of(mid))
            if why:
                refused.append((what, mid, why))
            else:
                kept[what].append(mid)
    return kept["confirms"], kept["supersedes"], refused


# ---- an end date ---------------------------------------------------------------------------
_TIME_WORDS = (
    frozenset(
        """today tonight tomorrow yesterday day days week weeks weekend
fortnight month months year years quarter semester term sprint season summer winter spring
autumn fall until till due deadline expires expire expiry eod eow eom temporarily temporary
meantime christmas easter holiday holidays vacation""".split()
    )
    | frozenset(_MONTHS)
    | frozenset(_DAYS)
)
# a number that is a date or a time, not an id or an amount: 2026-03-15, 3/15, 10:30, 18th, 2026
_DATE_NUMBER = re.compile(
    r"^(?:\d{4}-\d{1,2}(?:-\d{1,2})?|\d{1,2}/\d{1,2}(?:/\d{2,4})?|"
    r"\d{1,2}[:.]\d{2}(?:am|pm)?|\d{1,2}(?:am|pm)|(?:19|20)\d{2})$"
)
_TODAY_WORDS = frozenset("today tonight now eod".split())


def time_said(*texts: str) -> bool:
    """Does any of these texts give a date, a time or a duration an end date could come
    from? A small model gives lasting facts today's date as their end, and an order
    number or a room size is no date."""
    for text in texts:
        for surface, n in tokens(text or ""):
            low = surface.lower()
            if (
                n in _TIME_WORDS
                or low in _TIME_WORDS
                or _DATE_NUMBER.match(low)
                or re.match(r"^\d{1,2}(?:st|nd|rd|th)$", low)
            ):
                return True
    return False


def expiry_refusal(expires_at, today: str | None, *texts: str) -> str | None:
    """Why an end date may not be set: the turn names no date, time or duration, or the
    date is today's and the turn does not say today (the memory would expire at once)."""
    if not expires_at:
        return None
    if not time_said(*texts):
        return (
            f"an end date ({expires_at}) for a memory whose turn names no date, time or "
            "duration; answer null when the user gave no end"
        )
    said = {n for text in texts for _, n in tokens(text or "")}
    if today and str(expires_at)[:10] == str(today)[:10] and not said & _TODAY_WORDS:
        return (
            f"an end date of today ({str(today)[:10]}) for a memory whose turn does not "
            "say it ends today: it would expire at once; answer null or the date the user gave"
        )
    return None


def content_refusal(content: str, user: str) -> str | None:
    """Why a gate's content may not stand for the turn: it shares no word with what the
    user said (a small model writes the assistant's "Noted." as the memory)."""
    said = content_words(user)
    if content and said and not content_words(content) & said:
        return (
            "the content shares no word with what the user said; state the user's own "
            "fact, or save false when there is none"
        )
    return None


# ---- an example answer ----------------------------------------------------------------------
def example_answers(prompt: str) -> list[object]:
    """The JSON objects a prompt shows outside its data: examples a model may copy."""
    found: list[object] = []
    decoder, i = json.JSONDecoder(), 0
    while True:
        i = prompt.find("{", i)
        if i < 0:
            return found
        try:
            value, end = decoder.raw_decode(prompt, i)
        except ValueError:
            i += 1
            continue
        if isinstance(value, dict) and value:
            found.append(value)
        i = end
