"""Playing one case: through a Lethe policy, or through a raw-turn retriever.

Either way the outcome lists the recalled items in order, each with the pairs it came
from (its provenance), and for a policy where every pair's memories ended up (`fates`),
which is what the miss table reads. Nothing here sees the gold answer.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import os
import tempfile
import time
import warnings

from . import retrieval
from .data import Case, Key

TICK = dt.timedelta(days=1)  # how often simulated time stops to run the passes that fell due
K = 6  # the raw-turn baselines' budget: the shipped recall's top_n

# a pair's fate, from most to least alive: the miss table names the first that applies
FATES = (
    "active",
    "compressed",
    "superseded",
    "expired",
    "archived",
    "reinforced only",
    "pending",
    "never stored",
)


@dataclasses.dataclass
class Item:
    text: str
    keys: frozenset  # the pairs it came from


@dataclasses.dataclass
class Outcome:
    system: str
    qid: str
    qtype: str
    items: list
    fates: dict | None = None  # pair key -> fate (policies only)
    calls: int = 0
    tokens: int = 0
    seconds: float = 0.0
    cpu: float = 0.0  # CPU seconds of the process playing it (stable under load)
    counts: dict | None = None  # memories by status at the question's date
    kept: dict | None = None  # pair key -> the texts of the memories it stored (policies)
    error: str | None = None

    @property
    def context(self) -> str:
        return "\n".join(f"- {i.text}" for i in self.items)


class Sim:
    """A FixedClock moved forward through simulated time, running `run_due()` at every
    TICK boundary it crosses (so a pass falls due months into a gap, not only at the next
    turn) and at every turn."""

    def __init__(self, mem, clock, tick: dt.timedelta = TICK):
        self.mem, self.clock, self.tick = mem, clock, tick
        self.next_stop = clock() + tick

    def goto(self, when: dt.datetime) -> None:
        while self.next_stop <= when:
            self.clock.set(self.next_stop)
            self.mem.run_due()
            self.next_stop += self.tick
        if when > self.clock():
            self.clock.set(when)


def play_policy(
    case: Case, policy: str, offline: bool = True, tick: dt.timedelta = TICK, folder: str | None = None
) -> Outcome:
    """A fresh store under `policy`; every pair remembered at its time, passes as they fall
    due; at the question's date, `recall(question)`."""
    from engine import FixedClock, Memory

    t0, c0 = time.perf_counter(), time.process_time()
    with tempfile.TemporaryDirectory(dir=folder) as tmp, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        clock = FixedClock(case.pairs[0].at if case.pairs else case.asked_at)
        with Memory(os.path.join(tmp, "lme.db"), policy=policy, offline=offline, clock=clock) as mem:
            sim = Sim(mem, clock, tick)
            stored: dict[Key, list[int]] = {}
            reinforced: dict[Key, list[int]] = {}
            pending: set[Key] = set()
            for pair in case.pairs:
                sim.goto(pair.at)
                written = mem.remember(pair.user, pair.assistant)
                stored[pair.key] = list(written.stored)
                reinforced[pair.key] = list(written.reinforced)
                if written.pending:
                    pending.add(pair.key)
                mem.run_due()
            sim.goto(case.asked_at)
            mem.run_due()
            recalled = mem.recall(case.question)
            every = {m.id: m for m in mem.memories("all", limit=None)}
            source = provenance(stored, every)
            items = [Item(m.content, frozenset(source.get(m.id, ()))) for m in recalled]
            fates = {
                p.key: fate(stored[p.key], reinforced[p.key], p.key in pending, every) for p in case.pairs
            }
            kept = {k: [every[i].content for i in ids if i in every] for k, ids in stored.items()}
            use = mem.model_use()
            counts = mem.counts()
    return Outcome(
        policy,
        case.qid,
        case.qtype,
        items,
        fates,
        use["calls"],
        use["tokens"],
        time.perf_counter() - t0,
        time.process_time() - c0,
        counts,
        kept,
    )


def provenance(stored: dict, every: dict) -> dict[int, set]:
    """Memory id -> the pairs it came from: the pair that stored it, and, for a memory a
    compression merged others into, the pairs of those (followed to any depth)."""
    own: dict[int, set] = {}
    for key, ids in stored.items():
        for i in ids:
            own.setdefault(i, set()).add(key)
    absorbed: dict[int, list[int]] = {}
    for m in every.values():
        if m.merged_into is not None:
            absorbed.setdefault(m.merged_into, []).append(m.id)

    def of(i: int, seen: frozenset = frozenset()) -> set:
        out = set(own.get(i, ()))
        for j in absorbed.get(i, ()):
            if j not in seen:
                out |= of(j, seen | {i})
        return out

    return {i: of(i) for i in every}


def fate(stored: list[int], reinforced: list[int], pending: bool, every: dict) -> str:
    """Where one pair's memories are at the question's date: the most alive of them (a
    merged memory counts as `compressed` unless its merge result is active)."""
    if not stored:
        return "reinforced only" if reinforced else ("pending" if pending else "never stored")
    found = []
    for i in stored:
        m, hops = every.get(i), 0
        status = m.status if m else "never stored"
        while m is not None and m.status == "compressed" and m.merged_into and hops < 20:
            m, hops = every.get(m.merged_into), hops + 1  # where the merge went
            status = "compressed" if m is None or m.status != "active" else "active"
        found.append(status)
    return min(found, key=lambda s: FATES.index(s) if s in FATES else len(FATES))


def play_raw(case: Case, name: str, k: int = K) -> Outcome:
    """A raw-turn retriever: every user turn indexed as it is, the top `k` for the
    question. Provenance is direct (each item is one pair)."""
    t0, c0 = time.perf_counter(), time.process_time()
    docs = [p.user for p in case.pairs]
    order = retrieval.RETRIEVERS[name](docs, case.question, k)
    items = [Item(docs[i], frozenset({case.pairs[i].key})) for i in order]
    return Outcome(
        name, case.qid, case.qtype, items, None, 0, 0, time.perf_counter() - t0, time.process_time() - c0
    )


def play(case: Case, system: str, offline: bool = True, k: int = K) -> Outcome:
    """One case under one system: a raw-turn retriever by name, else a policy."""
    try:
        if system in retrieval.RETRIEVERS:
            return play_raw(case, system, k)
        return play_policy(case, system, offline)
    except Exception as exc:  # one broken question must not lose the run: it is counted
        return Outcome(system, case.qid, case.qtype, [], None, error=f"{type(exc).__name__}: {exc}")


def label(policy: str) -> str:
    """A system as the table shows it: a policy file by its base name."""
    base = os.path.basename(policy)
    return base[:-5] if base.endswith(".yaml") else base
