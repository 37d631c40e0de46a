"""Scene cells (seed C): `extract_cells` turns an exchange into typed cells filed under a
scene, `summarise_scene` writes a scene's summary."""

from __future__ import annotations

import re

from engine.judges.lexicon import lexicon, words
from engine.judges.rules.cues import EVENT, WORK_NOUN, is_request, is_small_talk
from engine.judges.rules.dates import DAY_RE, FULL_MONTH_RE
from engine.judges.rules.hedging import confidence
from engine.judges.rules.reading import FIRST_PERSON, as_sentence, read, sentences, similarity
from engine.judges.rules.words import GENERIC, STANCE, STOPWORDS, WORD_RE, canon, is_value, normalise, stems

_LEXICON = lexicon("scenes")

_KIND_RULES = tuple(
    (kind, re.compile(cue))
    for kind, cue in (
        (
            "decision",
            r"\b(decided|decide|decision|going with|go with|went with|let us|chose|"
            r"chosen|settled on|agreed|opted|picked|ended up|switching|migrating|"
            r"switched|migrated)\b",
        ),
        (
            "plan",
            rf"\b(plan|plans|planned|planning|roadmap|milestone|will ship|going to|"
            rf"schedul\w*|next (week|sprint|month|quarter)|by ({DAY_RE}|the end|"
            rf"{FULL_MONTH_RE}|q[1-4]|\d))\b",
        ),
        (
            "risk",
            r"\b(risks?|risky|(might|could|may|will) (break|drift|fail|leak|corrupt|lose|"
            r"cause)|drift\w*|concerns?|concerned|worr(y|ies|ied)|danger\w*|fragile|flaky|"
            r"vulnerab\w*|bottleneck|caveat|downside|race condition)\b",
        ),
        ("decision", r"\bwe will\b"),
        (
            "preference",
            r"\b(prefer\w*|always|never|(i|we|user) (really )?(like|likes|love|loves|"
            r"hate|hates|dislike|dislikes)|favou?rite|would rather)\b",
        ),
        (
            "task",
            r"\b(todo|need to|needs to|must|have to|has to|should|remember to|remind me|"
            r"do not forget|action item|fixme)\b",
        ),
    )
)
_KIND_SALIENCE: dict[str, float] = dict(_LEXICON["kind_salience"])
_EMPHASIS = re.compile(
    r"\b(always|never|must|critical|important|urgent|asap|deadline|"
    r"blocker|security)\b"
)
_PROJECT_WORDS = re.compile(
    r"\b(project|app|application|api|service|repo|repository|"
    r"codebase|backend|frontend|server|database|schema|pipeline|"
    r"deploy\w*|production|staging|release|tests?|build|team|"
    r"memory|memories|cache|index|scene|summar\w+)\b"
)
_KIND_CUE_WORDS = stems(_LEXICON["kind_cues"])
_SCENE_SKIP = frozenset(words(_LEXICON["scene_skip"]))
_SCENE_OF_CATEGORY: dict[str, str | None] = dict(_LEXICON["scene_of_category"])
_THEMES = tuple((scene, stems(theme)) for scene, theme in _LEXICON["themes"].items())
_THEME_RANK = {scene: rank for rank, (scene, _) in enumerate(_THEMES)}
_ORDINALS = frozenset(words(_LEXICON["ordinals"]))
_BE_WORDS = frozenset(words(_LEXICON["be_words"]))


def _kind(norm: str) -> str:
    for kind, cue in _KIND_RULES:
        if cue.search(norm):
            return kind
    return "fact"


def _scene(sentence: str) -> str:
    """A short lowercase slug naming the topic, the same for the same topic every time.

    The lexicon slot of a named tool ('storage' for SQLite), else a topic noun from a
    small theme list ('summaries', 'schedule', 'release', 'goals'), else the first topic
    word of the sentence (verbs, ordinals, dates and stance words skipped)."""
    r = read(sentence)
    hits: dict[str, float] = {}
    for category, weight in [(c, 2) for c, _ in r.members] + [(c, 1) for c in r.slots]:
        scene = _SCENE_OF_CATEGORY.get(category, category)
        if scene is not None:
            hits[scene] = hits.get(scene, 0) + weight
    if hits:
        return min(hits, key=lambda c: (-hits[c], c))
    for scene, theme in _THEMES:
        found = len(theme & r.concepts)
        if found:
            hits[scene] = hits.get(scene, 0) + found
    if hits:
        return min(hits, key=lambda c: (-hits[c], _THEME_RANK[c]))
    return _topic_word(normalise(sentence))


def _topic_word(norm: str) -> str:
    """The first word of a sentence that could name its topic, or 'general'."""
    raw = WORD_RE.findall(norm)

    def topical(i: int, word: str) -> bool:
        key = canon(word)
        return (
            word.isalpha()
            and len(word) > 2
            and word not in STOPWORDS
            and word not in _SCENE_SKIP
            and word not in _ORDINALS
            and not is_value(key)
            and key not in GENERIC | STANCE | _KIND_CUE_WORDS
            and not (word.endswith("ed") and len(word) > 4)  # a participle
            and not (word.endswith("ing") and i > 0 and raw[i - 1] in _BE_WORDS)
        )

    # "... about the API spec" names its topic outright
    about = re.search(
        r"\b(?:about|regarding|concerning|re)\s+(?:(?:the|our|my|a|an|their)\s+)?"
        r"([a-z][\w-]*)",
        norm,
    )
    if about and about[1] in raw and topical(raw.index(about[1]), about[1]):
        return about[1]
    for i, word in enumerate(raw):
        if topical(i, word):
            return word
    return "general"


def _cell(sentence: str, from_user: bool) -> dict | None:
    norm = normalise(sentence)
    if is_request(sentence, norm) or is_small_talk(norm):
        return None
    kind = _kind(norm)
    if kind == "fact":
        # a fact needs an owner: the user, their project, or a named tool
        grounded = (
            FIRST_PERSON.search(norm)
            or _PROJECT_WORDS.search(norm)
            or WORK_NOUN.search(norm)
            or EVENT.search(norm)
            or read(sentence).members
        )
        if not from_user or not grounded:
            return None
    if not from_user and kind == "preference":
        return None  # the assistant's tastes are not the user's memory
    salience = _KIND_SALIENCE[kind] + (0.1 if _EMPHASIS.search(norm) else 0.0)
    if kind != "risk" and confidence(sentence) <= 0.3:
        salience -= 0.2  # hedged; risks are hedged by nature, so they keep their weight
    if not from_user:
        salience -= 0.1
    return {
        "scene": _scene(sentence),
        "kind": kind,
        "salience": round(max(0.05, min(1.0, salience)), 2),
        "content": sentence.strip(),
    }


def extract_cells(user: str, assistant: str) -> list[dict]:
    """Seed C: turn one exchange into typed cells, at most one per sentence.

    User sentences give any kind; assistant sentences only decisions, plans, risks and
    tasks (its explanations are not memories). Questions, greetings and ungrounded chatter
    give nothing. kind comes from cue words (decision > plan > risk > 'we will' >
    preference > task > fact); salience from the kind, emphasis and hedging."""
    cells = []
    for text, from_user in ((user, True), (assistant, False)):
        for sentence in sentences(text):
            cell = _cell(sentence, from_user)
            if cell:
                cells.append(cell)
    return cells


def summarise_scene(cells: list[dict]) -> str:
    """A scene summary under 100 words: the most salient cells first, repeats skipped."""
    ordered = sorted(enumerate(cells), key=lambda p: (-float(p[1].get("salience", 0)), p[0]))
    parts: list[str] = []
    count = 0
    for _, cell in ordered:
        text = str(cell.get("content", "")).strip()
        if not text or any(similarity(text, p) >= 0.8 for p in parts):
            continue
        sentence = as_sentence(text)
        size = len(sentence.split())
        if count + size > 99:
            if not parts:  # one huge cell: keep its head rather than nothing
                parts.append(" ".join(sentence.split()[:98]) + " ...")
                break
            continue
        parts.append(sentence)
        count += size
    return " ".join(parts)
