"""Cues shared by the gate and the scene extractor: what kind of sentence this is.

A question or request asks rather than tells; small talk says nothing; a work noun or an
event grounds a statement in the user's project or calendar.
"""

from __future__ import annotations

import re

from engine.judges.rules.words import token_tuple

# Nouns that make a statement about the user's work: a project, its parts, its people.
WORK_NOUNS = (
    r"(apis?|specs?|specification|app|apps|application|services?|servers?|"
    r"databases?|db|repo|repository|codebase|monorepo|backend|frontend|pipelines?|"
    r"ci|builds?|tests?|test suite|team|squad|standups?|stand-ups?|meetings?|sync|"
    r"retros?|sprints?|releases?|deploys?|deployments?|cluster|schema|docs|"
    r"documentation|endpoints?|modules?|library|libraries|packages?|config|"
    r"configuration|staging|production|prod|branch|branches|workflow|roadmap|"
    r"budget|clients?|customers?|product|dashboard|tracker|bot|agent|jobs?|cron|"
    r"queue|cache|bucket|website|site|dataset|project|projects|company|office|"
    r"manager|boss|lead|org|organi[sz]ation|department|stack|infra|infrastructure|"
    r"cli|sdk|scripts?|migrations?|microservices?|containers?|instances?|tooling|"
    r"editor|laptop|machine|plugins?|extensions?|integrations?|webhooks?|features?|"
    r"ui|tickets?|backlog|board|wiki|readme|invoices?|billing|auth|login|"
    r"style guide|linter|formatter|framework|on-?call|rota|rotation|code ?base) "
)
WORK_NOUN = re.compile(rf"\b{WORK_NOUNS.strip()}\b")
EVENT = re.compile(
    r"\b(meeting|call|interview|demo|release|launch|review|appointment|"
    r"exam|trip|flight|standup|presentation|sprint|deadline|deliver\w*|"
    r"submit\w*|ship\w*|due|offsite|conference|vacation|leave)\b"
)
_REQUEST = re.compile(
    r"^(what|why|how|when|where|who|which|whats|can you|could you|"
    r"would you|will you|tell me|show me|explain|give me|help me|write me|"
    r"find me|make me|get me|suggest|recommend|summari[sz]e|convert|"
    r"(compose|draft|generate|create|make|write|give|show|find|rewrite|fix|"
    r"describe|check|compute|solve|design|brainstorm|outline|proofread|"
    r"review|refactor|debug|plan|book|order|buy) (a|an|me|us|this|that|these|"
    r"those|some|it)\b|"
    r"translate|calculate|define|list)\b"
)
_SMALL_TALK = re.compile(
    r"\b(hi|hello|hey|hiya|yo|good (morning|afternoon|evening|night)|thanks?( you)?|thx|"
    r"cheers|bye|goodbye|see you|ok|okay|cool|great|nice|awesome|perfect|sure|yes|yep|"
    r"nope|no|lol|haha|got it|sounds good|noted|understood|how are you( doing)?|"
    r"(so|very) much|a lot|for (the|your) help|appreciate it|have a (good|nice|great) "
    r"(day|one|weekend)|you are (great|awesome|the best)|there|again|will do|never ?mind|"
    r"no worries|no problem|my bad|all good)\b"
)


def is_request(sentence: str, norm: str) -> bool:
    """A question, or a request for the assistant to do something ('write me a haiku')."""
    return sentence.rstrip().endswith("?") or bool(_REQUEST.match(norm.strip(" \"'")))


def is_small_talk(norm: str) -> bool:
    """Nothing left once greetings, thanks and filler are taken out."""
    return not token_tuple(_SMALL_TALK.sub(" ", norm))
