"""The one seam between formulas and a database's SQL: IR -> (sql text, bound params).

SQLite is what runs today; PostgreSQL compiles from the same IR so policies move
unchanged when a deployment outgrows one file. Identifiers come only from the known
schema and every value is a bound parameter.
"""
from __future__ import annotations

from typing import Mapping

from . import expr as X
from .errors import FormulaError

NOW = object()  # marker parameter, replaced by the clock's ISO text when executed


class SQL:
    """Accumulates SQL text and its parameters in order."""

    def __init__(self):
        self.parts: list[str] = []
        self.params: list = []

    def add(self, text: str, *params) -> "SQL":
        self.parts.append(text)
        self.params.extend(params)
        return self

    def text(self) -> str:
        return "".join(self.parts)


class Dialect:
    name = "sqlite"
    placeholder = "?"
    json_object = "json_object"
    _FUNCS = {"exp": "exp", "ln": "ln", "log": "log10", "floor": "floor", "ceil": "ceil",
              "abs": "abs", "pow": "pow", "min": "min", "max": "max", "coalesce": "coalesce",
              "sqrt": "sqrt"}
    _AGGS = {"avg": "avg", "max": "max", "min": "min", "sum": "sum", "count": "count"}

    def unindexed(self, ident: str) -> str:
        """A column the planner must not pick an index for (SQLite's unary `+`)."""
        return "+" + self.quote(ident)

    def ids_in(self) -> str:
        """`IN (...)` over memory ids bound as one JSON array (one parameter, any length)."""
        return f"IN (SELECT value FROM json_each({self.placeholder}))"

    def quote(self, ident: str) -> str:
        if ident not in X.COLUMNS and not ident.replace("_", "").isalnum():
            raise FormulaError(f"not an identifier: {ident!r}")
        return '"' + ident + '"'

    def render(self, node: X.Node, overrides: Mapping[str, X.Node] | None = None,
               relevance_sql: str | None = None,
               similarity: tuple[str, list] | None = None) -> tuple[str, list]:
        """SQL text and params for a formula. `overrides` replaces columns by new values
        (to compute a stored rank from the values an UPDATE is about to write);
        `similarity` is the (sql, params) that `similarity` stands for in this statement."""
        out = SQL()
        self._similarity = similarity or ("0.0", [])
        self._emit(node, out, overrides or {}, relevance_sql)
        return out.text(), out.params

    # -- emitters
    def _emit(self, n: X.Node, out: SQL, ov: Mapping, rel: str | None) -> None:
        e = lambda child: self._emit(child, out, ov, rel)  # noqa: E731
        if isinstance(n, X.Const):
            if n.value is None:
                out.add("NULL")
            else:
                out.add(self.placeholder, int(n.value) if isinstance(n.value, bool) else n.value)
        elif isinstance(n, X.Col):
            if n.name in ov:  # the new value is computed from the row's old values
                out.add("(")
                self._emit(ov[n.name], out, {}, rel)
                out.add(")")
            else:
                out.add(self.quote(n.name))
        elif isinstance(n, X.TimeWord):
            self._time_word(n.name, out, ov, e)
        elif isinstance(n, X.Relevance):
            if rel is None:
                raise FormulaError("'relevance' needs a query")
            out.add(rel)
        elif isinstance(n, X.Similarity):
            out.add(self._similarity[0], *self._similarity[1])
        elif isinstance(n, X.BinOp):
            out.add("(")
            e(n.left)
            # true division, as in Python: SQLite would truncate integer / integer
            out.add(" * 1.0 / " if n.op == "/" else f" {n.op} ")
            e(n.right)
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

    def _func(self, n: X.Func, out: SQL, e) -> None:
        if n.name == "clamp":
            x, lo, hi = n.args
            n = X.Func(X.NUM, "max", (lo, X.Func(X.NUM, "min", (hi, x))))
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

    def _time_word(self, name: str, out: SQL, ov: Mapping, e) -> None:
        now = lambda: out.add(self.placeholder, NOW)  # noqa: E731
        col = lambda c: e(X.Col(X.TIME, c))  # noqa: E731
        if name == "now":
            now()
        elif name == "idle_days":
            self._days_between(now, lambda: (out.add("coalesce("), col("last_accessed"),
                                             out.add(", "), col("created_at"), out.add(")")), out)
        elif name == "age_days":
            self._days_between(now, lambda: col("created_at"), out)
        elif name == "days_to_expiry":
            self._days_between(lambda: col("expires_at"), now, out)


class PostgresDialect(Dialect):
    """PostgreSQL: same IR, `%s` placeholders, GREATEST/LEAST, epoch arithmetic for days.

    Compiles today (see `lethe compile --dialect postgres`); running against a server is
    the next step, behind the same Store interface.
    """

    name = "postgres"
    placeholder = "%s"
    json_object = "json_build_object"
    _FUNCS = {**Dialect._FUNCS, "min": "least", "max": "greatest", "log": "log"}

    def unindexed(self, ident: str) -> str:
        return self.quote(ident)  # PostgreSQL's planner needs no such hint here

    def ids_in(self) -> str:
        return f"IN (SELECT value::bigint FROM json_array_elements_text({self.placeholder}::json))"

    def _days_between(self, later, earlier, out: SQL) -> None:
        out.add("(extract(epoch from (")
        later()
        out.add(")::timestamp - (")
        earlier()
        out.add(")::timestamp) / 86400.0)")


DIALECTS = {"sqlite": Dialect(), "postgres": PostgresDialect()}
