"""The one seam between formulas and a database's SQL: IR -> (sql text, bound params).

SQLite and PostgreSQL compile from the same IR, so policies move unchanged when a
deployment outgrows one file. Full text goes through here too: FTS5's `MATCH` and `bm25`
on SQLite, a tsvector with `websearch_to_tsquery` and `ts_rank` on PostgreSQL, each score
mapped onto 0..1 as x / (1 + x). Identifiers come only from the known schema and every
value is a bound parameter.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Mapping

from engine.base.errors import FormulaError
from engine.policy import expr as X

NOW = object()  # marker parameter, replaced by the clock's ISO text when executed
PG_SEARCH_CONFIG = "lethe_english"  # the text search configuration the PostgreSQL schema creates


class SQL:
    """Accumulates SQL text and its parameters in order."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.params: list = []

    def add(self, text: str, *params) -> "SQL":
        self.parts.append(text)
        self.params.extend(params)
        return self

    def text(self) -> str:
        return "".join(self.parts)


@dataclass(frozen=True)
class Rendering:
    """One call of `Dialect.render`: the text it writes, and what stands for overridden
    columns, `relevance` and `similarity` there. Made per call and passed down, never kept
    on the dialect, which is one shared object (`DIALECTS`) rendered from any thread."""

    out: SQL
    overrides: Mapping[str, X.Node]
    relevance: str | None
    similarity: tuple[str, list]


class Dialect:
    """How formulas and statements are spelled for one database, and what it can do: the
    plan asks these capabilities, never the dialect's name."""

    name = "sqlite"  # for people: `lethe compile`'s header, error messages
    placeholder = "?"
    text_param = "?"  # a parameter that must be read as text (a JSON key)
    json_object = "json_object"
    # bm25 is negative, better matches lower: x = -bm25, relevance x / (1 + x)
    relevance_sql = "coalesce(-fts.score / (1.0 - fts.score), 0.0)"
    matches_first = "CROSS JOIN"  # SQLite keeps a CROSS JOIN's order: the matches drive it
    no_relevance = "0.0"  # relevance without a query
    # `SET (a, b) = (SELECT ...)`: one evaluation of a value both columns need
    row_value_set = True
    # a function the store defines that counts its calls and returns NULL: a pass's rule
    # calls it for each row it keeps because a new value is unusable (plan.rules)
    kept: str | None = "lethe_kept"
    # recall's index may hold only the head of the ranking (engine.store.sqlite.recall_head): candidates
    # in rank order get a form that reads only `rank >= :floor`, run first
    recall_head = True
    # what a statement that writes memories, or a pass that reads them, names: on SQLite
    # the table of every column but the text (engine.store.sqlite.sqlite_schema m020), under the
    # name the view has, so `memories."rank"` reads the same everywhere
    rows = "memory_rows AS memories"
    # where the text lives when it is not in `rows`: a formula reads a text column there
    texts: str | None = "memory_texts"
    # `similarity`: the vector functions of sqlite-vec (vec_distance_cosine) are there
    vector_search = True
    # a write's candidates read the rows of the best-scored full-text matches only
    # (plan._best_matches_first: measured at 1M memories on SQLite)
    best_matches_first = True
    # the store gives way to a waiting writer: a one-transaction pass rolls back and runs
    # its rules over one id range per transaction (engine.store.sqlite_wait)
    passes_give_way = True
    # the store rewrites most of the file in id order, over every id, instead of through
    # an index on namespace: a pass that reaches most of it, a namespace's rank refresh
    # (engine.store.bulk)
    rewrites_in_id_order = True
    _FUNCS = {
        "exp": "exp",
        "ln": "ln",
        "log": "log10",
        "floor": "floor",
        "ceil": "ceil",
        "abs": "abs",
        "pow": "pow",
        "min": "min",
        "max": "max",
        "coalesce": "coalesce",
        "sqrt": "sqrt",
    }
    _AGGS = {"avg": "avg", "max": "max", "min": "min", "sum": "sum", "count": "count"}

    def unindexed(self, ident: str) -> str:
        """A column the planner must not pick an index for (SQLite's unary `+`)."""
        return "+" + self.quote(ident)

    def ids_in(self) -> str:
        """`IN (...)` over memory ids bound as one JSON array (one parameter, any length)."""
        return f"IN (SELECT value FROM json_each({self.placeholder}))"

    def fts_matches(self, sep: str = " ") -> str:
        """A SELECT of (fts_id, score) over the memories matching the query bound here."""
        return (
            f"SELECT rowid AS fts_id, bm25(memories_fts) AS score FROM memories_fts{sep}"
            f"WHERE memories_fts MATCH {self.placeholder}"
        )

    def fts_row_relevance(self) -> str:
        """The relevance of the row `memories.id` to the query bound here (0 if no match)."""
        return (
            "coalesce((SELECT -s / (1.0 - s) FROM (SELECT bm25(memories_fts) AS s FROM "
            f"memories_fts\n      WHERE memories_fts MATCH {self.placeholder} "
            "AND rowid = memories.id)), 0.0)"
        )

    def quote(self, ident: str) -> str:
        if ident not in X.COLUMNS and not ident.replace("_", "").isalnum():
            raise FormulaError(f"not an identifier: {ident!r}")
        return '"' + ident + '"'

    def render(
        self,
        node: X.Node,
        overrides: Mapping[str, X.Node] | None = None,
        relevance_sql: str | None = None,
        similarity: tuple[str, list] | None = None,
    ) -> tuple[str, list]:
        """SQL text and params for a formula. `overrides` replaces columns by new values
        (to compute a stored rank from the values an UPDATE is about to write);
        `similarity` is the (sql, params) that `similarity` stands for in this statement."""
        r = Rendering(SQL(), overrides or {}, relevance_sql, similarity or ("0.0", []))
        self._emit(node, r)
        return r.out.text(), r.out.params

    # -- emitters
    def _emit(self, n: X.Node, r: Rendering) -> None:
        out, ov = r.out, r.overrides
        e = lambda child: self._emit(child, r)  # noqa: E731
        if isinstance(n, X.Const):
            if n.value is None:
                out.add("NULL")
            else:
                value = int(n.value) if isinstance(n.value, bool) else n.value
                out.add(self._param(value), value)
        elif isinstance(n, X.Col):
            if n.name in ov:  # the new value is computed from the row's old values
                out.add("(")
                self._emit(ov[n.name], replace(r, overrides={}))
                out.add(")")
            elif self.texts and n.name in X.TEXT_COLUMNS:  # beside the row, by its id
                out.add(f"(SELECT t.{self.quote(n.name)} FROM {self.texts} AS t WHERE t.id = memories.id)")
            else:
                out.add(self.quote(n.name))
        elif isinstance(n, X.TimeWord):
            self._time_word(n.name, out, e)
        elif isinstance(n, X.Relevance):
            if r.relevance is None:
                raise FormulaError("'relevance' needs a query")
            out.add(r.relevance)
        elif isinstance(n, X.Similarity):
            out.add(r.similarity[0], *r.similarity[1])
        elif isinstance(n, X.BinOp):
            out.add("(")
            e(n.left)
            # true division, as in Python: SQLite would truncate integer / integer
            out.add(self._divide if n.op == "/" else f" {n.op} ")
            e(n.right)
            out.add(self._divide_end if n.op == "/" else "")
            out.add(")")
        elif isinstance(n, X.Neg):
            out.add("(-")
            e(n.arg)
            out.add(")")
        elif isinstance(n, X.Cmp):
            out.add("(")
            e(n.left)
            out.add(" <> " if n.op == "!=" else f" {n.op} ")
            e(n.right)
            out.add(")")
        elif isinstance(n, X.BoolOp):
            out.add("(")
            for i, item in enumerate(n.items):
                if i:
                    out.add(f" {n.op.upper()} ")
                e(item)
            out.add(")")
        elif isinstance(n, X.Not):
            out.add("(NOT ")
            e(n.arg)
            out.add(")")
        elif isinstance(n, X.IsNull):
            out.add("(")
            e(n.arg)
            out.add(" IS NOT NULL)" if n.negated else " IS NULL)")
        elif isinstance(n, X.In):
            out.add("(")
            e(n.arg)
            out.add(" NOT IN (" if n.negated else " IN (")
            for i, v in enumerate(n.values):
                if i:
                    out.add(", ")
                e(v)
            out.add("))")
        elif isinstance(n, X.Func):
            self._func(n, out, e)
        elif isinstance(n, X.Agg):
            out.add(self._AGGS[n.name] + "(")
            e(n.arg)
            out.add(")")
        else:  # pragma: no cover - the compiler only builds the nodes above
            raise FormulaError(f"cannot render {type(n).__name__}")

    _divide, _divide_end = " * 1.0 / ", ""

    def _param(self, value) -> str:
        return self.placeholder

    def _func(self, n: X.Func, out: SQL, e) -> None:
        if n.name == "clamp":
            x, lo, hi = n.args
            n = X.Func(X.NUM, "max", (lo, X.Func(X.NUM, "min", (hi, x))))
        self._call(n, out, e)

    def _call(self, n: X.Func, out: SQL, e) -> None:
        out.add(self._FUNCS[n.name] + "(")
        for i, a in enumerate(n.args):
            if i:
                out.add(", ")
            e(a)
        out.add(")")

    def _days_between(self, later, earlier, out: SQL) -> None:
        # julianday differences rounded to the millisecond, so 30 whole days is exactly 30.0
        # and floor(idle_days) equals Python's timedelta.days
        out.add("(round((julianday(")
        later()
        out.add(") - julianday(")
        earlier()
        out.add(")) * 86400000.0) / 86400000.0)")

    def _time_word(self, name: str, out: SQL, e) -> None:
        now = lambda: out.add(self.placeholder, NOW)  # noqa: E731
        col = lambda c: e(X.Col(X.TIME, c))  # noqa: E731
        if name == "now":
            now()
        elif name == "idle_days":
            self._days_between(
                now,
                lambda: (
                    out.add("coalesce("),
                    col("last_accessed"),
                    out.add(", "),
                    col("created_at"),
                    out.add(")"),
                ),
                out,
            )
        elif name == "age_days":
            self._days_between(now, lambda: col("created_at"), out)
        elif name == "days_to_expiry":
            self._days_between(lambda: col("expires_at"), now, out)


class PostgresDialect(Dialect):
    """PostgreSQL: same IR, `%s` placeholders typed where the server cannot infer them,
    GREATEST/LEAST, epoch arithmetic for days, and SQLite's forgiving math: division by
    zero, ln/log/sqrt outside their domain give NULL (PostgreSQL raises), exp saturates
    instead of raising on underflow."""

    name = "postgres"
    placeholder = "%s"
    text_param = "%s::text"
    json_object = "json_build_object"
    relevance_sql = "coalesce(fts.score / (1.0 + fts.score), 0.0)"
    matches_first = "JOIN"  # the planner picks the order from statistics
    no_relevance = "0.0::float8"  # a bare constant may not stand in ORDER BY
    row_value_set = False  # one assignment per column (row values not measured there)
    kept = None  # no function of ours on the server: a guard in the WHERE and a count first
    recall_head = False  # its planner has statistics: recall's index holds every active row
    rows, texts = "memories", None  # one table, the text in it
    vector_search = False  # no vector extension assumed on the server yet
    best_matches_first = False  # not measured here: the planner picks the order from statistics
    passes_give_way = False  # a writer waits for a row, not the file (engine.store.postgres)
    rewrites_in_id_order = False  # indexes stay in place (engine.store.postgres rewriting)
    _FUNCS = {**Dialect._FUNCS, "min": "least", "max": "greatest", "log": "log"}
    _divide, _divide_end = " * 1.0 / nullif(", ", 0)"
    _TYPES = ((bool, "::bigint"), (int, "::bigint"), (float, "::double precision"), (str, "::text"))

    def unindexed(self, ident: str) -> str:
        return self.quote(ident)  # PostgreSQL's planner needs no such hint here

    def ids_in(self) -> str:
        return f"IN (SELECT value::bigint FROM json_array_elements_text({self.placeholder}::json))"

    def fts_matches(self, sep: str = " ") -> str:
        # weight A (1.0) on every word: one matching word scores about 0.6, as bm25 does here
        return (
            f"SELECT id AS fts_id, ts_rank(tsv, q)::float8 AS score FROM memories_fts, "
            f"websearch_to_tsquery('{PG_SEARCH_CONFIG}', {self.placeholder}) AS q{sep}"
            "WHERE tsv @@ q"
        )

    def fts_row_relevance(self) -> str:
        return (
            "coalesce((SELECT s / (1.0 + s) FROM (SELECT ts_rank(tsv, q)::float8 AS s "
            f"FROM memories_fts, websearch_to_tsquery('{PG_SEARCH_CONFIG}', {self.placeholder}) "
            "AS q\n      WHERE tsv @@ q AND id = memories.id) AS one), 0.0)"
        )

    def _param(self, value) -> str:
        # a bare parameter inside json_build_object or least() has no type to infer
        return self.placeholder + next((t for cls, t in self._TYPES if isinstance(value, cls)), "")

    def _call(self, n: X.Func, out: SQL, e) -> None:
        if n.name in ("ln", "log", "sqrt"):  # outside the domain: NULL, as SQLite answers
            out.add("(CASE WHEN ")
            e(n.args[0])
            out.add(" > 0 THEN " if n.name != "sqrt" else " >= 0 THEN ")
            super()._call(n, out, e)
            out.add(" END)")
        elif n.name == "exp":  # exp(-746) underflows to an error here, to 0 in SQLite
            out.add("exp(least(greatest(")
            e(n.args[0])
            out.add(", -745.0), 709.0))")
        else:
            super()._call(n, out, e)

    def _days_between(self, later, earlier, out: SQL) -> None:
        # exact to the microsecond, then a double: 30 whole days is exactly 30.0
        out.add("(extract(epoch from (")
        later()
        out.add(")::timestamp - (")
        earlier()
        out.add(")::timestamp) / 86400.0)::double precision")


DIALECTS = {"sqlite": Dialect(), "postgres": PostgresDialect()}
