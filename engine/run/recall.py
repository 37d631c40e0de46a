"""Recall: the policy's candidates, a select judge that picks among them, then one UPDATE
for the chosen memories' access (the article: access_count + 1, last_accessed = now).

`explain` answers "why did it return that?": the same candidates and picks, each with its
score parts, and how many memories were left out and why, counted by one GROUP BY.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from engine.base.records import MemoryRecord
from engine.base.text import fts_query
from engine.judges import JudgeUnavailable
from engine.judges.rules.asking import asks_about_the_past
from engine.judges.rules.reading import read
from engine.judges.rules.words import GENERIC
from engine.run import neighbours as vectors
from engine.run.context import Context
from engine.run.matching import distinctive_query
from engine.steps.answers import today

# statuses recall explains by name, in this order; others found are listed after them
STATUSES = ("archived", "superseded", "expired", "compressed")


def candidates(
    ctx: Context,
    query: str | None = None,
    limit: int | None = None,
    scored: bool = False,
    relevance: bool = True,
) -> list[MemoryRecord]:
    """Recall candidates in the policy's recall order, before any model picks among them.
    With a query: only memories matching it in full text, or with `scored=True` all
    candidates, each with its `relevance` to the query (0 when it shares no word)."""
    plan, rec = ctx.plan, ctx.policy.recall
    limit = rec.candidates.limit if limit is None else int(limit)
    fts = fts_query(query) if query else None
    st, unscored = plan.recall, False
    if fts:
        filtering = not scored or rec.match == "filter"
        st = plan.recall_query if filtering else plan.recall_scored
        if scored and not filtering and not relevance and not plan.recall_reads_relevance:
            # bm25 needs each query word's document count: costly at a million rows,
            # and nothing here reads it (the select judge reads the text itself)
            st, fts, unscored = plan.recall, None, True
    # a policy reading `similarity` binds the query's vector (an outage: similarity 0)
    vector = vectors.vector_of(ctx, query) if query and fts and ctx.plan.neighbours else None
    rows = ctx.store.fetch(st, ctx.namespace, query=fts, limit=limit, vector=vector)
    if not rows and fts and scored:  # `match: filter` and nothing matched: the top ones
        return candidates(ctx, None, limit)
    records = MemoryRecord.from_rows(rows)
    for r in records if unscored else ():
        r.relevance = None  # not computed: say nothing rather than a made-up 0.0
    return records


def get(ctx: Context, memory_id: int) -> MemoryRecord | None:
    row = ctx.store.get(memory_id, ctx.namespace)
    return MemoryRecord.from_row(row) if row else None


def recall(ctx: Context, query: str, top_n: int | None = None) -> list[MemoryRecord]:
    """What the agent should know for `query`: the policy's candidates, picked by its
    select judge (at most top_n), with their access recorded; or, from `recall.fallback`,
    archived or expired memories with their status and no access recorded."""
    shown, chosen, past = _choose(ctx, query, top_n, relevance=False)
    by_id = {c.id: c for c in shown}
    if past:
        return _from_the_past(ctx, chosen, by_id)
    if chosen and ctx.plan.access is not None:
        live = record_access(ctx, chosen)
    else:
        live = still_active(ctx, chosen)
    out: list[MemoryRecord] = []
    seen: set[int] = set()
    for mid in chosen:
        now_id = live.get(mid)
        if now_id is None or now_id in seen:
            continue
        seen.add(now_id)
        fresh = get(ctx, now_id)
        if fresh is None:  # gone since it was chosen (its namespace forgotten)
            continue
        fresh.relevance = by_id[mid].relevance
        out.append(fresh)
    return out


def _from_the_past(ctx: Context, chosen: list[int], shown: dict[int, MemoryRecord]) -> list[MemoryRecord]:
    """The picks of `recall.fallback` as they are now, each with the status it had when it
    was shown, or restored since (one superseded or merged meanwhile is left out). Its
    access is not recorded: the policy's `on_access` is for the memories it keeps current,
    and the past stays put."""
    out = []
    for mid in chosen:
        fresh = get(ctx, mid)
        if fresh is not None and fresh.status in (shown[mid].status, "active"):
            fresh.relevance = shown[mid].relevance
            out.append(fresh)
    return out


def record_access(ctx: Context, chosen: list[int]) -> dict[int, int]:
    """Record the chosen memories' access (the policy's on_access) and say which active
    memory holds each now (`still_active`), resolved under the write lock so that nothing
    moves meanwhile. A recall is a read: when another writer holds the lock longer than
    KEEP_AFTER (a pass's one transaction: seconds at 1M memories), the access is kept for
    this store's next transaction (`write_or_keep`: then resolved and timed) and the answer is not
    held up."""
    store = ctx.store

    def access() -> dict[int, int]:
        live = still_active(ctx, chosen)
        store.run(ctx.plan.access, ctx.namespace, ids=list(dict.fromkeys(live.values())))
        return live

    live = store.write_or_keep(access)
    # kept: resolved again when it is written (the pass may merge a chosen memory), and
    # at that time (`now` then: a later recall's access, written meanwhile, is not undone)
    return live if live is not None else still_active(ctx, chosen)  # readers never wait


def still_active(ctx: Context, ids: list[int], depth: int = 8) -> dict[int, int]:
    """Each chosen id -> the active memory that holds it now: itself, or the memory a
    merge absorbed it into while the select model was thinking (followed through later
    merges too). Chosen memories archived, expired or superseded meanwhile are left out."""
    out, todo = {}, {mid: mid for mid in ids}
    for _ in range(depth):
        if not todo:
            break
        rows = ctx.store.statuses(ctx.namespace, list(set(todo.values())))
        nxt = {}
        for orig, cur in todo.items():
            status, merged_into = rows.get(cur, (None, None))
            if status == "active":
                out[orig] = cur
            elif status == "compressed" and merged_into:
                nxt[orig] = merged_into
        todo = nxt
    return out


def choose(
    ctx: Context, query: str, top_n: int | None = None, relevance: bool = True
) -> tuple[list, list[int]]:
    """The candidates in the policy's recall order (each with its relevance to `query`),
    and the ids the select judge picks among them (the first `top_n` without a judge);
    when it picks none and the policy has a `recall.fallback`, the fallback's candidates
    follow and the picks are among those."""
    shown, chosen, _ = _choose(ctx, query, top_n, relevance)
    return shown, chosen


def _choose(ctx: Context, query: str, top_n: int | None, relevance: bool) -> tuple[list, list[int], int]:
    """choose(), and how many of the candidates, at the end, came from `recall.fallback`
    (the picks are among those when it is not 0)."""
    rec = ctx.policy.recall
    top_n = top_n or rec.top_n
    shown = candidates(ctx, query, scored=True, relevance=relevance)
    shown, similar = _hybrid(ctx, query, shown)
    chosen = _pick(ctx, query, shown, top_n, similar)
    if chosen or rec.past is None or not query or not asks_about_the_past(query):
        return shown, chosen, 0  # what faded is no answer to what is now, whoever judges
    past, similar = _past(ctx, query, {c.id for c in shown})
    return shown + past, _pick(ctx, query, past, top_n, similar, past=True), len(past)


def _pick(
    ctx: Context, query: str, shown: list, top_n: int, similar: dict[int, float], past: bool = False
) -> list[int]:
    rec = ctx.policy.recall
    if rec.select is not None and shown:
        chosen = _select(ctx, rec, query, shown, top_n, similar, past)
        return newest_first(query, chosen, {c.id: c for c in shown})
    return [c.id for c in shown[:top_n]]  # the policy's own order, as written


def _past(ctx: Context, query: str, seen: set[int]) -> tuple[list, dict[int, float]]:
    """`recall.fallback`: the best full-text matches of the query's distinctive words among
    the memories it names (archived or expired ones: what the agent no longer keeps at
    hand), and with an embedding model their nearest neighbours to the query, `k` of each.
    Asked only when nothing current fits and the query asks about what was (the rules'
    reading, `asks_about_the_past`, whatever judge the policy has: a served 0.5B model
    picked archived memories for "which laptop should I buy?"), so a recall that finds
    something, or asks about now, pays nothing."""
    k = ctx.policy.recall.past.k if ctx.policy.recall.past else 0
    fts = distinctive_query(ctx, query, MATCH_BUDGET, MATCH_BUDGET, every_word=False)
    rows = ctx.store.fetch(ctx.plan.recall_past, ctx.namespace, query=fts, limit=k) if fts and k else []
    past = [m for m in MemoryRecord.from_rows(rows) if m.id not in seen]
    vector = vectors.vector_of(ctx, query) if ctx.policy.embed else None
    near = vectors.neighbours(ctx, "recall fallback", vector, k, [m.id for m in past])
    similar = {r["id"]: r["similarity"] for r in near}
    have = seen | {m.id for m in past}
    past += [MemoryRecord.from_row(r) for r in near if r["id"] not in have][:k]
    return not_forgotten(ctx, past), similar


def not_forgotten(ctx: Context, past: list[MemoryRecord]) -> list[MemoryRecord]:
    """`past` without the memories archived by `forget`: the user said so, they stay out."""
    if not past or ctx.plan.recall_forgotten is None:
        return past
    gone = {r[0] for r in ctx.store.fetch(ctx.plan.recall_forgotten, ctx.namespace, ids=[m.id for m in past])}
    return [m for m in past if m.id not in gone]


def newest_first(query: str | None, chosen: list[int], records: dict) -> list[int]:
    """The select judge's picks, where two of them are about the same thing, the newer first: a
    memory's older value ranked above its newer one hands the agent what was true rather
    than what is ("30 dozen eggs" above "20 dozen eggs now"). Two picks are about the same
    thing when they share a word of the query (not a generic one), and so, transitively,
    are the members of one group: each group keeps the places its members held, filled
    newest first; a pick sharing no query word with another keeps its place."""
    if not query or len(chosen) < 2:
        return chosen
    wanted = read(query).concepts - GENERIC
    keys = [read(records[i].content).concepts & wanted for i in chosen]
    group = list(range(len(chosen)))

    def root(i: int) -> int:
        while group[i] != i:
            i = group[i]
        return i

    for i in range(len(chosen)):
        for j in range(i + 1, len(chosen)):
            if keys[i] & keys[j]:
                group[root(j)] = root(i)
    places: dict[int, list[int]] = {}
    for i in range(len(chosen)):
        places.setdefault(root(i), []).append(i)
    out = list(chosen)
    for members in places.values():
        newest = sorted(members, key=lambda i: records[chosen[i]].created_at or "", reverse=True)
        for place, i in zip(members, newest):
            out[place] = chosen[i]
    return out


MATCHES = 20  # best full-text matches that join the head of recall's order (no embeddings)
# a recall waits for these: its words count up to, and its matches rank, at most this many
# rows (a write's budget is ten times that: engine/run/matching.py); measured in bench/recall.py
MATCH_BUDGET = 200


def _hybrid(ctx: Context, query: str, shown: list) -> tuple[list, dict[int, float]]:
    """With an embedding model: the policy's candidates, then full-text matches and
    nearest neighbours of the query not among them (k of each), and every candidate's
    similarity to the query. Without one (or when it does not answer): the policy's
    candidates, then the best full-text matches of the query's distinctive words not
    among them (`text_matches`)."""
    embed = ctx.policy.embed
    vector = vectors.vector_of(ctx, query) if query and embed else None
    if vector is None or embed is None:
        return text_matches(ctx, query, shown), {}
    k = embed.k
    fts = fts_query(query)
    seen = {c.id for c in shown}
    started = vectors.search(ctx, "recall", vector, k)  # beside the full-text query
    matches = (
        MemoryRecord.from_rows(ctx.store.fetch(ctx.plan.recall_query, ctx.namespace, query=fts, limit=k))
        if fts
        else []
    )
    shown = shown + [m for m in matches if m.id not in seen]
    near = vectors.neighbours(ctx, "recall", vector, k, [c.id for c in shown], started)
    similar = {r["id"]: r["similarity"] for r in near}
    seen = {c.id for c in shown}
    shown += [MemoryRecord.from_row(r) for r in near if r["id"] not in seen][:k]
    return shown, similar


def text_matches(ctx: Context, query: str, shown: list) -> list:
    """The head of recall's order reads the first `limit` memories by rank only: a memory
    that answers the query but ranks below them (one of ~500 in a long history) was never
    shown to the select judge. Its best full-text matches among every memory recall may
    return join the head, MATCHES of them, most relevant first. The query keeps the
    rarest of its words within a budget of matching rows (engine/run/matching.py), so the
    cost does not grow with the store."""
    fts = (
        distinctive_query(ctx, query, MATCH_BUDGET, MATCH_BUDGET, every_word=False)
        if query and ctx.plan.recall_matches
        else None
    )
    if not fts:
        return shown
    seen = {c.id for c in shown}
    rows = ctx.store.fetch(ctx.plan.recall_matches, ctx.namespace, query=fts, limit=MATCHES)
    return shown + [m for m in MemoryRecord.from_rows(rows) if m.id not in seen]


def _select(
    ctx: Context, rec, query: str, candidates: list, top_n: int, similar: dict[int, float], past: bool = False
) -> list[int]:
    shown = [
        {
            "n": i,
            "id": c.id,
            "summary": c.summary or c.content[:120],
            "content": c.content,
            "confidence": c.confidence,
            "decay_score": c.decay_score,
            "created_at": c.created_at,
            "status": c.status,
            "similarity": similar.get(c.id),
        }
        for i, c in enumerate(candidates, 1)
    ]
    now = ctx.clock()
    variables = {"query": query, "candidates": shown, "top_n": top_n, "now": now, "today": today(now)}
    variables["past"] = past  # the candidates are recall.fallback's: none of them is current
    try:
        picked, _ = ctx.judges.ask("select", rec.select, variables)
    except JudgeUnavailable as exc:  # recall must answer: the rules judge picks instead
        picked = ctx.judges.fallback("select", rec.select, variables, f"model unreachable: {exc}")
    local = {c["n"]: c["id"] for c in shown}
    picks = picked if isinstance(picked, list) else []  # the select step's checked numbers
    return [local[n] for n in dict.fromkeys(picks) if n in local][:top_n]


# ---- explain --------------------------------------------------------------------------
@dataclass
class Explained:
    """One recall candidate: its place in the recall order, its score parts, and whether
    the select step picked it."""

    memory: MemoryRecord
    position: int  # 1-based, in the policy's recall order
    chosen: bool
    order_keys: list = field(default_factory=list)  # the value of each `order` term
    past: bool = False  # shown from `recall.fallback`: nothing current fitted

    def as_dict(self) -> dict:
        m = self.memory
        return {
            "id": m.id,
            "position": self.position,
            "chosen": self.chosen,
            "importance": m.importance,
            "confidence": m.confidence,
            "decay": m.decay_score,
            "relevance": m.relevance,
            "rank": m.rank,
            "order_keys": self.order_keys,
            "access_count": m.access_count,
            "summary": m.summary or m.content[:120],
            **({"fallback": m.status} if self.past else {}),
        }


@dataclass
class Explanation:
    """Why recall returns what it returns for one query."""

    query: str
    policy: str
    where: str  # the policy's recall.where, as written
    order: str  # the policy's recall.order, as written
    limit: int
    select: str | None  # "model via template", or None without a select step
    top_n: int
    candidates: list[Explained]
    filtered: dict[str, int]  # memories never considered, by reason
    eligible: int  # memories passing recall.where (before the limit)
    picks: list[int] = field(default_factory=list)  # chosen ids, in the order recall returns them

    @property
    def chosen(self) -> list[Explained]:
        by_id = {c.memory.id: c for c in self.candidates}
        return [by_id[i] for i in self.picks]

    @property
    def beyond_limit(self) -> int:
        return max(0, self.eligible - len(self.candidates))

    @property
    def not_chosen(self) -> int:
        return sum(1 for c in self.candidates if not c.chosen)

    def as_dict(self) -> dict:
        return {
            "query": self.query,
            "policy": self.policy,
            "where": self.where,
            "order": self.order,
            "limit": self.limit,
            "select": self.select,
            "top_n": self.top_n,
            "chosen": self.picks,
            "candidates": [c.as_dict() for c in self.candidates],
            "filtered": self.filtered,
            "eligible": self.eligible,
            "beyond_limit": self.beyond_limit,
            "not_chosen": self.not_chosen,
        }


def explain(ctx: Context, query: str, top_n: int | None = None) -> Explanation:
    """What recall would return for `query` and why: every candidate with its importance,
    confidence, decay, relevance, rank and order keys, which ones the select step picks,
    and counts of the memories left out (archived, superseded, expired, compressed, below
    the recall floor, beyond the candidate limit). Records no access: explaining a recall
    does not change what the next one returns."""
    rec = ctx.policy.recall
    shown, picks, past = _choose(ctx, query, top_n, relevance=True)
    fts = fts_query(query) if query else None
    keys = _order_keys(ctx, fts, [c.id for c in shown])
    current = len(shown) - past
    explained = [
        Explained(c, i, c.id in picks, keys.get(c.id, []), i > current) for i, c in enumerate(shown, 1)
    ]
    counts = _reasons(ctx, fts)
    eligible = counts.pop("eligible", 0)
    src = rec.candidates.source
    return Explanation(
        query,
        ctx.policy.name,
        str(src.get("where", "status = 'active'")),
        str(src.get("order", "rank")),
        rec.candidates.limit,
        f"{rec.select.model} via {rec.select.prompt}" if rec.select else None,
        top_n or rec.top_n,
        explained,
        counts,
        eligible,
        picks,
    )


def _reasons(ctx: Context, fts: str | None) -> dict[str, int]:
    st = ctx.plan.explain_reasons[bool(fts)]
    found = {r["reason"]: r["n"] for r in ctx.store.fetch(st, ctx.namespace, query=fts)}
    out = {s: found.pop(s, 0) for s in STATUSES}
    out["below_floor"] = found.pop("below_floor", 0)
    eligible = found.pop("eligible", 0)
    if fts and ctx.policy.recall.match == "filter":
        no_match = found.pop("no_match", 0)
        if not eligible:  # nothing matched: `match: filter` recalls from the top candidates
            eligible, no_match = no_match, 0
        out["no_match"] = no_match
    out.update(sorted(found.items()))  # status words the policy made up
    out["eligible"] = eligible
    return out


def _order_keys(ctx: Context, fts: str | None, ids: list[int]) -> dict[int, list]:
    if not ids:
        return {}
    rows = ctx.store.fetch(ctx.plan.explain_order_keys[bool(fts)], ctx.namespace, query=fts, ids=ids)
    return {r[0]: list(r[1:]) for r in rows}
