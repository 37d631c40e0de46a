"""Directives: standing instructions given in the imperative ("keep code readable",
"deploy from the release branch for now"), told apart from one-off requests ("run the
tests", "write a function that..."). Verb lists are in `lexicon/directives.yaml`."""

from __future__ import annotations

import re

from engine.judges.lexicon import lexicon, words
from engine.judges.lexicon.slots import MEMBER_OF
from engine.judges.rules.words import GENERIC, STOPWORDS, WORD_RE, canon

_LEXICON = lexicon("directives")


def _set(name: str) -> frozenset[str]:
    return frozenset(words(_LEXICON[name]))


_RULE_VERBS = _set("rule_verbs")
_ACTION_VERBS = _set("action_verbs")
_ONE_OFF_OBJECT = _set("one_off_objects")
_MANNER = _set("manner")
_KEEP_IDIOM = _set("keep_idioms")
_BE_IDIOM = _set("be_idioms")
_ADVERB_WORDS = _set("adverbs")

_LEAD_IN = re.compile(
    r"^(?:please|kindly|also|just|and|so|then|always|only|generally|"
    r"ideally|for now|from now on|going forward|in general|by default|"
    r"in (?:the )?future|here|in (?:this|our|my|the) (?:project|repo|"
    r"repository|codebase|team))\s+"
)
_SUBORDINATE = re.compile(
    r"^(?:when|whenever|if|until|till|unless|before|after|once|while|"
    r"since|because|as|for|during|in case|even)\b"
)
_DEICTIC = re.compile(
    r"\b(this|these|those|the following|below|above|attached|"
    r"(in|on|to|for|from|with|like|of|use) that)\b"
)
_ORDINAL_REF = re.compile(
    r"^the (first|second|third|last|previous|other|same|next|"
    r"former|latter|above|below|following)\b"
)
_POLICY = re.compile(
    r"\b(before|after|when|whenever|instead of|rather than|over|unless|"
    r"every|each|all|any|only|by default|for now|until|from now on|"
    r"going forward|in (the )?future)\b"
)


def directive(norm: str) -> bool:
    """Does this sentence give a standing instruction in the imperative?"""
    if _DEICTIC.search(norm):
        return False
    for clause in re.split(r"[,;:]|\s[-\u2013\u2014]\s|\b(?:and|but|so|then)\b", norm):
        clause = clause.strip(" \"'()")
        while True:
            stripped = _LEAD_IN.sub("", clause, count=1)
            if stripped == clause:
                break
            clause = stripped
        if _SUBORDINATE.match(clause):
            continue
        found = WORD_RE.findall(clause)
        if len(found) < 2 or (found[0] not in _RULE_VERBS and found[0] not in _ACTION_VERBS):
            continue
        verb, rest = found[0], found[1:]
        while rest and rest[0] in _ADVERB_WORDS:
            rest = rest[1:]
        if not rest or (
            rest[0] in _ONE_OFF_OBJECT
            and not (
                (verb in ("call", "address", "refer", "ask") and rest[0] == "me")
                or (
                    verb == "keep"
                    and rest[0] in ("it", "them")
                    and len(rest) > 1
                    and rest[1] not in _KEEP_IDIOM
                )
            )
        ):
            continue
        if (verb == "keep" and rest[0] in _KEEP_IDIOM) or (verb == "be" and rest[0] in _BE_IDIOM):
            continue  # 'keep going', 'keep it up', 'be right back' are chatter
        if _ORDINAL_REF.match(" ".join(rest)):
            continue  # 'use the first option' picks among answers just given
        content = [w for w in rest if w not in STOPWORDS]
        if not [w for w in content if canon(w) not in GENERIC]:
            continue  # 'ask me anything', 'keep everything'
        if verb in _RULE_VERBS:
            return True
        if _POLICY.search(norm):
            return True  # 'run the tests before pushing', 'for now, skip the flaky tests'
        if rest[0] in _MANNER:
            return True  # how or where: 'deploy from the release branch', 'answer in Spanish'
        if re.search(r"\b(a|an)\b", " ".join(rest)):
            continue  # 'write a function that...', 'write code to reverse a string'
        if any(canon(w) in MEMBER_OF for w in content) or (
            len(content) >= 2 and rest[0] not in ("the", "my", "our", "your")
        ):
            return True  # a general object: 'write readable code', 'use tabs'
    return False
