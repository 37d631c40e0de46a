"""The gate judge: should a user/assistant turn be saved as a memory, and as what?"""

from __future__ import annotations

import re

from engine.judges.lexicon import lexicon
from engine.judges.rules.asking import told_in_question
from engine.judges.rules.cues import EVENT, WORK_NOUN, WORK_NOUNS, is_request, is_small_talk
from engine.judges.rules.dates import DAY_RE, date_mentions, takes_part_today
from engine.judges.rules.directives import directive
from engine.judges.rules.exemptions import subject_ids
from engine.judges.rules.expiring import RECURRING
from engine.judges.rules.hedging import confidence
from engine.judges.rules.phrasing import tags, third_person
from engine.judges.rules.reading import (
    FIRST_PERSON,
    NOT_YET,
    STRONG_CHANGE,
    as_sentence,
    read,
    sentences,
    summary,
)
from engine.judges.rules.words import GENERIC, canon, is_value, normalise, stems

# What such a subject does: a present-tense verb (or a plain 'is').
_WORK_VERBS = (
    r"(is|are|was|were|has|have|had|will|can|must|should|needs?|runs?|uses?|"
    r"takes?|lives?|depends?|pass|passes|fails?|covers?|calls?|goes|gets?|costs?|"
    r"requires?|supports?|handles?|belongs?|meets?|owns?|stores?|sends?|returns?|"
    r"expects?|reads?|writes?|talks?|hits?|starts?|ends?|happens?|includes?|"
    r"contains?|lacks?|relies|rely|sits?|lives|points?|targets?|builds?|deploys?|"
    r"ships?|serves?|syncs?|reports?|works?|belongs)"
)
# (kind, importance, cue). Importance follows the article: explicit instructions,
# decisions and deadlines matter most; curiosities least.
_GATE_SIGNALS = tuple(
    (kind, weight, re.compile(cue))
    for kind, weight, cue in (
        (
            "instruction",
            9,
            r"^(please )?(do not|avoid|stop) (use|using|add|adding|write|writing|"
            r"include|including|put|make|call|mention|ask|send|suggest|recommend)\b|"
            r"\b(always|never|from now on|do not ever|make sure (to|you|that)|"
            r"remember (to|that)|keep in mind|note that|going forward|"
            r"in (the )?future|by default|whenever)\b",
        ),
        (
            "decision",
            8,
            r"\b(decided|decide|decision|going with|go with|went with|let us (go with|"
            r"use)|chose|chosen|settled on|agreed|opted|we will use|picked|picking|"
            r"ended up|selected)\b",
        ),
        (
            "deadline",
            8,
            rf"\b(deadline|due|launch(es|ing)? on|release date|ships? (on|by)|"
            rf"by ({DAY_RE}))\b",
        ),
        (
            "migration",
            7,
            r"\b(switched|switching|migrated|migrating|ported|porting|"
            r"mov(e|ed|ing) (\w+ ){0,3}"
            r"(from|to|over|away)|"
            r"replaced|stopped|no longer|anymore|ditched|dropped|upgraded|gave up|given up|"
            r"quit|cut out|swore off|"
            r"downgraded|instead of)\b",
        ),
        (
            "bug",
            7,
            r"\b(bugs?|errors?|exceptions?|traceback|crash\w*|fails?|failing|failed|"
            r"broken|breaks|broke|segfault|regression|not working|leak\w*|timeout|"
            r"timed out|outage)\b",
        ),
        (
            "plan",
            6,
            r"\b(plan|plans|planning|going to|roadmap|next step|intend|aim to|goal is|"
            r"will (start|build|ship|migrate|launch|release|add|move|switch|write|"
            r"deploy|set up))\b",
        ),
        ("waiting", 6, rf"\b(blocked|waiting|on hold|pending|awaiting)\b|\b{NOT_YET}"),
        ("task", 6, r"\b(remind me|todo|need to|have to|must|do not forget|action item)\b"),
        (
            "preference",
            6,
            r"\b(prefer\w*|(i|we) (really |do |also )?(like|love|hate|dislike|"
            r"enjoy|value|care (a lot |deeply |most |more )?(about|for))|"
            r"favou?rite|would rather|fan of|can not stand|"
            r"(matters?|counts?) (\w+ ){0,2}(to|for) (me|us)|"
            r"(is|are) (\w+ )?important (to|for) (me|us)|(i|we) find (\w+ ){1,3}"
            r"(important|essential|crucial))\b",
        ),
        (
            "fact",
            5,
            r"\b(i am (a|an|the|from|based|working|using|on|allergic|vegan|vegetarian|"
            r"diabetic|colou?rblind|left-handed|married|retired|pregnant)|my name|"
            r"i work|we work|i live|we are based|(my|our) (role|job|title|team|company|"
            r"boss|manager|stack|setup|editor|laptop|machine|workflow|tooling|project|"
            r"app|application|product|codebase|repository|backend|frontend|api|"
            r"database|service|server|customers|users|clients|wife|husband|partner|son|"
            r"daughter|kids?|children|parents|mom|dad|mother|father|sister|brother|dog|"
            r"cat|family|home|house|city)|(the|our) (\w+ )?(ci|pipeline|build|test suite|api|"
            r"app|application|service|server|database|db|repository|repo|codebase|"
            r"backend|frontend|staging|production|prod|cluster|schema|deploy\w*) (is|are|"
            r"has|have|takes?|runs?|uses?|lives?|needs?|gets?|was|were)|"
            r"our (\w+ ){1,3}(is|are|was|were|has|have|returns?|runs?|uses?|takes?|"
            r"needs?|gets?|lives?|sends?|stores?|calls?|depends)|heads up|fyi|"
            r"for context|just so you know|for your information|"
            # habits and where things are kept: "I don't eat pork", "I take 10 mg of
            # X every morning", "I keep my receipts in a Drive folder"
            r"(i|we) (do not |never |rarely |usually |often |always |only )?(eat|drink|"
            r"smoke|take|cook|drive|cycle|bike|walk|commute|keep|store|file|back up) "
            r"(?!a look|a break|care|it easy)|(we|i) have (a|an|\d+|two|"
            r"three|four|five|several) (?!question|quick|idea|doubt|minute|second|"
            r"moment|feeling|thought|suggestion|problem)\w+|"
            r"(i am|we are|i have been|we have been) (currently |now |still )?(working on|"
            r"building|developing|writing|maintaining|learning|studying|migrating|"
            r"porting|rewriting|refactoring|designing|running)|"
            rf"(^|\b(the|our|my) )(\w+ ){{0,3}}?{WORK_NOUNS}(\w+ )?(now )?{_WORK_VERBS})\b",
        ),
        (
            "progress",
            5,
            r"\b(i|we)( have| had)?( just| finally| now| already| recently)? "
            r"(added|built|finished|implemented|completed|shipped|launched|released|"
            r"deployed|merged|set up|wrote|rewrote|refactored|integrated|created|"
            r"published|fixed|got \w+ working|hooked up|wired up)\b|"
            r"^(just |finally )?got (\w+ ){1,4}working|"
            r"^(just |finally )?(added|built|finished|implemented|completed|shipped|"
            r"launched|released|merged|set up|rewrote|refactored|integrated|"
            r"published|wired up|hooked up)\b",
        ),
        (
            "tool",
            5,
            r"\b(i|we) (\w+ )?(use|used|run|ran|deploy|deployed|host|manage|maintain|"
            r"write|wrote|build|built|develop|code|work in|work with)\b",
        ),
        (
            "curiosity",
            3,
            r"\b(thinking (about|of)|considering|wondering about|toying with|"
            r"looking into|curious about|interested in)\s+(\w+\s+)?(trying|"
            r"switching|learning|using|adopting|moving|migrating|building|getting)|"
            r"\b(might|maybe) (try|switch|learn|use|move)\b",
        ),
    )
)
_PERSON_ROLE = re.compile(
    r"[A-Z][a-z]+(?: [A-Z][a-z]+)? (?:(owns|leads|manages|maintains|"
    r"reports to|works on|is (?:our|my) \w+)|runs|handles|reviews|"
    r"approves|builds|designs|is the \w+)\b"
)
# Any other past-tense deed on a piece of the user's work: 'we ported the CLI to Go'.
_DID_WORK = re.compile(
    rf"\b(i|we)( have| had)?( just| finally| already| recently)? [a-z]+ed "
    rf"((the|our|my|a|an|some|new) )?(\w+ ){{0,2}}?{WORK_NOUNS.strip()}\b"
)
# A plain statement of a value about something definite: "The code freeze starts on March
# 13.", "The API rate limit is 100 requests per second.", "My order 4417 has not arrived".
_DEFINITE = re.compile(r"^(?:the|our|my|this|their|his|her)\s+[a-z]")
# a person's thing as the subject: "Karen's birthday is in June" (not "Today's weather")
_SOMEONES = re.compile(r"^([A-Z][a-z]+)(?:'s|s'|\u2019s)\s+[a-z]")
_NOT_SOMEONE = frozenset(
    "that what it there here today tonight yesterday tomorrow everyone everybody nobody "
    "someone somebody this who where let he she".split()
)
# a definite subject's value, or its change: "the landlord raised the rent to 1850"
_STATES = re.compile(
    rf"\b(?:{_WORK_VERBS}|[a-z]{{3,}}ed|starts?|begins?|opens?|closes?|"
    r"arrives?|lands?|expires?|renews?|lasts?|allows?|caps?|limits?|weighs?|holds?|seats?|"
    r"fits?|leaves|departs?|went|rose|fell|grew|got|became|came|comes|goes|runs|ships?|costs?|pays|"
    r"is|are|was|were|has|have|did|does) "
)
_NUMBER = re.compile(r"\d")
_NAMED = re.compile(r"(?<=[a-z,] )(?!I\b)[A-Z][A-Za-z]+")  # a name inside: "... from IKEA"


def _states_a_value(sentence: str, norm: str) -> bool:
    """A definite subject (or one named by an id: "Order 1003", "Room B"), a verb, and a
    value (a number, an id, a date other than today, a name: "The new bookshelf is from
    IKEA")."""
    someones = _SOMEONES.match(sentence.strip())
    if someones and (someones[1].lower() in _NOT_SOMEONE or is_value(canon(someones[1].lower()))):
        someones = None  # "That's", "Today's", "Monday's": no one's
    definite = _DEFINITE.match(norm) or someones or subject_ids(sentence)
    if not definite or not _STATES.search(norm + " "):
        return False
    dated = any(m.label not in ("today", "tonight") for m in date_mentions(sentence))
    return dated or bool(_NUMBER.search(norm) or _NAMED.search(sentence))


# Kinds found outside the cue table: an imperative rule, a recurring schedule, an event.
_EXTRA_WEIGHTS = {"directive": 7, "schedule": 5, "event": 5}
# Something the user did, told with when: "I just signed a contract with my first client
# today", "I got back from a road trip last week", "we adopted a cat yesterday". What the
# user lived through is a fact about them that stays true (a past trip still happened),
# and when it happened is what a later "how long ago" asks.
_DEED_VERBS = (
    r"([a-z]+ed|got|bought|went|took|made|ran|met|won|wore|gave|began|sent|did|built|found|"
    r"left|came|flew|drove|ate|sold|brought|spent|caught|taught|sang|swam|rode|paid|lost|"
    r"threw|held|kept|shot|drew|grew|became|joined|moved|signed|had(?! to\b))\b"
)
# the user's deed, or a second one after 'and' in a sentence the user's first one opens
# ("I figured out the slow cooker and made a delicious beef stew")
_PAST_DEED = re.compile(
    r"\b(?:i|we)(?: have| had)?(?: just| finally| actually| recently| also| already| only)* " + _DEED_VERBS
)
_AND_DEED = re.compile(r"\band (?:then |also |finally |just )?" + _DEED_VERBS)
_WHEN_DONE = re.compile(
    r"\b(?:just|today|yesterday|tonight|recently|earlier|ago|last (?:week|weekend|month|year|"
    r"night|time|monday|tuesday|wednesday|thursday|friday|saturday|sunday)|this (?:morning|"
    r"afternoon|evening|week|weekend|month|year)|the other day|on (?:monday|tuesday|"
    r"wednesday|thursday|friday|saturday|sunday))\b"
)
_NOT_DEEDS = frozenset(lexicon("gating")["not_deeds"].split())


def _own_event_today(sentence: str, norm: str) -> bool:
    """The user telling of an event of their own on the day they tell it: "I'm playing in
    the charity tournament today" (what "I'm tired today" is not)."""
    if sentence.rstrip().endswith("?") or not FIRST_PERSON.search(norm):
        return False
    return any(takes_part_today(norm, m) for m in date_mentions(sentence))


def _did(sentence: str, norm: str) -> bool:
    """The user telling of a deed of theirs with when it was done, about something."""
    if sentence.rstrip().endswith("?") or not _WHEN_DONE.search(norm):
        return False
    first = _PAST_DEED.search(norm)
    after = _AND_DEED.finditer(norm, first.end()) if first else ()
    deeds = [m[1] for m in (*_PAST_DEED.finditer(norm), *after) if m[1] not in _NOT_DEEDS]
    done = {canon(d) for d in deeds}
    return bool(deeds) and bool(read(sentence).topic - done - _PROGRESS_VERBS - GENERIC - _VAGUE)


_VAGUE = stems("there here it that this back around")


_PROGRESS_VERBS = stems(lexicon("gating")["progress_verbs"])
# how often, said as a count: "twice a week", "three times a month", "once per day"
_HOW_OFTEN = re.compile(
    r"\b(?:once|twice|thrice|(?:\d+|two|three|four|five|six|seven|several|a few) times) "
    r"(?:a|an|per|each) (?:day|week|month|year|fortnight)\b"
)
# a thing of the user's that is new: "my new tennis racket", "our brand new car"
_NEW_THING = re.compile(r"\b(?:my|our) (?:brand )?new [a-z]+")
_OWNERSHIP = re.compile(r"\b(my|our|mine|ours|i am|we are|i have|we have|i use|we use)\b")
_FIX = re.compile(
    r"\b(fix|fixed|fixes|solution|solved?|resolved?|the (issue|problem|cause) "
    r"(is|was)|caused by|workaround|you need to|try|set|enable|disable|pin|"
    r"upgrade|downgrade|install|add|remove|use|switch)\b"
)


def _signals(sentence: str) -> list[str]:
    """Kinds of durable information in one user sentence (empty: nothing to keep)."""
    norm = normalise(sentence)
    if is_small_talk(norm):
        return []  # 'never mind', 'thanks again'
    found = [kind for kind, _, cue in _GATE_SIGNALS if cue.search(norm)]
    role = _PERSON_ROLE.match(sentence.strip())
    if "fact" not in found and role and (role[1] or FIRST_PERSON.search(norm) or WORK_NOUN.search(norm)):
        found.append("fact")  # someone the user works with, and what they do
    if "instruction" not in found and directive(norm):
        found.insert(0, "directive")
    if "progress" not in found and _DID_WORK.search(norm) and not STRONG_CHANGE.search(norm):
        found.append("progress")  # a change ('we moved the standup') is not progress
    if "progress" in found and not (read(sentence).topic - _PROGRESS_VERBS - GENERIC):
        found.remove("progress")  # 'fixed it!' says nothing about what
    if (
        (RECURRING.search(norm) or _HOW_OFTEN.search(norm))
        and "deadline" not in found
        and (FIRST_PERSON.search(norm) or WORK_NOUN.search(norm))
    ):
        found.append("schedule")  # 'the team meets on Mondays', 'I run every morning'
    if is_request(sentence, norm):
        # A lookup or request keeps only explicit rules, or news about the user's own
        # things ("why does my app crash?"); asking for a fact ("what's my name?") is not
        # telling one.
        if not _OWNERSHIP.search(norm):
            return [k for k in found if k in ("instruction", "directive")]
        found = [k for k in found if k not in ("fact", "tool")]
        if not found:
            return []
    mine = bool(FIRST_PERSON.search(norm))
    if read(sentence).members and mine and "tool" not in found:
        found.append("tool")  # a named tool in the user's hands
    ends = [m.label for m in date_mentions(sentence) if not m.is_start]
    # a dated event ("meeting with Ana on Friday"), or the user's own schedule beyond
    # today ("I'll be out next week"; "I'm tired today" is not news worth keeping)
    if "deadline" not in found and ends and (EVENT.search(norm) or mine and set(ends) - {"today", "tonight"}):
        found.append("deadline")
    if not found and _NEW_THING.search(norm) and not sentence.rstrip().endswith("?"):
        found.append("fact")  # "I'm really happy with my new tennis racket": the user's own, new
    if not found and (_states_a_value(sentence, norm) or _personal_value(sentence, norm)):
        found.append("fact")  # nothing else to say for it, but a date, amount or id
    if not found and (_did(sentence, norm) or _own_event_today(sentence, norm)):
        found.append("event")
    return found


# The user telling of their own things in passing ("By the way, I'm now at 600 followers",
# "I've tried 3 of Emma's recipes so far", "I'm currently obsessed with Kansas City
# Masterpiece BBQ sauce"): a first-person statement with a value or a name in it, or
# with a word that says it holds now.
_I_STATE = re.compile(
    r"\b(?:i|we)(?: am| are| have| had| was| were| will| just| now| "
    r"currently| finally| recently| already| still| been| also| really)* "
    r"(?!think\b|wonder|want|would|could|hope|guess|need to\b|was wondering|"
    r"am wondering|am thinking|am looking|am trying|am planning)[a-z]+|"
    r"\b(?:my|our) [a-z]+"
)
_HOLDS_NOW = re.compile(
    r"\b(?:currently|so far|by now|these days|lately|in total|"
    r"personal best|my best|record|now at|up to|obsessed with|"
    r"(?:for|since) (?:\d+|a|an|two|three|four|five|six|several|a few) "
    r"(?:days?|weeks?|months?|years?))\b"
)
_NAME_INSIDE = re.compile(r"(?<=[a-z,] )(?!I\b)[A-Z][a-z]+")


# a count spelled out is a value as much as its digits: "I attended five sessions", "we
# have three kids" ('one' is left out: "the blue one", "pick one up")
_COUNT_WORD = re.compile(
    r"\b(?:two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|fourteen|"
    r"fifteen|sixteen|seventeen|eighteen|nineteen|twenty|thirty|forty|fifty|hundred|"
    r"dozens?|twice|thrice)\b"
)


def _personal_value(sentence: str, norm: str) -> bool:
    if sentence.rstrip().endswith("?") or not _I_STATE.search(norm):
        return False
    counted = _NUMBER.search(norm) or _COUNT_WORD.search(norm)
    return bool(counted or _HOLDS_NOW.search(norm) or _NAME_INSIDE.search(sentence))


def _fix_sentence(assistant: str) -> str | None:
    """The assistant's first sentence that says how to fix something."""
    for sentence in sentences(assistant):
        if _FIX.search(normalise(sentence)) and not sentence.endswith("?"):
            return summary(sentence, 200)
    return None


def gate(user: str, assistant: str) -> dict:
    """Should this user/assistant turn be saved as a memory?

    Saves turns whose user side states something durable: an instruction (always/never,
    or an imperative about how to work: "keep code readable", "deploy from the release
    branch for now"), a decision, a deadline or dated event, a migration, a bug, a plan,
    a wait, a preference (including what "matters" to the user), a fact about the user,
    their project, team or tools, a recurring schedule, a progress report ("I added auth
    to the tracker"), or (at low importance) an idea being considered. Greetings, thanks,
    small talk, one-off lookups and one-off requests ("write a haiku", "run the tests",
    "fix this function") are not saved. `content` is the user's durable sentences in the
    third person (key nouns untouched), plus the assistant's fix when the turn is about a
    bug."""
    picked = _durable(user)
    if not picked:
        return {"save": False, "content": "", "summary": "", "tags": [], "importance": 1}
    kinds = list(dict.fromkeys(k for _, found in picked for k in found))
    return _memory(" ".join(third_person(s) for s, _ in picked), kinds, assistant)


def memories(user: str, assistant: str) -> dict:
    """The gate's answer as a list: one memory for each durable sentence of the user's
    side, so that each fact of a turn is judged on its own (its own contradictions, its
    own end date) and a date or a change in one sentence does not end or replace the
    others. The assistant's fix joins the sentence that tells of the bug."""
    picked = _durable(user)
    if not picked:
        return {"save": False, "memories": []}
    out, fixed = [], False
    for sentence, kinds in picked:
        memory = _memory(third_person(sentence), kinds, "" if fixed else assistant)
        fixed = fixed or "bug" in kinds
        out.append({k: memory[k] for k in ("content", "summary", "tags", "importance")})
    return {"save": True, "memories": out}


def _durable(user: str) -> list[tuple[str, list[str]]]:
    """The user's sentences that state something durable, with what kinds of thing. A
    question telling a fact as its grounds ("what time should I start my jog, considering
    I wake up at 7:30 on Saturdays?") keeps the fact, said as a statement: asking is not
    telling, and the question around it would keep the fact at a question's confidence.
    Likewise a statement followed by a question about it ("I'm thinking of changing my
    coffee limit to two cups, do you think that's a good idea?") keeps the statement, and so
    does a named thing the user has, inside a question (asking.py)."""
    out: list[tuple[str, list[str]]] = []
    before, kept = "", False  # the sentence before this one; whether it ends out[-1]
    for sentence in sentences(user):
        if _CONTINUES.match(sentence) and before and not before.endswith("?"):
            # "We bought a used Volvo last spring. It needs new brakes.": what "it" is
            # lives in the sentence before, so the two are one memory
            if kept:  # its kinds join the memory's (read alone: a turn stays linear)
                text, kinds = out[-1]
                out[-1] = (f"{text} {sentence}", list(dict.fromkeys(kinds + _signals(sentence))))
                before = sentence
                continue
            joined = f"{before} {sentence}"
            if _signals(sentence) and (found := _signals(joined)):
                out.append((joined, found))
                before, kept = sentence, True
                continue
        grounds = told_in_question(sentence)
        before, kept = sentence, True
        if grounds and (found := _signals(grounds)):
            out.append((grounds, found))
        elif found := _signals(sentence):
            out.append((sentence, found))
        else:
            kept = False
    return out


# a sentence whose subject is what the one before it spoke of: "It needs new brakes",
# "They moved it to Friday", "By the way, she starts on Monday", "For Sophia, it was a
# coffee shop"
_CONTINUES = re.compile(
    r"^(?:(?:and|but|so|also|plus)\s+|[\w' ]{1,30},\s*)?(?:it|they|she|he)\b(?!'s\b)", re.IGNORECASE
)


def _memory(content: str, kinds: list[str], assistant: str) -> dict:
    fix = _fix_sentence(assistant) if "bug" in kinds and assistant else None
    if fix:
        content += " Fix: " + as_sentence(fix)
    return {
        "save": True,
        "content": content,
        "summary": summary(content),
        "tags": tags(kinds, [content]),
        "importance": _importance(kinds, content),
    }


def _importance(kinds: list[str], content: str) -> int:
    weights = {kind: weight for kind, weight, _ in _GATE_SIGNALS} | _EXTRA_WEIGHTS
    score = max(weights[k] for k in kinds)
    if len(kinds) >= 3:
        score += 1  # several durable facets in one turn
    if confidence(content) <= 0.3:
        score = min(score, 3)  # a maybe is worth keeping, not worth ranking high
    return max(1, min(10, score))
