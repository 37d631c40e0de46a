"""The `rules` judges: offline, deterministic stand-ins for the cheap and strong models.

Every judge reads text with the same small toolkit - a tokenizer, a light stemmer, a
synonym map, a lexicon of interchangeable tools (databases, package managers, editors...),
cue words and a date reader - so it generalises to wording it has never seen instead of
looking examples up. Nothing here reads the clock, the network or a random source: the
same input always gives the same answer, and "today" is always passed in.

The word lists are data, in `lexicon/*.yaml`, read once by `data`. The modules, from the
bottom up:
  data         the lexicon loader
  slots        tool families (MySQL/PostgreSQL...) and `related_words`; needs only `data`
  words        tokenizer, stemmer, synonyms, stance and cue words
  dates        finding and resolving dates
  reading      `read` (one text, read once), `similarity`, sentence helpers
  cues         what kind of sentence this is (request, small talk, work, event)
  hedging      the confidence judge
  replacements the shapes a replacement takes (a member swapped, a value moved, a handover...)
  superseding  the contradiction judge
  expiring     the expiry judge
  directives   standing instructions in the imperative
  phrasing     third-person rewriting and tags
  asking       the statement a user's question tells (its grounds, a named thing they have)
  gating       the gate judge
  compression  the cluster and merge judges
  recall       the select judge
  scenes       extract_cells and summarise_scene
  adapter      the `rules` provider's answers, in each step's answer shape

Public judges: gate, confidence, contradiction, expiry, cluster, merge, select,
extract_cells, summarise_scene. Public helpers: tokens, stem, similarity, read_dates,
related_words.
"""

from __future__ import annotations

from engine.judges.lexicon.slots import related_words
from engine.judges.rules.compression import cluster, merge
from engine.judges.rules.dates import read_dates
from engine.judges.rules.expiring import expiry
from engine.judges.rules.gating import gate
from engine.judges.rules.hedging import confidence
from engine.judges.rules.reading import similarity
from engine.judges.rules.scenes import extract_cells, summarise_scene
from engine.judges.rules.selecting import select
from engine.judges.rules.superseding import contradiction
from engine.judges.rules.words import stem, tokens

__all__ = [
    "gate",
    "confidence",
    "contradiction",
    "expiry",
    "cluster",
    "merge",
    "select",
    "extract_cells",
    "summarise_scene",
    "tokens",
    "stem",
    "similarity",
    "read_dates",
    "related_words",
]
