"""The head form of recall's statements: the same SELECT over `rank >= :floor` only, for a
SQLite store whose recall index holds only the head of the ranking (engine.store.sqlite.recall_head).
"""

from __future__ import annotations

from engine.plan.dialect import Dialect
from engine.plan.statement import FLOOR, NAMESPACE, Statement
from engine.policy import Candidates
from engine.policy import expr as X


def reads_the_head(c: Candidates) -> bool:
    """Whether candidates are active memories taken best rank first: what recall's index
    over the head of the ranking serves (engine.store.sqlite.recall_head)."""
    if not c.order or not c.order[0][1]:
        return False
    first = c.order[0][0]
    if not (isinstance(first, X.Col) and first.name == "rank"):
        return False
    items = c.where.items if isinstance(c.where, X.BoolOp) and c.where.op == "and" else (c.where,)
    return any(_is_active(w) for w in items)


def _is_active(w: X.Node) -> bool:
    """`status = 'active'`, either way round."""
    if not (isinstance(w, X.Cmp) and w.op == "="):
        return False
    col = next((s for s in (w.left, w.right) if isinstance(s, X.Col)), None)
    const = next((s for s in (w.left, w.right) if isinstance(s, X.Const)), None)
    return col is not None and const is not None and col.name == "status" and const.value == "active"


def with_head(st: Statement, c: Candidates, d: Dialect, where_params: list) -> Statement:
    """`st` with its form over the head of the ranking: `AND rank >= :floor` after the
    policy's `where`, when the dialect's store may keep recall's index over the head only
    and these candidates are what it serves. The store runs that form first, and `st` when
    it returns fewer rows than the limit, so the answer is the same either way."""
    if not (d.recall_head and reads_the_head(c)):
        return st
    at = st.sql.index("\nORDER BY ")
    cut = st.params.index(NAMESPACE) + 1 + len(where_params)
    st.head = Statement(
        f"{st.label}, over the head of the ranking",
        f'{st.sql[:at]} AND "rank" >= {d.placeholder}{st.sql[at:]}',
        [*st.params[:cut], FLOOR, *st.params[cut:]],
        kind=st.kind,
    )
    return st
