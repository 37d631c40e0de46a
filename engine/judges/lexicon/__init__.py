"""Lexicons: word lists, synonym groups and slot families kept as YAML data files in this
package. The rules judges read most of them; the online write path reads only `slots`
(a replacement names another member of the same slot: MySQL finds PostgreSQL).

Each file is parsed once, on first use, and shared. Word lists are written as plain
whitespace-separated text rather than YAML lists, so words like `no`, `on` and `off`
stay words instead of turning into booleans.
"""

from __future__ import annotations

from functools import cache
from importlib.resources import files

import yaml

# libyaml when it is there: the lexicons are read on every start of a process that judges
_BaseLoader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class LexiconError(ValueError):
    """A lexicon file that cannot be read as intended (a bug in the shipped data)."""


class _StrictLoader(_BaseLoader):  # type: ignore[valid-type,misc]  # chosen at import
    """Safe YAML that refuses a key given twice: the last one would silently win."""

    source = "<lexicon>"

    def construct_mapping(self, node, deep=False):
        seen = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                mark = key_node.start_mark
                raise LexiconError(f"{self.source}:{mark.line + 1}:{mark.column + 1}: duplicate key {key!r}")
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def parse(text: str, source: str) -> dict:
    """One lexicon document: a mapping, duplicate keys refused with file:line:col."""
    loader = _StrictLoader(text)
    loader.source = source  # errors name the file
    try:
        data = loader.get_single_data()
    finally:
        loader.dispose()
    if not isinstance(data, dict):
        raise LexiconError(f"{source}: a lexicon is a mapping of names to entries")
    return data


@cache
def lexicon(name: str) -> dict:
    """The lexicon `<name>.yaml` of this package, parsed once."""
    path = files(__package__) / f"{name}.yaml"
    return parse(path.read_text(encoding="utf-8"), f"{name}.yaml")


def words(text: str) -> list[str]:
    """A word list as written in a lexicon: whitespace-separated words, in order."""
    if not isinstance(text, str):
        raise LexiconError(f"a word list is plain text, not {type(text).__name__}: {text!r}")
    return text.split()
