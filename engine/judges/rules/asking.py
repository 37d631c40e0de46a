"""What a question tells: the statement inside a user's question that the gate keeps
(gating.py reads a sentence through `told_in_question` before judging it alone). Asking is
not telling, so a question is not kept; but "what time should I start my jog, considering
I wake up at 7:30?" tells when the user wakes, "I'm thinking of two cups a day, do you
think that's a good idea?" what they are thinking of, and "... with the Philips LED bulb I
have in my bedside lamp?" what they have.
"""

from __future__ import annotations

import re

from engine.judges.rules.dates import past_deed
from engine.judges.rules.words import normalise


def told_in_question(sentence: str) -> str | None:
    """The statement a question tells, as a sentence of its own, or None."""
    return _grounds(sentence) or _told_then_asked(sentence) or _had_in_question(sentence)


# the grounds of a question, told by the user about themselves
_GROUNDS = re.compile(
    r"(?:^|[,;(]\s*|\s)(?:considering|given|since|because|as|seeing as|now that)(?: that)?\s+"
    r"(?=(?:i|i'm|i've|i'd|my|we|we're|we've|our)\b)",
    re.IGNORECASE,
)


def _grounds(sentence: str) -> str | None:
    """The clause after 'considering / given that / since I ...' in a question, as a
    statement ('I like to wake up at 7:30 am on Saturdays.'), or None."""
    if not sentence.rstrip().endswith("?"):
        return None
    m = _GROUNDS.search(sentence)
    if m is None or m.start() == 0:
        return None
    clause = sentence[m.end() :].rstrip(" ?").strip()
    if len(clause.split()) < 3 or _POINTS_BACK.search(clause):
        return None  # "since my old one broke": what broke is in the question
    return clause[:1].upper() + clause[1:] + "."


# a question about what was just said: "..., do you think that's a good idea?"
_ASKED_AFTER = re.compile(
    r",\s*(?:and\s+|so\s+|but\s+)?(?:do you think|what do you think|what would you|"
    r"does (?:that|this|it) (?:sound|seem|make sense)|is (?:that|this|it) (?:a good|ok|okay|wise|normal|"
    r"enough|too)|would (?:that|this|it) (?:be|work|help)|should i|any (?:tips|ideas|suggestions|advice|"
    r"thoughts|recommendations)|can you|could you|how (?:do|can|should) i|what (?:should|can) i)\b[^,]*\?$",
    re.IGNORECASE,
)
# a few words before a colon that only open the turn: "Quick one: ...", "Random question: ..."
# (letters only: "7:45" is a time)
_LEAD_IN = re.compile(r"^[A-Za-z' ]{1,30}:\s+")
_TELLS = re.compile(
    r"^(?:[\w' ]+,\s*|[A-Za-z' ]{1,30}:\s+)?(?:i|i'm|i've|i'd|my|we|we're|we've|our)\b", re.IGNORECASE
)


def _told_then_asked(sentence: str) -> str | None:
    """The statement before a question about it ("I'm thinking of two cups a day, do you
    think that's a good idea?" -> "I'm thinking of two cups a day."), or None."""
    m = _ASKED_AFTER.search(sentence.rstrip())
    if m is None:
        return None
    head = sentence[: m.start()].strip()
    if len(head.split()) < 4 or head.endswith("?") or not _TELLS.search(head):
        return None
    head = _LEAD_IN.sub("", head)
    return head[:1].upper() + head[1:] + "."


# a thing the user has, named inside a question: "... work well with the Philips LED bulb
# I have in my bedside lamp?", "... for the Brompton that we keep in the hall?"
_HAD = re.compile(
    r"\b(?:the|a|an)\s+((?:(?!(?:the|a|an|for|with|to|of)\b)[\w'-]+\s+){0,4}?[\w'-]+)\s+"
    r"(?:that\s+|which\s+)?(i|we)\s+(?:already\s+|currently\s+|still\s+)?(have|own|keep|use)"
    r"((?:\s+(?:in|on|at|for)\s+(?:my|our|the)\s+(?:[\w'-]+\s+){0,2}?[\w'-]+)?)"
    r"(?=\s*[?,.]|\s+(?:and|but|so)\b)",
    re.IGNORECASE,
)


def _had_in_question(sentence: str) -> str | None:
    """A thing the user has, named inside a question, as a statement ("... with the
    Philips LED bulb I have in my bedside lamp?" -> "I have a Philips LED bulb in my bedside
    lamp."), or None: asking is not telling, but the question names what the user has. The
    thing must be named (a capital or a number in it), not pointed back to ("the one I
    have")."""
    if not sentence.rstrip().endswith("?"):
        return None
    for m in _HAD.finditer(sentence):
        thing = m[1]
        if _POINTS_BACK.search(thing) or not re.search(r"[A-Z0-9]", thing):
            continue
        article = "an" if thing[:1].lower() in "aeiou" else "a"
        return f"{m[2].capitalize()} {m[3].lower()} {article} {thing}{m[4]}."
    return None


_POINTS_BACK = re.compile(r"\b(?:one|ones|it|its|this|that|these|those|they|them|there)\b", re.IGNORECASE)


# a question about what was: asked in the past tense ('when did I', 'what was'), or
# counting back from now ('how many months ago', 'how long since')
_ASKED_IN_THE_PAST = re.compile(r"\b(?:did|didn't|was|wasn't|were|had|ago|how long since|last time)\b")


def asks_about_the_past(question: str) -> bool:
    """Does `question` ask about what was rather than what is? "How many months ago did I
    attend the film festival?", "Which happened first, ...?": yes; "What should I use for the
    frontend?", "Which bank am I with?", "How many countries have I visited?" (so far: a
    count as it stands now): no. Recall's fallback (archived and expired memories) is for
    the first kind only: what faded is no answer to what is now."""
    text = normalise(question)
    if _ASKED_IN_THE_PAST.search(text):
        return True
    if _ASKED_IN_THE_PRESENT.match(text):  # "is the release blocked?": how it is now
        return False
    if _PRESENT_PERFECT.search(text):  # "how many countries have I visited?": so far, now
        return False
    return any(past_deed(text, m.start()) for m in re.finditer(r"[,;:.!?]|$", text))


_PRESENT_PERFECT = re.compile(r"\b(?:have|has|haven't|hasn't|i've|we've)\b")
_ASKED_IN_THE_PRESENT = re.compile(
    r"\s*(?:is|isn't|are|aren't|am|do|does|don't|can|will|should|shall|must)\b"
)
