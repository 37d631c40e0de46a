"""What `recall.fallback` reads: the past a recall searches when nothing current fits.

Its candidates are the policy's (`where`, best full-text matches first, K of them) and,
with an embedding model, the nearest neighbours passing the same `where`. A memory the
user asked to forget is archived too, by `forget`, with a `forgotten` event: that is no
fading, and the fallback never shows it (`forgotten_statement` names those among its
candidates: one probe of the events' (memory_id, id) index per candidate).
"""

from __future__ import annotations

from engine.plan.dialect import Dialect
from engine.plan.statement import IDS, Kind, Statement


def forgotten_statement(d: Dialect) -> Statement:
    """Which of the bound ids have ever been forgotten."""
    return Statement(
        "recall (fallback): forgotten ones left out",
        f"SELECT DISTINCT memory_id FROM memory_events\n"
        f"WHERE memory_id {d.ids_in()} AND event_type = {d.placeholder}",
        [IDS, "forgotten"],
        kind=Kind.READ,
    )
