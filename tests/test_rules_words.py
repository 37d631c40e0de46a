"""The rules judges read words of every script, not only a-z: a memory in Chinese or German
is found offline by its own words, as full-text search finds it."""

import pytest

from engine import Memory
from engine.judges import rules
from engine.judges.rules.reading import sentences
from engine.judges.rules.words import WORD_RE


def test_words_of_other_scripts_are_words():
    assert WORD_RE.findall("项目使用 postgresql 数据库") == ["项目使用", "postgresql", "数据库"]
    assert WORD_RE.findall("café müller, straße") == ["café", "müller", "straße"]
    assert WORD_RE.findall("snake_case v1.2.3 on 2026-03-01") == [
        "snake",
        "case",
        "v1",
        "2.3",
        "on",
        "2026-03-01",
    ]


@pytest.mark.parametrize("query, wanted", [("数据库", 0), ("Café Müller", 1), ("Straße", 2)])
def test_offline_recall_finds_a_memory_by_a_word_of_its_own_script(tmp_path, query, wanted):
    texts = [
        "项目使用 PostgreSQL 数据库",
        "Wir treffen uns im Café Müller",
        "Das Büro ist in der Hauptstraße, nicht in der Straße am Markt",
    ]
    with Memory(str(tmp_path / "u.db"), offline=True) as mem:
        ids = [mem.add(t, judged=False) for t in texts]
        got = [m.id for m in mem.recall(query)]
    assert got and got[0] == ids[wanted], (query, got, ids)


@pytest.mark.parametrize(
    "user, kept",
    [
        ("The standup moved to 9 a.m. every Monday.", "9 a.m. every Monday"),
        ("My favourite actor is Michael J. Fox, I watch his films every month.", "Michael J. Fox"),
        ("My dentist is Dr. Flores at Smile Studio on Elm Street.", "Dr. Flores at Smile Studio"),
        ("For tests we use a runner, e.g. pytest, on every push.", "e.g. pytest, on every push"),
    ],
)
def test_a_period_inside_a_sentence_does_not_cut_it(user, kept):
    # a title, a dotted abbreviation or an initial ends no sentence: the gate kept 'The
    # standup moved to 9 a.m.' and 'We order the team uniforms from J.'
    assert kept in rules.gate(user, "Noted.")["content"]


def test_sentences_end_where_they_end():
    assert sentences("I moved to Lyon. I work remotely now!  Fine; thanks.\nBye") == [
        "I moved to Lyon.",
        "I work remotely now!",
        "Fine",
        "thanks.",
        "Bye",
    ]
    assert sentences("Mrs. Dalloway buys the flowers. Done.") == ["Mrs. Dalloway buys the flowers.", "Done."]
    # a period after a letter, a street or an abbreviation before a capital ends a sentence
    for text in (
        "I prefer plan B. It is cheaper.",
        "I live on Main St. The rent is 1500.",
        "Meet me at 5 p.m. Bring snacks.",
        "We moved to Washington D.C. I love it.",
    ):
        assert len(sentences(text)) == 2, text
