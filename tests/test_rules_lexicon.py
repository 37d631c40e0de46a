"""The rules judges' lexicons: shipped as YAML in the package, read strictly, and the slot
families the online write path searches with."""

from __future__ import annotations

import ast
from importlib.resources import files

import pytest

from engine.judges import lexicon as data
from engine.judges import rules
from engine.judges.lexicon import slots

LEXICONS = sorted(p.name for p in files("engine.judges.lexicon").iterdir() if p.name.endswith(".yaml"))


def test_the_lexicons_ship_inside_the_package():
    assert {"words.yaml", "slots.yaml", "dates.yaml"} <= set(LEXICONS)


@pytest.mark.parametrize("name", LEXICONS)
def test_every_lexicon_reads_as_a_mapping(name):
    lexicon = data.lexicon(name.removesuffix(".yaml"))
    assert isinstance(lexicon, dict) and lexicon


def test_a_lexicon_is_read_once():
    assert data.lexicon("words") is data.lexicon("words")


def test_a_key_given_twice_is_refused_with_where():
    with pytest.raises(data.LexiconError, match=r"slots\.yaml:3:3: duplicate key 'pg'"):
        data.parse("aliases:\n  pg: postgresql\n  pg: mysql\n", "slots.yaml")


def test_a_lexicon_must_be_a_mapping():
    with pytest.raises(data.LexiconError, match="words.yaml: a lexicon is a mapping"):
        data.parse("- a\n- b\n", "words.yaml")


def test_word_lists_are_text_so_no_and_on_stay_words():
    assert data.words("no on off yes") == ["no", "on", "off", "yes"]
    with pytest.raises(data.LexiconError, match="plain text"):
        data.words([False, True])  # what YAML makes of the list [no, on]


def test_related_words_names_the_other_members_of_a_slot():
    related = rules.related_words("MySQL")
    assert related[0] == "postgresql" and "mysql" not in related
    assert {"sqlite", "database", "storage", "postgres", "pg"} <= set(related)


def test_related_words_reads_aliases_and_joins_every_slot_of_a_member():
    assert "mysql" in rules.related_words("postgres")
    # bun is both a JavaScript package manager and a runtime
    assert {"npm", "deno", "runtime", "packagemanager"} <= set(rules.related_words("bun"))


def test_related_words_names_the_other_words_of_a_noun_synonym_group():
    # "a new job" must find "works as": the judges fold job into work, so the search must too
    assert {"work", "employed"} <= set(rules.related_words("job"))
    assert "repository" in rules.related_words("repos")
    # stances are no topic: "love" must not pull in every memory saying "likes"
    assert rules.related_words("love") == []


def test_related_words_is_empty_outside_the_lexicon():
    assert rules.related_words("kreuzberg") == []


def test_an_exclusive_slot_holds_one_member_at_a_time():
    assert slots.CATEGORIES["editor"].exclusive
    assert not slots.CATEGORIES["language"].exclusive


def test_slots_needs_nothing_of_the_rules_judges_but_the_loader():
    # the online write path imports slots for related_words; it must not drag in the judges
    tree = ast.parse((files("engine.judges.lexicon") / "slots.py").read_text(encoding="utf-8"))
    ours = {
        (node.level, node.module)
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").startswith("engine"))
    }
    ours |= {
        (0, alias.name)
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
        if alias.name.startswith("engine")
    }
    # `from engine.judges.lexicon import lexicon, words`: the loader, nothing else
    assert ours == {(0, "engine.judges.lexicon")}
