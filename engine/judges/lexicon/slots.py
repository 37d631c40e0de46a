"""Slots: families of interchangeable tools and things (databases, package managers,
editors, ...), read from `lexicon/slots.yaml`.

A replacement names another member of the same slot ("migrated to MySQL" replaces "uses
PostgreSQL"), so both the contradiction judge and the online write path's candidate
search ask this module. It depends on nothing but the lexicon loader, so the write path
can use it without the rest of the rules judges.
"""

from __future__ import annotations

from typing import NamedTuple

from engine.judges.lexicon import lexicon, words

__all__ = ["Slot", "CATEGORIES", "ALIASES", "MEMBER_OF", "related_words"]


class Slot(NamedTuple):
    exclusive: bool  # normally holds one member at a time (one editor)
    members: tuple[str, ...]  # the interchangeable names, as tokens
    names: tuple[str, ...]  # words naming the slot itself ('database', 'editor')


def _categories() -> dict[str, Slot]:
    return {
        name: Slot(bool(entry["exclusive"]), tuple(words(entry["members"])), tuple(words(entry["names"])))
        for name, entry in lexicon("slots")["categories"].items()
    }


CATEGORIES: dict[str, Slot] = _categories()
ALIASES: dict[str, str] = dict(lexicon("slots")["aliases"])


def _member_of() -> dict[str, set[str]]:
    members: dict[str, set[str]] = {}
    for category, slot in CATEGORIES.items():
        for name in slot.members:
            members.setdefault(name, set()).add(category)
    return members


MEMBER_OF: dict[str, set[str]] = _member_of()  # member -> the slots it belongs to


def _synonym_groups() -> dict[str, tuple[str, ...]]:
    """Each word of a noun synonym group in `words.yaml` -> its group ('job' -> work,
    employed, job). Groups of stances and qualities ('prefer', 'fast') are left out: a
    word like 'love' would bring in every memory saying 'likes', about anything."""
    data = lexicon("words")
    not_nouns = set(words(data["not_nouns"]))
    groups: dict[str, tuple[str, ...]] = {}
    for canonical, raw in data["synonyms"].items():
        if canonical in not_nouns:
            continue
        group = (canonical, *words(raw))
        for word in group:
            groups[word] = group
    return groups


_SYNONYMS = _synonym_groups()


def _given_up() -> dict[str, tuple[str, ...]]:
    """superseding.yaml's kinds a person gives up: each word naming one ('caffeine',
    'drinking') and each state that ends some ('vegan') -> the members it ends ('coffee',
    'latte', ...): "I gave up caffeine" is news to "drinks two coffees every morning"."""
    data = lexicon("superseding")
    kinds: dict[str, tuple[str, ...]] = {}
    for row in data["given_up"]:
        left, _, right = row.partition(":")
        for name in words(left):
            kinds[name] = tuple(words(right))
    out = dict(kinds)
    for state, ended in data["given_up_as"].items():
        out[state] = tuple(m for kind in words(ended) for m in kinds[kind])
    return out


_GIVEN_UP = _given_up()


def _news_to() -> dict[str, tuple[str, ...]]:
    """superseding.yaml `news_to`: a change word -> the words its old value is said with."""
    out: dict[str, tuple[str, ...]] = {}
    for row in lexicon("superseding")["news_to"]:
        left, _, right = row.partition(":")
        for name in words(left):
            out[name] = tuple(words(right))
    return out


_NEWS_TO = _news_to()


def _kinds() -> dict[str, tuple[str, ...]]:
    """words.yaml `implies`: each thing of a kind -> the kind and the kind's other things
    ('pixel' -> phone, iphone, galaxy, smartphone): "I'm on a Pixel now" is news to "User's
    phone is an iPhone"."""
    out: dict[str, tuple[str, ...]] = {}
    for kind, raw in lexicon("words")["implies"].items():
        things = tuple(words(raw))
        for thing in things:
            out[thing] = (kind, *things)
    return out


_KINDS = _kinds()


def related_words(word: str) -> list[str]:
    """Words a replacement of `word` may use instead: the other members of its lexicon
    categories, the words naming the slot (mysql -> postgresql, sqlite, ..., database),
    the other words of its noun synonym group (job -> work, employed), and what giving it
    up ends (caffeine -> coffee, espresso, ...), and the words an old value of a change is
    said with (relocated -> live, based, ...), and the kind of thing it is with that kind's
    other things (pixel -> phone, iphone, ...). Empty for words outside the lexicon."""
    name = ALIASES.get(word.lower(), word.lower())
    out: list[str] = [w for w in _SYNONYMS.get(name, ()) if w != name]
    out += [w for w in _GIVEN_UP.get(name, ()) if w != name]
    out += [w for w in _NEWS_TO.get(name, ()) if w != name]
    out += [w for w in _KINDS.get(name, ()) if w != name]
    for category in sorted(MEMBER_OF.get(name, ())):
        slot = CATEGORIES[category]
        out += [n for n in slot.members if n != name] + list(slot.names)
    out += [alias for alias, target in ALIASES.items() if target in out]
    return list(dict.fromkeys(out))
