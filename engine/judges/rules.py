"""The `rules` judges: offline, deterministic stand-ins for the cheap and strong models.

Every judge reads text with the same small toolkit - a tokenizer, a light stemmer, a
synonym map, a lexicon of interchangeable tools (databases, package managers, editors...),
cue words and a date reader - so it generalises to wording it has never seen instead of
looking examples up. Nothing here reads the clock, the network or a random source: the
same input always gives the same answer, and "today" is always passed in.

Public judges: gate, confidence, contradiction, expiry, cluster, merge, select,
extract_cells, summarise_scene. Public helpers: tokens, stem, similarity, read_dates.
"""
from __future__ import annotations

import calendar
import math
import re
from datetime import date, datetime, timedelta
from functools import lru_cache
from itertools import combinations
from typing import Callable, NamedTuple

__all__ = [
    "gate", "confidence", "contradiction", "expiry", "cluster", "merge", "select",
    "extract_cells", "summarise_scene", "tokens", "stem", "similarity", "read_dates",
    "related_words",
]

# --------------------------------------------------------------------------- words

STOPWORDS = frozenset("""
a about above after again against all am an and any are as at be because been before
being below between both but by can could did do does doing down during each few for from
further had has have having he her here hers herself him himself his how i if in into is
it its itself just me more most my myself no nor not of off on once only or other our ours
ourselves out over own same she should so some such than that the their theirs them
themselves then there these they this those through to too under until up very was we
were what when where which while who whom why will with would you your yours yourself
yourselves user users also really still now currently anymore longer lot bit stuff thing
things get got gets getting make makes made let use uses used using may might must shall
need needs needed yes ok okay please thanks thank hi hello hey going gonna
maybe perhaps probably possibly someday via per across within onto upon etc next last
previous mostly usually often sometimes generally honestly basically actually literally ugh
hmm well anyway btw fyi again
""".split())

# Contractions are expanded first so "don't" reads as a negation and "we'll" as "we will".
_CONTRACTIONS = (
    (r"\blet's\b", "let us"), (r"\bwon't\b", "will not"), (r"\bcan't\b", "can not"),
    (r"\bcannot\b", "can not"),
    (r"n't\b", " not"), (r"'m\b", " am"), (r"'re\b", " are"), (r"'ve\b", " have"),
    (r"'ll\b", " will"), (r"'d\b", " would"), (r"'s\b", ""),
)

# Multi-word names become one token, so "VS Code" and "vscode" are the same word.
_PHRASES = (
    (r"\bc\+\+", " cpp "), (r"\bc#", " csharp "), (r"\.net\b", " dotnet "),
    (r"\bnode\.?js\b", "node"), (r"\bnext\.?js\b", "nextjs"), (r"\bvue\.?js\b", "vue"),
    (r"\bnuxt\.?js\b", "nuxt"), (r"\bexpress\.?js\b", "expressjs"), (r"\bfly\.io\b", "flyio"),
    (r"\bvs ?code\b|\bvisual studio code\b", "vscode"), (r"\bsublime text\b", "sublime"),
    (r"\bsql server\b", "mssql"), (r"\bgoogle cloud( platform)?\b", "gcp"),
    (r"\bamazon web services\b", "aws"), (r"\bgithub actions\b", "githubactions"),
    (r"\bgitlab ci\b", "gitlabci"), (r"\b(ms|microsoft) teams\b", "msteams"),
    (r"\bintellij idea\b", "intellij"), (r"\bmac ?os( x)?\b|\bos x\b", "macos"),
    (r"\barch linux\b", "archlinux"), (r"\bdark (mode|theme)\b", "darkmode"),
    (r"\blight (mode|theme)\b", "lightmode"),
    (r"\b(package|dependency) manag(er|ers|ement)\b", "packagemanager"),
    (r"\bprogramming languages?\b", "language"), (r"\boperating system\b", "os"),
    (r"\btest (runner|framework)\b", "testframework"),
    (r"\b(easy|easier|simple|simpler) to (read|understand|follow)\b", "readable"),
    (r"\bhuman[- ]readable\b", "readable"), (r"\bto[- ]do\b", "todo"),
    (r"\bone[- ]liners?\b", "oneliner"), (r"\bself[- ](documenting|explanatory)\b",
                                            r"self\1"),
    (r"\bdue date\b", "deadline"),
)

# Words that mean the same thing for matching purposes (raw word -> canonical word).
_SYNONYMS = {
    **dict.fromkeys("like likes liked love loves loved enjoy enjoys favor favour favors "
                    "favours favorite favourite prefers preferred preference preferences "
                    "want wants wanted fond".split(), "prefer"),
    **dict.fromkeys("hate hates hated dislikes disliked detest avoid avoids".split(), "dislike"),
    **dict.fromkeys("keep keeps consistently".split(), "always"),
    **dict.fromkeys("clear clean legible understandable readability descriptive "
                    "selfdocumenting selfexplanatory".split(), "readable"),
    **dict.fromkeys("db dbs databases datastore".split(), "database"),
    **dict.fromkeys("lives living based reside resides located".split(), "live"),
    **dict.fromkeys("repo repos".split(), "repository"),
    **dict.fromkeys("app apps".split(), "application"),
    **dict.fromkeys("deps".split(), "dependency"),
    **dict.fromkeys("defect glitch".split(), "bug"),
    **dict.fromkeys("quick speedy".split(), "fast"),
    **dict.fromkeys("employed job".split(), "work"),
    **dict.fromkeys("brief concise terse shorter".split(), "short"),
    **dict.fromkeys("answers reply replies response responses".split(), "answer"),
    "config": "configuration", "docs": "documentation", "due": "deadline",
    "indentation": "indent", "indents": "indent", "indenting": "indent",
}

_NOUN_SYNONYMS = frozenset(_SYNONYMS.values()) - {"prefer", "dislike", "always", "readable",
                                                   "live", "fast", "short"}

# Lexicon: members of one slot are interchangeable, so replacing one by another is a
# strong sign of supersession. `exclusive` slots normally hold one member at a time (one
# editor, one indentation style); the others (languages, clouds) happily hold several.
_CATEGORIES: dict[str, tuple[bool, str, str]] = {
    # name: (exclusive, members, words that name the slot itself)
    "database": (False, "postgresql mysql mariadb sqlite mongodb dynamodb cassandra oracle "
                 "mssql cockroachdb duckdb supabase firestore neo4j couchdb clickhouse",
                 "database storage persistence"),
    "python-packaging": (True, "poetry uv pip pipenv conda mamba pdm hatch rye",
                         "packagemanager dependency packaging"),
    "js-packaging": (True, "npm yarn pnpm bun", "packagemanager dependency packaging"),
    "js-runtime": (True, "node deno bun", "runtime"),
    "editor": (True, "vim neovim emacs vscode sublime atom pycharm intellij cursor zed "
               "helix nano webstorm", "editor ide"),
    "language": (False, "python javascript typescript golang rust java kotlin ruby php cpp "
                 "csharp swift scala elixir haskell clojure perl lua dart julia zig",
                 "language"),
    "cloud": (False, "aws gcp azure digitalocean heroku vercel netlify flyio cloudflare "
              "linode hetzner", "cloud hosting host deploy deployment"),
    "os": (False, "linux ubuntu debian fedora archlinux macos windows freebsd centos", "os"),
    "mobile-os": (True, "ios android", "mobile phone"),
    "indentation": (True, "tabs spaces", "indent"),
    "theme": (True, "darkmode lightmode", "theme"),
    "shell": (True, "bash zsh fish powershell", "shell terminal"),
    "browser": (True, "chrome firefox safari brave", "browser"),
    "web-framework": (False, "django flask fastapi rails expressjs laravel nestjs",
                      "framework backend"),
    "frontend": (False, "react vue angular svelte nextjs nuxt", "frontend"),
    "test-framework": (True, "pytest unittest jest mocha vitest rspec",
                       "testframework testing test"),
    "linter": (False, "ruff flake8 pylint prettier eslint mypy isort",
               "linter lint formatter formatting"),
    "code-host": (True, "github gitlab bitbucket", "hosting host"),
    "ci": (True, "jenkins circleci githubactions travis gitlabci buildkite", "ci pipeline"),
    "containers": (False, "docker podman", "container"),
    "orchestration": (True, "kubernetes nomad swarm", "orchestration orchestrator"),
    "chat": (True, "slack msteams discord mattermost", "chat messaging"),
    "tracker": (True, "jira trello asana linear", "ticket tracker"),
    "notes": (True, "notion obsidian evernote confluence", "notes wiki"),
    "units": (True, "celsius fahrenheit metric imperial", "units"),
    "cache": (False, "redis memcached", "cache caching"),
    "queue": (False, "rabbitmq kafka sqs", "queue"),
}
_ALIASES = {
    "postgres": "postgresql", "pg": "postgresql", "psql": "postgresql", "mongo": "mongodb",
    "sqlite3": "sqlite", "nvim": "neovim", "js": "javascript", "ts": "typescript",
    "py": "python", "python3": "python", "nodejs": "node", "k8s": "kubernetes",
    "osx": "macos", "mac": "macos", "gcloud": "gcp", "tab": "tabs", "space": "spaces",
}
# Things that are a kind of something the user may have named instead: a MacBook is a
# laptop running macOS, so "got a new MacBook" speaks of the user's laptop.
_IMPLIES = {
    **dict.fromkeys("macbook macbooks thinkpad thinkpads chromebook ultrabook notebook "
                    "xps".split(), ("laptop",)),
    **dict.fromkeys("imac desktop workstation".split(), ("computer",)),
    **dict.fromkeys("iphone pixel galaxy smartphone".split(), ("phone",)),
    **dict.fromkeys("ipad tablet".split(), ("tablet",)),
}
_SCENE_OF_CATEGORY = {
    "database": "storage", "python-packaging": "dependencies", "js-packaging": "dependencies",
    "indentation": "code-style", "linter": "code-style", "cloud": "deployment",
    "language": "languages", "test-framework": "testing",
}

_WORD_RE = re.compile(r"\d{4}-\d{2}-\d{2}|\d+(?:\.\d+)+|[a-z0-9]+")


def stem(word: str) -> str:
    """A light suffix stripper: 'migrated', 'migrating', 'migrate' -> 'migrat'.

    Deliberately cruder than Porter: it only has to map inflections of one word onto the
    same key, never to produce a dictionary form."""
    if len(word) <= 3 or not word.isalpha():
        return word
    for suffix, repl in (("ies", "y"), ("sses", "ss"), ("ches", "ch"), ("shes", "sh"),
                         ("xes", "x")):
        if word.endswith(suffix) and len(word) > len(suffix) + 2:
            word = word[: -len(suffix)] + repl
            break
    else:
        if word.endswith("s") and not word.endswith(("ss", "us", "is")):
            word = word[:-1]
    for suffix in ("ability", "ingly", "edly", "able", "ible", "ing", "ed", "ly", "ness",
                   "ment", "er"):
        rest = word[: -len(suffix)]
        if word.endswith(suffix) and len(rest) >= 3 and re.search("[aeiouy]", rest):
            if suffix == "er" and len(word) < 6:
                continue  # short words like 'user', 'over' keep their ending
            word = rest
            if len(word) > 3 and word[-1] == word[-2] and word[-1] not in "lsz":
                word = word[:-1]  # 'stopp' -> 'stop', 'plann' -> 'plan'
            break
    if len(word) > 5 and word.endswith("ic"):
        word = word[:-2]  # 'allergic' meets 'allergy', 'historic' meets 'history'
    elif (len(word) > 3 and word.endswith("e")) or (len(word) > 4 and word.endswith("y")):
        word = word[:-1]
    return word


def _member_table() -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    members: dict[str, set[str]] = {}
    slot_words: dict[str, set[str]] = {}
    for category, (_, names, slots) in _CATEGORIES.items():
        for name in names.split():
            members.setdefault(name, set()).add(category)
        for word in slots.split():
            slot_words.setdefault(stem(_SYNONYMS.get(word, word)), set()).add(category)
    return members, slot_words


_MEMBER_OF, _SLOT_OF = _member_table()


@lru_cache(maxsize=4096)
def _normalise(text: str) -> str:
    """Lowercase, expand contractions and fold multi-word names into single tokens."""
    text = text.lower().replace("\u2019", "'").replace("\u2018", "'")
    for pattern, repl in _CONTRACTIONS + _PHRASES:
        text = re.sub(pattern, repl, text)
    return re.sub(r"\b(\d+)(?:st|nd|rd|th)\b", r"\1", text)


def _canon(word: str) -> str:
    word = _ALIASES.get(word, word)
    if word in _MEMBER_OF:
        return word  # product names are kept whole; stemming 'pandas' helps nobody
    if word not in _SYNONYMS and word.endswith("s"):
        # a plural noun folds like its singular: 'jobs' like 'job', 'glitches' like 'glitch'
        # (verbs and adjectives are left alone: 'clears' is not 'clear' code)
        for single in (word[:-1], word[:-2]):
            if _SYNONYMS.get(single) in _NOUN_SYNONYMS:
                word = single
                break
    return stem(_SYNONYMS.get(word, word))


@lru_cache(maxsize=4096)
def _tokens(text: str) -> tuple[str, ...]:
    words = _WORD_RE.findall(_normalise(text))
    out: list[str] = []
    for word in words:
        if word not in STOPWORDS:
            out.append(_canon(word))
            out += [w for w in _IMPLIES.get(word, ()) if w not in out]
    return tuple(out)


def related_words(word: str) -> list[str]:
    """Words a replacement of `word` may use instead: the other members of its lexicon
    categories, and the words naming the slot (mysql -> postgresql, sqlite, ..., database).
    Empty for words outside the lexicon."""
    name = _ALIASES.get(word.lower(), word.lower())
    out: list[str] = []
    for category in sorted(_MEMBER_OF.get(name, ())):
        _, names, slots = _CATEGORIES[category]
        out += [n for n in names.split() if n != name] + slots.split()
    out += [alias for alias, target in _ALIASES.items() if target in out]
    return list(dict.fromkeys(out))


def tokens(text: str) -> list[str]:
    """Content words of `text`: lowercased, stopwords dropped, synonyms folded, stemmed.

    Recall can reuse this to build full-text queries: the same fact worded differently
    yields overlapping tokens ('easy to read' and 'readable' both give 'read')."""
    return list(_tokens(text))


def _stems(words: str) -> frozenset[str]:
    return frozenset(_canon(w) for w in words.split())


# Words that carry a stance (how the user feels) rather than a topic.
_STANCE = _stems("prefer dislike always never")
# Words that say a change, an addition or progress happened: not topics either.
_CUE_WORDS = _stems(
    "switch switched switching migrate migrated migrating migration moved moving replace "
    "replaced replacing instead stopped quit ditched dropped abandoned gave changed swapped "
    "pushed postponed delayed rescheduled bumped cancelled canceled converted upgraded "
    "downgraded added adding finished implemented completed shipped started also additionally "
    "slipped rewrote rewritten increased decreased raised lowered reduced extended "
    "another besides next step")
# Words too common to say two memories are about the same thing.
_GENERIC = _stems("project team application code work thing system time company people way "
                  "everything anything everywhere something whatever "
                  "part tool tools user new old main good")
# Words that are values of a slot rather than the slot: dates and amounts.
_MONTHS = {
    "january": 1, "jan": 1, "february": 2, "feb": 2, "march": 3, "mar": 3, "april": 4,
    "apr": 4, "may": 5, "june": 6, "jun": 6, "july": 7, "jul": 7, "august": 8, "aug": 8,
    "september": 9, "sep": 9, "sept": 9, "october": 10, "oct": 10, "november": 11,
    "nov": 11, "december": 12, "dec": 12,
}
_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_VALUE_WORDS = _stems(" ".join(_MONTHS) + " " + " ".join(_WEEKDAYS) + " today tomorrow "
                      "tonight yesterday week weekend month year day sprint quarter morning "
                      "afternoon evening eod eow am pm")


def _is_value(token: str) -> bool:
    return token in _VALUE_WORDS or bool(re.fullmatch(r"[\d.\-]+|v\d+|q[1-4]|\d+(am|pm)",
                                                      token))


# --------------------------------------------------------------------------- dates

_MONTH_RE = "|".join(sorted(_MONTHS, key=len, reverse=True))
_FULL_MONTH_RE = "|".join(m for m in _MONTHS if len(m) > 3 or m == "may")
_WEEKDAY_RE = "|".join(_WEEKDAYS)
_NUMBER_WORDS = {
    "a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6,
    "seven": 7, "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12,
    "a couple of": 2, "a couple": 2, "couple of": 2, "a few": 3, "few": 3, "several": 3,
}
_AMOUNT_RE = r"(\d+|" + "|".join(sorted(_NUMBER_WORDS, key=len, reverse=True)) + ")"
# A date right after these words is a start, not an end ("since March", "from May 2").
_START_BEFORE = re.compile(r"(since|as of|starting|started|start|began|beginning|from|joined|"
                           r"born|founded|effective|last|every|each)\s+(on\s+|in\s+|the\s+)?$")


class DateMention(NamedTuple):
    """A date found in text: where it is, a comparable label, and how to resolve it."""
    start: int
    end: int
    label: str                                  # e.g. '03-15', 'friday', 'next week'
    resolve: Callable[[date], date | None]      # today -> the date meant
    absolute: bool = True                       # a calendar date, not 'tomorrow'
    is_start: bool = False                      # 'since March 3': begins, does not end


def _month_end(year: int, month: int) -> date:
    return date(year, month, calendar.monthrange(year, month)[1])


def _next_on_or_after(today: date, month: int, day: int) -> date | None:
    """A day without a year means its next occurrence on or after today."""
    for year in range(today.year, today.year + 5):  # 5 years reach the next February 29th
        try:
            candidate = date(year, month, day)
        except ValueError:
            continue  # February 29th outside a leap year; February 30th never matches
        if candidate >= today:
            return candidate
    return None


def _absolute(year: str | None, month: int, day: int) -> Callable[[date], date | None]:
    if year:
        def fixed(today: date) -> date | None:
            try:
                return date(int(year), month, day)
            except ValueError:
                return None
        return fixed
    return lambda today: _next_on_or_after(today, month, day)


def _next_day_of_month(today: date, day: int) -> date | None:
    for months in range(0, 3):  # short months lack a 31st: look a little further
        first = _add_months(today.replace(day=1), months)
        if day <= calendar.monthrange(first.year, first.month)[1]:
            candidate = first.replace(day=day)
            if candidate >= today:
                return candidate
    return None


def _month_of(year: str | None, month: int) -> Callable[[date], date]:
    """A month without a day ends with the month: 'by June' -> June 30."""
    def end(today: date) -> date:
        if year:
            return _month_end(int(year), month)
        y = today.year if month >= today.month else today.year + 1
        return _month_end(y, month)
    return end


def _full_year(text: str | None) -> str | None:
    if text and len(text) == 2:
        return "20" + text
    return text


# '3/15' only after a date word or with a year, so '3/4 spent' stays a fraction
_SLASH_DATE = re.compile(r"(?:\b(?:on|by|due|until|till|before|after|from|to|for|dated|"
                         r"deadline|is|at)\s+|[,:]\s*|^)(\d{1,2})/(\d{1,2})(?![\d/])|"
                         r"(?<![\d/.])(\d{1,2})/(\d{1,2})/(\d{2}|\d{4})(?![\d/])")


def _slash_mentions(text: str) -> list[DateMention]:
    found = []
    for m in _SLASH_DATE.finditer(text):
        start, first, second, year = ((m.start(), m[3], m[4], _full_year(m[5])) if m[3]
                                      else (m.start(1), m[1], m[2], None))
        if year is None and re.match(r"\s*(spent|done|complete|full|of)\b", text[m.end():]):
            continue
        a, b = int(first), int(second)
        month, day = (a, b) if a <= 12 else (b, a)  # US order unless the first is a day
        if 1 <= month <= 12 and 1 <= day <= 31:
            found.append(DateMention(start, m.end(), f"{month:02d}-{day:02d}",
                                     _absolute(year, month, day)))
    return found


def _absolute_mentions(text: str, original: str) -> list[DateMention]:
    found: list[DateMention] = []
    for m in re.finditer(r"\b(\d{4})-(\d{1,2})-(\d{1,2})\b", text):
        found.append(DateMention(m.start(), m.end(), f"{int(m[2]):02d}-{int(m[3]):02d}",
                                 _absolute(m[1], int(m[2]), int(m[3]))))
    for m in re.finditer(rf"\b({_MONTH_RE})\.?\s+(\d{{1,2}})\b(?!:)"
                         rf"(?:\s*[-\u2013]\s*(\d{{1,2}})\b)?(?:,?\s+(\d{{4}}))?", text):
        # a range 'Mar 3-5' ends on its last day
        month, day = _MONTHS[m[1]], int(m[3] or m[2])
        found.append(DateMention(m.start(), m.end(), f"{month:02d}-{day:02d}",
                                 _absolute(m[4], month, day)))
    for m in re.finditer(rf"\b(\d{{1,2}})\s+(?:of\s+)?({_MONTH_RE})\b\.?(?:,?\s+(\d{{4}}))?",
                         text):
        month, day = _MONTHS[m[2]], int(m[1])
        found.append(DateMention(m.start(), m.end(), f"{month:02d}-{day:02d}",
                                 _absolute(m[3], month, day)))
    found += _slash_mentions(text)
    found += _month_mentions(text, original)
    for m in re.finditer(r"\b(?:by|in|until|till|before|during|end of)\s+(20\d\d)\b", text):
        found.append(DateMention(m.start(1), m.end(), m[1],
                                 lambda today, y=int(m[1]): date(y, 12, 31)))
    return found


def _month_mentions(text: str, original: str) -> list[DateMention]:
    found = []
    for m in re.finditer(rf"\b({_MONTH_RE})\s+(\d{{4}})\b", text):
        found.append(DateMention(m.start(), m.end(), f"{_MONTHS[m[1]]:02d}",
                                 _month_of(m[2], _MONTHS[m[1]])))
    pattern = (rf"\b(?:in|by|until|till|before|after|during|through|for|to|from|since|"
               rf"around|this|next|last|end of|early|mid|late)"
               rf"[\s-]+(?:the\s+end\s+of\s+)?({_FULL_MONTH_RE})\b")
    # 'may' is usually the modal verb: it is a month only when written 'May' mid-sentence
    may_is_month = bool(re.search(r"(?<![.!?]\s)(?<=\s)May\b", original))
    for m in re.finditer(pattern, text):
        if m[1] == "may" and not may_is_month:
            continue
        found.append(DateMention(m.start(1), m.end(), f"{_MONTHS[m[1]]:02d}",
                                 _month_of(None, _MONTHS[m[1]])))
    for m in re.finditer(r"\b(?:until|till|by|before) the (\d{1,2})\b(?! ?[a-z])", text):
        # 'until the 12th': the next 12th of a month
        found.append(DateMention(m.start(), m.end(), f"day-{m[1]}",
                                 lambda today, d=int(m[1]): _next_day_of_month(today, d)))
    for m in re.finditer(r"\bq([1-4])(?:\s+(\d{4}))?\b", text):
        quarter_end = int(m[1]) * 3
        found.append(DateMention(m.start(), m.end(), f"q{m[1]}",
                                 _month_of(m[2], quarter_end)))
    return found


def _week_end(today: date, weeks_ahead: int = 0) -> date:
    return today + timedelta(days=6 - today.weekday() + 7 * weeks_ahead)


def _quarter_end(today: date, ahead: int = 0) -> date:
    index = (today.month - 1) // 3 + ahead
    year, quarter = today.year + index // 4, index % 4
    return _month_end(year, quarter * 3 + 3)


def _add_months(today: date, months: int) -> date:
    year, month = divmod(today.month - 1 + months, 12)
    year += today.year
    return date(year, month + 1, min(today.day, calendar.monthrange(year, month + 1)[1]))


def _month_end_after(today: date, months: int) -> date:
    shifted = _add_months(today.replace(day=1), months)
    return _month_end(shifted.year, shifted.month)


def _after(amount: int, unit: str) -> Callable[[date], date]:
    unit = unit.rstrip("s")
    if unit == "month":
        return lambda today: _add_months(today, amount)
    if unit == "hour":
        return lambda today: today + timedelta(days=amount // 24)
    days = {"day": 1, "week": 7, "year": 365}[unit] * amount
    return lambda today: today + timedelta(days=days)


def _weekday(name: str, next_week: bool) -> Callable[[date], date]:
    index = _WEEKDAYS.index(name)
    if next_week:
        # 'next Friday' is read as the Friday of next calendar week (Monday-Sunday).
        return lambda today: today + timedelta(days=7 - today.weekday() + index)
    # A bare weekday is the next one after today: said on a Monday, "until Monday" means
    # a week later (the same day would have been called "today").
    return lambda today: today + timedelta(days=(index - today.weekday() - 1) % 7 + 1)


# Relative expressions, most specific first; each maps a match to a resolver.
_RELATIVE: tuple[tuple[str, Callable[[re.Match], Callable[[date], date]]], ...] = (
    (r"\bday after tomorrow\b", lambda m: lambda t: t + timedelta(days=2)),
    (r"\btomorrow\b", lambda m: lambda t: t + timedelta(days=1)),
    (r"\b(today|tonight|this (morning|afternoon|evening|session|conversation)|later today|"
     r"eod|end of (the )?day)\b", lambda m: lambda t: t),
    (r"\bend of next week\b|\bnext weekend\b", lambda m: lambda t: _week_end(t, 1)),
    (r"\bnext week\b", lambda m: lambda t: _week_end(t, 1)),
    (r"\b(this week|end of (the )?week|eow|this weekend|by the weekend|over the weekend)\b",
     lambda m: lambda t: _week_end(t)),
    (r"\bend of next month\b|\bnext month\b", lambda m: lambda t: _month_end_after(t, 1)),
    (r"\b(this month|end of (the )?month|eom)\b", lambda m: lambda t: _month_end(t.year, t.month)),
    (r"\bnext quarter\b", lambda m: lambda t: _quarter_end(t, 1)),
    (r"\b(this quarter|end of (the )?quarter|eoq)\b", lambda m: lambda t: _quarter_end(t)),
    (r"\bnext year\b", lambda m: lambda t: date(t.year + 1, 12, 31)),
    (r"\b(this year|end of (the )?year|eoy)\b", lambda m: lambda t: date(t.year, 12, 31)),
    # A sprint is taken as two weeks, the most common length.
    (r"\bnext sprint\b", lambda m: lambda t: t + timedelta(days=28)),
    (r"\b(this|current|the) sprint\b|\bend of (the )?sprint\b",
     lambda m: lambda t: t + timedelta(days=14)),
    (rf"\b(?:in|within|for the next|next)\s+{_AMOUNT_RE}\s+(hour|day|week|month|year)s?\b",
     lambda m: _after(_NUMBER_WORDS.get(m[1]) or int(m[1]), m[2])),
    (rf"\b{_AMOUNT_RE}\s+(day|week|month|year)s?\s+from now\b",
     lambda m: _after(_NUMBER_WORDS.get(m[1]) or int(m[1]), m[2])),
    (rf"\bnext ({_WEEKDAY_RE})\b", lambda m: _weekday(m[1], True)),
    (rf"\b({_WEEKDAY_RE})\b", lambda m: _weekday(m[1], False)),
)
# 'for two weeks' is an end only when the sentence is not about the past
# ("I've used Python for 5 years" has no end date).
_FOR_SPAN = re.compile(rf"\bfor\s+{_AMOUNT_RE}\s+(day|week|month)s?\b")
_PAST_MARKERS = re.compile(r"\b(have|has|had|been|was|were|ago|past|last|over the)\b")


def _relative_mentions(text: str) -> list[DateMention]:
    found = []
    for pattern, build in _RELATIVE:
        for m in re.finditer(pattern, text):
            found.append(DateMention(m.start(), m.end(), m[0], build(m), False))
    if not _PAST_MARKERS.search(text):
        for m in _FOR_SPAN.finditer(text):
            amount = _NUMBER_WORDS.get(m[1]) or int(m[1])
            found.append(DateMention(m.start(), m.end(), m[0], _after(amount, m[2]), False))
    return found


@lru_cache(maxsize=2048)
def _date_mentions(original: str) -> tuple[DateMention, ...]:
    text = _normalise(original)
    chosen: list[DateMention] = []
    # Absolute dates win over relative words they overlap ('Friday March 3' is one date).
    for mention in _absolute_mentions(text, original) + _relative_mentions(text):
        if any(mention.start < c.end and c.start < mention.end for c in chosen):
            continue
        if _START_BEFORE.search(text[max(0, mention.start - 25):mention.start]):
            mention = mention._replace(is_start=True)  # 'since March 3' ends nothing
        chosen.append(mention)
    return tuple(sorted(chosen, key=lambda m: m.start))


def read_dates(text: str, today: date) -> list[date]:
    """Every end date mentioned in `text` (not start dates), resolved against `today`."""
    resolved = (m.resolve(today) for m in _date_mentions(text) if not m.is_start)
    return [d for d in resolved if d is not None]


# --------------------------------------------------------------------------- reading

# Negative words that affirm: "not going back" seals a switch, "no doubt" is a yes.
_NOT_NEGATION = re.compile(r"\b(?:not|never|no) (?:going |gonna |looking |looked |look |"
                           r"went |turning )?back\b|\bno (?:doubt|regrets|question|problem|"
                           r"worries|going back)\b|\bnot (?:bad|only)\b|\bnever looked back\b|"
                           r"\bcan not (?:wait|recommend \w+ enough)\b")
_NEGATION = re.compile(r"\b(not|no|never|without|stopped|quit|dislike\w*|hate\w*|avoid\w*|"
                       r"nobody|nothing|neither|nor|out of|away from)\b")
_STRONG_CHANGE = re.compile(
    r"\b(switch(ed|ing)?|migrat(ed|ing|e)|moved|moving|replac(ed|ing|e)|instead|no longer|"
    r"anymore|stopped|quit|ditched|dropped|abandoned|gave up|changed|swapped|rather than|"
    r"pushed|postponed|delayed|rescheduled|bumped|brought forward|cancel+ed|went back to|"
    r"converted|transitioned|upgraded|downgraded|is now|are now|now (uses?|prefers?|on)|"
    r"slipped|slid|rewr(o|i)te|rewritten|increased|decreased|raised|lowered|reduced|"
    r"extended|left(?![- ](side|hand|panel|column|sidebar|corner|over|click))|resigned|"
    r"(not|never|nobody|no one) miss(es|ed)?)\b")
_WEAK_CHANGE = re.compile(r"(?<!for )\bnow\b|\bthese days\b|\bnowadays\b|\bstarted using\b|"
                          r"\bpicked up\b|\bactually\b")
_ADDITIVE = re.compile(r"\b(also|as well|too|in addition|additionally|another|besides|both|"
                       r"along with|on top of|alongside)\b")
_PROGRESSION = re.compile(r"\b(added|adding|finished|finishing|implemented|implementing|"
                          r"completed|next step|built|wrote|set up|integrated|refactored|"
                          r"improved|done with|merged|shipped|deployed)\b")
# What comes after these words is the thing being left behind ("stopped using poetry").
_OLD_SIDE = re.compile(r"\b(?:from|instead of|rather than|no longer(?: use| using| uses| on)?|"
                       r"stopped(?: using| with)?|replaced|ditched|dropped|quit|abandoned|"
                       r"gave up(?: on)?|not using|away from|left|resigned from|"
                       r"(?:not|never|nobody|no one) miss(?:es|ed)?)\s+([\w.+#\- ]+)")
# What comes after these words is the new value ("moved to Berlin").
_NEW_SIDE = re.compile(r"\b(?:to|with|onto|into|now)\s+([\w.+#\- ]+)")
_SIDE_BREAK = frozenset("to with for and but because since as in on at now it is are "
                        "which that so then".split())


class Reading(NamedTuple):
    """What the judges need to know about one piece of text."""
    text: str                              # normalised text
    concepts: frozenset[str]               # tokens()
    topic: frozenset[str]                  # concepts minus stance, cues and values
    members: frozenset[tuple[str, str]]    # (category, member) from the lexicon
    slots: frozenset[str]                  # categories named by a slot word ('editor')
    values: frozenset[str]                 # dates, weekdays, numbers, versions
    negative: bool                         # says something is not / no longer so
    strong_change: bool
    weak_change: bool
    additive: bool
    progression: bool


def _side_words(pattern: re.Pattern, text: str) -> frozenset[str]:
    words: set[str] = set()
    for m in pattern.finditer(text):
        for word in _WORD_RE.findall(m[1])[:4]:
            if word in _SIDE_BREAK:
                break
            if word not in STOPWORDS:
                words.add(_canon(word))
    return frozenset(words - _GENERIC)


def _values(text: str, original: str) -> frozenset[str]:
    mentions = _date_mentions(original)
    values = {m.label for m in mentions}
    covered = [(m.start, m.end) for m in mentions]
    for m in re.finditer(r"\bv?\d+(?:\.\d+)*(?:%|k|am|pm)?\b", text):
        if not any(s <= m.start() < e for s, e in covered):
            values.add(m[0])
    values.update(m[1] for m in re.finditer(rf"\b({_WEEKDAY_RE})s\b", text))  # 'on Tuesdays'
    return frozenset(values)


@lru_cache(maxsize=4096)
def read(text: str) -> Reading:
    """Read `text` once; every judge works from this."""
    norm = _normalise(text)
    concepts = frozenset(_tokens(text))
    members = frozenset((cat, w) for w in concepts for cat in _MEMBER_OF.get(w, ()))
    slots = frozenset(cat for w in concepts for cat in _SLOT_OF.get(w, ()))
    topic = frozenset(w for w in concepts
                      if w not in _STANCE and w not in _CUE_WORDS and not _is_value(w))
    return Reading(norm, concepts, topic, members, slots, _values(norm, text),
                   bool(_NEGATION.search(_NOT_NEGATION.sub(" ", norm))),
                   bool(_STRONG_CHANGE.search(norm)),
                   bool(_WEAK_CHANGE.search(norm)), bool(_ADDITIVE.search(norm)),
                   bool(_PROGRESSION.search(norm)))


def _jaccard(a: frozenset[str] | set[str], b: frozenset[str] | set[str]) -> float:
    return len(a & b) / len(a | b) if a or b else 0.0


def _members_by_category(reading: Reading) -> dict[str, set[str]]:
    grouped: dict[str, set[str]] = {}
    for category, member in reading.members:
        grouped.setdefault(category, set()).add(member)
    return grouped


def _conflict(a: Reading, b: Reading) -> bool:
    """Do two texts disagree on polarity, on a slot's member, or on a value?"""
    if a.negative != b.negative:
        return True
    ma, mb = _members_by_category(a), _members_by_category(b)
    # "pytest over unittest" and "pytest" agree; "pytest" and "unittest" do not
    if any(ma[c] - mb[c] and mb[c] - ma[c] for c in ma.keys() & mb.keys()):
        return True
    return bool(a.values and b.values and a.values != b.values)


def _gist(reading: Reading) -> frozenset[str]:
    """Topic words plus values: what a memory says, without how strongly it says it.

    A slot word next to one of its members adds nothing ("Postgres database" says no more
    than "Postgres"), so it is dropped."""
    held = {category for category, _ in reading.members}
    words = reading.topic | {v for v in reading.concepts if _is_value(v)}
    return frozenset(w for w in words if not _SLOT_OF.get(w, set()) & held)


# After these words a text elaborates or names what it is preferred over: "readable code
# over clever one-liners", "clear code with descriptive names". Those words say less
# about what the memory is than the words before them.
_TAIL = re.compile(r"\b(?:over|rather than|instead of|more than|than|with|such as|including|"
                   r"especially|particularly|except|e\.g\.?|like)\b")
_TAIL_WEIGHT = 0.5


def _weights(reading: Reading) -> dict[str, float]:
    """The gist of a text, each word weighted 1 in the main part and less in a tail."""
    gist = _gist(reading)
    m = _TAIL.search(reading.text)
    if not m or not set(_tokens(reading.text[:m.start()])) & gist:
        return dict.fromkeys(gist, 1.0)
    main = set(_tokens(reading.text[:m.start()]))
    # a named tool is the substance of a memory wherever it stands ("manages deps with uv")
    return {w: 1.0 if w in main or w in _MEMBER_OF or _is_value(w) else _TAIL_WEIGHT
            for w in gist}


def similarity(a: str, b: str) -> float:
    """How far two texts say the same thing, 0..1 (0 when they conflict).

    A weighted Jaccard overlap of their gists: words of a trailing elaboration or contrast
    ("... over clever one-liners", "... with descriptive names") weigh half."""
    ra, rb = read(a), read(b)
    if _conflict(ra, rb):
        return 0.0
    wa, wb = _weights(ra), _weights(rb)
    words = wa.keys() | wb.keys()
    if not words:
        return 0.0
    shared = sum(min(wa.get(w, 0.0), wb.get(w, 0.0)) for w in words)
    return shared / sum(max(wa.get(w, 0.0), wb.get(w, 0.0)) for w in words)


def _sentences(text: str) -> list[str]:
    parts = re.split(r"(?<=[.!?;])\s+|\n+", (text or "").strip())
    return [p.strip() for p in parts if p.strip()]


def _summary(content: str, limit: int = 120) -> str:
    """The first `limit` characters, cut at a word boundary."""
    content = " ".join(content.split())
    if len(content) <= limit:
        return content
    cut = content[: limit - 3].rsplit(" ", 1)[0].rstrip(",;:")
    return cut + "..."


def _as_sentence(text: str) -> str:
    text = text.strip()
    text = text[:1].upper() + text[1:]
    return text if text.endswith((".", "!", "?")) else text + "."


# --------------------------------------------------------------------------- confidence

# Cue words per rung of the article's scale, weakest first; the weakest cue present wins.
_CONFIDENCE_RUNGS = (
    (0.1, re.compile(r"\b(maybe|perhaps|possibly|wonder(ing)?|someday|some day|who knows|"
                     r"no idea|just an idea|hypothetically|daydream\w*)\b")),
    (0.3, re.compile(r"\b(considering|consider|thinking (about|of)|might|could(?!\s+not)|"
                     r"tempted|curious|toying with|on the fence|not sure|unsure|undecided|"
                     r"would like to try|may (be|not|need|want|have|switch|move|try|use|go|"
                     r"change))\b|\b(i|we|you|it|they|he|she|this|that|user) may\b")),
    (0.5, re.compile(r"\b(probably|likely|seems?|seemed|appears? to|apparently|i guess|i suspect|"
                     r"i suppose|presumably|sounds like|looks like|i assume|assuming|"
                     r"supposedly|i gather)\b")),
    (0.7, re.compile(r"\b(i think|i believe|pretty sure|fairly sure|kind of|sort of|"
                     r"i would say|i feel like|if i remember)\b")),
)
_SCALE = (0.1, 0.3, 0.5, 0.7, 1.0)


def confidence(content: str) -> float:
    """How sure the memory is, on the article's scale (1.0, 0.7, 0.5, 0.3, 0.1).

    A plain statement ("I use poetry", "We decided on SQLite", "Always use tabs") is
    explicit: 1.0. Hedges lower it: the weakest hedge present sets the rung, and two or
    more hedges together drop one more rung ("I think we probably..." -> 0.3). A bare
    question is at most a weak inference (0.3)."""
    content = content or ""
    text = _normalise(content)
    score, hedges = 1.0, 0
    for rung, pattern in _CONFIDENCE_RUNGS:
        found = pattern.findall(text)
        if found:
            score = min(score, rung)
            hedges += len(found)
    if hedges >= 2 and score > _SCALE[0]:
        score = _SCALE[_SCALE.index(score) - 1]
    if content.strip().endswith("?"):
        score = min(score, 0.3)
    return score


# --------------------------------------------------------------------------- contradiction

def contradiction(new: str, candidates: list[tuple[int, str]]) -> dict:
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
    ("doesn't like Java") is never the one that replaces. Confirm = the same content words (after stemming and
    synonyms) with no conflict in polarity, lexicon member, date or amount."""
    fresh = read(new or "")
    supersedes, confirms = [], []
    for number, text in candidates:
        old = read(text or "")
        if _replaces(fresh, old):
            supersedes.append(number)
        elif _restates(fresh, old):
            confirms.append(number)
    return {"supersedes": supersedes, "confirms": confirms}


def _replaces(n: Reading, o: Reading) -> bool:
    if not n.topic or not o.topic:
        return False
    if n.strong_change and not o.negative and _side_words(_OLD_SIDE, n.text) & o.topic:
        return True  # the new text names what it left behind, and the old one held it
    if n.additive:
        return False
    return any(test(n, o) for test in (_member_swap, _value_change, _polarity_flip,
                                        _slot_change, _relocation, _resolution, _opposite))


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
        return _members_by_category(r)
    grouped: dict[str, set[str]] = {}
    for clause in re.split(r"[,;]|\b(?:and|but)\b", r.text):
        if _NEGATION.search(_NOT_NEGATION.sub(" ", clause)):
            continue
        for word in _tokens(clause):
            for category in _MEMBER_OF.get(word, ()):
                grouped.setdefault(category, set()).add(word)
    return grouped


def _contexts(n: Reading, o: Reading, category: str) -> tuple[set[str], set[str]]:
    """What each text says around the slot, without members, slot names and values."""
    noise = ({m for _, m in n.members | o.members} | _GENERIC
             | {w for w, cats in _SLOT_OF.items() if category in cats})
    mine = (n.concepts - _CUE_WORDS) - noise - {w for w in n.concepts if _is_value(w)}
    theirs = (o.concepts - _CUE_WORDS) - noise - {w for w in o.concepts if _is_value(w)}
    return mine, theirs


def _compatible_use(n: Reading, o: Reading, category: str) -> bool:
    """After a change cue the new member may come bare ("migrated to MySQL"): it replaces
    an old member used in the same place, or one whose use is barely described, but not
    "the study tracker has a SQLite cache"."""
    mine, theirs = (c - _STANCE for c in _contexts(n, o, category))
    if mine & theirs:
        return True
    # a clause joined by 'and'/'but'/'because' is a comment on the change ("... and I'm
    # not going back", "... because the plugins are better"), not where the member is used
    held = {m for c, m in n.members if c == category}
    clauses = re.split(r"[;]|\b(?:and|but|because|since|so|as)\b", n.text)
    using = [c for c in clauses if held & set(_tokens(c))]
    if using and len(using) < len(clauses):
        mine = _contexts(read(" ".join(using)), o, category)[0] - _STANCE
    if mine and theirs:
        return False
    return len(mine | theirs) <= 2


def _same_context(n: Reading, o: Reading, category: str) -> bool:
    """Without a change cue, a swap counts only when both texts speak of the same use."""
    mine, theirs = _contexts(n, o, category)
    if _CATEGORIES[category][0]:
        # one editor at a time: same stance, or neither says anything else
        return bool(mine & theirs) or not (mine - _STANCE or theirs - _STANCE)
    mine, theirs = mine - _STANCE, theirs - _STANCE
    return bool(mine & theirs) and _jaccard(mine, theirs) >= 0.5


def _value_change(n: Reading, o: Reading) -> bool:
    """Same subject, different date or amount ("release on May 3" -> "release May 10")."""
    if not n.values or not o.values or not (n.values - o.values):
        return False
    shared = (n.topic & o.topic) - _GENERIC
    if n.strong_change:
        return bool(shared)
    if n.progression or not (o.values - n.values):
        return False
    return bool(shared) and _jaccard(n.topic, o.topic) >= 0.5


def _polarity_flip(n: Reading, o: Reading) -> bool:
    """"Drinks coffee" -> "doesn't drink coffee anymore"; "never X" -> "always X"."""
    if n.negative == o.negative or n.progression:
        return False
    return bool((n.topic & o.topic) - _GENERIC) and _jaccard(n.topic, o.topic) >= 0.5


def _slot_change(n: Reading, o: Reading) -> bool:
    """A change cue over a shared subject, with something different on each side.

    Words after 'to'/'with' are the new value: an old memory that already mentions them
    agrees with the change ("moved to Berlin" does not supersede "works in Berlin"). When
    the cue names what changed ("moved the cluster", "the cluster was moved"), that head
    word must be in the old memory: "replaced the date picker in the frontend" leaves
    "the frontend uses React" alone."""
    if not n.strong_change or (n.values and not o.values):
        return False  # a new time for something the old memory gave no time for
    # only the clause holding the cue counts: "..., CI does it" is a reason, not a change
    clause = read(" ".join(c for c in re.split(r"[,;:]|\b(?:and|but|because|since|so)\b",
                                               n.text) if _STRONG_CHANGE.search(c)))
    shared = (clause.topic & o.topic) - _GENERIC - _side_words(_NEW_SIDE, n.text)
    if not shared or not (o.topic - clause.topic) or not (clause.topic - o.topic):
        return False
    heads = _changed_heads(n.text)
    if heads:
        return bool(heads & o.topic)
    return len(shared) / len(o.topic - _GENERIC) >= 0.5


_CHANGE_VERB = (r"(?:switched|migrated|moved|replaced|changed|swapped|converted|rewrote|"
                r"rewritten|upgraded|downgraded|pushed|postponed|delayed|rescheduled|"
                r"cancell?ed|dropped|ditched|abandoned|increased|decreased|raised|lowered|"
                r"reduced|extended)")
_ACTIVE_OBJECT = re.compile(_CHANGE_VERB + r"\s+(?:(?:the|a|an|our|my|their|its|this|"
                            r"that|all|some)\s+)*((?:[\w.+#-]+\s*)+)")
_PASSIVE_SUBJECT = re.compile(r"([\w.+#-]+)\s+(?:was|were|is|are|got|has been|have been|"
                              r"had been)\s+" + _CHANGE_VERB)
_OBJECT_BREAK = _SIDE_BREAK | frozenset("from into onto over by after before".split())


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
            heads.add(_canon(phrase[-1]))
    heads.update(_canon(m[1]) for m in _PASSIVE_SUBJECT.finditer(text))
    return frozenset(heads - STOPWORDS - _GENERIC)


_RELOCATION = re.compile(r"\b(?:i|we|user|they|he|she)(?: have| has| just| recently| finally)*"
                         r" (?:moved|relocated) to ([a-z][\w-]*)")


def _relocation(n: Reading, o: Reading) -> bool:
    """"I moved to Lisbon" replaces where the user lives, unless that already says Lisbon."""
    m = _RELOCATION.search(n.text)
    if not m or m[1] in STOPWORDS or _canon(m[1]) in _MEMBER_OF:
        return False
    return _canon("live") in o.topic and _canon(m[1]) not in o.topic


_WAITING = re.compile(r"\b(blocked|waiting|awaiting|on hold|pending|stuck)\b")
_RESOLVED = re.compile(r"\b(passed|approved|resolved|unblocked|done|finished|completed|"
                       r"closed|merged|landed|arrived|heard back|got back|received|signed|"
                       r"cleared|fixed|granted|accepted|rejected|denied|cancel+ed)\b")


def _resolution(n: Reading, o: Reading) -> bool:
    """"Blocked on the security review" ends when "the security review passed"."""
    if not _WAITING.search(o.text) or _WAITING.search(n.text) or not _RESOLVED.search(n.text):
        return False
    return bool((n.topic & o.topic) - _GENERIC)


# Opposite ends of one scale: a preference for one replaces a preference for the other.
_OPPOSITES = tuple((_canon(a), _canon(b)) for a, b in (
    ("short", "long"), ("short", "detailed"), ("short", "verbose"), ("short", "lengthy"),
    ("formal", "casual"), ("formal", "informal"), ("early", "late"), ("remote", "onsite"),
    ("remote", "office"), ("public", "private"), ("sync", "async"), ("simple", "complex"),
    ("strict", "lenient"), ("minimal", "verbose"),
))


def _opposite(n: Reading, o: Reading) -> bool:
    """"Prefers short answers" -> "likes long detailed answers": same subject, other end."""
    if n.negative != o.negative or n.progression:
        return False
    flipped = any((a in n.topic and b in o.topic and b not in n.topic)
                  or (b in n.topic and a in o.topic and a not in n.topic)
                  for a, b in _OPPOSITES)
    return flipped and bool((n.topic & o.topic) - _GENERIC)


def _restates(n: Reading, o: Reading) -> bool:
    # a change can restate an older change ("moved to MySQL" / "migrated to MySQL")
    if (n.strong_change and not o.strong_change) or n.progression or _conflict(n, o):
        return False
    return _jaccard(_gist(n), _gist(o)) >= 0.6


# --------------------------------------------------------------------------- expiry

_NO_END = re.compile(r"\b(birthday|anniversary|born|date of birth)\b")
_RECURRING = re.compile(rf"\b(every|each|weekly|daily|nightly|monthly|yearly|annually|"
                        rf"biweekly|fortnightly|hourly|(?:{_WEEKDAY_RE})s)\b")
# Dateless states that still end. Horizons (days from today) are our choice, documented:
_HORIZONS = (
    # tied to a release or a migration: about a quarter
    (re.compile(r"\buntil (v\d|version|the next (release|version|major)|we (migrate|upgrade|"
                r"ship|release|launch|move|switch|finish)|the (migration|refactor|rewrite|"
                r"launch|release|upgrade)\b)"), 90),
    # waiting on someone or blocked: usually resolved, one way or another, in two weeks
    (re.compile(r"\b(blocked|blocking|wait|waiting|awaiting|on hold|pending|hear back|stuck on|"
                r"held up)\b"), 14),
    # explicitly temporary arrangements: a month
    (re.compile(r"\b(for now|temporar(y|ily)|for the time being|in the meantime|meanwhile|"
                r"interim|stopgap|short[- ]term|until further notice|until)\b"), 30),
    # an upcoming one-time event with no date: two weeks
    (re.compile(r"\b(upcoming|coming up|have an? (job )?(interview|meeting|call|appointment|"
                r"demo|presentation|exam|flight|trip))\b"), 14),
)


def expiry(content: str, today: datetime | date | str) -> str | None:
    """Natural end date of the memory as 'YYYY-MM-DD', or None when it has none.

    Dates named in the text win (the latest future one, so "pushed from March 15 to
    April 1" ends April 1); a date without a year is its next occurrence on/after today;
    start dates ("since", "from", "starting") are ignored. Recurring things ("every
    Monday") and yearly facts (birthdays) have no end. Without a date, temporary states
    get a horizon from today: release-bound ("until v2") 90 days, waiting/blocked 14,
    temporary ("for now") 30, an upcoming undated event 14."""
    if isinstance(today, str):  # an ISO timestamp from a template variable
        today = datetime.fromisoformat(today.strip().replace("Z", "+00:00"))
    day = today.date() if isinstance(today, datetime) else today
    content = content or ""
    text = _normalise(content)
    if _NO_END.search(text):
        return None
    recurring = bool(_RECURRING.search(text))
    ends = [m.resolve(day) for m in _date_mentions(content)
            if not m.is_start and (m.absolute or not recurring)]
    future = [d for d in ends if d is not None and d >= day]
    if future:
        return max(future).isoformat()
    if recurring:
        return None
    for pattern, days in _HORIZONS:
        if pattern.search(text):
            return (day + timedelta(days=days)).isoformat()
    return None


# --------------------------------------------------------------------------- gate

_DAY_RE = _WEEKDAY_RE + "|tomorrow|tonight|today|next week|end of"
# Nouns that make a statement about the user's work: a project, its parts, its people.
_WORK_NOUNS = (r"(apis?|specs?|specification|app|apps|application|services?|servers?|"
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
               r"style guide|linter|formatter|framework|on-?call|rota|rotation|code ?base) ")
_WORK_NOUN = re.compile(rf"\b{_WORK_NOUNS.strip()}\b")
# What such a subject does: a present-tense verb (or a plain 'is').
_WORK_VERBS = (r"(is|are|was|were|has|have|had|will|can|must|should|needs?|runs?|uses?|"
               r"takes?|lives?|depends?|pass|passes|fails?|covers?|calls?|goes|gets?|costs?|"
               r"requires?|supports?|handles?|belongs?|meets?|owns?|stores?|sends?|returns?|"
               r"expects?|reads?|writes?|talks?|hits?|starts?|ends?|happens?|includes?|"
               r"contains?|lacks?|relies|rely|sits?|lives|points?|targets?|builds?|deploys?|"
               r"ships?|serves?|syncs?|reports?|works?|belongs)")
# (kind, importance, cue). Importance follows the article: explicit instructions,
# decisions and deadlines matter most; curiosities least.
_GATE_SIGNALS = tuple((kind, weight, re.compile(cue)) for kind, weight, cue in (
    ("instruction", 9, r"^(please )?(do not|avoid|stop) (use|using|add|adding|write|writing|"
                       r"include|including|put|make|call|mention|ask|send|suggest|recommend)\b|"
                       r"\b(always|never|from now on|do not ever|make sure (to|you|that)|"
                       r"remember (to|that)|keep in mind|note that|going forward|"
                       r"in (the )?future|by default|whenever)\b"),
    ("decision", 8, r"\b(decided|decide|decision|going with|go with|went with|let us (go with|"
                    r"use)|chose|chosen|settled on|agreed|opted|we will use|picked|picking|"
                    r"ended up|selected)\b"),
    ("deadline", 8, rf"\b(deadline|due|launch(es|ing)? on|release date|ships? (on|by)|"
                    rf"by ({_DAY_RE}))\b"),
    ("migration", 7, r"\b(switched|switching|migrated|migrating|ported|porting|"
                     r"mov(e|ed|ing) (\w+ ){0,3}"
                     r"(from|to|over|away)|"
                     r"replaced|stopped|no longer|anymore|ditched|dropped|upgraded|"
                     r"downgraded|instead of)\b"),
    ("bug", 7, r"\b(bugs?|errors?|exceptions?|traceback|crash\w*|fails?|failing|failed|"
               r"broken|breaks|broke|segfault|regression|not working|leak\w*|timeout|"
               r"timed out|outage)\b"),
    ("plan", 6, r"\b(plan|plans|planning|going to|roadmap|next step|intend|aim to|goal is|"
                r"will (start|build|ship|migrate|launch|release|add|move|switch|write|"
                r"deploy|set up))\b"),
    ("waiting", 6, r"\b(blocked|waiting|on hold|pending|awaiting)\b"),
    ("task", 6, r"\b(remind me|todo|need to|have to|must|do not forget|action item)\b"),
    ("preference", 6, r"\b(prefer\w*|(i|we) (really |do |also )?(like|love|hate|dislike|"
                      r"enjoy|value|care (a lot |deeply |most |more )?(about|for))|"
                      r"favou?rite|would rather|fan of|can not stand|"
                      r"(matters?|counts?) (\w+ ){0,2}(to|for) (me|us)|"
                      r"(is|are) (\w+ )?important (to|for) (me|us)|(i|we) find (\w+ ){1,3}"
                      r"(important|essential|crucial))\b"),
    ("fact", 5, r"\b(i am (a|an|the|from|based|working|using|on|allergic|vegan|vegetarian|"
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
                r"for context|just so you know|for your information|(we|i) have (a|an|\d+|two|"
                r"three|four|five|several) (?!question|quick|idea|doubt|minute|second|"
                r"moment|feeling|thought|suggestion|problem)\w+|"
                r"(i am|we are|i have been|we have been) (currently |now |still )?(working on|"
                r"building|developing|writing|maintaining|learning|studying|migrating|"
                r"porting|rewriting|refactoring|designing|running)|"
                rf"(^|\b(the|our|my) )(\w+ ){{0,3}}?{_WORK_NOUNS}(\w+ )?(now )?{_WORK_VERBS})\b"),
    ("progress", 5, r"\b(i|we)( have| had)?( just| finally| now| already| recently)? "
                    r"(added|built|finished|implemented|completed|shipped|launched|released|"
                    r"deployed|merged|set up|wrote|rewrote|refactored|integrated|created|"
                    r"published|fixed|got \w+ working|hooked up|wired up)\b|"
                    r"^(just |finally )?got (\w+ ){1,4}working|"
                    r"^(just |finally )?(added|built|finished|implemented|completed|shipped|"
                    r"launched|released|merged|set up|rewrote|refactored|integrated|"
                    r"published|wired up|hooked up)\b"),
    ("tool", 5, r"\b(i|we) (\w+ )?(use|used|run|ran|deploy|deployed|host|manage|maintain|"
                r"write|wrote|build|built|develop|code|work in|work with)\b"),
    ("curiosity", 3, r"\b(thinking (about|of)|considering|wondering about|toying with|"
                     r"looking into|curious about|interested in)\s+(\w+\s+)?(trying|"
                     r"switching|learning|using|adopting|moving|migrating|building|getting)|"
                     r"\b(might|maybe) (try|switch|learn|use|move)\b"),
))
_PERSON_ROLE = re.compile(r"[A-Z][a-z]+(?: [A-Z][a-z]+)? (?:(owns|leads|manages|maintains|"
                          r"reports to|works on|is (?:our|my) \w+)|runs|handles|reviews|"
                          r"approves|builds|designs|is the \w+)\b")
# Any other past-tense deed on a piece of the user's work: 'we ported the CLI to Go'.
_DID_WORK = re.compile(rf"\b(i|we)( have| had)?( just| finally| already| recently)? [a-z]+ed "
                       rf"((the|our|my|a|an|some|new) )?(\w+ ){{0,2}}?{_WORK_NOUNS.strip()}\b")
# Kinds found outside the cue table: an imperative rule, and a recurring schedule.
_EXTRA_WEIGHTS = {"directive": 7, "schedule": 5}
_PROGRESS_VERBS = _stems("add added build built finish finished implement implemented "
                         "complete completed ship shipped launch launched release released "
                         "deploy deployed merge merged set wrote rewrote refactor refactored "
                         "integrate integrated create created publish published fix fixed "
                         "hook hooked wire wired working just finally")
_OWNERSHIP = re.compile(r"\b(my|our|mine|ours|i am|we are|i have|we have|i use|we use)\b")
_REQUEST = re.compile(r"^(what|why|how|when|where|who|which|whats|can you|could you|"
                      r"would you|will you|tell me|show me|explain|give me|help me|write me|"
                      r"find me|make me|get me|suggest|recommend|summari[sz]e|convert|"
                      r"(compose|draft|generate|create|make|write|give|show|find|rewrite|fix|"
                      r"describe|check|compute|solve|design|brainstorm|outline|proofread|"
                      r"review|refactor|debug|plan|book|order|buy) (a|an|me|us|this|that|these|"
                      r"those|some|it)\b|"
                      r"translate|calculate|define|list)\b")
_FIRST_PERSON = re.compile(r"\b(i|we|my|our|me|us)\b")
_EVENT = re.compile(r"\b(meeting|call|interview|demo|release|launch|review|appointment|"
                    r"exam|trip|flight|standup|presentation|sprint|deadline|deliver\w*|"
                    r"submit\w*|ship\w*|due|offsite|conference|vacation|leave)\b")
_FIX = re.compile(r"\b(fix|fixed|fixes|solution|solved?|resolved?|the (issue|problem|cause) "
                  r"(is|was)|caused by|workaround|you need to|try|set|enable|disable|pin|"
                  r"upgrade|downgrade|install|add|remove|use|switch)\b")


# Imperatives about how to work. A verb of keeping or choosing ("keep", "use", "avoid")
# states a standing rule whatever follows; a verb of doing ("write", "deploy", "run") does
# so only with a general object or a manner ("write readable code", "deploy from the
# release branch", "run the tests before pushing"), not on one specific thing ("run the
# tests", "write a function that...").
_RULE_VERBS = frozenset("keep use avoid prefer stick default follow favor favour stay be "
                        "treat call address refer spell target limit pin stop".split())
_ACTION_VERBS = frozenset("write deploy run test commit push add put format name document "
                          "comment store log answer reply respond start begin end check lint "
                          "annotate include exclude prefix wrap sort structure indent merge "
                          "rebase squash tag release ship cite ask mention skip split "
                          "organise organize group label".split())
_LEAD_IN = re.compile(r"^(?:please|kindly|also|just|and|so|then|always|only|generally|"
                      r"ideally|for now|from now on|going forward|in general|by default|"
                      r"in (?:the )?future|here|in (?:this|our|my|the) (?:project|repo|"
                      r"repository|codebase|team))\s+")
_SUBORDINATE = re.compile(r"^(?:when|whenever|if|until|till|unless|before|after|once|while|"
                          r"since|because|as|for|during|in case|even)\b")
# After the verb, these point at one thing in this conversation: a one-off request.
_ONE_OFF_OBJECT = frozenset("a an this that these those something some here one another "
                            "it them me us".split())
_DEICTIC = re.compile(r"\b(this|these|those|the following|below|above|attached|"
                      r"(in|on|to|for|from|with|like|of|use) that)\b")
_ORDINAL_REF = re.compile(r"^the (first|second|third|last|previous|other|same|next|"
                          r"former|latter|above|below|following)\b")
_POLICY = re.compile(r"\b(before|after|when|whenever|instead of|rather than|over|unless|"
                     r"every|each|all|any|only|by default|for now|until|from now on|"
                     r"going forward|in (the )?future)\b")
_MANNER = frozenset("from in with using on to before after without as via into over under "
                    "at by for through within between".split())
_KEEP_IDIOM = frozenset("going up on trying coming at working in track calm quiet".split())
_BE_IDIOM = frozenset("right back there honest ready quick patient serious sure".split())
_ADVERB_WORDS = frozenset("always only consistently never also just still strictly "
                          "really".split())


def _directive(norm: str) -> bool:
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
        words = _WORD_RE.findall(clause)
        if len(words) < 2 or (words[0] not in _RULE_VERBS and words[0] not in _ACTION_VERBS):
            continue
        verb, rest = words[0], words[1:]
        while rest and rest[0] in _ADVERB_WORDS:
            rest = rest[1:]
        if not rest or (rest[0] in _ONE_OFF_OBJECT and not (
                (verb in ("call", "address", "refer", "ask") and rest[0] == "me")
                or (verb == "keep" and rest[0] in ("it", "them") and len(rest) > 1
                        and rest[1] not in _KEEP_IDIOM))):
            continue
        if (verb == "keep" and rest[0] in _KEEP_IDIOM) or (verb == "be" and rest[0] in _BE_IDIOM):
            continue  # 'keep going', 'keep it up', 'be right back' are chatter
        if _ORDINAL_REF.match(" ".join(rest)):
            continue  # 'use the first option' picks among answers just given
        content = [w for w in rest if w not in STOPWORDS]
        if not [w for w in content if _canon(w) not in _GENERIC]:
            continue  # 'ask me anything', 'keep everything'
        if verb in _RULE_VERBS:
            return True
        if _POLICY.search(norm):
            return True  # 'run the tests before pushing', 'for now, skip the flaky tests'
        if rest[0] in _MANNER:
            return True  # how or where: 'deploy from the release branch', 'answer in Spanish'
        if re.search(r"\b(a|an)\b", " ".join(rest)):
            continue  # 'write a function that...', 'write code to reverse a string'
        if (any(_canon(w) in _MEMBER_OF for w in content)
                or (len(content) >= 2 and rest[0] not in ("the", "my", "our", "your"))):
            return True  # a general object: 'write readable code', 'use tabs'
    return False


def _is_request(sentence: str, norm: str) -> bool:
    return sentence.rstrip().endswith("?") or bool(_REQUEST.match(norm.strip(" \"'")))


def _signals(sentence: str) -> list[str]:
    """Kinds of durable information in one user sentence (empty: nothing to keep)."""
    norm = _normalise(sentence)
    if _is_small_talk(norm):
        return []  # 'never mind', 'thanks again'
    found = [kind for kind, _, cue in _GATE_SIGNALS if cue.search(norm)]
    role = _PERSON_ROLE.match(sentence.strip())
    if "fact" not in found and role and (
            role[1] or _FIRST_PERSON.search(norm) or _WORK_NOUN.search(norm)):
        found.append("fact")  # someone the user works with, and what they do
    if "instruction" not in found and _directive(norm):
        found.insert(0, "directive")
    if "progress" not in found and _DID_WORK.search(norm) and not _STRONG_CHANGE.search(norm):
        found.append("progress")  # a change ('we moved the standup') is not progress
    if "progress" in found and not (read(sentence).topic - _PROGRESS_VERBS - _GENERIC):
        found.remove("progress")  # 'fixed it!' says nothing about what
    if (_RECURRING.search(norm) and "deadline" not in found
            and (_FIRST_PERSON.search(norm) or _WORK_NOUN.search(norm))):
        found.append("schedule")  # 'the team meets on Mondays', 'I run every morning'
    if _is_request(sentence, norm):
        # A lookup or request keeps only explicit rules, or news about the user's own
        # things ("why does my app crash?"); asking for a fact ("what's my name?") is not
        # telling one.
        if not _OWNERSHIP.search(norm):
            return [k for k in found if k in ("instruction", "directive")]
        found = [k for k in found if k not in ("fact", "tool")]
        if not found:
            return []
    mine = bool(_FIRST_PERSON.search(norm))
    if read(sentence).members and mine and "tool" not in found:
        found.append("tool")  # a named tool in the user's hands
    ends = [m.label for m in _date_mentions(sentence) if not m.is_start]
    # a dated event ("meeting with Ana on Friday"), or the user's own schedule beyond
    # today ("I'll be out next week"; "I'm tired today" is not news worth keeping)
    if "deadline" not in found and ends and (
            _EVENT.search(norm) or mine and set(ends) - {"today", "tonight"}):
        found.append("deadline")
    return found


_VERB_ADVERBS = ("really|usually|always|never|often|also|just|still|now|mostly|sometimes|"
                 "generally|definitely|actually|recently|finally|currently|mainly|only|"
                 "already|strongly|personally|rarely|typically")
_NOT_VERBS = frozenset("and or but the a an to for in on at with as of if so then too".split())
_KEEP_VERB = frozenset("can could will would should must might may shall was had did went "
                       "got made took wrote ran built chose left began bought found told "
                       "thought saw came gave kept lost met paid sent spent stood won broke "
                       "forgot set put cut".split())


def _third(verb: str) -> str:
    irregular = {"am": "is", "have": "has", "do": "does", "go": "goes"}
    if verb in irregular:
        return irregular[verb]
    if verb in _KEEP_VERB or verb in _NOT_VERBS or verb.endswith("ed"):
        return verb
    if verb.endswith(("s", "sh", "ch", "x", "z", "o")):
        return verb + "es"
    if verb.endswith("y") and verb[-2:-1] not in ("a", "e", "i", "o", "u"):
        return verb[:-1] + "ies"
    return verb + "s"


def _third_person(sentence: str) -> str:
    """'I manage deps with poetry' -> 'User manages deps with poetry'. Nouns stay intact."""
    text = sentence.strip().replace("\u2019", "'")
    text = re.sub(r"\b[Ii](?:'m| am)\b", "User is", text)
    text = re.sub(r"\b[Ii]'ve\b", "User has", text)
    text = re.sub(r"\b[Ii] (?:don't|do not)\b", "User does not", text)
    text = re.sub(r"\b[Ii]'ll\b", "User will", text)
    text = re.sub(r"\b[Ii]'d\b", "User would", text)

    def conjugate(m: re.Match) -> str:
        return "User" + m[1] + " " + _third(m[2])
    text = re.sub(rf"\b[Ii]((?:\s+(?:{_VERB_ADVERBS}))*)\s+([a-z]+)\b(?!')", conjugate, text)
    text = re.sub(r"\b[Ii]\b(?![/'.])", "User", text)
    text = re.sub(r"^My\b", "User's", text)
    text = re.sub(r"\b[Mm]y\b", "their", text)
    text = re.sub(r"\bmyself\b", "themselves", text)
    text = re.sub(r"\bme\b", "the user", text)
    return _as_sentence(text)


def _fix_sentence(assistant: str) -> str | None:
    """The assistant's first sentence that says how to fix something."""
    for sentence in _sentences(assistant):
        if _FIX.search(_normalise(sentence)) and not sentence.endswith("?"):
            return _summary(sentence, 200)
    return None


def _tags(kinds: list[str], texts: list[str]) -> list[str]:
    """Kinds first, then lexicon categories and members, then frequent keywords."""
    # an imperative rule is tagged as the instruction it is
    tags = list(dict.fromkeys("instruction" if k == "directive" else k for k in kinds))
    for text in texts:
        for category, member in sorted(read(text).members):
            tags += [category, member]
    tags += _keywords(texts, 3)
    return list(dict.fromkeys(tags))[:8]


def _keywords(texts: list[str], limit: int) -> list[str]:
    """The most frequent topic words, in the first surface form they were written in."""
    counts: dict[str, int] = {}
    surface: dict[str, str] = {}
    for text in texts:
        topic = read(text).topic - _GENERIC
        for word in _WORD_RE.findall(_normalise(text)):
            key = _canon(word)
            if key in topic and word.isalpha() and len(word) > 2 and key not in _MEMBER_OF:
                counts[key] = counts.get(key, 0) + 1
                surface.setdefault(key, word)
    ranked = sorted(counts, key=lambda k: -counts[k])  # stable: first seen wins ties
    return [surface[k] for k in ranked[:limit]]


def gate(user: str, assistant: str) -> dict:
    """Should this user/assistant turn be saved as a memory?

    Saves turns whose user side states something durable: an instruction (always/never,
    or an imperative about how to work: "keep code readable", "deploy from the release
    branch for now"), a decision, a deadline or dated event, a migration, a bug, a plan,
    a wait, a preference (including what "matters" to the user), a fact about the user,
    their project, team or tools, a recurring schedule, a progress report ("I added auth
    to the tracker"), or (at low importance) an idea being considered. Greetings, thanks,
    small talk, one-off lookups and one-off requests ("write a haiku", "run the tests",
    "fix this function") are not saved. `content` is the user's durable sentences in the third person
    (key nouns untouched), plus the assistant's fix when the turn is about a bug."""
    kinds: list[str] = []
    picked: list[str] = []
    for sentence in _sentences(user):
        found = _signals(sentence)
        if found:
            kinds += [k for k in found if k not in kinds]
            picked.append(sentence)
    if not kinds:
        return {"save": False, "content": "", "summary": "", "tags": [], "importance": 1}
    content = " ".join(_third_person(s) for s in picked)
    fix = _fix_sentence(assistant) if "bug" in kinds else None
    if fix:
        content += " Fix: " + _as_sentence(fix)
    return {"save": True, "content": content, "summary": _summary(content),
            "tags": _tags(kinds, [content]), "importance": _importance(kinds, content)}


def _importance(kinds: list[str], content: str) -> int:
    weights = {kind: weight for kind, weight, _ in _GATE_SIGNALS} | _EXTRA_WEIGHTS
    score = max(weights[k] for k in kinds)
    if len(kinds) >= 3:
        score += 1  # several durable facets in one turn
    if confidence(content) <= 0.3:
        score = min(score, 3)  # a maybe is worth keeping, not worth ranking high
    return max(1, min(10, score))


# --------------------------------------------------------------------------- compression

def cluster(candidates: list[tuple[int, str]], threshold: float = 0.5) -> list[list[int]]:
    """Groups (2+ local numbers) of candidates that say the same thing in other words.

    Similarity is the (weighted) Jaccard overlap of normalised content words (stemmed,
    synonyms folded, stance words like 'prefer'/'always' left out; words in a trailing
    elaboration or contrast - "... with descriptive names", "... over clever one-liners" -
    weigh half), forced to 0 when two texts conflict (polarity, lexicon member, date or
    amount). Groups grow by average linkage:
    the closest pair of groups merges while its mean similarity reaches `threshold`."""
    texts = {number: text or "" for number, text in candidates}
    groups = [[number] for number in sorted(texts)]
    sim = {(a, b): similarity(texts[a], texts[b]) for a, b in combinations(sorted(texts), 2)}

    def link(g: list[int], h: list[int]) -> float:
        pairs = [sim[(min(a, b), max(a, b))] for a in g for b in h]
        return sum(pairs) / len(pairs)

    while True:
        best = None
        for i, g in enumerate(groups):
            for j in range(i + 1, len(groups)):
                score = link(g, groups[j])
                if score >= threshold and (best is None or score > best[0]):
                    best = (score, i, j)
        if best is None:
            break
        _, i, j = best
        groups[i] = sorted(groups[i] + groups.pop(j))
    return sorted(g for g in groups if len(g) >= 2)


def merge(contents: list[str]) -> dict:
    """One memory from a cluster: {"content", "summary" (<=120 chars), "tags"}.

    The most informative wording (most distinct content words, then longest) leads; any
    other member that adds a content word the lead lacks is appended, so no distinct fact
    is lost. Exact and near-exact repeats are dropped."""
    unique = list(dict.fromkeys(c.strip() for c in contents if c and c.strip()))
    if not unique:
        return {"content": "", "summary": "", "tags": []}
    ranked = sorted(unique, key=lambda t: (-len(read(t).concepts), -len(t), unique.index(t)))
    parts, covered = [ranked[0]], set(_gist(read(ranked[0])))
    for text in ranked[1:]:
        extra = _gist(read(text)) - covered - _GENERIC
        if extra:
            parts.append(text)
            covered |= _gist(read(text))
    content = " ".join(_as_sentence(p) for p in parts)
    return {"content": content, "summary": _summary(content), "tags": _tags([], unique)}


# --------------------------------------------------------------------------- recall

def select(query: str, candidates: list[tuple[int, str]], top_n: int) -> list[int]:
    """Which recall candidates fit the query, best first, at most `top_n`.

    Each shared content word scores its rarity among the candidates (IDF), and a query
    naming a slot ('which dependency manager', 'what database') also matches candidates
    holding a member of that slot (uv, PostgreSQL). Question words ask for a kind of
    answer: 'where do I live' / 'what city' match a memory of where the user lives or
    moved to; 'when ...' favours on-topic memories holding a date. A broad question about
    the user ('what do you know about me?') returns the top candidates, those about the
    user first, in the given order. Candidates scoring under a quarter of the best are
    dropped; ties keep the given order. [] when nothing is shared."""
    if top_n <= 0 or not candidates:
        return []
    q = read(query or "")
    if _about_the_user(q):
        # "what do you know about me?": everything about the user, in the given order
        mine = [n for n, text in candidates if _FIRST_PERSON.search(_normalise(text or ""))
                or re.search(r"\buser\b", (text or "").lower())]
        return (mine + [n for n, _ in candidates if n not in mine])[:top_n]
    # 'like' in "what's the weather like?" is no preference: stance words count only when
    # the query has nothing else ("what are my preferences?").
    wanted = (q.topic | {w for w in q.concepts if _is_value(w)}) or (q.concepts & _STANCE)
    # query words that name a slot, by slot ('database' -> database; 'uv' -> packaging)
    namers: dict[str, set[str]] = {}
    for word in q.concepts:
        for category in _SLOT_OF.get(word, set()) | _MEMBER_OF.get(word, set()):
            namers.setdefault(category, set()).add(word)
    readings = [(number, read(text or "")) for number, text in candidates]
    total = len(readings)
    # question words that ask for a kind of answer: 'where do I live' wants a place the
    # user lives in or moved to; 'when is the demo' prefers memories holding a date
    asks = {name for name, (asked, _) in _ASKED_SLOTS.items() if asked(q)}
    holders = {name: sum(1 for _, r in readings if _ASKED_SLOTS[name][1](r)) for name in asks}
    scored = []
    for position, (number, r) in enumerate(readings):
        # sorted, so float sums (and hence ties) do not depend on set order
        score = sum(math.log(1 + total / _df(readings, w)) for w in sorted(wanted & r.concepts))
        for category in sorted(namers.keys() & {c for c, _ in r.members}):
            if not namers[category] & r.concepts:  # a word already matched counts once
                score += math.log(1 + total / _df_slot(readings, category))
        for name in sorted(asks):
            words, holds, topical = _SLOT_WORDS[name], _ASKED_SLOTS[name][1], name in _BOOSTS
            if holds(r) and not (wanted & r.concepts & words) and (score > 0 or not topical):
                score += math.log(1 + total / holders[name]) * (0.5 if topical else 1.0)
        if score > 0:
            scored.append((-score, position, number))
    scored.sort()
    if not scored:
        return []
    floor = -scored[0][0] / 4
    return [number for score, _, number in scored if -score >= floor][:top_n]


_PLACE_WORDS = _stems("live city town country hometown address neighbourhood neighborhood "
                      "relocate relocated home")
_TIME_WORDS = _stems("deadline schedule date time day when")
_SLOT_WORDS = {"place": _PLACE_WORDS, "time": _TIME_WORDS}
_BOOSTS = frozenset({"time"})  # a date only helps a memory already on topic
_MOVED_TO = re.compile(r"\b(?:moved|relocated|moving|relocating) (?:back )?to ([a-z][\w-]*)|"
                       r"\b(?:i am|is|are|we are|am) (?:originally )?from [a-z]")


def _asks_place(q: Reading) -> bool:
    return bool(q.concepts & _PLACE_WORDS) or bool(
        re.match(r"where\b", q.text) and re.search(r"\b(i|me|user|we|he|she|they)\b", q.text)
        and not (q.topic - _PLACE_WORDS - _GENERIC))


def _holds_place(r: Reading) -> bool:
    m = _MOVED_TO.search(r.text)
    moved_to_place = bool(m) and (m[1] is None or (m[1] not in STOPWORDS
                                                   and _canon(m[1]) not in _MEMBER_OF))
    return _canon("live") in r.concepts or moved_to_place


def _asks_time(q: Reading) -> bool:
    return bool(re.match(r"(when|what time|what day|which day|what date|how soon|"
                         r"how long until|by when|until when)\b", q.text))


def _holds_time(r: Reading) -> bool:
    return bool(r.values) or bool(r.concepts & _stems("deadline schedule due"))


_ASKED_SLOTS = {"place": (_asks_place, _holds_place), "time": (_asks_time, _holds_time)}
_ABOUT_WORDS = _stems("know knows remember remembers learn learned learnt stored store have "
                      "far lately recently yet already till "
                      "saved save memory memories note notes recall tell told anything "
                      "everything information info profile summary summarise summarize")


def _about_the_user(q: Reading) -> bool:
    """'What do you know about me?', 'tell me about myself': no topic but the user."""
    if not re.search(r"\b(know|remember|learn\w*|stored|saved|recall|notes?|profile|"
                     r"tell me about|summari[sz]e)\b", q.text):
        return False
    return not (q.topic - _ABOUT_WORDS - _GENERIC - _stems("myself yourself user"))


def _df(readings: list[tuple[int, Reading]], word: str) -> int:
    return sum(1 for _, r in readings if word in r.concepts)


def _df_slot(readings: list[tuple[int, Reading]], category: str) -> int:
    return sum(1 for _, r in readings if any(c == category for c, _ in r.members))


# --------------------------------------------------------------------------- scene cells

_KIND_RULES = tuple((kind, re.compile(cue)) for kind, cue in (
    ("decision", r"\b(decided|decide|decision|going with|go with|went with|let us|chose|"
                 r"chosen|settled on|agreed|opted|picked|ended up|switching|migrating|"
                 r"switched|migrated)\b"),
    ("plan", rf"\b(plan|plans|planned|planning|roadmap|milestone|will ship|going to|"
             rf"schedul\w*|next (week|sprint|month|quarter)|by ({_DAY_RE}|the end|"
             rf"{_FULL_MONTH_RE}|q[1-4]|\d))\b"),
    ("risk", r"\b(risks?|risky|(might|could|may|will) (break|drift|fail|leak|corrupt|lose|"
             r"cause)|drift\w*|concerns?|concerned|worr(y|ies|ied)|danger\w*|fragile|flaky|"
             r"vulnerab\w*|bottleneck|caveat|downside|race condition)\b"),
    ("decision", r"\bwe will\b"),
    ("preference", r"\b(prefer\w*|always|never|(i|we|user) (really )?(like|likes|love|loves|"
                   r"hate|hates|dislike|dislikes)|favou?rite|would rather)\b"),
    ("task", r"\b(todo|need to|needs to|must|have to|has to|should|remember to|remind me|"
             r"do not forget|action item|fixme)\b"),
))
_KIND_SALIENCE = {"decision": 0.8, "risk": 0.75, "plan": 0.7, "preference": 0.7,
                  "task": 0.6, "fact": 0.5}
_EMPHASIS = re.compile(r"\b(always|never|must|critical|important|urgent|asap|deadline|"
                       r"blocker|security)\b")
_SMALL_TALK = re.compile(
    r"\b(hi|hello|hey|hiya|yo|good (morning|afternoon|evening|night)|thanks?( you)?|thx|"
    r"cheers|bye|goodbye|see you|ok|okay|cool|great|nice|awesome|perfect|sure|yes|yep|"
    r"nope|no|lol|haha|got it|sounds good|noted|understood|how are you( doing)?|"
    r"(so|very) much|a lot|for (the|your) help|appreciate it|have a (good|nice|great) "
    r"(day|one|weekend)|you are (great|awesome|the best)|there|again|will do|never ?mind|"
    r"no worries|no problem|my bad|all good)\b")
_PROJECT_WORDS = re.compile(r"\b(project|app|application|api|service|repo|repository|"
                            r"codebase|backend|frontend|server|database|schema|pipeline|"
                            r"deploy\w*|production|staging|release|tests?|build|team|"
                            r"memory|memories|cache|index|scene|summar\w+)\b")
_KIND_CUE_WORDS = _stems("decided decide decision plan risk concern worried drift break "
                         "prefer always never todo must should will ship going schedule")
# Verbs that name no topic; raw forms, so the noun 'migration' survives while 'migrate' goes.
_SCENE_SKIP = frozenset("""add adds added adding fix fixes fixed handle handles handled make
run runs ran keep try tries tried want wants support supports switch switched switching
migrate migrated migrating move moved moving replace replaced stop stopped drop dropped
finish finished implement implemented start started change changed break breaks broke
push pushed upgrade upgraded rewrite rewrote hear heard wait waiting waited await awaiting
tell told ask asked think thought know knew see saw look looking talk talked say said need
needs hope expect try trying help helping go going come coming give gave take took bring
send sent receive find found remember forget learn learning feel back""".split())


def _kind(norm: str) -> str:
    for kind, cue in _KIND_RULES:
        if cue.search(norm):
            return kind
    return "fact"


def _is_small_talk(norm: str) -> bool:
    return not _tokens(_SMALL_TALK.sub(" ", norm))


# Topic nouns that name a scene, most specific first (the order breaks ties): a sentence
# about "the memory summaries" is filed under summaries, one about the goal of a memory
# agent under goals. Every wording of the topic lands in the same scene across exchanges.
_THEMES = tuple((scene, _stems(words)) for scene, words in (
    ("goals", "goal goals aim aims objective objectives mission purpose"),
    ("summaries", "summary summaries summarise summarize summarising summarizing digest recap"),
    ("schedule", "deadline deadlines schedule timeline milestone milestones due calendar "
                 "standup meeting meetings"),
    ("release", "release releases version versions launch rollout mvp beta"),
    ("security", "security secret secrets credential credentials password passwords "
                 "vulnerability vulnerabilities encryption"),
    ("auth", "auth authentication login logins oauth sso signup"),
    ("performance", "performance latency slow slowness speed throughput"),
    ("answers", "answer answers reply replies response responses tone"),
    ("code-style", "style readable naming formatting indent"),
    ("testing", "test tests testing coverage"),
    ("deployment", "deploy deploys deployment deployments hosting"),
    ("storage", "database storage persistence"),
    ("search", "search retrieval"),
    ("bugs", "bug bugs crash crashes error errors regression"),
    ("work", "work job employer career"),
    ("memory", "memory memories remember remembers recall scene scenes"),
))
_THEME_RANK = {scene: rank for rank, (scene, _) in enumerate(_THEMES)}
_ORDINALS = frozenset("one two three four five first second third fourth fifth last next "
                      "previous final initial other".split())
_BE_WORDS = frozenset("am is are was were be been being".split())


def _scene(sentence: str) -> str:
    """A short lowercase slug naming the topic, the same for the same topic every time.

    The lexicon slot of a named tool ('storage' for SQLite), else a topic noun from a
    small theme list ('summaries', 'schedule', 'release', 'goals'), else the first topic
    word of the sentence (verbs, ordinals, dates and stance words skipped)."""
    r = read(sentence)
    hits: dict[str, float] = {}
    for category, _ in r.members:
        scene = _SCENE_OF_CATEGORY.get(category, category)
        hits[scene] = hits.get(scene, 0) + 2
    for category in r.slots:
        scene = _SCENE_OF_CATEGORY.get(category, category)
        hits[scene] = hits.get(scene, 0) + 1
    if hits:
        return min(hits, key=lambda c: (-hits[c], c))
    for scene, words in _THEMES:
        found = len(words & r.concepts)
        if found:
            hits[scene] = hits.get(scene, 0) + found
    if hits:
        return min(hits, key=lambda c: (-hits[c], _THEME_RANK[c]))
    norm = _normalise(sentence)
    raw = _WORD_RE.findall(norm)

    def topical(i: int, word: str) -> bool:
        key = _canon(word)
        return (word.isalpha() and len(word) > 2 and word not in STOPWORDS
                and word not in _SCENE_SKIP and word not in _ORDINALS and not _is_value(key)
                and key not in _GENERIC | _STANCE | _KIND_CUE_WORDS
                and not (word.endswith("ed") and len(word) > 4)  # a participle
                and not (word.endswith("ing") and i > 0 and raw[i - 1] in _BE_WORDS))
    # "... about the API spec" names its topic outright
    about = re.search(r"\b(?:about|regarding|concerning|re)\s+(?:(?:the|our|my|a|an|their)\s+)?"
                      r"([a-z][\w-]*)", norm)
    if about and about[1] in raw and topical(raw.index(about[1]), about[1]):
        return about[1]
    for i, word in enumerate(raw):
        if topical(i, word):
            return word
    return "general"


def _cell(sentence: str, from_user: bool) -> dict | None:
    norm = _normalise(sentence)
    if _is_request(sentence, norm) or _is_small_talk(norm):
        return None
    kind = _kind(norm)
    if kind == "fact":
        # a fact needs an owner: the user, their project, or a named tool
        grounded = (_FIRST_PERSON.search(norm) or _PROJECT_WORDS.search(norm)
                    or _WORK_NOUN.search(norm) or _EVENT.search(norm) or read(sentence).members)
        if not from_user or not grounded:
            return None
    if not from_user and kind == "preference":
        return None  # the assistant's tastes are not the user's memory
    salience = _KIND_SALIENCE[kind] + (0.1 if _EMPHASIS.search(norm) else 0.0)
    if kind != "risk" and confidence(sentence) <= 0.3:
        salience -= 0.2  # hedged; risks are hedged by nature, so they keep their weight
    if not from_user:
        salience -= 0.1
    return {"scene": _scene(sentence), "kind": kind,
            "salience": round(max(0.05, min(1.0, salience)), 2), "content": sentence.strip()}


def extract_cells(user: str, assistant: str) -> list[dict]:
    """Seed C: turn one exchange into typed cells, at most one per sentence.

    User sentences give any kind; assistant sentences only decisions, plans, risks and
    tasks (its explanations are not memories). Questions, greetings and ungrounded chatter
    give nothing. kind comes from cue words (decision > plan > risk > 'we will' >
    preference > task > fact); salience from the kind, emphasis and hedging."""
    cells = []
    for text, from_user in ((user, True), (assistant, False)):
        for sentence in _sentences(text):
            cell = _cell(sentence, from_user)
            if cell:
                cells.append(cell)
    return cells


def summarise_scene(cells: list[dict]) -> str:
    """A scene summary under 100 words: the most salient cells first, repeats skipped."""
    ordered = sorted(enumerate(cells), key=lambda p: (-float(p[1].get("salience", 0)), p[0]))
    parts: list[str] = []
    words = 0
    for _, cell in ordered:
        text = str(cell.get("content", "")).strip()
        if not text or any(similarity(text, p) >= 0.8 for p in parts):
            continue
        sentence = _as_sentence(text)
        size = len(sentence.split())
        if words + size > 99:
            if not parts:  # one huge cell: keep its head rather than nothing
                parts.append(" ".join(sentence.split()[:98]) + " ...")
                break
            continue
        parts.append(sentence)
        words += size
    return " ".join(parts)
