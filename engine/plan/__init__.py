"""Compile a policy into its plan: the SQL statements and parameters it will run.

A pure function of the policy and a dialect; nothing here opens a database. `lethe
compile` prints a plan, and the snapshot tests pin the plan of every shipped policy.
This module has the plan, recall and candidate queries; `rules` a pass's rules, `writes`
what a write and a merge run, `explain` what `recall --explain` runs.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass, field

from engine.base.errors import PolicyError
from engine.plan.dialect import DIALECTS, Dialect
from engine.plan.explain import order_keys_statement, reasons_statement
from engine.plan.head_form import with_head
from engine.plan.nearest import neighbours_statement, similarity_sql
from engine.plan.past import forgotten_statement
from engine.plan.rules import (
    assignments,
    due_statement,
    id_range,
    pass_statements,
    pass_writes,
    reach_statement,
)
from engine.plan.statement import IDS, LIMIT, NAMESPACE, QUERY, Kind, Statement
from engine.plan.writes import (
    absorb_events_statement,
    absorb_statement,
    forget_statement,
    merge_values_statement,
    reinforce_statement,
    supersede_statement,
)
from engine.policy import Candidates, Policy, Rule, schema
from engine.policy import expr as X
from engine.steps import kinds as steps


@dataclass
class Plan:
    policy: Policy
    dialect: Dialect
    passes: dict[str, list[Statement]]
    recall: Statement
    recall_query: Statement
    recall_scored: Statement
    rank_refresh: Statement
    rank_refresh_ids: Statement
    rank_refresh_ranged: Statement  # over one id range: all of them, for most of the file
    access: Statement | None
    write_candidates: dict[str, Statement] = field(default_factory=dict)
    recall_reads_relevance: bool = False
    cluster_candidates: dict[str, Statement] = field(default_factory=dict)
    supersede: Statement | None = None
    forget: Statement | None = None
    reinforce: Statement | None = None
    merge_values: dict[str, Statement] = field(default_factory=dict)
    merge_absorb_events: Statement | None = None
    merge_absorb: Statement | None = None
    explain_reasons: dict[bool, Statement] = field(default_factory=dict)  # by "has a query"
    explain_order_keys: dict[bool, Statement] = field(default_factory=dict)
    # a one-transaction pass: how many rows it reaches, and the columns it writes (when it
    # reaches most of the file, the indexes over those are rebuilt once: engine.store.sqlite.bulk)
    pass_reach: dict[str, Statement] = field(default_factory=dict)
    pass_writes: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # a one-transaction pass whose rules all have a `when`: whether any row is due, asked
    # first; none: its rules are not run (engine.plan.rules.due_statement)
    pass_due: dict[str, Statement] = field(default_factory=dict)
    # a one-transaction pass that gave way to a writer: its rules over one id range each,
    # and its reach within one (the rest, run at once when no writer waits any more)
    pass_ranges: dict[str, list[Statement]] = field(default_factory=dict)
    pass_reach_ranged: dict[str, Statement] = field(default_factory=dict)
    # with an embedding model: nearest neighbours (ids from the store's vector index)
    # through each step's candidate query, by step ('contradiction', 'fused', 'recall')
    neighbours: dict[str, Statement] = field(default_factory=dict)
    # recall's candidates beyond the head of its order: the best full-text matches of the
    # query's distinctive words among every memory recall may return (K bound at run time)
    recall_matches: Statement | None = None
    # recall.fallback: the best matches among the memories it names, when nothing else fits
    recall_past: Statement | None = None
    recall_forgotten: Statement | None = None


def compile_policy(policy: Policy, dialect: str | Dialect = "sqlite") -> Plan:
    d = DIALECTS[dialect] if isinstance(dialect, str) else dialect
    if policy.embed and not d.vector_search:  # similarity is sqlite-vec's vec_distance_cosine
        raise PolicyError(
            f"policy {policy.name}: `embed:` (vector search) runs on SQLite "
            f"only for now, not on {d.name}; use a policy without it there"
        )
    passes = {name: pass_statements(policy, p, d) for name, p in policy.passes.items()}
    rec = policy.recall
    model = policy.embed.name if policy.embed else None
    return Plan(
        policy=policy,
        dialect=d,
        passes=passes,
        recall=candidates_statement("recall", rec.candidates, d),
        recall_query=candidates_statement(
            "recall (matching a query)", rec.candidates, d, query=True, model=model
        ),
        recall_scored=candidates_statement(
            "recall (scored by a query)", rec.candidates, d, query=True, keep_unmatched=True, model=model
        ),
        recall_matches=write_candidates_statement(
            "recall", rec.candidates, d, model, "recall (best matches)"
        ),
        recall_past=write_candidates_statement("recall", rec.past, d, None, "recall (fallback)")
        if rec.past
        else None,
        recall_forgotten=forgotten_statement(d) if rec.past else None,
        rank_refresh=rank_refresh_statement(policy, d),
        rank_refresh_ids=rank_refresh_statement(policy, d, by_ids=True),
        rank_refresh_ranged=rank_refresh_statement(policy, d, ranged=True),
        access=access_statement(policy, rec.on_access, d) if rec.on_access else None,
        recall_reads_relevance=any(
            "@relevance" in X.columns_of(n)
            for n in [rec.candidates.where, *[o for o, _ in rec.candidates.order]]
        ),
        write_candidates={
            s.step: write_candidates_statement(s.step, s.judgment.candidates, d, model)
            for s in policy.write
            if steps.kind(s.step).shows_candidates
        },
        cluster_candidates={
            name: candidates_statement(
                f"{name} cluster candidates", p.cluster.candidates or DEFAULT_CANDIDATES(), d
            )
            for name, p in policy.passes.items()
            if p.cluster
        },
        supersede=supersede_statement(d),
        forget=forget_statement(d),
        reinforce=reinforce_statement(policy, d),
        merge_values={name: merge_values_statement(p, d) for name, p in policy.passes.items() if p.cluster},
        merge_absorb_events=absorb_events_statement(d),
        merge_absorb=absorb_statement(d),
        explain_reasons={q: reasons_statement(policy, d, q) for q in (False, True)},
        explain_order_keys={q: order_keys_statement(policy, d, q) for q in (False, True)},
        pass_reach={
            name: reach_statement(p, d) for name, p in policy.passes.items() if p.rules and not p.batch
        },
        pass_writes={name: pass_writes(policy, p) for name, p in policy.passes.items()},
        pass_due={
            name: st
            for name, p in policy.passes.items()
            if p.rules and not p.batch and (st := due_statement(p, d)) is not None
        },
        pass_ranges={
            name: pass_statements(policy, p, d, ranged=True)
            for name, p in policy.passes.items()
            if p.rules and not p.batch
        },
        pass_reach_ranged={
            name: reach_statement(p, d, ranged=True)
            for name, p in policy.passes.items()
            if p.rules and not p.batch
        },
        neighbours=neighbour_statements(policy, d, model) if model else {},
    )


def neighbour_statements(policy: Policy, d: Dialect, model: str) -> dict[str, Statement]:
    out = {
        s.step: neighbours_statement(
            f"{s.step} neighbours", s.judgment.candidates or DEFAULT_CANDIDATES(), d, model
        )
        for s in policy.write
        if steps.kind(s.step).shows_candidates
    }
    out["recall"] = neighbours_statement("recall neighbours", policy.recall.candidates, d, model)
    if policy.recall.past:
        out["recall fallback"] = neighbours_statement(
            "recall fallback neighbours", policy.recall.past, d, model
        )
    return out


def DEFAULT_CANDIDATES() -> Candidates:
    return Candidates(
        X.Cmp(X.BOOL, "=", X.Col(X.TEXT, "status"), X.Const(X.TEXT, "active")),
        [(X.Col(X.NUM, "rank"), True)],
        limit=schema.JUDGMENT_CANDIDATES["limit"],
        k=schema.JUDGMENT_CANDIDATES["k"],
    )


def write_candidates_statement(
    step: str, c: Candidates | None, d: Dialect, model: str | None = None, label: str | None = None
) -> Statement:
    """What a new memory is compared with: the policy's candidates, most relevant first,
    K of them (LIMIT is bound to K at run time), so a write costs the same at any size.
    Recall's best matches of a query are the same statement over recall's candidates."""
    c = c or DEFAULT_CANDIDATES()
    by_relevance = Candidates(c.where, [(X.Relevance(X.NUM), True), *c.order], c.limit, c.min, c.k)
    read = set().union(*(X.columns_of(n) for n in [c.where, *[o for o, _ in c.order]]))
    if d.best_matches_first and not (model and "@similarity" in read):
        return _best_matches_first(label or f"{step} candidates", by_relevance, d)
    return candidates_statement(label or f"{step} candidates", by_relevance, d, query=True, model=model)


BEST = 4  # matches read per candidate wanted, best scored first (see _best_matches_first)


def _best_matches_first(label: str, c: Candidates, d: Dialect) -> Statement:
    """Candidates ordered by relevance first, reading the rows of the best-scored matches
    only: at 1M memories a write's words match ~1,000-2,000 memories, and reading each
    one's row (to test namespace and status) cost more than scoring it. The rows read are
    the BEST x K best-scored matches and any tied with the last of them; when fewer than K
    of those pass the policy's `where`, every match is read. Either way the
    answer is the one the plain statement gives: the cut is on relevance, the order's
    first key, so a match left out ranks below every match kept, and K kept ones pass."""
    rel = d.relevance_sql
    where_sql, where_params = d.render(c.where, relevance_sql=rel)
    o_sql, o_params = order_sql(c.order, d, rel)
    ph, kept = d.placeholder, f'"namespace" = {d.placeholder} AND {where_sql}'
    sql = (
        f"WITH matched AS MATERIALIZED ({d.fts_matches()}),\n"
        f"best AS MATERIALIZED (SELECT fts_id, score FROM matched ORDER BY score "
        f"LIMIT {BEST} * {ph})\n"
        f"SELECT memories.*, {rel} AS relevance\n"
        f"FROM (SELECT * FROM matched AS fts WHERE (SELECT count(*) FROM best AS fts "
        f"CROSS JOIN memories ON memories.id = fts.fts_id WHERE {kept}) < {ph}\n"
        f"      OR {rel} >= (SELECT min({rel}) FROM best AS fts)) AS fts\n"
        f"CROSS JOIN memories ON memories.id = fts.fts_id\n"
        f"WHERE {kept}\nORDER BY {o_sql}\nLIMIT {ph}"
    )
    params = [QUERY, LIMIT, NAMESPACE, *where_params, LIMIT, NAMESPACE, *where_params, *o_params, LIMIT]
    return Statement(label, sql, params, kind=Kind.READ)


def order_sql(
    order: list[tuple[X.Node, bool]], d: Dialect, rel: str | None, sim: tuple[str, list] | None = None
) -> tuple[str, list]:
    parts, params = [], []
    for node, desc in order:
        sql, p = d.render(node, relevance_sql=rel, similarity=sim)
        parts.append(f"{sql} {'DESC' if desc else 'ASC'}")
        params += p
    parts.append('"id" DESC')  # ties: newest first, and a total order for snapshots
    return ", ".join(parts), params


def candidates_statement(
    label: str,
    c: Candidates,
    d: Dialect,
    query: bool = False,
    keep_unmatched: bool = False,
    model: str | None = None,
) -> Statement:
    """SELECT over memories in the policy's order; with a query, only full-text matches
    (or, keeping unmatched rows, all of them with relevance 0), and `relevance` is the
    dialect's full-text score mapped onto 0..1 (x / (1 + x)). A policy that reads
    `similarity` joins each memory's vector (of `model`) and binds the query's."""
    read = set().union(*(X.columns_of(n) for n in [c.where, *[o for o, _ in c.order]]))
    uses_relevance = "@relevance" in read
    similar = bool(model) and query and "@similarity" in read
    if query and keep_unmatched and not uses_relevance and not similar:
        return _scored_in_recall_order(label, c, d)
    rel = d.relevance_sql if query else d.no_relevance
    sim = similarity_sql(d, similar)
    where_sql, where_params = d.render(c.where, relevance_sql=rel, similarity=sim)
    o_sql, o_params = order_sql(c.order, d, rel, sim)
    fts = f"({d.fts_matches(chr(10) + '      ')}) AS fts"
    if not query:
        source = "memories"
    elif keep_unmatched:  # every candidate, ordered partly by its relevance
        source = f"memories\nLEFT JOIN {fts} ON fts.fts_id = memories.id"
    else:  # matches first (CROSS JOIN fixes the order): never one full-text query per row
        source = f"{fts}\n{d.matches_first} memories ON memories.id = fts.fts_id"
    join, join_params = "", []
    if similar:
        join = f"\nLEFT JOIN memory_vectors AS v ON v.memory_id = memories.id AND v.model = {d.placeholder}"
        join_params = [model]
    sql = (
        (
            f"SELECT memories.*, {rel} AS relevance\nFROM {source}{join}\n"
            f'WHERE memories."namespace" = {d.placeholder} AND {where_sql}\n'
            f"ORDER BY {o_sql}\nLIMIT {d.placeholder}"
        )
        if similar
        else (
            f"SELECT memories.*, {rel} AS relevance\nFROM {source}\n"
            f'WHERE "namespace" = {d.placeholder} AND {where_sql}\n'
            f"ORDER BY {o_sql}\nLIMIT {d.placeholder}"
        )
    )
    params = ([QUERY] if query else []) + join_params + [NAMESPACE, *where_params, *o_params, LIMIT]
    return (
        with_head(Statement(label, sql, params, kind=Kind.READ), c, d, where_params)
        if not query
        else Statement(label, sql, params, kind=Kind.READ)
    )


def _scored_in_recall_order(label: str, c: Candidates, d: Dialect) -> Statement:
    """The policy's order does not read relevance: take candidates in index order, and
    score only those (one rowid-bounded full-text lookup each), never every match."""
    where_sql, where_params = d.render(c.where)
    o_sql, o_params = order_sql(c.order, d, None)
    rel = d.fts_row_relevance()
    sql = (
        f"SELECT memories.*, {rel} AS relevance\nFROM memories\n"
        f'WHERE "namespace" = {d.placeholder} AND {where_sql}\n'
        f"ORDER BY {o_sql}\nLIMIT {d.placeholder}"
    )
    return with_head(
        Statement(label, sql, [QUERY, NAMESPACE, *where_params, *o_params, LIMIT], kind=Kind.READ),
        c,
        d,
        where_params,
    )


def rank_refresh_statement(
    policy: Policy, d: Dialect, by_ids: bool = False, ranged: bool = False
) -> Statement:
    """Recompute the stored rank for a namespace (after adoption or a rank formula change),
    or for a few memories by id (after a write the passes did not make). `ranged`: the
    namespace's rows within one id range, read in id order (for a namespace that is most
    of the file: engine.store.sqlite.bulk)."""
    sql, p = d.render(policy.rank)
    if ranged:
        r_sql, r_params = id_range(d)
        return Statement(
            "rank refresh (in id order)",
            f'UPDATE {d.rows} SET "rank" = {sql}\n'
            f"WHERE {d.unindexed('namespace')} = {d.placeholder} AND {r_sql}",
            p + [NAMESPACE, *r_params],
            kind=Kind.WRITE_MEMORIES,
        )
    if not by_ids:
        return Statement(
            "rank refresh",
            f'UPDATE {d.rows} SET "rank" = {sql}\nWHERE "namespace" = {d.placeholder}',
            p + [NAMESPACE],
            kind=Kind.WRITE_MEMORIES,
        )
    # +namespace: look the ids up by primary key, not by walking the namespace's index
    return Statement(
        "rank refresh (by id)",
        f'UPDATE {d.rows} SET "rank" = {sql}\n'
        f"WHERE {d.unindexed('namespace')} = {d.placeholder} "
        f'AND "id" {d.ids_in()}',
        p + [NAMESPACE, IDS],
        kind=Kind.WRITE_MEMORIES,
    )


def access_statement(policy: Policy, rule: Rule, d: Dialect) -> Statement:
    """on_access: one UPDATE for all chosen memories; their ids come from a JSON array.
    Only memories still active are touched (a merge may have absorbed one meanwhile)."""
    set_sql, set_params = assignments(policy, rule.set, d)
    return Statement(
        "recall on_access",
        # +namespace: look the ids up by primary key, not by the namespace index
        f"UPDATE {d.rows}\nSET {set_sql}\nWHERE {d.unindexed('namespace')} = {d.placeholder} "
        f'AND "id" {d.ids_in()} AND "status" = {d.placeholder}',
        set_params + [NAMESPACE, IDS, "active"],
        kind=Kind.WRITE_MEMORIES,
    )


def render_plan(plan: Plan) -> str:
    """The plan as reviewable text: every statement with its parameters."""
    blocks = [f"-- policy: {plan.policy.name}  dialect: {plan.dialect.name}"]
    for name, statements in plan.passes.items():
        every = plan.policy.passes[name].every
        blocks.append(f"\n-- pass {name} (every {every or 'on demand'})")
        if plan.policy.passes[name].cluster:
            blocks.append("-- then: cluster and merge through judges")
        if name in plan.pass_reach:
            blocks.append(
                f"-- when it reaches over half of the file's memories, the indexes "
                f"over {', '.join(plan.pass_writes[name])} are dropped before its "
                "rules and created again after them, in its transaction"
                + (
                    " (not recall's while it holds only the head of the ranking, "
                    "nor the small partial ones: those move the few entries the "
                    "pass changes; recall's is made again when its head has drifted)"
                    if plan.dialect.recall_head
                    else ""
                )
                + (
                    "; its rules are then the ones over an id range below, run "
                    "over every id (the rows read in id order, not through an "
                    "index on namespace)"
                    if name in plan.pass_ranges and plan.dialect.rewrites_in_id_order
                    else ""
                )
            )
            blocks.append(_show(plan.pass_reach[name]))
        if name in plan.pass_due:
            blocks.append(
                "-- asked first, in its transaction: whether any row is due; when none is, "
                "its rules do not run (they could change nothing) and only its run is recorded"
            )
            blocks.append(_show(plan.pass_due[name]))
        if any(st.counts_kept for st in statements):
            blocks.append(
                f"-- {plan.dialect.kept}() counts the row and returns NULL: a "
                "row where a new value comes out NULL or not finite keeps all its "
                "values, and the pass reports it as skipped"
            )
        for st in statements:
            blocks.append(_show(st))
        if name in plan.pass_ranges and plan.dialect.passes_give_way:
            blocks.append(
                "-- when a writer waits for the lock meanwhile, the transaction rolls "
                "back and the rules run over one id range per transaction instead; "
                "once no writer has waited for a while, the rest runs in one "
                "transaction again, counted first"
            )
            blocks.append(_show(plan.pass_reach_ranged[name]))
            blocks.extend(_show(st) for st in plan.pass_ranges[name])
    blocks.append("\n-- recall")
    blocks.append(_show(plan.recall))
    blocks.append(_show(plan.recall_query))
    blocks.append(_show(plan.recall_scored))
    if plan.recall_matches:
        blocks.append(_show(plan.recall_matches))
    if plan.recall_past and plan.recall_forgotten:
        blocks.append(_show(plan.recall_past))
        blocks.append(_show(plan.recall_forgotten))
    if plan.access:
        blocks.append(_show(plan.access))
    blocks.append(_show(plan.rank_refresh))
    blocks.append(_show(plan.rank_refresh_ids))
    if plan.dialect.rewrites_in_id_order:
        blocks.append(
            "-- when the namespace is over half of the file's memories, its ranks "
            "are refreshed in id order, over every id:"
        )
        blocks.append(_show(plan.rank_refresh_ranged))
    for st in [*plan.write_candidates.values(), *plan.cluster_candidates.values(), *plan.neighbours.values()]:
        blocks.append(_show(st))
    blocks.append("\n-- write, merge and explain")
    for later in [
        plan.supersede,
        plan.forget,
        plan.reinforce,
        *plan.merge_values.values(),
        *([plan.merge_absorb_events, plan.merge_absorb] if plan.merge_values else []),
        *plan.explain_reasons.values(),
        *plan.explain_order_keys.values(),
    ]:
        if later is not None:  # compile_policy sets every one
            blocks.append(_show(later))
    return "\n".join(_wrapped(line) for line in "\n".join(blocks).split("\n")) + "\n"


def _wrapped(line: str, width: int = 100) -> str:
    """A comment line cut at `width`, each part a comment (SQL lines stay whole)."""
    if not line.startswith("-- ") or len(line) <= width:
        return line
    return "\n".join(
        textwrap.wrap(line, width, subsequent_indent="--   ", break_long_words=False, break_on_hyphens=False)
    )


def _show(st: Statement) -> str:
    shown = f"-- {st.label}\n{st.sql};\n-- params: {st.shown_params()!r}"
    if st.head is None:
        return shown
    return (
        f"{shown}\n-- while recall's index holds only the head of the ranking (rank >= "
        ":floor, a number the store\n-- chooses from the ranks; a store of few memories "
        "keeps every active one in it), this runs\n-- first, and the statement above "
        "only when it returns fewer than :limit rows:\n" + _show(st.head)
    )
